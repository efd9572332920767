// Tests of the aggregation coefficients and the KL estimators (clamps, straight-through) on hand-computed values.
// Not a source of expected numbers: every expected value is derived in the test itself.

import { describe, expect, it } from 'vitest';
import { aggregate, aggregations } from '../../src/rl/index.js';
import { k1, k1StraightThrough, k2, k3, k3StraightThrough } from '../../src/rl/kl.js';
import { flat } from './helpers.js';

// rows: 3 valid tokens, 1 valid token, 0 valid tokens (left out of every sequence mean)
const MASK = flat([
  [1, 1, 1],
  [1, 0, 0],
  [0, 0, 0],
]);
const LOSS = flat([
  [1, 2, 3],
  [4, 99, 99],
  [99, 99, 99],
]);
const shape = { B: 3, T: 3 };

describe('aggregation: hand-computed values', () => {
  it('token-mean = Σ L·m / Σ m', () => {
    expect(aggregate(aggregations['token-mean'](MASK, shape, {}).value, LOSS)).toBeCloseTo(10 / 4, 15);
  });
  it('seq-mean-token-sum = mean over non-empty rows of Σ_t L·m', () => {
    expect(aggregate(aggregations['seq-mean-token-sum'](MASK, shape, {}).value, LOSS)).toBeCloseTo((6 + 4) / 2, 15);
  });
  it('seq-mean-token-mean = mean over non-empty rows of the row means', () => {
    expect(aggregate(aggregations['seq-mean-token-mean'](MASK, shape, {}).value, LOSS)).toBeCloseTo((2 + 4) / 2, 15);
  });
  it('seq-mean-token-sum-norm = seq-mean-token-sum / K, K defaults to T', () => {
    expect(aggregate(aggregations['seq-mean-token-sum-norm'](MASK, shape, {}).value, LOSS)).toBeCloseTo(5 / 3, 15);
    const r = aggregations['seq-mean-token-sum-norm'](MASK, shape, { normalizer: 10 });
    expect(aggregate(r.value, LOSS)).toBeCloseTo(0.5, 15);
    expect(r.metrics['actor/loss_scale_factor']).toBe(10);
  });
  it('coefficients are zero on masked tokens and an empty batch gives 0', () => {
    for (const fn of Object.values(aggregations)) {
      const c = fn(MASK, shape, {}).value;
      MASK.forEach((m, k) => m === 0 && expect(c[k]).toBe(0));
      expect(aggregate(fn(new Float64Array(9), shape, {}).value, LOSS)).toBe(0);
    }
  });
});

describe('KL estimators', () => {
  const theta = Float64Array.of(-1, -2, -30, -1);
  const ref = Float64Array.of(-1.5, -1.7, -1, -1);
  const mask = Float64Array.of(1, 1, 1, 0);
  const up = Float64Array.of(1, 2, 1, 1);
  const base = { shape: { B: 1, T: 4 }, logpTheta: theta, logpRef: ref, klMask: mask, upstream: up };
  const d = [0.5, -0.3, -29];

  it('k1 = d, k2 = ½d², gradients 1 and d (× upstream)', () => {
    const a = k1(base, {}).value;
    d.forEach((x, i) => expect(a.tokenKl[i]).toBeCloseTo(x, 14));
    expect(Array.from(a.gradLogpTheta)).toEqual([1, 2, 1, 0]);
    const b = k2(base, {}).value;
    d.forEach((x, i) => expect(b.tokenKl[i]).toBeCloseTo(0.5 * x * x, 13));
    d.forEach((x, i) => expect(b.gradLogpTheta[i]).toBeCloseTo(x * up[i]!, 13));
  });

  it('k3 = e^−d − 1 + d with verl clamps (u to ±20, value to ±10)', () => {
    const r = k3(base, {}).value;
    expect(r.tokenKl[0]).toBeCloseTo(Math.exp(-0.5) - 1 + 0.5, 15);
    expect(r.tokenKl[1]).toBeCloseTo(Math.exp(0.3) - 1 - 0.3, 15);
    expect(r.tokenKl[2]).toBe(10);
    expect(r.gradLogpTheta[0]).toBeCloseTo(1 - Math.exp(-0.5), 15);
    expect(r.gradLogpTheta[1]).toBeCloseTo(2 * (1 - Math.exp(0.3)), 15);
    expect(r.gradLogpTheta[2]).toBe(0);
    expect(r.tokenKl[3]).toBe(0);
  });

  it('straight-through k1+ / k3+: value of the base estimator, gradient of k2', () => {
    const a = k1StraightThrough(base, {}).value;
    const b = k3StraightThrough(base, {}).value;
    expect(Array.from(a.tokenKl)).toEqual(Array.from(k1(base, {}).value.tokenKl));
    expect(Array.from(b.tokenKl)).toEqual(Array.from(k3(base, {}).value.tokenKl));
    expect(Array.from(a.gradLogpTheta)).toEqual(Array.from(k2(base, {}).value.gradLogpTheta));
    expect(Array.from(b.gradLogpTheta)).toEqual(Array.from(k2(base, {}).value.gradLogpTheta));
  });
});
