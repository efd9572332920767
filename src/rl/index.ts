// Public surface of the estimator library (advantages, correction, losses, aggregation, KL, diagnostics, estimate).
// Not the GRPO loop itself, which will import from here.

export type { BatchShape, Estimate, MetricRecord } from './types.js';
export { LOG_RATIO_BOUND, boundedExp } from './types.js';
export * from './advantages.js';
export * from './correction.js';
export * from './losses.js';
export * from './aggregation.js';
export * from './kl.js';
export * from './diagnostics.js';
export * from './schema.js';
export * from './estimate.js';
// The GRPO loop's policy contract and run config (the loop and the run driver stay internal for now).
export type { PlanSideName, RlEngine, RolloutBatch, TrainerLogprobs as RlTrainerLogprobs } from './grpo/engine.js';
export { runConfigSchema, type RunConfig } from './grpo/config.js';
export type { PolicyFactory } from './grpo/run.js';
