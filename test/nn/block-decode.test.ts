// The single-position block forward over a K/V cache reproduces the full causal block forward
// (two stacked blocks, float32, Object.is per element) and calls the KV-cache hook once per row.

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
import { randn, rngFor } from './gradcheck.js';

const cfgArb = fc.record({
  CH: fc.constantFrom([4, 1], [8, 2], [8, 4]),
  norm: fc.constantFrom<BlockConfig['norm']>('layernorm', 'rmsnorm'),
  mlp: fc.constantFrom<MlpKind>('gelu', 'swiglu'),
  bias: fc.boolean(),
  rope: fc.boolean(),
});

describe('blockDecodeForward', () => {
  test.prop([cfgArb, fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 6 }), fc.nat()], { numRuns: 25 })(
    'equals the full causal forward at every position (two blocks, float32)',
    (c, B, T, seed) => {
      const [C, H] = c.CH as [number, number];
      const cfg: BlockConfig = {
        C,
        H,
        hidden: 2 * C,
        norm: c.norm,
        mlp: c.mlp,
        bias: c.bias,
        causal: true,
        rope: c.rope,
      };
      const store = createParamStore([...blockParamSpecs('h0', cfg, 2), ...blockParamSpecs('h1', cfg, 2)], seed);
      // Perturb the zero biases and unit gains so every parameter matters.
      const r = rngFor(seed, 'decode-block');
      const noise = randn(r, store.data.length, 0.3);
      for (let i = 0; i < noise.length; i++) store.data[i] = store.data[i]! + noise[i]!;
      const w0 = blockWeights('h0', (n) => store.paramOrNull(n));
      const w1 = blockWeights('h1', (n) => store.paramOrNull(n));
      const x = Float32Array.from(randn(r, B * T * C));
      const h1 = new Float32Array(B * T * C);
      const h2 = new Float32Array(B * T * C);
      blockForward(h1, createBlockCache(x, B, T, cfg), x, w0, B, T, cfg);
      blockForward(h2, createBlockCache(x, B, T, cfg), h1, w1, B, T, cfg);
      const kv0 = createBlockKvCache(x, B, T, C);
      const kv1 = createBlockKvCache(x, B, T, C);
      const hookRows: number[] = [];
      for (let t = 0; t < T; t++) {
        const xt = new Float32Array(B * C);
        for (let b = 0; b < B; b++) xt.set(x.subarray((b * T + t) * C, (b * T + t + 1) * C), b * C);
        const y1 = new Float32Array(B * C);
        const y2 = new Float32Array(B * C);
        blockDecodeForward(y1, kv0, xt, w0, t, B, cfg, undefined, (_k, _v, row) => hookRows.push(row));
        blockDecodeForward(y2, kv1, y1, w1, t, B, cfg);
        for (let b = 0; b < B; b++) {
          for (let i = 0; i < C; i++) {
            expect(Object.is(y2[b * C + i], h2[(b * T + t) * C + i]), `t=${t} b=${b} i=${i}`).toBe(true);
          }
        }
      }
      expect(hookRows).toEqual(Array.from({ length: T }, (_, t) => t));
    },
  );

  test.prop([fc.nat()], { numRuns: 3 })(
    'a rounding KV hook changes the output; bidirectional config is rejected',
    (seed) => {
      const cfg: BlockConfig = {
        C: 4,
        H: 1,
        hidden: 8,
        norm: 'rmsnorm',
        mlp: 'gelu',
        bias: false,
        causal: true,
        rope: false,
      };
      const store = createParamStore(blockParamSpecs('h0', cfg, 1), seed);
      const w = blockWeights('h0', (n) => store.paramOrNull(n));
      const x = Float32Array.from(randn(rngFor(seed, 'hook'), 4));
      const plain = new Float32Array(4);
      const rounded = new Float32Array(4);
      blockDecodeForward(plain, createBlockKvCache(x, 1, 2, 4), x, w, 0, 1, cfg);
      blockDecodeForward(
        rounded,
        createBlockKvCache(x, 1, 2, 4),
        x,
        w,
        0,
        1,
        cfg,
        undefined,
        (_k, v, t, _B, _tCap, C) => {
          for (let c = 0; c < C; c++) v[t * C + c] = Math.round(v[t * C + c]! * 4) / 4 + 0.125;
        },
      );
      expect(Array.from(rounded)).not.toEqual(Array.from(plain));
      expect(() =>
        blockDecodeForward(plain, createBlockKvCache(x, 1, 2, 4), x, w, 0, 1, { ...cfg, causal: false }),
      ).toThrow(/causal/);
    },
  );
});
