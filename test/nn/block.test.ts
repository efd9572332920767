// Gradient checks (float64) for the MLP and for a whole 1-layer transformer (embedding, block, final
// norm, LM head, cross-entropy) assembled from the nn layers; plus a float32 smoke run.

import { describe, expect } from 'vitest';
import { fc, test } from '@fast-check/vitest';
import {
  blockBackward,
  blockForward,
  blockParamSpecs,
  blockWeights,
  createBlockCache,
  createMlpCache,
  createParamStore,
  gemmSequential,
  mlpBackward,
  mlpForward,
  type BlockConfig,
  type BlockGemms,
  type FloatArray,
  type GemmFn,
  type MlpKind,
} from '../../src/nn/index.js';
import { dotProbe, expectGradClose, randn, rngFor } from './gradcheck.js';
import { tinyModel } from './tiny-model.js';

describe('mlp', () => {
  test.prop(
    [
      fc.integer({ min: 1, max: 4 }),
      fc.integer({ min: 1, max: 5 }),
      fc.integer({ min: 1, max: 6 }),
      fc.constantFrom<MlpKind>('gelu', 'swiglu'),
      fc.boolean(),
      fc.nat(),
    ],
    { numRuns: 25 },
  )('gradients of input and all weights', (N, C, Hd, kind, bias, seed) => {
    const r = rngFor(seed, 'mlp');
    const x = randn(r, N * C);
    const w = {
      up: randn(r, Hd * C),
      upBias: bias ? randn(r, Hd) : null,
      gate: kind === 'swiglu' ? randn(r, Hd * C) : null,
      gateBias: kind === 'swiglu' && bias ? randn(r, Hd) : null,
      down: randn(r, C * Hd),
      downBias: bias ? randn(r, C) : null,
    };
    const zerosLike = (a: FloatArray | null) => (a ? new Float64Array(a.length) : null);
    const g = {
      up: new Float64Array(Hd * C),
      upBias: zerosLike(w.upBias),
      gate: zerosLike(w.gate),
      gateBias: zerosLike(w.gateBias),
      down: new Float64Array(C * Hd),
      downBias: zerosLike(w.downBias),
    };
    const R = randn(r, N * C);
    const out = new Float64Array(N * C);
    const cache = createMlpCache(x, N, Hd, kind);
    const loss = () => (mlpForward(out, cache, x, w, N, C, Hd, kind), dotProbe(out, R));
    loss();
    const dx = new Float64Array(N * C);
    mlpBackward(dx, g, R, cache, x, w, N, C, Hd, kind);
    expectGradClose('dx', x, dx, loss);
    for (const key of ['up', 'upBias', 'gate', 'gateBias', 'down', 'downBias'] as const) {
      const wk = w[key];
      const gk = g[key];
      if (wk && gk) expectGradClose(key, wk as Float64Array, gk, loss);
    }
  });
});

const blockCfg = fc.record({
  CH: fc.constantFrom([4, 1], [4, 2], [8, 2]),
  hiddenMul: fc.constantFrom(1, 2),
  norm: fc.constantFrom<BlockConfig['norm']>('layernorm', 'rmsnorm'),
  mlp: fc.constantFrom<MlpKind>('gelu', 'swiglu'),
  bias: fc.boolean(),
  causal: fc.boolean(),
  rope: fc.boolean(),
});

describe('transformer block (end to end)', () => {
  test.prop(
    [
      blockCfg,
      fc.integer({ min: 1, max: 2 }),
      fc.integer({ min: 1, max: 4 }),
      fc.integer({ min: 2, max: 5 }),
      fc.nat(),
    ],
    { numRuns: 20 },
  )('the whole loss gradient passes a finite-difference check', (c, B, T, V, seed) => {
    const [C, H] = c.CH as [number, number];
    const cfg: BlockConfig = {
      C,
      H,
      hidden: C * c.hiddenMul,
      norm: c.norm,
      mlp: c.mlp,
      bias: c.bias,
      causal: c.causal,
      rope: c.rope,
    };
    const { layout, run } = tinyModel(cfg, V, T);
    const r = rngFor(seed, 'model');
    const params = randn(r, layout.size, 0.5);
    for (const n of ['h0.ln1.weight', 'h0.ln2.weight', 'lnf.weight']) {
      const view = layout.view(params, n);
      for (let i = 0; i < view.length; i++) view[i] = view[i]! + 1;
    }
    const tokens = Array.from({ length: B * T }, () => r.int(V));
    const targets = Array.from({ length: B * T }, () => r.int(V));
    const grads = new Float64Array(layout.size);
    run(params, tokens, targets, B, grads);
    for (const e of layout.entries) {
      const pv = layout.view(params, e.name);
      expectGradClose(e.name, pv, layout.view(grads, e.name), () => run(params, tokens, targets, B), { rtol: 1e-5 });
    }
  });

  test.prop([fc.nat()], { numRuns: 3 })('float32 run is deterministic and close to float64', (seed) => {
    const cfg: BlockConfig = {
      C: 8,
      H: 2,
      hidden: 16,
      norm: 'rmsnorm',
      mlp: 'swiglu',
      bias: false,
      causal: true,
      rope: true,
    };
    const { layout, run } = tinyModel(cfg, 6, 5);
    const r = rngFor(seed, 'f32');
    const p64 = randn(r, layout.size, 0.3);
    const p32 = Float32Array.from(p64);
    const tokens = Array.from({ length: 10 }, () => r.int(6));
    const targets = Array.from({ length: 10 }, () => r.int(6));
    const g1 = new Float32Array(layout.size);
    const g2 = new Float32Array(layout.size);
    const l1 = run(p32, tokens, targets, 2, g1);
    const l2 = run(p32, tokens, targets, 2, g2);
    expect(Object.is(l1, l2)).toBe(true);
    expect(g1).toEqual(g2);
    const l64 = run(Float64Array.from(p32), tokens, targets, 2);
    expect(Math.abs(l1 - l64)).toBeLessThan(1e-4);
    expect(l1).not.toBe(l64); // the float32 path really rounds
  });
});

describe('GEMM sites of a block', () => {
  test.prop([fc.constantFrom<MlpKind>('gelu', 'swiglu'), fc.nat()], { numRuns: 4 })(
    'every site goes through the GemmFn it is given',
    (mlp, seed) => {
      const cfg: BlockConfig = {
        C: 8,
        H: 2,
        hidden: 16,
        norm: 'layernorm',
        mlp,
        bias: true,
        causal: true,
        rope: false,
      };
      const store = createParamStore(blockParamSpecs('h0', cfg, 1), seed);
      const B = 2;
      const T = 3;
      const N = B * T;
      const x = Float32Array.from(randn(rngFor(seed, 'sites'), N * 8));
      const calls = new Map<string, number>();
      const site =
        (name: string): GemmFn =>
        (out, a, b, m, n, k) => {
          calls.set(name, (calls.get(name) ?? 0) + 1);
          gemmSequential(out, a, b, m, n, k);
        };
      const lin = (p: string) => ({
        forward: site(`${p}.forward`),
        dgrad: site(`${p}.dgrad`),
        wgrad: site(`${p}.wgrad`),
      });
      const gemms: BlockGemms = {
        q: lin('q'),
        k: lin('k'),
        v: lin('v'),
        o: lin('o'),
        mlp: { up: lin('up'), gate: lin('gate'), down: lin('down') },
        attention: {
          qk: site('qk'),
          pv: site('pv'),
          dScores: site('dScores'),
          dValues: site('dValues'),
          dQuery: site('dQuery'),
          dKey: site('dKey'),
        },
      };
      const w = blockWeights('h0', (n) => store.paramOrNull(n));
      const run = (g?: BlockGemms) => {
        store.zeroGrad();
        const out = new Float32Array(N * 8);
        const cache = createBlockCache(x, B, T, cfg);
        blockForward(out, cache, x, w, B, T, cfg, g);
        const dx = new Float32Array(N * 8);
        blockBackward(
          dx,
          blockWeights('h0', (n) => store.gradOrNull(n)),
          out,
          cache,
          x,
          w,
          B,
          T,
          cfg,
          g,
        );
        return { out, dx, grads: Float32Array.from(store.grads) };
      };
      const hooked = run(gemms);
      const plain = run();
      expect(hooked).toEqual(plain);
      const sites = ['q', 'k', 'v', 'o', 'up', 'down', ...(mlp === 'swiglu' ? ['gate'] : [])].flatMap((p) => [
        `${p}.forward`,
        `${p}.dgrad`,
        `${p}.wgrad`,
      ]);
      for (const s of sites) expect(calls.get(s), s).toBe(1);
      for (const s of ['qk', 'pv', 'dScores', 'dValues', 'dQuery', 'dKey']) expect(calls.get(s), s).toBe(B * cfg.H);
      if (mlp === 'gelu') expect(calls.has('gate.forward')).toBe(false);
    },
  );
});
