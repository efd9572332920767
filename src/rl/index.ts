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
export * from './length-diagnostics.js';
export * from './schema.js';
export * from './estimate.js';
export * from './grpo/index.js';
