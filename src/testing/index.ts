// `qrl-sim/testing`: fast-check arbitraries and invariant suites for property tests of your own
// estimator, cast and quantizer code. Not used by the simulator itself (only by `qrl-sim check`).

export * from './arbitraries.js';
export * from './invariants.js';
export { compareArrays, elementMatches, mismatchText, ulpDistance, type Mismatch } from '../golden/compare.js';
export type { CompareRule } from '../golden/types.js';
export { readGolden, type GoldenReader } from '../golden/read.js';
