// AdamW and global-norm clipping tests: a hand-computed update, decay only on 2-D weights, state
// serialization, and clipping that returns the pre-clip norm.

import { describe, expect, it } from 'vitest';
import { fc, test } from '@fast-check/vitest';
import { AdamW, clipGradNorm, createParamStore, type ParamSpec } from '../../src/nn/index.js';
import { randn, rngFor } from './gradcheck.js';

const specs: ParamSpec[] = [
  { name: 'w', shape: [1, 2], init: { kind: 'constant', value: 1 } },
  { name: 'b', shape: [1], init: { kind: 'constant', value: 1 } },
];

describe('AdamW', () => {
  it('matches a hand computation for two steps', () => {
    const store = createParamStore(specs, 0);
    const opt = new AdamW(store, { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1 });
    store.grads.set([0.5, -2, 0.5]);
    opt.step();
    // Step 1: m = 0.1·g, v = 0.001·g², m̂ = g, v̂ = g², update = lr·(sign(g)·|g|/(|g|+eps) + wd·θ).
    const w0 = 1 - 0.1 * (0.5 / (0.5 + 1e-8) + 0.1 * 1);
    const w1 = 1 - 0.1 * (-2 / (2 + 1e-8) + 0.1 * 1);
    const b0 = 1 - 0.1 * (0.5 / (0.5 + 1e-8)); // 1-D: no decay
    expect(store.data[0]).toBe(Math.fround(w0));
    expect(store.data[1]).toBe(Math.fround(w1));
    expect(store.data[2]).toBe(Math.fround(b0));
    expect(store.data[0]).toBeCloseTo(0.89, 6);
    expect(store.data[2]).toBeCloseTo(0.9, 6);
    // Step 2 with g = 1 on the bias: m = 0.9·0.05 + 0.1 = 0.145, v = 0.999·0.00025 + 0.001 = 0.00124975.
    store.grads.set([0, 0, 1]);
    opt.step(0.05);
    const m1 = Math.fround((1 - 0.9) * 0.5);
    const v1 = Math.fround((1 - 0.999) * 0.5 * 0.5);
    const m = Math.fround(0.9 * m1 + (1 - 0.9) * 1);
    const v = Math.fround(0.999 * v1 + (1 - 0.999) * 1);
    expect(m).toBeCloseTo(0.145, 7);
    expect(v).toBeCloseTo(0.00124975, 9);
    const mHat = m / (1 - 0.81);
    const vHat = v / (1 - 0.999 ** 2);
    const bWant = Math.fround(Math.fround(b0) - 0.05 * (mHat / (Math.sqrt(vHat) + 1e-8)));
    expect(store.data[2]).toBe(bWant);
    expect(opt.stepCount).toBe(2);
  });

  test.prop([fc.nat()], { numRuns: 10 })('restoring the serialized state continues identically', (seed) => {
    const r = rngFor(seed, 'adamw');
    const mk = () =>
      createParamStore(
        [
          { name: 'w', shape: [3, 4], init: { kind: 'normal', std: 0.02 } },
          { name: 'g', shape: [4], init: { kind: 'constant', value: 1 } },
        ],
        seed,
      );
    const a = mk();
    const optA = new AdamW(a, { lr: 1e-2, weightDecay: 0.01 });
    const grads = [randn(r, a.layout.size), randn(r, a.layout.size), randn(r, a.layout.size)];
    a.grads.set(grads[0]!);
    optA.step();
    const saved = JSON.parse(JSON.stringify({ params: a.toJSON(), opt: optA.state() }));
    for (const g of grads.slice(1)) {
      a.grads.set(g);
      optA.step();
    }
    const b = mk();
    b.data.set(saved.params.data);
    const optB = new AdamW(b, { lr: 1e-2, weightDecay: 0.01 }, saved.opt);
    for (const g of grads.slice(1)) {
      b.grads.set(g);
      optB.step();
    }
    expect(b.data).toEqual(a.data);
    expect(optB.state()).toEqual(optA.state());
  });

  it('rejects bad hyper-parameters by name', () => {
    const store = createParamStore(specs, 0);
    expect(() => new AdamW(store, { lr: 0.1, beta1: 1 })).toThrow(/beta1/);
    expect(() => new AdamW(store, { lr: NaN })).toThrow(/lr/);
    expect(() => new AdamW(store, { lr: 0.1 }, { step: 1, m: [0], v: [0] })).toThrow(/state\.m/);
  });
});

describe('clipGradNorm', () => {
  test.prop([fc.integer({ min: 1, max: 50 }), fc.double({ min: 0.01, max: 10, noNaN: true }), fc.nat()], {
    numRuns: 50,
  })('returns the pre-clip norm and scales to maxNorm only when above', (n, maxNorm, seed) => {
    const g = Float32Array.from(randn(rngFor(seed, 'clip'), n));
    const before = Float32Array.from(g);
    let s = 0;
    for (const x of g) s += x * x;
    const norm = clipGradNorm(g, maxNorm);
    expect(norm).toBe(Math.sqrt(s));
    let after = 0;
    for (const x of g) after += x * x;
    if (norm + 1e-6 > maxNorm) {
      expect(Math.sqrt(after)).toBeCloseTo((maxNorm * norm) / (norm + 1e-6), 5);
      const coef = maxNorm / (norm + 1e-6);
      for (let i = 0; i < n; i++) expect(g[i]).toBe(Math.fround(before[i]! * coef));
    } else {
      expect(g).toEqual(before);
    }
  });
});
