// The operand side of the one-call hopper-fp8 kernel (hopper-gemm-kernel.ts): B packed into 4- or 8-column panels
// (kept for cached weight decodings), and the facts that decide whether the chunk sums may run in float32 lanes.
// Not the kernel: nothing here touches WebAssembly memory or changes a sum.

import type { FloatFormat } from '../formats.js';
import { NON_FINITE, codeExponents } from '../gemm-hopper.js';
import type { CodeArray } from '../vector.js';
import { decodeTable } from '../vector.js';

/**
 * What makes the float32 chunk sums of an operand pair exact, scanned from the data: every nonzero value
 * has at most 12 significant bits and a normal float32 exponent (`minE`..`maxE`, unbiased; +∞/−∞ when
 * all are zero), and its exponent table spans `tmin`..`tmax`. Null: a value has more bits, is a float32
 * subnormal or is not finite.
 */
export interface NarrowFacts {
  readonly minE: number;
  readonly maxE: number;
  readonly tmin: number;
  readonly tmax: number;
}

export function narrowFacts(values: Float32Array, exps: Int16Array, len: number): NarrowFacts | null {
  const bits = new Int32Array(values.buffer, values.byteOffset, len);
  let minF = 255;
  let maxF = 0;
  for (let x = 0; x < len; x++) {
    const b = (bits[x] as number) & 0x7fffffff;
    if (b === 0) continue;
    // low 12 of the 23 stored mantissa bits zero (≤ 12 significant bits); exponent field 1..254 (normal, finite)
    if ((b & 0xfff) !== 0 || b < 0x00800000 || b >= 0x7f800000) return null;
    const f = b >>> 23;
    if (f < minF) minF = f;
    if (f > maxF) maxF = f;
  }
  let tmin = Infinity;
  let tmax = -Infinity;
  for (let x = 0; x < len; x++) {
    const e = exps[x] as number;
    if (e < tmin) tmin = e;
    if (e > tmax) tmax = e;
  }
  return maxF === 0 ? { minE: Infinity, maxE: -Infinity, tmin, tmax } : { minE: minF - 127, maxE: maxF - 127, tmin, tmax };
}

/**
 * Whether the float32 lanes compute the chunk sums of these operands exactly, bit for bit the f64
 * lanes' sums: (1) a·b of two values of ≤ 12 significant bits is exact in float32 when it stays normal
 * (minE_a + minE_b ≥ −126, maxE_a + maxE_b + 2 ≤ 127); (2) inv = 2^(fb − maxE) is a normal float32
 * (maxE between max(−126, tmin_a + tmin_b) and max(−126, tmax_a + tmax_b)); (3) then a·b·inv is exact
 * whenever it is ≥ 1 in magnitude, and below 1 it truncates to the same signed zero either way; every
 * truncated addend is below 2^(fb + 2) (|a·b| < 2^(e_a + e_b + 2), e_a + e_b ≤ maxE), so (4) with
 * segLen·2^(fb + 2) ≤ 2^24 every partial sum is an integer that float32 holds exactly, in any order.
 * Exponent sums stay far inside int16 (|e| ≤ 254), so the kernel's i16x8 maxima are exact too.
 */
function narrowOk(a: NarrowFacts, b: NarrowFacts, fractionBits: number, segLen: number): boolean {
  if (segLen * 2 ** (fractionBits + 2) > 2 ** 24) return false;
  const anyProduct = a.maxE !== -Infinity && b.maxE !== -Infinity;
  if (anyProduct && (a.minE + b.minE < -126 || a.maxE + b.maxE > 125)) return false;
  const lo = Math.max(-126, a.tmin + b.tmin);
  const hi = Math.max(-126, a.tmax + b.tmax);
  // and the e8m13 value c = sum·2^(maxE − fb), |sum| < 2^24, stays below 2^128: nothing for the flag to catch
  return fractionBits + 127 - hi >= 1 && fractionBits + 127 - lo <= 254 && 24 + hi - fractionBits <= 128;
}

/** B (n, K) packed into panels over all of K for one kernel: values and exponents panel[p][kk][c], `width` columns per panel. */
interface Panels {
  readonly values: Float64Array | Float32Array;
  readonly exps: Int32Array | Int16Array;
}

/** What is kept with a cached B: its narrow facts and its panels for either kernel (packed on first use). */
interface CachedB {
  readonly n: number;
  readonly K: number;
  readonly facts: NarrowFacts | null;
  wide: Panels | null;
  narrow: Panels | null;
}

/** Packed panels of B operands that are cached weight decodings (immutable), by values array. */
const panelCache = new WeakMap<Float32Array, CachedB>();

/** Where {@link packInto} writes: value and exponent arrays and the element each panel run starts at. */
export interface PanelTarget {
  readonly values: Float64Array | Float32Array;
  readonly vo: number;
  readonly exps: Int32Array | Int16Array;
  readonly eo: number;
}

/**
 * Writes B (n, K) and its exponents eB as panels of `width` columns into `to` from elements `vo`/`eo` on
 * (padding columns: 0 and −126).
 */
export function packInto(B: Float32Array, eB: Int16Array, n: number, K: number, width: 4 | 8, to: PanelTarget): void {
  const { values, vo, exps, eo } = to;
  const cols = Math.ceil(n / width) * width;
  for (let j = 0; j < cols; j++) {
    // column j is lane c of panel p: its K values go to (p·K + kk)·width + c
    const c = j % width;
    let at = (j - c) * K + c;
    if (j >= n) {
      for (let kk = 0; kk < K; kk++, at += width) {
        values[vo + at] = 0;
        exps[eo + at] = -126;
      }
      continue;
    }
    const row = j * K;
    for (let kk = 0; kk < K; kk++, at += width) {
      values[vo + at] = B[row + kk] as number;
      exps[eo + at] = eB[row + kk] as number;
    }
  }
}

/** B (n, K) and its exponents as new panels of `width` columns: f64/i32 for the wide kernel (4), f32/i16 for the narrow one (8). */
export function packPanels(B: Float32Array, eB: Int16Array, n: number, K: number, width: 4 | 8): Panels {
  const narrow = width === 8;
  const size = Math.ceil(n / width) * width * K;
  const panels = narrow ? { values: new Float32Array(size), exps: new Int16Array(size) } : { values: new Float64Array(size), exps: new Int32Array(size) };
  packInto(B, eB, n, K, width, { values: panels.values, vo: 0, exps: panels.exps, eo: 0 });
  return panels;
}

export function cachedB(B: Float32Array, eB: Int16Array, n: number, K: number): CachedB {
  let c = panelCache.get(B);
  if (c === undefined || c.n !== n || c.K !== K) {
    c = { n, K, facts: narrowFacts(B, eB, n * K), wide: null, narrow: null };
    panelCache.set(B, c);
  }
  return c;
}

/**
 * One operand of {@link hopperGemm}: decoded element values with their MMA-Sim input exponents (finite), or the codes
 * of a float format of at most 8 bits, which the kernel decodes through the format's tables (a NaN/Inf code hands the
 * call back).
 */
export type HopperOperand =
  | { readonly values: Float32Array; readonly exps: Int16Array; readonly codes?: undefined; readonly format?: undefined }
  | { readonly codes: CodeArray; readonly format: FloatFormat; readonly values?: undefined; readonly exps?: undefined };

/**
 * Narrow facts of every finite code of a format: bounds of any tensor of its codes, so {@link narrowOk} on them
 * implies it on the data (each condition only gets harder as the bounds widen).
 */
const formatFacts = new Map<FloatFormat, NarrowFacts | null>();

function factsOfFormat(fmt: FloatFormat): NarrowFacts | null {
  let f = formatFacts.get(fmt);
  if (f === undefined) {
    const exps = codeExponents(fmt);
    const finite = decodeTable(fmt).filter((_, c) => exps[c] !== NON_FINITE);
    f = narrowFacts(finite, exps.filter((e) => e !== NON_FINITE), finite.length);
    formatFacts.set(fmt, f);
  }
  return f;
}

/** A per-call operand's narrow facts: its format's, or scanned from its values. */
export function factsOf(x: HopperOperand, len: number): NarrowFacts | null {
  return x.format !== undefined ? factsOfFormat(x.format) : narrowFacts(x.values, x.exps, len);
}

/** The last {@link narrowOk} question and answer: coded operands ask the same one (their formats' facts) call after call. */
const narrowMemo = { a: null as NarrowFacts | null, b: null as NarrowFacts | null, fb: -1, segLen: -1, ok: false };

export function narrowOkMemo(a: NarrowFacts, b: NarrowFacts, fractionBits: number, segLen: number): boolean {
  const memo = narrowMemo;
  if (memo.a !== a || memo.b !== b || memo.fb !== fractionBits || memo.segLen !== segLen) {
    memo.a = a;
    memo.b = b;
    memo.fb = fractionBits;
    memo.segLen = segLen;
    memo.ok = narrowOk(a, b, fractionBits, segLen);
  }
  return memo.ok;
}
