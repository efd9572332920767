// Runs the qrl-sim/testing example of docs/examples: qrl-sim's estimate passes every invariant,
// and an implementation that ignores the TIS cap or reads padded positions is caught.

import { describe, expect, it } from 'vitest';
import { runExample } from '../../docs/examples/testing-invariants.js';
import { estimateJson } from '../../src/rl/estimate.js';
import type { EstimateFn } from '../../src/testing/index.js';

describe('qrl-sim/testing example', () => {
  it('qrl-sim passes every invariant', async () => {
    expect(await runExample()).toEqual([
      'rhoOneIsIdentity',
      'weightBounds',
      'permutationEquivariance',
      'maskedGarbageIsIgnored',
    ]);
  });

  it('an uncapped TIS fails weightBounds', async () => {
    const uncapped: EstimateFn = (input) => {
      const out = estimateJson({ ...input, config: { ...input.config, correction: { name: 'token-is' } } });
      return out;
    };
    await expect(runExample(uncapped)).rejects.toThrow(/weight|Property failed/i);
  });

  it('an implementation that reads padded positions fails maskedGarbageIsIgnored', async () => {
    const leaky: EstimateFn = (input) => {
      const out = estimateJson(input);
      const garbage = input.logpTheta.flat().reduce((s, v, k) => s + (input.mask.flat()[k] === 0 ? v : 0), 0);
      return { ...out, loss: out.loss + 1e-3 * garbage };
    };
    await expect(runExample(leaky)).rejects.toThrow(/Property failed/);
  });
});
