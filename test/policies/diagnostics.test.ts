// Mismatch diagnostics on hand-computed values.
// Not the estimator library's diagnostics (χ², CV, clip fractions live there).

import { describe, expect, it } from 'vitest';
import { probeDiagnostics } from '../../src/policies/index.js';

describe('probeDiagnostics', () => {
  it('matches a hand computation and ignores masked tokens', () => {
    const roll = [-1, -2, -0.5, -9];
    const old = [-1.1, -2, -0.4995, 5];
    const mask = [1, 1, 1, 0];
    const d = probeDiagnostics(roll, old, mask);
    const x = [0.1, 0, -0.0005];
    const w = x.map((v) => Math.exp(-v));
    const mw = (w[0]! + w[1]! + w[2]!) / 3;
    expect(d.tokens).toBe(3);
    expect(d.k1).toBeCloseTo((0.1 - 0.0005) / 3, 15);
    expect(d.k3).toBeCloseTo(x.reduce((a, v) => a + Math.exp(-v) - 1 + v, 0) / 3, 15);
    expect(d.meanAbsDp).toBeCloseTo(
      (Math.abs(Math.exp(-1.1) - Math.exp(-1)) + Math.abs(Math.exp(-0.4995) - Math.exp(-0.5))) / 3,
      15,
    );
    expect(d.meanAbsDelta).toBeCloseTo(0.1005 / 3, 15);
    expect(d.maxAbsDelta).toBeCloseTo(0.1, 15);
    expect(d.ess).toBeCloseTo(1 / (w.reduce((a, v) => a + (v / mw) ** 2, 0) / 3), 15);
    expect(d['fracAbsDeltaGt1e-3']).toBeCloseTo(1 / 3, 15);
  });

  it('is exactly zero mismatch for equal inputs, and checks lengths', () => {
    const d = probeDiagnostics([-1, -3], [-1, -3], [1, 1]);
    expect([d.k1, d.k3, d.meanAbsDp, d.maxAbsDelta, d.ess]).toEqual([0, 0, 0, 0, 1]);
    expect(() => probeDiagnostics([1], [1, 2], [1])).toThrow(/one length/);
  });
});
