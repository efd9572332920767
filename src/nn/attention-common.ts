// Internal helpers shared by attention.ts, attention-decode.ts and rope.ts (not part of the public API).
// Not exported from index.ts: head-size checks, head gathering and the attention softmax row.

import type { FloatArray } from './array.js';

/** hs = C/H, checking that H divides C and (with RoPE) that hs is even. */
export function headSize(C: number, H: number, rope: boolean): number {
  if (!Number.isInteger(H) || H < 1 || C % H !== 0) throw new Error(`attention: H must divide C, got C=${C}, H=${H}`);
  const hs = C / H;
  if (rope && hs % 2 !== 0) throw new Error(`attention: rope needs an even head size, got C/H=${hs}`);
  return hs;
}

/**
 * Copies head h of rows [0, rows) of a (·, C) array starting at `off` to `dst`:
 * `dst[dstOff + t·rowStride + d·colStride] = src[off + t·C + h·hs + d]`. With `(rowStride, colStride)`
 * = `(hs, 1)` the (rows, hs) block of the head; with `(1, rows)` its (hs, rows) transpose (the decode
 * step's Vᵀ).
 */
export function gatherHead(
  dst: FloatArray,
  dstOff: number,
  rowStride: number,
  colStride: number,
  src: FloatArray,
  off: number,
  rows: number,
  C: number,
  h: number,
  hs: number,
): void {
  for (let t = 0; t < rows; t++) {
    const s = off + t * C + h * hs;
    const o = dstOff + t * rowStride;
    for (let d = 0; d < hs; d++) dst[o + d * colStride] = src[s + d]!;
  }
}

/**
 * One row of the attention softmax, shared by the full and the decode paths so both round alike:
 * `P[t2] = exp(scale·S[t2] − m) / Σ exp(scale·S[t3] − m)` over t2 < len (doubles, increasing order),
 * `P[t2] = 0` for len ≤ t2 < width.
 */
export function softmaxRow(
  P: FloatArray,
  pOff: number,
  S: FloatArray,
  sOff: number,
  len: number,
  width: number,
  scale: number,
): void {
  if (expScratch.length < len) expScratch = new Float64Array(Math.max(len, 2 * expScratch.length));
  const e = expScratch; // each exponential once, kept as a double (the value the sum and the quotient use)
  let m = -Infinity;
  for (let t2 = 0; t2 < len; t2++) m = Math.max(m, scale * S[sOff + t2]!);
  let sum = 0;
  for (let t2 = 0; t2 < len; t2++) {
    const x = Math.exp(scale * S[sOff + t2]! - m);
    e[t2] = x;
    sum += x;
  }
  for (let t2 = 0; t2 < len; t2++) P[pOff + t2] = e[t2]! / sum;
  for (let t2 = len; t2 < width; t2++) P[pOff + t2] = 0;
}

/** Scratch of {@link softmaxRow} (grows; the function calls nothing that could re-enter it). */
let expScratch = new Float64Array(64);
