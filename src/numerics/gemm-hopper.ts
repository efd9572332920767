// The hopper-fp8 fast path in JavaScript: MMA-Sim input-exponent tables of the operands and a four-output range
// kernel on them, equal bit for bit to gemm-reference.ts hopperFusedDotAdd (finite operands). Not the WebAssembly steps.

import type { QuantizedTensor } from './quantize.js';
import { type FloatFormat, exponentOf } from './formats.js';
import { inputExponent, truncateToE8M } from './gemm-reference.js';
import type { HopperChunkResult } from './kernels/hopper-kernel.js';
import { memoized } from './gemm-caches.js';
import { fma32 } from './scales.js';
import { decodeTable } from './vector.js';

/** Sentinel of {@link codeExponents} for codes that decode to NaN or ±Inf. */
export const NON_FINITE = 0x7fff;
const codeExponentTables = new Map<FloatFormat, Int16Array>();

/** The MMA-Sim input exponent of every code of an 8-bit-or-narrower float format ({@link NON_FINITE} for NaN/Inf codes). */
export function codeExponents(fmt: FloatFormat): Int16Array {
  let t = codeExponentTables.get(fmt);
  if (t === undefined) {
    const values = decodeTable(fmt);
    t = Int16Array.from(values, (v) => (Number.isFinite(v) ? inputExponent(v, fmt.emin) : NON_FINITE));
    codeExponentTables.set(fmt, t);
  }
  return t;
}

/**
 * A float-coded tensor gemm quantized itself, decoded into `values` with its hopper-fp8 exponent table
 * in `exps` in the same pass (the values and exponents quantizedValues and {@link exponentTable} would
 * give); the table is null when a code decodes to NaN or ±Inf.
 */
export function decodeWithExponents(
  q: QuantizedTensor,
  fmt: FloatFormat,
  values: Float32Array,
  exps: Int16Array,
): [Float32Array, Int16Array | null] {
  const n = values.length;
  const table = decodeTable(fmt);
  const et = codeExponents(fmt);
  const codes = q.codes;
  let finite = true;
  for (let i = 0; i < n; i++) {
    const c = codes[i] as number;
    values[i] = table[c] as number;
    const e = et[c] as number;
    if (e === NON_FINITE) finite = false;
    exps[i] = e;
  }
  return [values, finite ? exps : null];
}

/** Exponent tables of decoded QuantizedTensor values (weights), by values array and emin. */
const exponentTables = new WeakMap<Float32Array, Map<number, Int16Array | null>>();

/** {@link exponentTable} of a cached decoding (a QuantizedTensor's values, immutable): computed once per array and emin. */
export function cachedExponentTable(values: Float32Array, emin: number): Int16Array | null {
  return memoized(exponentTables, values, emin, () => exponentTable(values, emin));
}

/**
 * Per-element MMA-Sim input exponents of an operand (⌊log2|v|⌋ floored at `emin`), or null if any value is not
 * finite. Read from the float32 bits: a normal value's ⌊log2|v|⌋ is its exponent field − 127; field 255 is
 * ±Inf/NaN; zeros and subnormals (field 0) take {@link inputExponent} itself.
 */
export function exponentTable(values: Float32Array, emin: number, out?: Int16Array): Int16Array | null {
  const e = out ?? new Int16Array(values.length);
  const bits = new Int32Array(values.buffer, values.byteOffset, values.length);
  for (let i = 0; i < values.length; i++) {
    const field = ((bits[i] as number) >>> 23) & 0xff;
    if (field === 255) return null;
    if (field === 0) e[i] = inputExponent(values[i] as number, emin);
    else e[i] = field - 127 < emin ? emin : field - 127;
  }
  return e;
}

/** 2^e for e ∈ [−POW2_BIAS, POW2_BIAS]: every scale the fast hopper kernel forms (|maxE ± fractionBits| stays far inside). */
const POW2_BIAS = 1000;
const POW2 = Float64Array.from({ length: 2 * POW2_BIAS + 1 }, (_, i) => 2 ** (i - POW2_BIAS));

/**
 * The hopper-fp8 partial sum of every output over [k0, k1) from pre-decoded exponent tables, equal bit
 * for bit to one hopperFusedDotAdd per chunk (finite operands only: the caller runs the reference
 * otherwise). Per chunk it forms the same maxE, then scales by
 * the exact power of two 2^(fractionBits − maxE) instead of dividing by its inverse (the same double,
 * both are exact), sums the truncated addends as integers (exact in a double, so in any order), and
 * truncates the sum to `fractionBits + 1` significant bits with integer arithmetic; the rare sums
 * that could leave the float32 exponent range go through {@link truncateToE8M}.
 */
export function hopperRangeFast(
  partial: Float32Array,
  A: Float32Array,
  B: Float32Array,
  eA: Int16Array,
  eB: Int16Array,
  m: number,
  n: number,
  k: number,
  k0: number,
  k1: number,
  chunk: number,
  fractionBits: number,
): void {
  const n4 = n - (n % 4);
  const base = POW2_BIAS + fractionBits; // POW2[base − maxE] = 1/u, u = 2^(maxE − fractionBits)
  for (let i = 0; i < m; i++) {
    const ra = i * k;
    // Four outputs (i, j..j+3) per pass: the A row and its exponents are read once for all four.
    for (let j = 0; j < n4; j += 4) {
      const rb0 = j * k;
      const rb1 = rb0 + k;
      const rb2 = rb1 + k;
      const rb3 = rb2 + k;
      let c0 = 0;
      let c1 = 0;
      let c2 = 0;
      let c3 = 0;
      for (let lo = k0; lo < k1; lo += chunk) {
        const hi = Math.min(lo + chunk, k1);
        let maxE0 = c0 === 0 ? -126 : Math.max(exponentOf(c0), -126);
        let maxE1 = c1 === 0 ? -126 : Math.max(exponentOf(c1), -126);
        let maxE2 = c2 === 0 ? -126 : Math.max(exponentOf(c2), -126);
        let maxE3 = c3 === 0 ? -126 : Math.max(exponentOf(c3), -126);
        for (let kk = lo; kk < hi; kk++) {
          const ea = eA[ra + kk] as number;
          const e0 = ea + (eB[rb0 + kk] as number);
          const e1 = ea + (eB[rb1 + kk] as number);
          const e2 = ea + (eB[rb2 + kk] as number);
          const e3 = ea + (eB[rb3 + kk] as number);
          if (e0 > maxE0) maxE0 = e0;
          if (e1 > maxE1) maxE1 = e1;
          if (e2 > maxE2) maxE2 = e2;
          if (e3 > maxE3) maxE3 = e3;
        }
        const inv0 = POW2[base - maxE0] as number;
        const inv1 = POW2[base - maxE1] as number;
        const inv2 = POW2[base - maxE2] as number;
        const inv3 = POW2[base - maxE3] as number;
        let sum0 = c0 === 0 ? 0 : Math.trunc(c0 * inv0);
        let sum1 = c1 === 0 ? 0 : Math.trunc(c1 * inv1);
        let sum2 = c2 === 0 ? 0 : Math.trunc(c2 * inv2);
        let sum3 = c3 === 0 ? 0 : Math.trunc(c3 * inv3);
        for (let kk = lo; kk < hi; kk++) {
          const a = A[ra + kk] as number;
          sum0 += Math.trunc(a * (B[rb0 + kk] as number) * inv0);
          sum1 += Math.trunc(a * (B[rb1 + kk] as number) * inv1);
          sum2 += Math.trunc(a * (B[rb2 + kk] as number) * inv2);
          sum3 += Math.trunc(a * (B[rb3 + kk] as number) * inv3);
        }
        c0 = roundE8M(sum0, maxE0, fractionBits);
        c1 = roundE8M(sum1, maxE1, fractionBits);
        c2 = roundE8M(sum2, maxE2, fractionBits);
        c3 = roundE8M(sum3, maxE3, fractionBits);
      }
      const o = i * n + j;
      partial[o] = c0;
      partial[o + 1] = c1;
      partial[o + 2] = c2;
      partial[o + 3] = c3;
    }
    for (let j = n4; j < n; j++) {
      const rb = j * k;
      let c = 0;
      for (let lo = k0; lo < k1; lo += chunk) {
        const hi = Math.min(lo + chunk, k1);
        let maxE = c === 0 ? -126 : Math.max(exponentOf(c), -126);
        for (let kk = lo; kk < hi; kk++) {
          const e = (eA[ra + kk] as number) + (eB[rb + kk] as number);
          if (e > maxE) maxE = e;
        }
        const inv = POW2[base - maxE] as number;
        let sum = c === 0 ? 0 : Math.trunc(c * inv);
        for (let kk = lo; kk < hi; kk++) sum += Math.trunc((A[ra + kk] as number) * (B[rb + kk] as number) * inv);
        c = roundE8M(sum, maxE, fractionBits);
      }
      partial[i * n + j] = c;
    }
  }
}

/** Below this many products per range the WebAssembly step's packing costs more than it saves (same bits either way). */
export const SIMD_MIN_WORK = 2048;

/**
 * `truncateToE8M(sum · 2^(maxE − fractionBits))` for an integer `sum` (exact in a double): integer
 * truncation to `fractionBits + 1` significant bits; sums that could saturate take the reference.
 */
function roundE8M(sum: number, maxE: number, fractionBits: number): number {
  const u = POW2[POW2_BIAS + maxE - fractionBits] as number;
  const s = Math.abs(sum);
  if (s === 0) return 0;
  if (s >= 2 ** 31) return truncateToE8M(sum * u, fractionBits);
  const bits = 32 - Math.clz32(s); // s ∈ [2^(bits−1), 2^bits)
  if (maxE - fractionBits + bits - 1 > 127) return truncateToE8M(sum * u, fractionBits); // saturates
  const keepBits = fractionBits + 1; // significant bits of an e8m13 value
  if (bits <= keepBits) return sum * u; // already a float with ≤ fractionBits fractional bits
  // Drop the bits below the kept mantissa: floor(s / 2^shift) · 2^shift as int32 shifts (s < 2^31; for an
  // integral s these equal the float division and floor), the sign put back after the exact scaling by u.
  const shift = bits - keepBits;
  const t = ((s >>> shift) << shift) * u;
  return sum < 0 ? -t : t;
}

/**
 * Adds one chunk's WebAssembly sums into `acc`, each rounded to e8m13 (and stored as float32, as the
 * `partial` buffer of the segment loop would hold it), then scaled and accumulated exactly as the
 * segment loop of gemm does: `fma32(fl(sa·sb), c, acc)` with fine-grained scales (`scales`: a per row of A,
 * b per row of B), else
 * `fl(acc + c)`. One pass over the outputs instead of a store to `partial` and a second pass.
 */
export function accumulateChunkSums(
  acc: Float32Array,
  r: HopperChunkResult,
  scales: { readonly a: Float64Array; readonly b: Float64Array } | null,
  m: number,
  n: number,
  fractionBits: number,
): void {
  const { sums, maxes, stride } = r;
  const fine = scales !== null;
  const sbK = fine ? scales.b : null;
  for (let i = 0; i < m; i++) {
    const sa = fine ? (scales.a[i] as number) : 1;
    const row = i * stride;
    for (let j = 0; j < n; j++) {
      const o = i * n + j;
      const c = Math.fround(roundE8M(sums[row + j] as number, maxes[row + j] as number, fractionBits));
      acc[o] =
        sbK !== null
          ? fma32(Math.fround(sa * (sbK[j] as number)), c, acc[o] as number)
          : Math.fround((acc[o] as number) + c);
    }
  }
}
