// Example: property-test your own estimator with qrl-sim/testing (run by test/testing/example.test.ts).
// In your project: import { estimatorInvariants } from 'qrl-sim/testing'; and import fc from 'fast-check'.

import fc from 'fast-check';
import { estimateJson } from '../../src/rl/estimate.js';
import { estimatorInvariants, type EstimateFn } from '../../src/testing/index.js';

/** Your implementation goes here; this example uses qrl-sim's own, which must pass. */
const myEstimate: EstimateFn = (input) => estimateJson(input);

/** Runs every invariant for a TIS + PPO + token-mean configuration; throws with a shrunk counterexample on failure. */
export async function runExample(estimate: EstimateFn = myEstimate, numRuns = 30): Promise<string[]> {
  const config = {
    advantage: { name: 'grpo' },
    correction: { name: 'tis', C: 2 },
    loss: { name: 'ppo-clip' },
    aggregation: 'token-mean',
    kl: null,
  };
  const passed: string[] = [];
  for (const [name, property] of Object.entries(estimatorInvariants(estimate, config))) {
    await fc.assert(property, { numRuns, seed: 1 });
    passed.push(name);
  }
  return passed;
}
