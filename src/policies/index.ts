// Public surface of the toy policies: the precision seam (PolicyNumerics, plans), probe diagnostics,
// top-k/top-p truncation, the autoregressive and the masked-diffusion policy. Not a place for logic.

export * from './engine.js';
export * from './numerics.js';
export * from './plans.js';
export * from './quantized.js';
export * from './truncation.js';
export * from './diagnostics.js';
export * from './ar/index.js';
export * from './diffusion/index.js';
