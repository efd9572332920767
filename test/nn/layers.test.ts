// Finite-difference gradient checks (float64) for embedding, linear, norms, activations, residual,
// softmax, log-softmax and cross-entropy, as property tests over small random shapes and seeds.

import { describe, expect } from 'vitest';
import { fc, test } from '@fast-check/vitest';
import {
  crossEntropyBackward,
  crossEntropyForward,
  embeddingBackward,
  embeddingForward,
  geluBackward,
  geluForward,
  layerNormBackward,
  layerNormForward,
  linearBackward,
  linearForward,
  logSoftmaxBackward,
  logSoftmaxForward,
  residualBackward,
  residualForward,
  rmsNormBackward,
  rmsNormForward,
  softmaxBackward,
  softmaxForward,
  swigluBackward,
  swigluForward,
} from '../../src/nn/index.js';
import { dotProbe, expectGradClose, randn, rngFor } from './gradcheck.js';

const RUNS = { numRuns: 25 };
const size = (max: number) => fc.integer({ min: 1, max });

describe('embedding', () => {
  test.prop([size(3), size(4), size(5), size(6), fc.boolean(), fc.nat()], RUNS)(
    'gradients of wte and wpe',
    (B, T, C, V, withPos, seed) => {
      const r = rngFor(seed, 'emb');
      const tokens = Array.from({ length: B * T }, () => r.int(V));
      const wte = randn(r, V * C);
      const wpe = withPos ? randn(r, T * C) : null;
      const R = randn(r, B * T * C);
      const out = new Float64Array(B * T * C);
      const loss = () => (embeddingForward(out, tokens, wte, wpe, B, T, C, V), dotProbe(out, R));
      const dwte = new Float64Array(V * C);
      const dwpe = withPos ? new Float64Array(T * C) : null;
      embeddingBackward(dwte, dwpe, R, tokens, B, T, C);
      expectGradClose('dwte', wte, dwte, loss);
      if (wpe && dwpe) expectGradClose('dwpe', wpe, dwpe, loss);
    },
  );

  test.prop([fc.nat()], { numRuns: 5 })('rejects an out-of-range token, naming it', (seed) => {
    const out = new Float64Array(4);
    expect(() => embeddingForward(out, [0, 3 + (seed % 2)], new Float64Array(6), null, 1, 2, 2, 3)).toThrow(
      /tokens\[1\]/,
    );
  });
});

describe('linear', () => {
  test.prop([size(5), size(5), size(5), fc.boolean(), fc.nat()], RUNS)(
    'gradients of input, weight, bias',
    (N, C, OC, withBias, seed) => {
      const r = rngFor(seed, 'lin');
      const x = randn(r, N * C);
      const W = randn(r, OC * C);
      const b = withBias ? randn(r, OC) : null;
      const R = randn(r, N * OC);
      const out = new Float64Array(N * OC);
      const loss = () => (linearForward(out, x, W, b, N, C, OC), dotProbe(out, R));
      const dx = randn(r, N * C); // nonzero start: backward must accumulate
      const dx0 = Float64Array.from(dx);
      const dW = new Float64Array(OC * C);
      const db = withBias ? new Float64Array(OC) : null;
      linearBackward(dx, dW, db, R, x, W, N, C, OC);
      expectGradClose(
        'dx',
        x,
        dx.map((v, i) => v - dx0[i]!),
        loss,
      );
      expectGradClose('dW', W, dW, loss);
      if (b && db) expectGradClose('db', b, db, loss);
    },
  );
});

describe('norms', () => {
  test.prop([size(4), fc.integer({ min: 2, max: 8 }), fc.boolean(), fc.nat()], RUNS)(
    'LayerNorm gradients',
    (N, C, withBias, seed) => {
      const r = rngFor(seed, 'ln');
      const x = randn(r, N * C);
      const w = randn(r, C);
      const b = withBias ? randn(r, C) : null;
      const R = randn(r, N * C);
      const out = new Float64Array(N * C);
      const mean = new Float64Array(N);
      const rstd = new Float64Array(N);
      const loss = () => (layerNormForward(out, mean, rstd, x, w, b, N, C), dotProbe(out, R));
      loss();
      const dx = new Float64Array(N * C);
      const dw = new Float64Array(C);
      const db = withBias ? new Float64Array(C) : null;
      layerNormBackward(dx, dw, db, R, x, w, mean, rstd, N, C);
      expectGradClose('dx', x, dx, loss, { rtol: 1e-5 });
      expectGradClose('dw', w, dw, loss);
      if (b && db) expectGradClose('db', b, db, loss);
      // Normalized rows: mean 0 and variance 1/(1 + eps/σ²) before the affine part.
      layerNormForward(out, mean, rstd, x, new Float64Array(C).fill(1), null, N, C);
      let s = 0;
      for (let c = 0; c < C; c++) s += out[c]!;
      expect(Math.abs(s / C)).toBeLessThan(1e-12);
    },
  );

  test.prop([size(4), size(8), fc.boolean(), fc.nat()], RUNS)(
    'RMSNorm gradients (with and without gain)',
    (N, C, withWeight, seed) => {
      const r = rngFor(seed, 'rms');
      const x = randn(r, N * C);
      const w = withWeight ? randn(r, C) : null;
      const R = randn(r, N * C);
      const out = new Float64Array(N * C);
      const rstd = new Float64Array(N);
      const loss = () => (rmsNormForward(out, rstd, x, w, N, C), dotProbe(out, R));
      loss();
      const dx = new Float64Array(N * C);
      const dw = withWeight ? new Float64Array(C) : null;
      rmsNormBackward(dx, dw, R, x, w, rstd, N, C);
      expectGradClose('dx', x, dx, loss, { rtol: 1e-5 });
      if (w && dw) expectGradClose('dw', w, dw, loss);
    },
  );
});

describe('activations and residual', () => {
  test.prop([size(20), fc.nat()], RUNS)('GELU gradient and GPT-2 values', (n, seed) => {
    const r = rngFor(seed, 'gelu');
    const x = randn(r, n, 2);
    const R = randn(r, n);
    const out = new Float64Array(n);
    const loss = () => (geluForward(out, x, n), dotProbe(out, R));
    const dx = new Float64Array(n);
    geluBackward(dx, x, R, n);
    expectGradClose('dx', x, dx, loss);
    // gelu(0) = 0; gelu(x) → x for large x; gelu(x) → 0 for very negative x.
    const y = new Float64Array(3);
    geluForward(y, Float64Array.from([0, 10, -10]), 3);
    expect(y[0]).toBe(0);
    expect(y[1]).toBeCloseTo(10, 12);
    expect(Math.abs(y[2]!)).toBeLessThan(1e-12);
  });

  test.prop([size(20), fc.nat()], RUNS)('SwiGLU gradients', (n, seed) => {
    const r = rngFor(seed, 'swiglu');
    const up = randn(r, n, 2);
    const gate = randn(r, n, 3);
    const R = randn(r, n);
    const out = new Float64Array(n);
    const loss = () => (swigluForward(out, up, gate, n), dotProbe(out, R));
    const dup = new Float64Array(n);
    const dgate = new Float64Array(n);
    swigluBackward(dup, dgate, R, up, gate, n);
    expectGradClose('dup', up, dup, loss);
    expectGradClose('dgate', gate, dgate, loss);
  });

  test.prop([size(12), fc.nat()], RUNS)('residual gradients', (n, seed) => {
    const r = rngFor(seed, 'res');
    const a = randn(r, n);
    const b = randn(r, n);
    const R = randn(r, n);
    const out = new Float64Array(n);
    const loss = () => (residualForward(out, a, b, n), dotProbe(out, R));
    const da = new Float64Array(n);
    const db = new Float64Array(n);
    residualBackward(da, db, R, n);
    expectGradClose('da', a, da, loss);
    expectGradClose('db', b, db, loss);
  });
});

describe('softmax family', () => {
  const tau = fc.constantFrom(1, 0.5, 0.7, 1.3, 2);

  test.prop([size(4), size(7), tau, fc.nat()], RUNS)(
    'softmax gradient and normalization',
    (N, V, temperature, seed) => {
      const r = rngFor(seed, 'sm');
      const z = randn(r, N * V, 3);
      const R = randn(r, N * V);
      const p = new Float64Array(N * V);
      const loss = () => (softmaxForward(p, z, N, V, { temperature }), dotProbe(p, R));
      loss();
      for (let i = 0; i < N; i++) {
        let s = 0;
        for (let v = 0; v < V; v++) s += p[i * V + v]!;
        expect(s).toBeCloseTo(1, 12);
      }
      const dz = new Float64Array(N * V);
      softmaxBackward(dz, R, p, N, V, { temperature });
      expectGradClose('dz', z, dz, loss);
    },
  );

  test.prop([size(4), size(7), tau, fc.nat()], RUNS)('log-softmax gradient', (N, V, temperature, seed) => {
    const r = rngFor(seed, 'lsm');
    const z = randn(r, N * V, 3);
    const R = randn(r, N * V);
    const lp = new Float64Array(N * V);
    const loss = () => (logSoftmaxForward(lp, z, N, V, { temperature }), dotProbe(lp, R));
    loss();
    const dz = new Float64Array(N * V);
    logSoftmaxBackward(dz, R, lp, N, V, { temperature });
    expectGradClose('dz', z, dz, loss);
  });

  test.prop([size(5), fc.integer({ min: 2, max: 7 }), tau, fc.boolean(), fc.nat()], RUNS)(
    'cross-entropy gradient with temperature and weights',
    (N, V, temperature, weighted, seed) => {
      const r = rngFor(seed, 'ce');
      const z = randn(r, N * V, 3);
      const targets = Array.from({ length: N }, () => r.int(V));
      const weights = weighted ? randn(r, N) : null;
      const losses = new Float64Array(N);
      const probs = new Float64Array(N * V);
      const opts = { temperature, weights };
      const loss = () => crossEntropyForward(losses, probs, z, targets, N, V, opts);
      loss();
      const dz = new Float64Array(N * V);
      crossEntropyBackward(dz, probs, targets, N, V, opts);
      expectGradClose('dz', z, dz, loss);
    },
  );

  test.prop([fc.nat()], { numRuns: 10 })('stable for huge logits and matches -log softmax', (seed) => {
    const r = rngFor(seed, 'ce-big');
    const V = 5;
    const z = Float32Array.from(randn(r, V, 1e4)); // exp would overflow without the max shift
    const losses = new Float32Array(1);
    const probs = new Float32Array(V);
    const y = r.int(V);
    const total = crossEntropyForward(losses, probs, z, [y], 1, V);
    expect(Number.isFinite(total)).toBe(true);
    const lp = new Float64Array(V);
    logSoftmaxForward(lp, Float64Array.from(z), 1, V);
    expect(losses[0]).toBeCloseTo(-lp[y]!, 2);
    expect(total).toBe(losses[0]);
    expect(() => crossEntropyForward(losses, probs, z, [V], 1, V)).toThrow(/targets\[0\]/);
    expect(() => softmaxForward(probs, z, 1, V, { temperature: 0 })).toThrow(/temperature/);
  });
});
