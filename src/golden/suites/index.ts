// The table of golden suites by name (what `qrl-sim golden --suite` accepts).
// Not the suites themselves: each has its own file.

import type { GoldenSuite } from '../types.js';
import { castsSuite } from './casts.js';
import { estimatorsSuite } from './estimators.js';
import { gemmSuite } from './gemm.js';
import { grpoStepSuite } from './grpo-step.js';
import { libraryCastsSuite } from './library-casts.js';
import { quantizersSuite } from './quantizers.js';

/** Every golden suite, by name. */
export const goldenSuites: Readonly<Record<string, GoldenSuite>> = Object.freeze({
  casts: castsSuite,
  quantizers: quantizersSuite,
  gemm: gemmSuite,
  estimators: estimatorsSuite,
  'grpo-step': grpoStepSuite,
  'library-casts': libraryCastsSuite,
});
