// Public surface of the masked-diffusion (LLaDA-style) toy policy: model, sampler, estimators, warm start, mismatch probe.
// Not where anything is implemented; the per-position scoring helpers stay internal except gumbelArgmax.

export {
  createDiffusionModel,
  diffusionBackward,
  diffusionForward,
  diffusionModelDefaults,
  type DiffusionForward,
  type DiffusionModel,
  type DiffusionModelConfig,
} from './model.js';
export { gumbelArgmax } from './logprob.js';
export {
  diffusionSamplerDefaults,
  diffusionSchedule,
  diffusionStateAt,
  sampleDiffusion,
  type DiffusionRemasking,
  type DiffusionRollout,
  type DiffusionSamplerConfig,
  type DiffusionSchedule,
  type DiffusionSequence,
  type SampleDiffusionOptions,
} from './sampler.js';
export {
  d1Estimator,
  d1MaskedView,
  diffusionCompletionMask,
  diffusionEstimatorNames,
  diffusionEstimators,
  diffusionLogProbs,
  elboEstimator,
  trajectoryEstimator,
  type DiffusionEstimatorFn,
  type DiffusionEstimatorName,
  type DiffusionEstimatorOptions,
  type DiffusionLogProbs,
} from './estimators.js';
export {
  diffusionWarmStart,
  maskedDiffusionLoss,
  padDiffusionResponse,
  type DiffusionWarmStartConfig,
  type DiffusionWarmStartResult,
} from './warmstart.js';
export {
  diffusionMismatch,
  diffusionMismatchProbe,
  type DiffusionMismatchOptions,
  type DiffusionMismatchProbeResult,
} from './mismatch.js';
export {
  createDiffusionEngine,
  diffusionPolicyFactory,
  isDiffusionEngine,
  validateDiffusionConfig,
  type DiffusionEngine,
  type DiffusionEngineRecord,
} from './engine.js';
export * from './presets.js';
