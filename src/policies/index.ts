// Public surface of the toy policies: the precision seam (PolicyNumerics, plans), diagnostics and the
// autoregressive policy. Not a place for logic.

export * from './numerics.js';
export * from './plans.js';
export * from './diagnostics.js';
export * from './ar/index.js';
