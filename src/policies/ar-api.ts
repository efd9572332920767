// What the layers above policies/ use of the autoregressive policy: the one door into src/policies/ar/ from outside policies/.
// Not the package entry (src/policies/index.ts, for users) and not new code: named re-exports only, grouped by what they serve.

// Model, configuration and the run config's AR fields.
export { arConfig, arParamSpecs } from './ar/config.js';
export { createArPolicy, type ArPolicy } from './ar/model.js';
export { arModelOptions, arModelPresetNames, type ArModelFields } from './ar/presets.js';
export { AR_CONFIG_METADATA } from './ar/weights.js';
export { loadCheckpoint } from './ar/checkpoint.js';

// The engine behind the GRPO loop and the AR config a run config resolves to.
export { arConfigFor, arPolicyFactory } from './ar/engine.js';

// Rollout, trainer log-probs and the supervised warm start (the golden GRPO step builds one step from them).
export { rollout, rolloutResponses } from './ar/rollout.js';
export { backwardLogprobs, computeLogprobs } from './ar/logprobs.js';
export { supervisedExamples, trainSupervised } from './ar/supervised.js';

// Probes of the CLI: divergence, trainer–rollout mismatch, channel statistics.
export { arDiverge } from './ar/diverge.js';
export { arMismatchProbe } from './ar/probe.js';
export { linearInputChannelStats, residualChannelStats } from './ar/channels.js';
