// The GEMM hook of the layers: GemmFn (out = a · bᵀ, row-major) and its exact sequential defaults.
// Not a quantized GEMM: precision plans substitute their own GemmFn; this file only fixes the contract.

import { gemmThreadsFromEnv, threadedGemmF32 } from '../numerics/threads.js';
import type { FloatArray } from './array.js';

let threads: number | null = null;

/**
 * Threads {@link gemmSequential} splits its large float32 GEMMs over (fixed row partition, identical
 * bits for any count): {@link setGemmThreads}'s value, else `QRL_THREADS`, else 1.
 */
export function gemmThreads(): number {
  threads ??= gemmThreadsFromEnv();
  return threads;
}

/**
 * Sets the thread count of {@link gemmSequential}'s large float32 GEMMs (null: back to `QRL_THREADS`).
 *
 * @example
 * ```ts
 * setGemmThreads(2); // GEMMs with m·n·k ≥ 2^21 use the caller and one worker thread
 * ```
 */
export function setGemmThreads(n: number | null): void {
  if (n !== null && (!Number.isInteger(n) || n < 1)) throw new Error(`threads: expected a positive integer, got ${n}`);
  threads = n;
}

/**
 * A matrix product `out (m×n) = a (m×k) · b (n×k)ᵀ`, all row-major. `out` is overwritten.
 *
 * Every matrix product of every layer goes through a `GemmFn`, so a precision plan can substitute
 * quantized operands or a different accumulator at each GEMM site. Rows of `a` are tokens (or
 * query positions) and rows of `b` are output channels, so per-token and per-channel scales map to
 * the rows of `a` and `b`; `k` is always the reduction axis.
 */
export type GemmFn = (out: FloatArray, a: FloatArray, b: FloatArray, m: number, n: number, k: number) => void;

/**
 * The three GEMMs of a linear layer `y = x · Wᵀ`:
 * `forward` (y = x·Wᵀ), `dgrad` (dx = dy·W, called as dy·(Wᵀ)ᵀ) and
 * `wgrad` (dW = dyᵀ·x, called as dyᵀ·(xᵀ)ᵀ).
 */
export interface LinearGemms {
  /** y (N×OC) = x (N×C) · W (OC×C)ᵀ. */
  readonly forward: GemmFn;
  /** dx (N×C) = dy (N×OC) · Wᵀ (C×OC)ᵀ. */
  readonly dgrad: GemmFn;
  /** dW (OC×C) = dyᵀ (OC×N) · xᵀ (C×N)ᵀ. */
  readonly wgrad: GemmFn;
  /**
   * Optional, for the backward: says that `dgrad` and `wgrad` round both operands element by element
   * with one function and then multiply the rounded operands, and gives the pieces. `linearBackward`
   * then rounds `dy` once for both products, takes the weight's rounded transpose once per weight
   * version and rounds an input once for all the layers that read it. It applies only while `dgrad`
   * and `wgrad` are the functions named here (a copy that replaces them drops it).
   */
  readonly backwardRounding?: LinearBackwardRounding;
}

/** The operand rounding of a linear layer's backward GEMMs ({@link LinearGemms.backwardRounding}). */
export interface LinearBackwardRounding {
  /** The `dgrad` this describes. */
  readonly dgrad: GemmFn;
  /** The `wgrad` this describes. */
  readonly wgrad: GemmFn;
  /** Writes the rounding of every element of `src` to `dst` (same length): what `dgrad` and `wgrad` do to each operand. */
  readonly round: (dst: Float32Array, src: FloatArray) => void;
  /** `dgrad` and `wgrad` with both operands already rounded by `round` (the same accumulation and output rounding). */
  readonly gemmRounded: GemmFn;
  /**
   * (C, OC) the rounding of `weightᵀ` for a weight (OC, C): equal to `round` of the transpose, and
   * may be kept by the weight's array identity for the life of the numerics (one weight version).
   */
  readonly roundedWeightT: (weight: FloatArray, OC: number, C: number) => Float32Array;
}

/**
 * Reference GEMM: a scalar triple loop. For a Float32Array `out`, every product and every add is
 * rounded to float32 with `Math.fround`; for a Float64Array `out`, plain doubles. Each output starts
 * from +0 and accumulates over `p = 0 … k−1` in increasing order.
 *
 * It is the oracle for {@link gemmSequential}, which must equal it bit for bit.
 */
export const gemmReference: GemmFn = (out, a, b, m, n, k) => {
  const f32 = out instanceof Float32Array;
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let acc = 0;
      for (let p = 0; p < k; p++) {
        if (f32) acc = Math.fround(acc + Math.fround(a[i * k + p]! * b[j * k + p]!));
        else acc = acc + a[i * k + p]! * b[j * k + p]!;
      }
      out[i * n + j] = acc;
    }
  }
};

/**
 * The default GEMM: same per-element semantics as {@link gemmReference} (sequential over k in
 * increasing order; exact float32 rounding of every product and add when `out` is a Float32Array),
 * computed by the WebAssembly SIMD kernel of `threadedGemmF32` when out, a and b are Float32Arrays with
 * n ≥ 8 (split over {@link gemmThreads} threads when that is above 1 and m·n·k ≥ 2^21; same bits),
 * else by a scalar loop with 2×2 register blocking over (i, j).
 *
 * @example
 * ```ts
 * const out = new Float32Array(2 * 2);
 * gemmSequential(out, new Float32Array([1, 2, 3, 4]), new Float32Array([1, 0, 0, 1]), 2, 2, 2);
 * // out = [1, 2, 3, 4]  (a · Iᵀ)
 * ```
 */
export const gemmSequential: GemmFn = (out, a, b, m, n, k) => {
  if (out instanceof Float32Array) {
    // At least one full 8-column panel: the SIMD kernel of threadedGemmF32 (split over threads above the work threshold).
    if (n >= 8 && a instanceof Float32Array && b instanceof Float32Array)
      threadedGemmF32(out, a, b, m, n, k, gemmThreads());
    else gemmF32(out, a, b, m, n, k);
  } else gemmF64(out, a, b, m, n, k);
};

/** The default {@link LinearGemms}: {@link gemmSequential} for all three products. */
export const sequentialLinearGemms: LinearGemms = Object.freeze({
  forward: gemmSequential,
  dgrad: gemmSequential,
  wgrad: gemmSequential,
});

const fr = Math.fround;

function gemmF32(out: Float32Array, a: FloatArray, b: FloatArray, m: number, n: number, k: number): void {
  const m2 = m - (m % 2);
  const n2 = n - (n % 2);
  for (let i = 0; i < m2; i += 2) {
    const a0 = i * k;
    const a1 = a0 + k;
    for (let j = 0; j < n2; j += 2) {
      const b0 = j * k;
      const b1 = b0 + k;
      let c00 = 0,
        c01 = 0,
        c10 = 0,
        c11 = 0;
      for (let p = 0; p < k; p++) {
        const x0 = a[a0 + p]!,
          x1 = a[a1 + p]!;
        const y0 = b[b0 + p]!,
          y1 = b[b1 + p]!;
        c00 = fr(c00 + fr(x0 * y0));
        c01 = fr(c01 + fr(x0 * y1));
        c10 = fr(c10 + fr(x1 * y0));
        c11 = fr(c11 + fr(x1 * y1));
      }
      out[i * n + j] = c00;
      out[i * n + j + 1] = c01;
      out[(i + 1) * n + j] = c10;
      out[(i + 1) * n + j + 1] = c11;
    }
    if (n2 < n) {
      const b0 = n2 * k;
      let c0 = 0,
        c1 = 0;
      for (let p = 0; p < k; p++) {
        const y = b[b0 + p]!;
        c0 = fr(c0 + fr(a[a0 + p]! * y));
        c1 = fr(c1 + fr(a[a1 + p]! * y));
      }
      out[i * n + n2] = c0;
      out[(i + 1) * n + n2] = c1;
    }
  }
  if (m2 < m) {
    const a0 = m2 * k;
    for (let j = 0; j < n; j++) {
      const b0 = j * k;
      let c = 0;
      for (let p = 0; p < k; p++) c = fr(c + fr(a[a0 + p]! * b[b0 + p]!));
      out[m2 * n + j] = c;
    }
  }
}

function gemmF64(out: Float64Array, a: FloatArray, b: FloatArray, m: number, n: number, k: number): void {
  const m2 = m - (m % 2);
  const n2 = n - (n % 2);
  for (let i = 0; i < m2; i += 2) {
    const a0 = i * k;
    const a1 = a0 + k;
    for (let j = 0; j < n2; j += 2) {
      const b0 = j * k;
      const b1 = b0 + k;
      let c00 = 0,
        c01 = 0,
        c10 = 0,
        c11 = 0;
      for (let p = 0; p < k; p++) {
        const x0 = a[a0 + p]!,
          x1 = a[a1 + p]!;
        const y0 = b[b0 + p]!,
          y1 = b[b1 + p]!;
        c00 += x0 * y0;
        c01 += x0 * y1;
        c10 += x1 * y0;
        c11 += x1 * y1;
      }
      out[i * n + j] = c00;
      out[i * n + j + 1] = c01;
      out[(i + 1) * n + j] = c10;
      out[(i + 1) * n + j + 1] = c11;
    }
    if (n2 < n) {
      const b0 = n2 * k;
      let c0 = 0,
        c1 = 0;
      for (let p = 0; p < k; p++) {
        const y = b[b0 + p]!;
        c0 += a[a0 + p]! * y;
        c1 += a[a1 + p]! * y;
      }
      out[i * n + n2] = c0;
      out[(i + 1) * n + n2] = c1;
    }
  }
  if (m2 < m) {
    const a0 = m2 * k;
    for (let j = 0; j < n; j++) {
      const b0 = j * k;
      let c = 0;
      for (let p = 0; p < k; p++) c += a[a0 + p]! * b[b0 + p]!;
      out[m2 * n + j] = c;
    }
  }
}
