// Tests of the GEMM hook: gemmSequential equals the scalar triple loop bit for bit (float32 and float64).
// Not a speed benchmark.

import { describe, expect } from 'vitest';
import { fc, test } from '@fast-check/vitest';
import { gemmReference, gemmSequential, transpose } from '../../src/nn/index.js';
import { randn, rngFor } from './gradcheck.js';

function sameBits(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

describe('gemmSequential', () => {
  // n ≥ 8 takes the SIMD kernel (4×8 tiles, tail tiles of 1–3 rows, zero-padded last panel), smaller n the scalar loop.
  const dims = fc.record({
    m: fc.integer({ min: 1, max: 13 }),
    n: fc.integer({ min: 1, max: 19 }),
    k: fc.integer({ min: 1, max: 40 }),
    seed: fc.nat(),
  });

  test.prop([dims])('equals the fround triple loop per element (float32)', ({ m, n, k, seed }) => {
    const r = rngFor(seed, 'gemm');
    const a = Float32Array.from(randn(r, m * k, 3));
    const b = Float32Array.from(randn(r, n * k, 3));
    const out = new Float32Array(m * n).fill(NaN);
    const ref = new Float32Array(m * n);
    gemmSequential(out, a, b, m, n, k);
    gemmReference(ref, a, b, m, n, k);
    expect(sameBits(out, ref)).toBe(true);
    // An independent scalar loop spelled out here, not shared with the source.
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let acc = 0;
        for (let p = 0; p < k; p++) acc = Math.fround(acc + Math.fround(a[i * k + p]! * b[j * k + p]!));
        expect(Object.is(out[i * n + j], acc)).toBe(true);
      }
    }
  });

  test.prop([dims])('equals the double triple loop per element (float64)', ({ m, n, k, seed }) => {
    const r = rngFor(seed, 'gemm64');
    const a = randn(r, m * k);
    const b = randn(r, n * k);
    const out = new Float64Array(m * n);
    gemmSequential(out, a, b, m, n, k);
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let acc = 0;
        for (let p = 0; p < k; p++) acc += a[i * k + p]! * b[j * k + p]!;
        expect(Object.is(out[i * n + j], acc)).toBe(true);
      }
    }
  });

  test.prop([fc.integer({ min: 2, max: 40 }), fc.integer({ min: 1, max: 3 })])(
    'float32 rounds every add: 1 + k·2^-24 stays 1 (ties to even), float64 does not',
    (k, m) => {
      // Guards against a float32 path that silently accumulates in doubles. Row of a: [1, 2^-24, …];
      // b: all ones. In float32, 1 + 2^-24 is a tie that rounds to even (1), at every step.
      const a = new Float32Array(m * (k + 1));
      for (let i = 0; i < m; i++) {
        a[i * (k + 1)] = 1;
        for (let p = 1; p <= k; p++) a[i * (k + 1) + p] = 2 ** -24;
      }
      const b = new Float32Array(k + 1).fill(1);
      const o32 = new Float32Array(m);
      const o64 = new Float64Array(m);
      gemmSequential(o32, a, b, m, 1, k + 1);
      gemmSequential(o64, Float64Array.from(a), Float64Array.from(b), m, 1, k + 1);
      for (let i = 0; i < m; i++) {
        expect(o32[i]).toBe(1);
        expect(o64[i]).toBe(1 + k * 2 ** -24);
      }
    },
  );

  test.prop([fc.integer({ min: 1, max: 7 }), fc.integer({ min: 1, max: 7 }), fc.nat()])(
    'transpose is an involution',
    (rows, cols, seed) => {
      const a = randn(rngFor(seed, 't'), rows * cols);
      const t = new Float64Array(rows * cols);
      const back = new Float64Array(rows * cols);
      transpose(t, a, rows, cols);
      transpose(back, t, cols, rows);
      expect(Array.from(back)).toEqual(Array.from(a));
      if (rows > 1 && cols > 1) expect(t[1]).toBe(a[cols]);
    },
  );
});
