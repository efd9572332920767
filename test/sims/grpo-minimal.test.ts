// Keeps the learners' walkthrough sims/grpo-minimal.ts working: it runs as written, its hand-computed
// TIS weights, loss and gradient agree with the library, and two runs print the same lines.
// Not a test of the estimators themselves (test/rl has those).

import { describe, expect, it } from 'vitest';
import { grpoMinimal } from '../../sims/grpo-minimal.js';

describe('sims/grpo-minimal.ts', () => {
  it('one GRPO step with TIS: weights within the cap, hand loss and gradient equal the library, deterministic', async () => {
    const a = await grpoMinimal();
    const b = await grpoMinimal();
    expect(b.lines).toEqual(a.lines);
    expect(a.lines).toHaveLength(10);
    for (const r of a.rewards) expect(r >= 0 && r <= 1).toBe(true);
    // GRPO advantages of a group sum to zero
    for (let g = 0; g < 4; g++)
      expect(Math.abs(a.advantages.slice(g * 8, g * 8 + 8).reduce((s, x) => s + x, 0))).toBeLessThan(1e-9);
    expect(a.k3).toBeGreaterThan(0); // NVFP4 rollout vs BF16 trainer: a real mismatch
    expect(a.tisWeights.max).toBeLessThanOrEqual(2);
    expect(a.tisWeights.min).toBeGreaterThan(0);
    expect(Math.abs(a.loss - a.lossFromLibrary)).toBeLessThan(1e-12);
    expect(a.maxGradDifference).toBeLessThan(1e-12);
    expect(Number.isFinite(a.gradNorm) && a.gradNorm > 0).toBe(true);
    // the step moved probability toward positive-advantage responses
    expect(a.meanLogpAfter).toBeGreaterThan(a.meanLogpBefore);
  });
});
