// Tests of the diffusion mismatch probe: exactly zero under identical numerics, non-zero and finite under a quantized rollout, metric formulas on hand-made inputs.
// Not the CLI command (written elsewhere); this tests the function it calls.

import { describe, expect, it } from 'vitest';
import { fp32Numerics } from '../../../src/policies/index.js';
import { diffusionMismatch } from '../../../src/policies/diffusion/mismatch.js';
import { probeDiagnostics } from '../../../src/policies/diagnostics.js';
import { e4m3TestNumerics } from './helpers.js';

describe('diffusionMismatch', () => {
  const keys = ['tokens', 'k1', 'k3', 'meanAbsDp', 'meanAbsDelta', 'maxAbsDelta', 'ess', 'fracAbsDeltaGt1e-3'];

  for (const estimator of ['trajectory', 'd1', 'elbo'] as const) {
    it(`${estimator}: identical numerics ⇒ zero mismatch; e4m3 rollout ⇒ non-zero, finite`, () => {
      const same = diffusionMismatch({
        rollout: fp32Numerics(),
        trainer: fp32Numerics(),
        length: 8,
        seed: 3,
        estimator,
        sequences: 4,
        task: 'reverse',
      });
      expect(Object.keys(same).sort()).toEqual([...keys].sort());
      expect(same).toMatchObject({
        k1: 0,
        k3: 0,
        meanAbsDp: 0,
        meanAbsDelta: 0,
        maxAbsDelta: 0,
        ess: 1,
        'fracAbsDeltaGt1e-3': 0,
      });
      expect(same.tokens).toBeGreaterThan(0);
      const q = diffusionMismatch({
        rollout: e4m3TestNumerics(),
        trainer: fp32Numerics(),
        length: 8,
        seed: 3,
        estimator,
        sequences: 4,
        task: 'reverse',
      });
      for (const k of keys) expect(Number.isFinite(q[k as keyof typeof q]), k).toBe(true);
      expect(q.meanAbsDelta).toBeGreaterThan(0);
      expect(q.maxAbsDelta).toBeGreaterThanOrEqual(q.meanAbsDelta);
      expect(q.k3).toBeGreaterThan(0);
      expect(q.ess).toBeGreaterThan(0);
      expect(q.ess).toBeLessThan(1);
    });
  }

  it('metric formulas on a hand-made example', () => {
    const old = Float64Array.from([Math.log(0.5), Math.log(0.25), -1, -7]);
    const roll = Float64Array.from([Math.log(0.25), Math.log(0.25), -1.0005, 0]);
    const mask = Float64Array.from([1, 1, 1, 0]);
    const m = probeDiagnostics(roll, old, mask);
    const d = [Math.log(2), 0, 0.0005];
    expect(m.tokens).toBe(3);
    expect(m.k1).toBeCloseTo(-(d[0]! + d[2]!) / 3, 12);
    expect(m.k3).toBeCloseTo(d.reduce((a, x) => a + Math.exp(x) - x - 1, 0) / 3, 12);
    expect(m.meanAbsDp).toBeCloseTo((0.25 + 0 + Math.abs(Math.exp(-1) - Math.exp(-1.0005))) / 3, 12);
    expect(m.maxAbsDelta).toBeCloseTo(Math.log(2), 12);
    const w = d.map(Math.exp);
    const mw = (w[0]! + w[1]! + w[2]!) / 3;
    expect(m.ess).toBeCloseTo(1 / (w.reduce((a, x) => a + (x / mw) ** 2, 0) / 3), 12);
    expect(m['fracAbsDeltaGt1e-3']).toBeCloseTo(1 / 3, 12);
  });

  it('validates its inputs', () => {
    expect(() =>
      diffusionMismatch({ rollout: fp32Numerics(), trainer: fp32Numerics(), length: 0, seed: 1, estimator: 'd1' }),
    ).toThrow(/length must be a positive integer, got 0/);
  });
});
