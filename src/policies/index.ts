// `qrl-sim/policies`: the in-process engine contract, the precision seam and plans, the autoregressive and the masked-diffusion policy.
// Chosen names, not `export *` (the rule: docs/decisions.md; pinned by test/api-surface.test.ts).

// The in-process engine contract (RlEngine, PolicyFactory).
export {
  type RlEngine,
  type PolicyFactory,
  type EngineBatch,
  type EngineLogprobs,
  type EngineRoutingReplay,
  warmStartMetrics,
} from './engine.js';

// The precision seam: PolicyNumerics and the FP32 / rounding numerics.
export {
  type PolicyNumerics,
  fp32Numerics,
  roundingNumerics,
  type RoundingNumericsOptions,
  type RoundingFormat,
  type AccumulatorOrder,
  pairwiseSum,
  withKernelRows,
} from './numerics.js';

// Execution paths: the rollout engine's scheduler settings and tensor-parallel all-reduce order.
export {
  type EngineExecution,
  type TensorParallel,
  checkEngineExecution,
  tensorParallelNumerics,
  reducePartials,
  ringOrder,
  shardRange,
} from './execution.js';
export { scheduleRequests, type ScheduleOptions, type EngineStep } from './ar/scheduler.js';

// Quantized PolicyNumerics.
export {
  quantizedNumerics,
  type QuantizedNumericsOptions,
  type QuantizedPolicyNumerics,
  type QuantSite,
  type OperandQuantPlan,
  type QuantBackward,
} from './quantized.js';

// Precision plans as data.
export {
  precisionPlan,
  precisionPlans,
  type PrecisionPlan,
  type PrecisionPlanName,
  type PlanSide,
  type GemmPlan,
  type Fp32GemmPlan,
  type RoundingGemmPlan,
  type QuantizedGemmPlan,
  type PlanData,
  resolvePlan,
  numericsFor,
  sideNumerics,
  planNeedsWeights,
  TOY_BLOCK,
} from './plans.js';
export { trainerPaddings, type TrainerPadding } from './plan-schema.js';

// The refit chain (BF16 export, checkpoint quantize→dequantize, fused scales) and per-module precision overrides.
export {
  refitWeights,
  refittedNumerics,
  checkRefitChain,
  ignoredSites,
  type RefitChain,
  type RefitFault,
  type RefitFusion,
  type RefitTransport,
} from './refit.js';
// The stacks' ignore-list matching rules and the engine module names of the toy's sites (refit fault `ignore-rule`, refit-check).
export {
  ignoreMatchRules,
  ignoreMatchAliases,
  ignoreMatchNames,
  ignoreMatchRule,
  engineModuleName,
  type IgnoreMatchRule,
  type IgnoreMatchName,
} from './ignore-rules.js';
export { overriddenNumerics, checkOverrides, siteNames, patternMatches, type PrecisionOverride } from './overrides.js';

// Log-prob semantics of each side and their named differences.
export {
  logprobSemantics,
  logitsFormat,
  semanticsDifferences,
  semanticsLine,
  semanticsMetrics,
  type LogprobSemantics,
  type SemanticsSampler,
  type SemanticsDifference,
} from './semantics.js';

// First-divergence localisation: op-by-op comparison of two forwards, the AR recorder, qrl-dump/1 files.
export {
  compareForwards,
  ulpDistances,
  ulpOf,
  type OpRecord,
  type DivergeOptions,
  type DivergeRow,
  type DivergeReport,
} from './diverge.js';
export { arDiverge, arForwardOps, arOpRecords, nextTokenLogprobs, type ArDivergeResult } from './ar/diverge.js';
export {
  readForwardDump,
  writeForwardDump,
  type ForwardDump,
  DUMP_VERSION_KEY,
  DUMP_ORDER_KEY,
  DUMP_DTYPES_KEY,
  DUMP_INPUTS_KEY,
  DUMP_TOKENS,
} from './dump.js';

// Probe diagnostics.
export { probeDiagnostics, type MismatchDiagnostics } from './diagnostics.js';

// AR policy: configuration and parameter layout.
export { arConfig, type ArConfig, arParamSpecs } from './ar/config.js';

// AR policy: the causal toy transformer.
export {
  ArPolicy,
  createArPolicy,
  arForward,
  arBackward,
  type ArDecodeState,
  createDecodeState,
  arPrefill,
  arDecodeStep,
  type ParamBuffers,
} from './ar/model.js';

// AR policy: the rollout engine.
export { rollout, type Rollout, type RolloutOptions, rolloutResponses } from './ar/rollout.js';

// AR policy: trainer log-probs and their backward.
export { computeLogprobs, backwardLogprobs, type TrainerLogprobOptions, type TrainerLogprobs } from './ar/logprobs.js';

// AR policy: supervised warm start.
export {
  trainSupervised,
  supervisedExamples,
  type TrainSupervisedOptions,
  type TrainSupervisedResult,
  sftStep,
  type SftStepOptions,
  type SftStepResult,
  type SupervisedExample,
} from './ar/supervised.js';

// AR policy: JSON checkpoints.
export { saveCheckpoint, loadCheckpoint, type ArCheckpoint, type CheckpointTask } from './ar/checkpoint.js';

// AR policy: the mismatch probe.
export {
  arMismatchProbe,
  type ArMismatchProbeOptions,
  type ArMismatchProbeResult,
  type ArMoeProbe,
} from './ar/probe.js';

// AR policy: the engine behind the GRPO loop.
export { createArEngine, arPolicyFactory, type ArEngineRecord } from './ar/engine.js';

// AR policy: safetensors weights files.
export { readArWeights, writeArWeights } from './ar/weights.js';

// AR policy: model presets.
export {
  arModelPresets,
  arModelPresetNames,
  type ArModelPresetName,
  arModelOptions,
  type ArModelFields,
} from './ar/presets.js';

// AR policy: per-channel activation magnitudes.
export {
  linearInputChannelStats,
  residualChannelStats,
  type ChannelStats,
  type LinearInputStats,
} from './ar/channels.js';

// Diffusion policy: the bidirectional toy transformer.
export {
  createDiffusionModel,
  diffusionBackward,
  diffusionForward,
  diffusionModelDefaults,
  type DiffusionForward,
  type DiffusionModel,
  type DiffusionModelConfig,
} from './diffusion/model.js';

// Diffusion policy: Gumbel-max sampling.
export { gumbelArgmax } from './diffusion/logprob.js';

// Diffusion policy: the LLaDA sampler.
export {
  diffusionSamplerDefaults,
  diffusionSchedule,
  diffusionStateAt,
  sampleDiffusion,
  type DiffusionRemasking,
  type DiffusionRollout,
  type DiffusionSamplerConfig,
  type DiffusionSamplerPolicy,
  type DiffusionSchedule,
  type DiffusionSequence,
  type SampleDiffusionOptions,
} from './diffusion/sampler.js';
// Top-k / top-p truncation shared by both samplers
export { truncationActive, truncatedSupport } from './truncation.js';

// Diffusion policy: the log-prob estimators (table) and completion mask.
export {
  diffusionCompletionMask,
  diffusionEstimatorNames,
  diffusionEstimators,
  diffusionLogprobs,
  type DiffusionEstimatorFn,
  type DiffusionEstimatorName,
  type DiffusionEstimatorOptions,
  type DiffusionLogprobs,
} from './diffusion/estimators.js';

// Diffusion policy: supervised warm start.
export {
  diffusionWarmStart,
  maskedDiffusionLoss,
  padDiffusionResponse,
  type DiffusionWarmStartConfig,
  type DiffusionWarmStartResult,
} from './diffusion/warmstart.js';

// Diffusion policy: the mismatch probe.
export {
  diffusionMismatch,
  diffusionMismatchProbe,
  type DiffusionMismatchOptions,
  type DiffusionMismatchProbeResult,
} from './diffusion/mismatch.js';

// Diffusion policy: the engine behind the GRPO loop.
export {
  createDiffusionEngine,
  diffusionPolicyFactory,
  validateDiffusionConfig,
  type DiffusionEngine,
  type DiffusionEngineRecord,
} from './diffusion/engine.js';

// Diffusion policy: model presets.
export {
  diffusionModelPresets,
  diffusionModelPresetNames,
  type DiffusionModelPresetName,
  diffusionModelOptions,
  type DiffusionModelFields,
} from './diffusion/presets.js';
