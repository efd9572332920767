// Public surface of the autoregressive toy policy: config, model, sampler, rollout, trainer log-probs,
// supervised warm start, checkpoints, mismatch probe. Not a place for logic.

export * from './config.js';
export * from './model.js';
export * from './sampler.js';
export * from './rollout.js';
export * from './logprobs.js';
export * from './supervised.js';
export * from './checkpoint.js';
export * from './probe.js';
export * from './engine.js';
export * from './weights.js';
