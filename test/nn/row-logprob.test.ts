// The one row log-prob implementation both policies use: hand values for the kept-set and excluded-id
// variants, entropy, and the backward against central differences. Not the samplers.

import { describe, expect, it } from 'vitest';
import { rowEntropy, rowLogProb, rowLogProbBackward, rowLogSumExp } from '../../src/nn/index.js';

describe('row log-prob', () => {
  const z = new Float64Array([9, 1, 2, 3]); // the row starts at offset 1: [1, 2, 3]
  it('log-sum-exp, log-prob and entropy by hand, with a kept set and an excluded id', () => {
    const lse = Math.log(Math.exp(0.5) + Math.exp(1) + Math.exp(1.5)); // τ = 2
    expect(rowLogSumExp(z, 1, 3, 2)).toBeCloseTo(lse, 14);
    expect(rowLogProb(z, 1, 3, 2, 2)).toBeCloseTo(1.5 - lse, 14);
    const kept = new Uint8Array([0, 1, 1]);
    expect(rowLogProb(z, 1, 3, 2, 2, kept)).toBeCloseTo(1.5 - Math.log(Math.exp(1) + Math.exp(1.5)), 14);
    expect(rowLogProb(z, 1, 3, 2, 2, null, 0)).toBe(rowLogProb(z, 1, 3, 2, 2, kept)); // excluding id 0 = keeping 1 and 2, bit for bit
    expect(rowLogProb(z, 1, 3, 0, 2, null, 0)).toBe(-Infinity);
    const p = [0.5, 1, 1.5].map((x) => Math.exp(x - lse));
    expect(rowEntropy(z, 1, 3, 2)).toBeCloseTo(-p.reduce((h, q) => h + q * Math.log(q), 0), 14);
    expect(rowEntropy(new Float32Array([0, 0]), 0, 2, 1)).toBeCloseTo(Math.LN2, 15);
  });

  it('the backward accumulates g·d logp/dz, equal to central differences, nothing on the excluded id', () => {
    const logits = Float64Array.from([0.3, -1.2, 2.0, 0.7]);
    const d = new Float64Array(4).fill(0.25);
    rowLogProbBackward(d, logits, 0, 4, 2, 1.5, 2, 3);
    const h = 1e-6;
    for (let v = 0; v < 3; v++) {
      const up = Float64Array.from(logits),
        dn = Float64Array.from(logits);
      up[v]! += h;
      dn[v]! -= h;
      const fd = (2 * (rowLogProb(up, 0, 4, 2, 1.5, null, 3) - rowLogProb(dn, 0, 4, 2, 1.5, null, 3))) / (2 * h);
      expect(d[v]! - 0.25).toBeCloseTo(fd, 8);
    }
    expect(d[3]).toBe(0.25);
  });

  it('entropy and backward over a kept set (sampling-support replay): renormalised, nothing outside the set', () => {
    const logits = Float64Array.from([0.3, -1.2, 2.0, 0.7, 5]);
    const keep = Uint8Array.of(1, 0, 1, 1, 1);
    // entropy of softmax over ids {0, 2, 3} (id 4 excluded, id 1 not kept), τ = 1.5
    const e = [0.3, 2.0, 0.7].map((x) => Math.exp(x / 1.5));
    const q = e.map((x) => x / e.reduce((a, b) => a + b, 0));
    expect(rowEntropy(logits, 0, 5, 1.5, 4, keep)).toBeCloseTo(-q.reduce((h, x) => h + x * Math.log(x), 0), 14);
    expect(rowEntropy(logits, 0, 5, 1.5, 4, null)).toBe(rowEntropy(logits, 0, 5, 1.5, 4)); // null = the full row, bit for bit
    const d = new Float64Array(5).fill(0.25);
    rowLogProbBackward(d, logits, 0, 5, 2, 1.5, 2, 4, keep);
    const h = 1e-6;
    for (const v of [0, 2, 3]) {
      const up = Float64Array.from(logits),
        dn = Float64Array.from(logits);
      up[v]! += h;
      dn[v]! -= h;
      const fd = (2 * (rowLogProb(up, 0, 5, 2, 1.5, keep, 4) - rowLogProb(dn, 0, 5, 2, 1.5, keep, 4))) / (2 * h);
      expect(d[v]! - 0.25).toBeCloseTo(fd, 8);
    }
    expect([d[1], d[4]]).toEqual([0.25, 0.25]);
  });
});
