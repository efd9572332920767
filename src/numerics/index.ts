// Public surface of the numerics core: formats, cast profiles, the scalar reference and vector casts.
// Not quantizers or GEMMs (added as their own modules).

export * from './formats.js';
export * from './profiles.js';
export * from './round.js';
export * from './vector.js';
export * from './describe.js';
