// Attention tests: float64 finite-difference gradients (causal/bidirectional, RoPE on/off), RoPE
// properties, masking, and the decode step equal to the full causal forward at every position.

import { describe, expect } from 'vitest';
import { fc, test } from '@fast-check/vitest';
import {
  attentionBackward,
  attentionDecodeAppend,
  attentionDecodeForward,
  attentionForward,
  createAttentionCache,
  ropeBackward,
  ropeForward,
} from '../../src/nn/index.js';
import { dotProbe, expectGradClose, randn, rngFor } from './gradcheck.js';

/** (C, H) pairs with an even head size so RoPE is always allowed. */
const heads = fc.constantFrom([2, 1], [4, 1], [4, 2], [6, 3], [8, 2], [8, 4]);

describe('attention', () => {
  test.prop(
    [fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 5 }), heads, fc.boolean(), fc.boolean(), fc.nat()],
    { numRuns: 30 },
  )('gradients of q, k, v', (B, T, [C, H], causal, rope, seed) => {
    const r = rngFor(seed, 'attn');
    const q = randn(r, B * T * C);
    const k = randn(r, B * T * C);
    const v = randn(r, B * T * C);
    const R = randn(r, B * T * C);
    const opts = { causal, rope, ropeBase: 100 };
    const out = new Float64Array(B * T * C);
    const cache = createAttentionCache(q, B, T, C, H!);
    const loss = () => (attentionForward(out, cache, q, k, v, B, T, C, H!, opts), dotProbe(out, R));
    loss();
    const dq = new Float64Array(B * T * C);
    const dk = new Float64Array(B * T * C);
    const dv = new Float64Array(B * T * C);
    attentionBackward(dq, dk, dv, R, cache, v, B, T, C, H!, opts);
    expectGradClose('dq', q, dq, loss);
    expectGradClose('dk', k, dk, loss);
    expectGradClose('dv', v, dv, loss);
  });

  test.prop([fc.integer({ min: 2, max: 6 }), heads, fc.nat()], { numRuns: 20 })(
    'causal rows ignore future keys; bidirectional rows do not',
    (T, [C, H], seed) => {
      const r = rngFor(seed, 'mask');
      const q = randn(r, T * C);
      const k = randn(r, T * C);
      const v = randn(r, T * C);
      const out1 = new Float64Array(T * C);
      const cache = createAttentionCache(q, 1, T, C, H!);
      attentionForward(out1, cache, q, k, v, 1, T, C, H!, { causal: true });
      for (let h = 0; h < H!; h++) {
        for (let t = 0; t < T; t++) {
          for (let t2 = t + 1; t2 < T; t2++) expect(cache.att[(h * T + t) * T + t2]).toBe(0);
        }
      }
      // Perturb the last key and value: only the last row may change under the causal mask.
      const k2 = Float64Array.from(k);
      const v2 = Float64Array.from(v);
      for (let c = 0; c < C; c++) {
        k2[(T - 1) * C + c] = k2[(T - 1) * C + c]! + 1;
        v2[(T - 1) * C + c] = v2[(T - 1) * C + c]! + 1;
      }
      const out2 = new Float64Array(T * C);
      attentionForward(out2, createAttentionCache(q, 1, T, C, H!), q, k2, v2, 1, T, C, H!, { causal: true });
      expect(Array.from(out2.subarray(0, (T - 1) * C))).toEqual(Array.from(out1.subarray(0, (T - 1) * C)));
      const out3 = new Float64Array(T * C);
      const out4 = new Float64Array(T * C);
      attentionForward(out3, createAttentionCache(q, 1, T, C, H!), q, k, v, 1, T, C, H!, { causal: false });
      attentionForward(out4, createAttentionCache(q, 1, T, C, H!), q, k2, v2, 1, T, C, H!, { causal: false });
      expect(out4[0]).not.toBe(out3[0]);
    },
  );

  test.prop([fc.integer({ min: 1, max: 4 }), heads, fc.nat()], { numRuns: 20 })(
    'RoPE preserves norms, is relative, and its backward is its transpose',
    (T, [C, H], seed) => {
      const r = rngFor(seed, 'rope');
      const x = randn(r, T * C);
      const y = new Float64Array(T * C);
      ropeForward(y, x, 1, T, C, H!, 10000, 3);
      const hs = C / H!;
      for (let i = 0; i < T * H!; i++) {
        let nx = 0;
        let ny = 0;
        for (let d = 0; d < hs; d++) {
          nx += x[i * hs + d]! ** 2;
          ny += y[i * hs + d]! ** 2;
        }
        expect(ny).toBeCloseTo(nx, 10);
      }
      // Relative: <rope(a, p), rope(b, p')> depends only on p − p'.
      const a = randn(r, C);
      const b = randn(r, C);
      const dotAt = (pa: number, pb: number): number => {
        const ra = new Float64Array(C);
        const rb = new Float64Array(C);
        ropeForward(ra, a, 1, 1, C, H!, 10000, pa);
        ropeForward(rb, b, 1, 1, C, H!, 10000, pb);
        return dotProbe(ra, rb);
      };
      expect(dotAt(5, 2)).toBeCloseTo(dotAt(13, 10), 9);
      // Backward = transpose: <R dy, x> = <dy, R x> up to rounding.
      const dy = randn(r, T * C);
      const dx = new Float64Array(T * C);
      ropeBackward(dx, dy, 1, T, C, H!, 10000, 3);
      expect(dotProbe(dx, x)).toBeCloseTo(dotProbe(dy, y), 9);
    },
  );

  test.prop([fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 7 }), heads, fc.boolean(), fc.nat()], {
    numRuns: 30,
  })('decode step equals the full causal forward at each position (float32, Object.is)', (B, T, [C, H], rope, seed) => {
    const r = rngFor(seed, 'decode');
    const q = Float32Array.from(randn(r, B * T * C));
    const k = Float32Array.from(randn(r, B * T * C));
    const v = Float32Array.from(randn(r, B * T * C));
    const opts = { causal: true, rope };
    const full = new Float32Array(B * T * C);
    const cache = createAttentionCache(q, B, T, C, H!);
    attentionForward(full, cache, q, k, v, B, T, C, H!, opts);
    const tCap = T + 2;
    const kCache = new Float32Array(B * tCap * C);
    const vCache = new Float32Array(B * tCap * C);
    const row = (x: Float32Array, t: number): Float32Array => {
      const o = new Float32Array(B * C);
      for (let b = 0; b < B; b++) o.set(x.subarray((b * T + t) * C, (b * T + t + 1) * C), b * C);
      return o;
    };
    for (let t = 0; t < T; t++) {
      attentionDecodeAppend(kCache, vCache, row(k, t), row(v, t), t, B, tCap, C, H!, opts);
      const out = new Float32Array(B * C);
      const att = new Float32Array(B * H! * (t + 1));
      attentionDecodeForward(out, att, row(q, t), kCache, vCache, t + 1, B, tCap, C, H!, opts);
      const want = row(full, t);
      for (let i = 0; i < B * C; i++) expect(Object.is(out[i], want[i]), `t=${t} i=${i}`).toBe(true);
      for (let b = 0; b < B; b++) {
        for (let h = 0; h < H!; h++) {
          for (let t2 = 0; t2 <= t; t2++) {
            expect(Object.is(att[(b * H! + h) * (t + 1) + t2], cache.att[((b * H! + h) * T + t) * T + t2])).toBe(true);
          }
        }
      }
    }
  });

  test.prop([fc.nat()], { numRuns: 3 })('rejects bad sizes with the field name', (seed) => {
    const x = new Float64Array(6 + (seed % 2));
    expect(() => attentionForward(x, createAttentionCache(x, 1, 1, 6, 4), x, x, x, 1, 1, 6, 4)).toThrow(
      /H must divide C/,
    );
    expect(() => attentionForward(x, createAttentionCache(x, 1, 1, 6, 2), x, x, x, 1, 1, 6, 2, { rope: true })).toThrow(
      /even head size/,
    );
    expect(() => attentionDecodeForward(x, null, x, x, x, 0, 1, 1, 6, 1)).toThrow(/tLen/);
  });
});
