// Public surface of the toy policies: the precision seam (PolicyNumerics) and the masked-diffusion policy.
// Not where anything is implemented; see numerics.ts and the policy folders.

export * from './numerics.js';
export * from './diffusion/index.js';
