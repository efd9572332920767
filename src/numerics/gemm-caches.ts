// The caches and scratch of the fast GEMM (gemm.ts): decodings of caller-given QuantizedTensors by identity, the
// "seen before" set of the hopper-fp8 one-call path, packed B panels, and per-call scratch grown on demand.
// Not a semantics: nothing here changes a result bit; every cache holds what gemm would otherwise compute again.
//
// Identity caches rest on "a QuantizedTensor is a value" (nothing writes its codes after quantize), which typed arrays
// cannot enforce: operand-checks.ts verifies it on demand (gemm calls verifyCachedOperand on every given tensor).

import type { QuantizedTensor } from './quant-spec.js';
export { setGemmCacheChecks, verifyCachedOperand } from './operand-checks.js';
import { type QuantizeScratch, createQuantizeScratch } from './quantize.js';
import { type ScaledGemmModel, packPanels } from './kernels/scaled-gemm-kernel.js';

// ---------------------------------------------------------------------------------------------------
// Identity caches of caller-given QuantizedTensors

/** Decoded element values of given QuantizedTensors, so a weight quantized once is decoded once, not per GEMM. */
const decodedValues = new WeakMap<QuantizedTensor, Float32Array>();

/** The cached decoding of a given tensor, or undefined. */
export function cachedDecoding(q: QuantizedTensor): Float32Array | undefined {
  return decodedValues.get(q);
}

export function cacheDecoding(q: QuantizedTensor, values: Float32Array): void {
  decodedValues.set(q, values);
}

/** Weight-only GEMMs: dequantized (and rounded) values of given QuantizedTensors, by tensor and rounding format. */
const dequantizedValues = new WeakMap<QuantizedTensor, Map<string, Float32Array>>();

/**
 * The value `make()` kept in `cache` under (`key`, `sub`), computed on the first call: the caches of this
 * file and of gemm-hopper.ts are keyed by an immutable tensor or values array, then by a setting.
 */
export function memoized<K extends object, S, V>(cache: WeakMap<K, Map<S, V>>, key: K, sub: S, make: () => V): V {
  let bySub = cache.get(key);
  if (bySub === undefined) {
    bySub = new Map();
    cache.set(key, bySub);
  }
  let v = bySub.get(sub);
  if (v === undefined) {
    v = make();
    bySub.set(sub, v);
  }
  return v;
}

/** The cached dequantized values of `q` rounded to `format`, computed by `make` on the first call. */
export function cachedDequantized(q: QuantizedTensor, format: string, make: () => Float32Array): Float32Array {
  return memoized(dequantizedValues, q, format, make);
}

/** Given B operands the hopper-fp8 one-call kernel has decoded from their codes once (a second sight decodes and caches them). */
const seenCoded = new WeakSet<QuantizedTensor>();

/**
 * Whether this is the first hopper-fp8 GEMM with `q` as a given B: a tensor used once (wgrad's xᵀ) never pays for a
 * cache. The one place where `gemm`'s path depends on its history; both paths give the same bits
 * (test/numerics/gemm-caches.test.ts).
 */
export function firstSight(q: QuantizedTensor): boolean {
  if (seenCoded.has(q)) return false;
  seenCoded.add(q);
  return true;
}

/** B panels of {@link packPanels} for cached operand values (decoded weights), by values array and model. */
const packedPanels = new WeakMap<Float32Array, Map<ScaledGemmModel, Float32Array | Int32Array>>();

/** B's panels for the scaled kernel when B is a cached decoding (immutable): packed once per values array and model. */
export function cachedPanels(
  model: ScaledGemmModel,
  values: Float32Array,
  n: number,
  k: number,
): Float32Array | Int32Array {
  return memoized(packedPanels, values, model, () => packPanels(model, values, n, k));
}

// ---------------------------------------------------------------------------------------------------
// Per-call scratch, grown on demand (valid until the next gemm call)

/** Scratch of the operands gemm quantized itself (slot 0: A, 1: B): quantizer scratch, decoded values, hopper-fp8 exponents. */
const operandScratchBuf = {
  quantize: [createQuantizeScratch(), createQuantizeScratch()] as const,
  values: [new Float32Array(256), new Float32Array(256)] as [Float32Array, Float32Array],
  exponents: [new Int16Array(256), new Int16Array(256)] as [Int16Array, Int16Array],
};

/** The quantizer scratch of a slot. */
export function quantizeScratch(slot: 0 | 1): QuantizeScratch {
  return operandScratchBuf.quantize[slot];
}

/** Decoded values of a slot's operand: (rows·k). */
export function operandScratch(slot: 0 | 1, n: number): Float32Array {
  const s = operandScratchBuf.values;
  if (s[slot].length < n) s[slot] = new Float32Array(Math.max(n, 2 * s[slot].length));
  return s[slot].subarray(0, n);
}

/** hopper-fp8 exponent table of a slot's operand: (rows·k). */
export function exponentScratch(slot: 0 | 1, n: number): Int16Array {
  const s = operandScratchBuf.exponents;
  if (s[slot].length < n) s[slot] = new Int16Array(Math.max(n, 2 * s[slot].length));
  return s[slot].subarray(0, n);
}

/**
 * Scratch of the segment loop (partial, acc, total: at least m·n; per-segment scales of A and B rows:
 * at least m and n). Only indices below m·n (m, n) are used, so calls of changing
 * shapes (attention GEMMs alternate) reuse the same arrays without building views.
 */
const segmentScratch = {
  partial: new Float32Array(256),
  acc: new Float32Array(256),
  total: new Float32Array(256),
  saK: new Float64Array(64),
  sbK: new Float64Array(64),
};

/** [partial, acc, total] (≥ m·n each), saK (≥ m), sbK (≥ n) of the segment loop. */
export function segmentLoopScratch(
  m: number,
  n: number,
): [Float32Array, Float32Array, Float32Array, Float64Array, Float64Array] {
  const mn = m * n;
  const sc = segmentScratch;
  if (sc.partial.length < mn) {
    const cap = Math.max(mn, 2 * sc.partial.length);
    sc.partial = new Float32Array(cap);
    sc.acc = new Float32Array(cap);
    sc.total = new Float32Array(cap);
  }
  if (sc.saK.length < m) sc.saK = new Float64Array(Math.max(m, 2 * sc.saK.length));
  if (sc.sbK.length < n) sc.sbK = new Float64Array(Math.max(n, 2 * sc.sbK.length));
  return [sc.partial, sc.acc, sc.total, sc.saK, sc.sbK];
}

/** Per-segment scales of the hopper-fp8 one call: (segment, row) of A and of B. */
let segmentScales = { a: new Float64Array(64), b: new Float64Array(64) };

/** The one call's scale tables: a ≥ nseg·m, b ≥ nseg·n. */
export function hopperSegmentScales(
  nseg: number,
  m: number,
  n: number,
): { readonly a: Float64Array; readonly b: Float64Array } {
  if (segmentScales.a.length < nseg * m || segmentScales.b.length < nseg * n) {
    segmentScales = {
      a: new Float64Array(Math.max(nseg * m, 2 * segmentScales.a.length)),
      b: new Float64Array(Math.max(nseg * n, 2 * segmentScales.b.length)),
    };
  }
  return segmentScales;
}

/** Scratch of the scaled one call's scale tables. */
const scaleScratch = {
  segA: new Float32Array(64),
  segB: new Float32Array(64),
  rowA: new Float32Array(64),
  rowB: new Float32Array(64),
};

/** One of the scaled one call's scale tables, `size` long. */
export function scaleTable(name: keyof typeof scaleScratch, size: number): Float32Array {
  if (scaleScratch[name].length < size)
    scaleScratch[name] = new Float32Array(Math.max(size, 2 * scaleScratch[name].length));
  return scaleScratch[name].subarray(0, size);
}
