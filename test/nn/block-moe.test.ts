// The MoE feed-forward inside a block: finite-difference gradients of a whole 1-layer model with the
// aux loss, replay of the block's own routing is bit-identical, and the KV-cache decode records it.

import { describe, expect } from 'vitest';
import { fc, test } from '@fast-check/vitest';
import {
  blockDecodeForward,
  blockForward,
  blockParamSpecs,
  blockWeights,
  createBlockCache,
  createBlockKvCache,
  createParamStore,
  type BlockConfig,
  type MlpKind,
} from '../../src/nn/index.js';
import { expectGradClose, randn, rngFor } from './gradcheck.js';
import { tinyModel } from './tiny-model.js';

const moeArb = fc.record({
  mlp: fc.constantFrom<MlpKind>('gelu', 'swiglu'),
  norm: fc.constantFrom<BlockConfig['norm']>('layernorm', 'rmsnorm'),
  bias: fc.boolean(),
  experts: fc.integer({ min: 1, max: 4 }),
  k: fc.integer({ min: 1, max: 4 }),
  aux: fc.constantFrom(0, 0.1),
});

describe('block with an MoE feed-forward', () => {
  test.prop([moeArb, fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 4 }), fc.nat()], { numRuns: 15 })(
    'the whole loss (incl. α·L_aux) passes a finite-difference check',
    (c, B, T, seed) => {
      const topK = Math.min(c.k, c.experts);
      const cfg: BlockConfig = {
        C: 4,
        H: 2,
        hidden: 4,
        norm: c.norm,
        mlp: c.mlp,
        bias: c.bias,
        causal: true,
        rope: false,
        moe: { experts: c.experts, topK, auxCoeff: c.aux },
      };
      const V = 3;
      const { layout, run } = tinyModel(cfg, V, T);
      expect(layout.has('h0.mlp.up')).toBe(false);
      expect(layout.has('h0.moe.router')).toBe(true);
      expect(layout.has(`h0.moe.e${c.experts - 1}.down`)).toBe(true);
      const r = rngFor(seed, 'moe-block');
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
        expectGradClose(
          e.name,
          layout.view(params, e.name),
          layout.view(grads, e.name),
          () => run(params, tokens, targets, B),
          { rtol: 1e-5 },
        );
      }
    },
  );

  test.prop([fc.nat()], { numRuns: 5 })(
    'replaying its own routing is bit-identical; a different routing changes the output',
    (seed) => {
      const cfg: BlockConfig = {
        C: 8,
        H: 2,
        hidden: 8,
        norm: 'rmsnorm',
        mlp: 'swiglu',
        bias: false,
        causal: true,
        rope: true,
        moe: { experts: 4, topK: 2, auxCoeff: 0.01 },
      };
      const store = createParamStore(blockParamSpecs('h0', cfg, 1), seed);
      const w = blockWeights('h0', (n) => store.paramOrNull(n));
      const B = 2;
      const T = 3;
      const x = Float32Array.from(randn(rngFor(seed, 'replay'), B * T * 8));
      const c1 = createBlockCache(x, B, T, cfg);
      const y1 = new Float32Array(B * T * 8);
      blockForward(y1, c1, x, w, B, T, cfg);
      const routing = Int32Array.from(c1.moe!.routing);
      const y2 = new Float32Array(B * T * 8);
      blockForward(y2, createBlockCache(x, B, T, cfg), x, w, B, T, cfg, undefined, routing);
      expect(y2).toEqual(y1);
      const other = Int32Array.from(routing, (e, i) =>
        i % 2 === 0 ? ((routing[i + 1]! + 1) % 4 === e ? (e + 2) % 4 : (routing[i + 1]! + 1) % 4) : e,
      );
      const y3 = new Float32Array(B * T * 8);
      blockForward(y3, createBlockCache(x, B, T, cfg), x, w, B, T, cfg, undefined, other);
      expect(Array.from(y3)).not.toEqual(Array.from(y1));
      expect(() =>
        blockForward(
          y3,
          createBlockCache(x, B, T, { ...cfg, moe: null }),
          x,
          blockWeights('h0', (n) => store.paramOrNull(n)),
          B,
          T,
          { ...cfg, moe: null },
          undefined,
          routing,
        ),
      ).toThrow(/mlp|moe/);
    },
  );

  test.prop([fc.nat()], { numRuns: 5 })('the KV-cache decode reproduces the full forward and its routing', (seed) => {
    const cfg: BlockConfig = {
      C: 8,
      H: 2,
      hidden: 8,
      norm: 'layernorm',
      mlp: 'gelu',
      bias: true,
      causal: true,
      rope: false,
      moe: { experts: 3, topK: 2, auxCoeff: 0 },
    };
    const store = createParamStore(blockParamSpecs('h0', cfg, 1), seed);
    const r = rngFor(seed, 'moe-decode');
    const noise = randn(r, store.data.length, 0.3);
    for (let i = 0; i < noise.length; i++) store.data[i] = store.data[i]! + noise[i]!;
    const w = blockWeights('h0', (n) => store.paramOrNull(n));
    const B = 2;
    const T = 4;
    const C = 8;
    const x = Float32Array.from(randn(r, B * T * C));
    const full = new Float32Array(B * T * C);
    const cache = createBlockCache(x, B, T, cfg);
    blockForward(full, cache, x, w, B, T, cfg);
    const kv = createBlockKvCache(x, B, T, C);
    for (let t = 0; t < T; t++) {
      const xt = new Float32Array(B * C);
      for (let b = 0; b < B; b++) xt.set(x.subarray((b * T + t) * C, (b * T + t + 1) * C), b * C);
      const y = new Float32Array(B * C);
      const routing = new Int32Array(B * 2);
      blockDecodeForward(y, kv, xt, w, t, B, cfg, undefined, undefined, routing);
      for (let b = 0; b < B; b++) {
        for (let i = 0; i < C; i++) expect(Object.is(y[b * C + i], full[(b * T + t) * C + i])).toBe(true);
        for (let j = 0; j < 2; j++) expect(routing[b * 2 + j]).toBe(cache.moe!.routing[(b * T + t) * 2 + j]);
      }
    }
  });
});
