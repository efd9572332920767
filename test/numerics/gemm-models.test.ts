// The fused-multiply-add accumulator models (`fp32-fma`, `fp32-fma-x2`): what sets them apart from
// `fp32` on inputs where the product's rounding shows, and the fast path equal to the reference.

import { describe, expect, it } from 'vitest';
import { gemm } from '../../src/numerics/gemm.js';
import { gemmReference } from '../../src/numerics/gemm-reference.js';
import { createRng } from '../../src/core/rng.js';

const f32 = (xs: number[]): Float32Array => Float32Array.from(xs);
const dot = (a: number[], b: number[], accumulator: 'fp32' | 'fp32-fma' | 'fp32-fma-x2'): number => {
  const out = new Float32Array(1);
  gemm(out, f32(a), f32(b), 1, 1, a.length, { accumulator });
  return out[0] as number;
};

describe('fp32-fma and fp32-fma-x2', () => {
  // −1 + (1 + 2^-12)²: the exact product 1 + 2^-11 + 2^-24 needs 25 bits
  const a = [1, 1 + 2 ** -12];
  const b = [-1, 1 + 2 ** -12];

  it('fp32 rounds the product first; fp32-fma keeps it whole until the add', () => {
    expect(dot(a, b, 'fp32')).toBe(2 ** -11);
    expect(dot(a, b, 'fp32-fma')).toBe(2 ** -11 + 2 ** -24);
  });

  it('fp32-fma-x2 sums even and odd k apart, so the product is rounded on its own chain', () => {
    // even chain: −1; odd chain: fl((1 + 2^-12)²) = 1 + 2^-11; then −1 + (1 + 2^-11)
    expect(dot(a, b, 'fp32-fma-x2')).toBe(2 ** -11);
    // four terms: chains (x0·y0 + x2·y2) and (x1·y1 + x3·y3) differ from one chain in increasing k
    const big = [2 ** 24, 1, -(2 ** 24), 1];
    const ones = [1, 1, 1, 1];
    // one chain: 2^24 + 1 rounds to 2^24 (tie to even), − 2^24 → 0, + 1 → 1
    expect(dot(big, ones, 'fp32-fma')).toBe(1);
    // two chains: (2^24 − 2^24) + (1 + 1) = 2, the exact sum
    expect(dot(big, ones, 'fp32-fma-x2')).toBe(2);
  });

  it.each(['fp32-fma', 'fp32-fma-x2'] as const)(
    '%s: the fast path equals the reference, split K included',
    (accumulator) => {
      const rng = createRng('gemm-models').fork(accumulator);
      for (const [m, n, k] of [
        [3, 5, 17],
        [4, 4, 256],
        [1, 7, 1],
      ] as const) {
        const x = Float32Array.from({ length: m * k }, () => Math.fround(rng.normal() * 8));
        const y = Float32Array.from({ length: n * k }, () => Math.fround(rng.normal() / 8));
        for (const splitK of [1, 3]) {
          const fast = gemm(new Float32Array(m * n), x, y, m, n, k, { accumulator, splitK, aQuant: 'bf16' });
          const ref = gemmReference(new Float32Array(m * n), x, y, m, n, k, { accumulator, splitK, aQuant: 'bf16' });
          expect(Array.from(fast)).toEqual(Array.from(ref));
        }
      }
    },
  );
});
