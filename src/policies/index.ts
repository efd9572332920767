// Public surface of the toy policies: the precision seam (PolicyNumerics, plans), probe diagnostics,
// the autoregressive and the masked-diffusion policy. Not a place for logic.

export * from './engine.js';
export * from './numerics.js';
export * from './plans.js';
export * from './quantized.js';
export * from './diagnostics.js';
export * from './ar/index.js';
export * from './diffusion/index.js';
export * from './moe-replay.js';
