// GEMM out(m×n) = A(m×k)·B(n×k)ᵀ with operand rounding/quantization, scales applied where real kernels apply them,
// and named accumulator models (fp32, pairwise, fp64, int32, hopper-fp8). Not a fast BLAS: exact semantics first.

import { type FloatFormat, type FloatFormatName, exponentOf, floatFormat } from './formats.js';
import {
  type CellLayout,
  type QuantSpec,
  type QuantizedTensor,
  cellLayout,
  dequantize,
  elementFormat,
  quantizeTransient,
  quantizedValues,
} from './quantize.js';
import { fp32Gemm } from './fp32-kernel.js';
import { hopperChunkSums, type HopperChunkResult } from './hopper-kernel.js';
import { hopperGemmSegments } from './hopper-gemm-kernel.js';
import { fma32 } from './scales.js';
import { decodeTable, fakeQuant } from './vector.js';

/**
 * How products are summed along K:
 * - `fp32`: each product rounded to float32, sequential float32 adds in increasing k (default);
 * - `pairwise`: float32 products summed as a balanced binary tree (left half + right half);
 * - `fp64`: products summed in double, rounded to float32 once;
 * - `int32`: exact integer products, int32 adds that wrap modulo 2^32 (integer operands only);
 * - `hopper-fp8`: MMA-Sim model of Hopper FP8 `wgmma` (per K-chunk of 32: products and incoming
 *   accumulator aligned to the largest exponent and truncated to 13 fractional bits, summed
 *   exactly, truncated to an e8m13 float), promoted to a float32 accumulator every
 *   `promoteEvery` chunks.
 */
export type AccumulatorModel = 'fp32' | 'pairwise' | 'fp64' | 'int32' | 'hopper-fp8';

/** Every accumulator model. */
export const accumulatorModels: readonly AccumulatorModel[] = Object.freeze(['fp32', 'pairwise', 'fp64', 'int32', 'hopper-fp8']);

/** How a Float32Array operand is prepared: rounded to a float format (RNE), or quantized by a spec. */
export type OperandQuant = FloatFormatName | QuantSpec;

/** Options of {@link gemm}. */
export interface GemmOptions {
  /** Rounding or quantizer for a Float32Array A (ignored when A is already quantized). @defaultValue none (fp32 as is) */
  readonly aQuant?: OperandQuant;
  /** Rounding or quantizer for a Float32Array B. @defaultValue none */
  readonly bQuant?: OperandQuant;
  /** @defaultValue 'fp32' */
  readonly accumulator?: AccumulatorModel;
  /** `hopper-fp8`: chunks between promotions to the float32 accumulator; 0 = never. @defaultValue 4 (128 K) */
  readonly promoteEvery?: number;
  /** `hopper-fp8`: K per tensor-core instruction. @defaultValue 32 */
  readonly chunk?: number;
  /** `hopper-fp8`: fractional bits kept by the alignment and the output. @defaultValue 13 */
  readonly fractionBits?: number;
  /** Split K into this many contiguous parts, each summed from zero, then added in order (split-K kernels). @defaultValue 1 */
  readonly splitK?: number;
  /** Round the output to this format (RNE, IEEE overflow), e.g. 'bf16'. @defaultValue none */
  readonly outFormat?: FloatFormatName;
  /**
   * Run the scalar reference loops instead of the fast kernels (pre-decoded tables, tiles). Both give
   * the same bits; the reference is the oracle of the tests. @defaultValue false
   */
  readonly reference?: boolean;
}

/** A prepared operand: element values and where its scales go. */
interface Operand {
  /** Element values (decoded codes minus zero points, or rounded floats), row-major (rows, k). */
  readonly values: Float32Array;
  /** Minimum normal exponent of the element format (hopper-fp8 alignment of subnormals and zeros). */
  readonly emin: number;
  /** Whether every value is an integer (int formats). */
  readonly integer: boolean;
  /** Per-cell dequant scales, or null. */
  readonly scales: Float32Array | null;
  readonly layout: CellLayout | null;
  /** Scale constant along K within `kSize` elements (fine-grained) or along all of K. */
  readonly fine: boolean;
  readonly globalScale: number;
  /** Whether `values` is the cached decoding of a QuantizedTensor (immutable, so derived tables may be cached too). */
  readonly cached: boolean;
  /** hopper-fp8 input exponents decoded with the values (null: a non-finite value); undefined when not computed in that pass. */
  readonly exponents: Int16Array | null | undefined;
}

function isQuantized(x: Float32Array | QuantizedTensor): x is QuantizedTensor {
  return !(x instanceof Float32Array);
}

function plainOperand(values: Float32Array, format: FloatFormatName | null): Operand {
  const emin = format === null ? -126 : floatFormat(format).emin;
  return { values, emin, integer: false, scales: null, layout: null, fine: false, globalScale: 1, cached: false, exponents: undefined };
}

/**
 * Decoded element values of QuantizedTensors by identity (a QuantizedTensor is a value: nothing writes
 * into its codes after {@link quantize}), so a weight quantized once is decoded once, not per GEMM.
 */
const decodedValues = new WeakMap<QuantizedTensor, Float32Array>();
/** Weight-only GEMMs: dequantized (and rounded) values of caller-given QuantizedTensors, by tensor and rounding format. */
const dequantizedValues = new WeakMap<QuantizedTensor, Map<string, Float32Array>>();

/** `cache`: the tensor came from the caller (a weight, say) and may be seen again; false for the ones gemm quantized itself. */
/** Sentinel of {@link codeExponents} for codes that decode to NaN or ±Inf. */
const NON_FINITE = 0x7fff;
const codeExponentTables = new Map<FloatFormat, Int16Array>();

/** The MMA-Sim input exponent of every code of an 8-bit-or-narrower float format ({@link NON_FINITE} for NaN/Inf codes). */
function codeExponents(fmt: FloatFormat): Int16Array {
  let t = codeExponentTables.get(fmt);
  if (t === undefined) {
    const values = decodeTable(fmt);
    t = Int16Array.from(values, (v) => (Number.isFinite(v) ? inputExponent(v, fmt.emin) : NON_FINITE));
    codeExponentTables.set(fmt, t);
  }
  return t;
}

/**
 * A float-coded tensor gemm quantized itself, decoded into the slot's scratch with its hopper-fp8
 * exponent table in the same pass (the values and exponents {@link quantizedValues} and
 * {@link exponentTable} would give).
 */
function decodeWithExponents(q: QuantizedTensor, fmt: FloatFormat, n: number, slot: 0 | 1): [Float32Array, Int16Array | null] {
  const values = operandScratch(slot, n);
  const exps = exponentScratch(slot, n);
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

function quantizedOperand(q: QuantizedTensor, rows: number, k: number, cache: boolean, slot: 0 | 1, wantExponents = false): Operand {
  const fmt = elementFormat(q.spec.format);
  let values = cache ? decodedValues.get(q) : undefined;
  let exponents: Int16Array | null | undefined;
  if (values === undefined && !cache && wantExponents && fmt.kind === 'float' && fmt.bits <= 8) {
    [values, exponents] = decodeWithExponents(q, fmt, rows * k, slot);
  }
  if (values === undefined) {
    // A tensor gemm quantized itself lives for this call only: decode it into the slot's scratch.
    values = cache ? quantizedValues(q) : quantizedValues(q, operandScratch(slot, rows * k));
    if (cache) decodedValues.set(q, values);
  }
  if (q.spec.scale.kind === 'none') {
    return { values, emin: fmt.kind === 'float' ? fmt.emin : 0, integer: fmt.kind === 'int', scales: null, layout: null, fine: false, globalScale: 1, cached: cache, exponents };
  }
  const layout = cellLayout(q.spec.granularity, rows, k);
  return {
    values,
    emin: fmt.kind === 'float' ? fmt.emin : 0,
    integer: fmt.kind === 'int',
    scales: q.scales,
    layout,
    fine: Number.isFinite(layout.kSize) && layout.kSize < k,
    globalScale: q.globalScale ?? 1,
    cached: cache,
    exponents,
  };
}

/** Per-call decoded values and exponent tables of the operands gemm quantized itself (slot 0: A, 1: B), grown on demand. */
const operandScratchBuf: [Float32Array, Float32Array] = [new Float32Array(256), new Float32Array(256)];
const exponentScratchBuf: [Int16Array, Int16Array] = [new Int16Array(256), new Int16Array(256)];

function operandScratch(slot: 0 | 1, n: number): Float32Array {
  if (operandScratchBuf[slot].length < n) operandScratchBuf[slot] = new Float32Array(Math.max(n, 2 * operandScratchBuf[slot].length));
  return operandScratchBuf[slot].subarray(0, n);
}

function exponentScratch(slot: 0 | 1, n: number): Int16Array {
  if (exponentScratchBuf[slot].length < n) exponentScratchBuf[slot] = new Int16Array(Math.max(n, 2 * exponentScratchBuf[slot].length));
  return exponentScratchBuf[slot].subarray(0, n);
}

function isScaled(x: Float32Array | QuantizedTensor): boolean {
  return isQuantized(x) && x.spec.scale.kind !== 'none';
}

/** A Float32Array operand with a QuantSpec quantizer, quantized into the slot's scratch (gemm consumes it in this call). */
function prepOperand(x: Float32Array | QuantizedTensor, rows: number, k: number, quant: OperandQuant | undefined, slot: 0 | 1): Float32Array | QuantizedTensor {
  if (isQuantized(x) || quant === undefined || typeof quant === 'string') return x;
  return quantizeTransient(quant, x, [rows, k], slot);
}

/** The rounding format of a Float32Array operand given a format name, else null. */
function roundingFormatOf(x: Float32Array | QuantizedTensor, quant: OperandQuant | undefined): FloatFormatName | null {
  return !isQuantized(x) && typeof quant === 'string' ? quant : null;
}

function roundTo(v: Float32Array, f: FloatFormatName | null): Float32Array {
  return f === null || f === 'fp32' ? v : fakeQuant(f, v, { profile: 'ieee' });
}

/**
 * The operand of the unscaled or weight-only path. Weight-only (one operand scaled): the quantized
 * operand is dequantized first, then rounded to the other operand's float format when one was
 * given (W4A16 kernels dequantize weights to fp16/bf16 before the MMA).
 */
function plainPathOperand(
  x: Float32Array | QuantizedTensor, rows: number, k: number, f: FloatFormatName | null, otherF: FloatFormatName | null,
  oneSided: boolean, cache: boolean, slot: 0 | 1,
): Operand {
  if (!isQuantized(x)) return plainOperand(roundTo(x, f), f);
  if (oneSided && x.spec.scale.kind !== 'none') {
    if (!cache) return plainOperand(roundTo(dequantize(x), otherF), otherF);
    let byFormat = dequantizedValues.get(x);
    if (byFormat === undefined) {
      byFormat = new Map();
      dequantizedValues.set(x, byFormat);
    }
    let v = byFormat.get(otherF ?? 'fp32');
    if (v === undefined) {
      v = roundTo(dequantize(x), otherF);
      byFormat.set(otherF ?? 'fp32', v);
    }
    return plainOperand(v, otherF);
  }
  return quantizedOperand(x, rows, k, cache, slot);
}

/** Prepares both operands: quantize Float32Arrays per options, then choose the scaled or dequantize-first path. */
function prepareOperands(a: Float32Array | QuantizedTensor, b: Float32Array | QuantizedTensor, m: number, n: number, k: number, options: GemmOptions): [Operand, Operand] {
  const qa = prepOperand(a, m, k, options.aQuant, 0);
  const qb = prepOperand(b, n, k, options.bQuant, 1);
  const fa = roundingFormatOf(qa, options.aQuant);
  const fb = roundingFormatOf(qb, options.bQuant);
  const scaledA = isScaled(qa);
  const scaledB = isScaled(qb);
  // `given`: passed in quantized (a === qa), not quantized here, so it may be seen again and its derived tables cached.
  const givenA = a === qa;
  const givenB = b === qb;
  const hopper = options.accumulator === 'hopper-fp8' && options.reference !== true;
  if (scaledA && scaledB) return [quantizedOperand(qa as QuantizedTensor, m, k, givenA, 0, hopper), quantizedOperand(qb as QuantizedTensor, n, k, givenB, 1, hopper)];
  const oneSided = scaledA !== scaledB;
  return [plainPathOperand(qa, m, k, fa, fb, oneSided, givenA, 0), plainPathOperand(qb, n, k, fb, fa, oneSided, givenB, 1)];
}

function checkShapes(out: Float32Array, a: Float32Array | QuantizedTensor, b: Float32Array | QuantizedTensor, m: number, n: number, k: number): void {
  const dims = Number.isInteger(m) && m >= 0 && Number.isInteger(n) && n >= 0 && Number.isInteger(k) && k >= 0;
  const aLen = isQuantized(a) ? a.codes.length : a.length;
  const bLen = isQuantized(b) ? b.codes.length : b.length;
  const aOk = isQuantized(a) ? a.shape[0] === m && a.shape[1] === k : a.length === m * k;
  const bOk = isQuantized(b) ? b.shape[0] === n && b.shape[1] === k : b.length === n * k;
  if (!dims || !aOk || !bOk || out.length !== m * n) {
    const shapeOf = (x: Float32Array | QuantizedTensor, len: number): string => (isQuantized(x) ? `[${x.shape.join(', ')}]` : `${len} elements`);
    throw new Error(
      `gemm: shapes do not match out(m×n) = A(m×k)·B(n×k)ᵀ with m = ${m}, n = ${n}, k = ${k}: ` +
        `out has ${out.length} elements (need ${m * n}), A is ${shapeOf(a, aLen)} (need ${m}×${k}), B is ${shapeOf(b, bLen)} (need ${n}×${k})`,
    );
  }
}

// ---------------------------------------------------------------------------------------------------
// Range kernels: partial(i, j) = Σ_{kk ∈ [k0, k1)} A(i, kk)·B(j, kk) under one model, written into `partial`.

function pairwiseSum(A: Float32Array, B: Float32Array, ra: number, rb: number, lo: number, hi: number): number {
  if (hi - lo === 1) return Math.fround((A[ra + lo] as number) * (B[rb + lo] as number));
  const mid = lo + ((hi - lo) >> 1);
  return Math.fround(pairwiseSum(A, B, ra, rb, lo, mid) + pairwiseSum(A, B, ra, rb, mid, hi));
}

function pairwiseRange(partial: Float32Array, A: Float32Array, B: Float32Array, m: number, n: number, k: number, k0: number, k1: number): void {
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) partial[i * n + j] = k1 > k0 ? pairwiseSum(A, B, i * k, j * k, k0, k1) : 0;
  }
}

function fp64Range(partial: Float32Array, A: Float32Array, B: Float32Array, m: number, n: number, k: number, k0: number, k1: number): void {
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let kk = k0; kk < k1; kk++) s += (A[i * k + kk] as number) * (B[j * k + kk] as number);
      partial[i * n + j] = s;
    }
  }
}

function int32Range(partial: Float32Array, A: Float32Array, B: Float32Array, m: number, n: number, k: number, k0: number, k1: number): void {
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let kk = k0; kk < k1; kk++) s = (s + (A[i * k + kk] as number) * (B[j * k + kk] as number)) | 0;
      partial[i * n + j] = s; // int32 → float32 conversion (RNE), as the kernels' epilogue does
    }
  }
}

/**
 * Whether every `int32` sum of A·Bᵀ is computed exactly by float32 arithmetic: integer operands with
 * k·max|A|·max|B| < 2^24. Then each product and each partial sum is an integer below 2^24 in
 * magnitude, exact in float32, so the sequential float32 sum (fp32 model, any order) equals the
 * integer sum, which never reaches 2^31 and so equals the wrapping int32 sum; it starts at +0 and
 * x + (−x) is +0 in round-to-nearest, so no −0 appears either. INT8 operands (|v| ≤ 128) qualify
 * up to k = 1023.
 */
function int32IsExactInFloat32(A: Float32Array, B: Float32Array, m: number, n: number, k: number): boolean {
  let maxA = 0;
  for (let i = 0; i < m * k; i++) {
    const v = Math.abs(A[i] as number);
    if (v > maxA) maxA = v;
  }
  let maxB = 0;
  for (let i = 0; i < n * k; i++) {
    const v = Math.abs(B[i] as number);
    if (v > maxB) maxB = v;
  }
  return k * maxA * maxB < 2 ** 24;
}

/** Exponent MMA-Sim assigns to an input value: ⌊log2|v|⌋, floored at the format's emin (zeros and subnormals). */
function inputExponent(v: number, emin: number): number {
  if (v === 0 || !Number.isFinite(v)) return emin;
  const e = exponentOf(v);
  return e < emin ? emin : e;
}

/**
 * Rounds toward zero to a float32 with `fractionBits` mantissa bits (e8m13 for 13): the output of one
 * Hopper FP8 `wgmma` step. Subnormals keep the float32 subnormal quantum scaled to the kept bits; a
 * finite overflow saturates (round toward zero never reaches Inf).
 */
export function truncateToE8M(x: number, fractionBits = 13): number {
  if (x === 0 || !Number.isFinite(x)) return x === 0 ? 0 : x;
  const a = Math.abs(x);
  const e = Math.max(exponentOf(a), -126);
  if (e > 127) return Math.sign(x) * (2 - 2 ** -fractionBits) * 2 ** 127;
  const q = 2 ** (e - fractionBits);
  return Math.sign(x) * Math.floor(a / q) * q;
}

/**
 * One MMA-Sim fused dot-add: d = c + Σ a_j·b_j over the chunk with every addend truncated (toward zero)
 * to a multiple of 2^(maxE − fractionBits), maxE the largest addend exponent (a product's is e_a + e_b;
 * c's its own, −126 for 0), then the exact sum truncated to `fractionBits` mantissa bits.
 * Source: microsoft/MMA-Sim mmasim/simulator/arithmetic.py fused_dot_add; reference/numerics.md §6.
 */
export function hopperFusedDotAdd(
  c: number,
  A: Float32Array,
  B: Float32Array,
  ra: number,
  rb: number,
  lo: number,
  hi: number,
  eminA: number,
  eminB: number,
  fractionBits = 13,
): number {
  let maxE = c === 0 ? -126 : Math.max(exponentOf(c), -126);
  let special = !Number.isFinite(c);
  for (let kk = lo; kk < hi; kk++) {
    const a = A[ra + kk] as number;
    const b = B[rb + kk] as number;
    if (!Number.isFinite(a) || !Number.isFinite(b)) special = true;
    const e = inputExponent(a, eminA) + inputExponent(b, eminB);
    if (e > maxE) maxE = e;
  }
  if (special) {
    let s = c;
    for (let kk = lo; kk < hi; kk++) s += (A[ra + kk] as number) * (B[rb + kk] as number);
    return Number.isNaN(s) ? Number.NaN : s;
  }
  const u = 2 ** (maxE - fractionBits);
  let sum = Math.trunc(c / u);
  for (let kk = lo; kk < hi; kk++) sum += Math.trunc(((A[ra + kk] as number) * (B[rb + kk] as number)) / u);
  return truncateToE8M(sum * u, fractionBits);
}

/** The scalar reference of {@link hopperRangeFast}: one {@link hopperFusedDotAdd} per chunk. */
function hopperRange(
  partial: Float32Array, A: Float32Array, B: Float32Array, m: number, n: number, k: number, k0: number, k1: number,
  chunk: number, eminA: number, eminB: number, fractionBits: number,
): void {
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let c = 0;
      for (let lo = k0; lo < k1; lo += chunk) c = hopperFusedDotAdd(c, A, B, i * k, j * k, lo, Math.min(lo + chunk, k1), eminA, eminB, fractionBits);
      partial[i * n + j] = c; // an e8m13 value is a float32 value
    }
  }
}

/** Exponent tables of decoded QuantizedTensor values (weights), by values array and emin. */
const exponentTables = new WeakMap<Float32Array, Map<number, Int16Array | null>>();

/** {@link exponentTable}, cached when `values` belongs to a QuantizedTensor (`cache`). */
function exponentTableOf(values: Float32Array, emin: number, cache: boolean, slot: 0 | 1): Int16Array | null {
  if (!cache) return exponentTable(values, emin, exponentScratch(slot, values.length));
  let byEmin = exponentTables.get(values);
  if (byEmin === undefined) {
    byEmin = new Map();
    exponentTables.set(values, byEmin);
  }
  let t = byEmin.get(emin);
  if (t === undefined) {
    t = exponentTable(values, emin);
    byEmin.set(emin, t);
  }
  return t;
}

/** Per-element MMA-Sim input exponents of an operand (⌊log2|v|⌋ floored at `emin`), or null if any value is not finite. */
function exponentTable(values: Float32Array, emin: number, out?: Int16Array): Int16Array | null {
  const e = out ?? new Int16Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (!Number.isFinite(v)) return null;
    e[i] = inputExponent(v, emin);
  }
  return e;
}

/** 2^e for e ∈ [−POW2_BIAS, POW2_BIAS]: every scale the fast hopper kernel forms (|maxE ± fractionBits| stays far inside). */
const POW2_BIAS = 1000;
const POW2 = Float64Array.from({ length: 2 * POW2_BIAS + 1 }, (_, i) => 2 ** (i - POW2_BIAS));

/**
 * {@link hopperRange} on pre-decoded exponent tables, equal to it bit for bit (finite operands only:
 * the caller falls back to the reference otherwise). Per chunk it forms the same maxE, then scales by
 * the exact power of two 2^(fractionBits − maxE) instead of dividing by its inverse (the same double,
 * both are exact), sums the truncated addends as integers (exact in a double, so in any order), and
 * truncates the sum to `fractionBits + 1` significant bits with integer arithmetic; the rare sums
 * that could leave the float32 exponent range go through {@link truncateToE8M}.
 */
function hopperRangeFast(
  partial: Float32Array, A: Float32Array, B: Float32Array, eA: Int16Array, eB: Int16Array, m: number, n: number, k: number,
  k0: number, k1: number, chunk: number, fractionBits: number,
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
const SIMD_MIN_WORK = 2048;

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

// ---------------------------------------------------------------------------------------------------

/**
 * Scratch of the segment loop (partial, acc, total: at least m·n; per-segment scales of A and B rows:
 * at least m and n), grown on demand. Only indices below m·n (m, n) are used, so calls of changing
 * shapes (attention GEMMs alternate) reuse the same arrays without building views.
 */
const segmentScratch = {
  partial: new Float32Array(256),
  acc: new Float32Array(256),
  total: new Float32Array(256),
  saK: new Float64Array(64),
  sbK: new Float64Array(64),
};

function scratch(m: number, n: number): [Float32Array, Float32Array, Float32Array, Float64Array, Float64Array] {
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

/** Segment boundaries of [lo, hi): every multiple of each step in `steps` (finite ones), plus lo and hi. */
function boundaries(lo: number, hi: number, steps: number[]): number[] {
  // The distinct finite steps: none, one (the common case) or more.
  let step = 0;
  let several = false;
  for (const s of steps) {
    if (!Number.isFinite(s) || s <= 0) continue;
    if (step === 0) step = s;
    else if (s !== step) several = true;
  }
  if (step === 0) return lo === hi ? [lo] : [lo, hi];
  if (!several) {
    // One step: its multiples inside (lo, hi), in order, without a set.
    const s = step;
    const out = [lo];
    for (let b = Math.ceil(lo / s) * s; b < hi; b += s) if (b > lo) out.push(b);
    if (hi !== lo) out.push(hi);
    return out;
  }
  const set = new Set<number>([lo, hi]);
  for (const s of steps) {
    if (!Number.isFinite(s) || s <= 0) continue;
    for (let b = Math.ceil(lo / s) * s; b < hi; b += s) if (b > lo) set.add(b);
  }
  return [...set].sort((x, y) => x - y);
}

/** The hopper-fp8 exponent tables of both operands, or null when a value is not finite (the scalar reference runs then). */
function hopperTablesOf(opA: Operand, opB: Operand): [Int16Array, Int16Array] | null {
  const eA = opA.exponents !== undefined ? opA.exponents : exponentTableOf(opA.values, opA.emin, opA.cached, 0);
  const eB = eA === null ? null : opB.exponents !== undefined ? opB.exponents : exponentTableOf(opB.values, opB.emin, opB.cached, 1);
  return eA !== null && eB !== null ? [eA, eB] : null;
}

/** One K-range [k0, k1) of every output under `model` into `partial` (module level: no per-call closures in the hot path). */
function runRange(
  model: AccumulatorModel, fp32: ((partial: Float32Array, k0: number, k1: number) => void) | null, tables: [Int16Array, Int16Array] | null,
  partial: Float32Array, A: Float32Array, B: Float32Array, m: number, n: number, k: number, k0: number, k1: number,
  chunk: number, fractionBits: number, eminA: number, eminB: number,
): void {
  switch (model) {
    case 'fp32': return (fp32 as NonNullable<typeof fp32>)(partial, k0, k1);
    case 'pairwise': return pairwiseRange(partial, A, B, m, n, k, k0, k1);
    case 'fp64': return fp64Range(partial, A, B, m, n, k, k0, k1);
    case 'int32':
      // Small integer operands: the float32 kernel's sums are the exact int32 sums (int32IsExactInFloat32).
      if (fp32 !== null) return fp32(partial, k0, k1);
      return int32Range(partial, A, B, m, n, k, k0, k1);
    case 'hopper-fp8':
      if (tables === null) return hopperRange(partial, A, B, m, n, k, k0, k1, chunk, eminA, eminB, fractionBits);
      return hopperRangeFast(partial, A, B, tables[0], tables[1], m, n, k, k0, k1, chunk, fractionBits);
  }
}

/**
 * Adds one chunk's WebAssembly sums into `acc`, each rounded to e8m13 (and stored as float32, as the
 * `partial` buffer of {@link runRange} would hold it), then scaled and accumulated exactly as the
 * segment loop of {@link gemm} does: `fma32(fl(sa·sb), c, acc)` with fine-grained scales, else
 * `fl(acc + c)`. One pass over the outputs instead of a store to `partial` and a second pass.
 */
function accumulateChunkSums(
  acc: Float32Array, r: HopperChunkResult, saK: Float64Array, sbK: Float64Array, m: number, n: number, fine: boolean, fractionBits: number,
): void {
  const { sums, maxes, stride } = r;
  for (let i = 0; i < m; i++) {
    const sa = saK[i] as number;
    const row = i * stride;
    for (let j = 0; j < n; j++) {
      const o = i * n + j;
      const c = Math.fround(roundE8M(sums[row + j] as number, maxes[row + j] as number, fractionBits));
      acc[o] = fine ? fma32(Math.fround(sa * (sbK[j] as number)), c, acc[o] as number) : Math.fround((acc[o] as number) + c);
    }
  }
}

/** Per-segment scales of {@link hopperOneCall}: (segment, row) of A and (segment, row) of B, grown on demand. */
let segmentScales = { a: new Float64Array(64), b: new Float64Array(64) };

/**
 * The hopper-fp8 GEMM of finite operands in one {@link hopperGemmSegments} call when every K-segment
 * is exactly one chunk and there are enough products to pay for the copies; writes the float32
 * accumulators into `total` and returns true, or returns false (nothing written that the segment
 * loop would read) for the segment loop to run.
 */
function hopperOneCall(
  total: Float32Array, opA: Operand, opB: Operand, tables: [Int16Array, Int16Array], m: number, n: number, k: number,
  steps: number[], chunk: number, fine: boolean, fractionBits: number,
): boolean {
  if (k === 0 || k % chunk !== 0 || m * n * k < SIMD_MIN_WORK) return false;
  const bounds = boundaries(0, k, steps);
  const nseg = k / chunk;
  if (bounds.length !== nseg + 1) return false;
  for (let s = 0; s <= nseg; s++) if (bounds[s] !== s * chunk) return false;
  if (fine) {
    if (segmentScales.a.length < nseg * m || segmentScales.b.length < nseg * n) {
      segmentScales = { a: new Float64Array(Math.max(nseg * m, 2 * segmentScales.a.length)), b: new Float64Array(Math.max(nseg * n, 2 * segmentScales.b.length)) };
    }
    const { a: sa, b: sb } = segmentScales;
    for (let s = 0; s < nseg; s++) {
      const k0 = s * chunk;
      for (let i = 0; i < m; i++) sa[s * m + i] = opA.fine ? (opA.scales as Float32Array)[(opA.layout as CellLayout).index(i, k0)] as number : 1;
      for (let j = 0; j < n; j++) sb[s * n + j] = opB.fine ? (opB.scales as Float32Array)[(opB.layout as CellLayout).index(j, k0)] as number : 1;
    }
  }
  return hopperGemmSegments(total, opA.values, opB.values, tables[0], tables[1], m, n, k, chunk, fine, segmentScales.a, segmentScales.b, fractionBits, opB.cached);
}

/** Every {@link GemmOptions} field, present (possibly undefined), in one key order: one object shape for the hot code. */
function normalizeOptions(o: GemmOptions): GemmOptions {
  return {
    aQuant: o.aQuant,
    bQuant: o.bQuant,
    accumulator: o.accumulator,
    promoteEvery: o.promoteEvery,
    chunk: o.chunk,
    fractionBits: o.fractionBits,
    splitK: o.splitK,
    outFormat: o.outFormat,
    reference: o.reference,
  } as GemmOptions;
}

/**
 * out(m×n) = A(m×k)·B(n×k)ᵀ, row-major, under an explicit accumulator model (the argument order of the
 * NN layers: output first, then inputs, then sizes).
 *
 * - `a`/`b` are Float32Arrays (rounded by `aQuant`/`bQuant` when that is a format name, quantized when
 *   it is a {@link QuantSpec}) or {@link QuantizedTensor}s used as they are.
 * - Both operands scaled: products of the element values (integer codes minus zero points, or
 *   decoded float codes); fine-grained (group/block) scales are applied inside the K loop, once per
 *   K-segment, as DeepGEMM promotes: `acc = fmaf(fl(s_a·s_b), partial, acc)`; per-tensor/per-row
 *   scales once at the end as CUTLASS's `ScaledEpilogue`: `fl(s_a·fl(s_b·acc))`; NVFP4 global scales
 *   last, as the GEMM's alpha.
 * - One operand scaled (weight-only, W4A16): it is dequantized first and rounded to the other
 *   operand's format when that was given as a format name.
 * - `splitK`: each of the parts is summed from zero, the parts are then added in order in float32.
 *
 * @example
 * ```ts
 * const out = new Float32Array(m * n);
 * gemm(out, x, w, m, n, k, { aQuant: 'bf16', bQuant: 'bf16' });                 // bf16 inputs, fp32 sequential
 * gemm(out, x, wq, m, n, k, { aQuant: quantPreset('deepseek-fp8-group', { block: 16 }), accumulator: 'hopper-fp8', chunk: 16 });
 * ```
 */
export function gemm(
  out: Float32Array,
  a: Float32Array | QuantizedTensor,
  b: Float32Array | QuantizedTensor,
  m: number,
  n: number,
  k: number,
  options: GemmOptions = {},
): Float32Array {
  checkShapes(out, a, b, m, n, k);
  // Callers pass option objects of many shapes: read them once, here, into one fixed shape.
  options = normalizeOptions(options);
  const model = options.accumulator ?? 'fp32';
  if (!accumulatorModels.includes(model)) throw new Error(`accumulator: unknown model '${model}' (known: ${accumulatorModels.join(', ')})`);
  const splitK = options.splitK ?? 1;
  if (!Number.isInteger(splitK) || splitK < 1) throw new Error(`splitK: expected a positive integer, got ${splitK}`);
  const chunk = options.chunk ?? 32;
  const promoteEvery = options.promoteEvery ?? 4;
  const fractionBits = options.fractionBits ?? 13;
  if (!Number.isInteger(chunk) || chunk < 1) throw new Error(`chunk: expected a positive integer, got ${chunk}`);
  if (!Number.isInteger(promoteEvery) || promoteEvery < 0) throw new Error(`promoteEvery: expected a non-negative integer, got ${promoteEvery}`);
  const [opA, opB] = prepareOperands(a, b, m, n, k, options);
  if (model === 'int32' && !(opA.integer && opB.integer)) {
    throw new Error(`accumulator: 'int32' needs integer operands (int8/uint8/int4/uint4 quantizers on both A and B)`);
  }
  const A = opA.values;
  const B = opB.values;
  const fine = opA.fine || opB.fine;
  if (model === 'hopper-fp8' && fine) {
    for (const op of [opA, opB]) {
      if (op.fine && op.layout !== null && op.layout.kSize % chunk !== 0) {
        throw new Error(`chunk: hopper-fp8 needs scale groups that are multiples of the chunk (group ${op.layout.kSize}, chunk ${chunk}); pass { chunk: ${op.layout.kSize} }`);
      }
    }
  }
  const steps = [
    opA.fine && opA.layout ? opA.layout.kSize : Infinity,
    opB.fine && opB.layout ? opB.layout.kSize : Infinity,
    model === 'hopper-fp8' && promoteEvery > 0 ? promoteEvery * chunk : Infinity,
  ];
  const fp32 = model === 'fp32' || (model === 'int32' && options.reference !== true && int32IsExactInFloat32(A, B, m, n, k)) ? fp32Gemm(A, B, m, n, k) : null;
  const hopperTables = model === 'hopper-fp8' && options.reference !== true ? hopperTablesOf(opA, opB) : null;
  const partSize = Math.ceil(k / splitK);
  const [partial, acc, total, saK, sbK] = scratch(m, n);
  // Every K-segment one chunk (the presets): the whole GEMM in one WebAssembly call, else the segment loop below.
  const oneCall = hopperTables !== null && splitK === 1 && hopperOneCall(total, opA, opB, hopperTables, m, n, k, steps, chunk, fine, fractionBits);
  for (let p = 0; p < (oneCall ? 0 : splitK); p++) {
    const lo = Math.min(k, p * partSize);
    const hi = Math.min(k, lo + partSize);
    const bounds = boundaries(lo, hi, steps);
    acc.fill(0, 0, m * n);
    for (let s = 0; s + 1 < bounds.length; s++) {
      const k0 = bounds[s] as number;
      const k1 = bounds[s + 1] as number;
      // A single-chunk hopper-fp8 segment with enough products runs the WebAssembly step (null: no SIMD here).
      const simd =
        hopperTables !== null && k1 - k0 <= chunk && m * n * (k1 - k0) >= SIMD_MIN_WORK
          ? hopperChunkSums(A, B, hopperTables[0], hopperTables[1], m, n, k, k0, k1, fractionBits, opB.cached)
          : null;
      if (simd === null) runRange(model, fp32, hopperTables, partial, A, B, m, n, k, k0, k1, chunk, fractionBits, opA.emin, opB.emin);
      if (fine) {
        // The scales of this K-segment, one per row of A and of B (1 where that operand is not fine-grained).
        for (let i = 0; i < m; i++) saK[i] = opA.fine ? (opA.scales as Float32Array)[(opA.layout as CellLayout).index(i, k0)] as number : 1;
        for (let j = 0; j < n; j++) sbK[j] = opB.fine ? (opB.scales as Float32Array)[(opB.layout as CellLayout).index(j, k0)] as number : 1;
      }
      if (simd !== null) {
        accumulateChunkSums(acc, simd, saK, sbK, m, n, fine, fractionBits);
      } else if (fine) {
        for (let i = 0; i < m; i++) {
          const sa = saK[i] as number;
          for (let j = 0; j < n; j++) {
            const o = i * n + j;
            acc[o] = fma32(Math.fround(sa * (sbK[j] as number)), partial[o] as number, acc[o] as number);
          }
        }
      } else {
        for (let o = 0; o < m * n; o++) acc[o] = Math.fround((acc[o] as number) + (partial[o] as number));
      }
    }
    if (p === 0) for (let o = 0; o < m * n; o++) total[o] = acc[o] as number;
    else for (let o = 0; o < m * n; o++) total[o] = Math.fround((total[o] as number) + (acc[o] as number));
  }
  // Epilogue: per-tensor / per-row scales (B first, then A), then the global scales.
  const global = Math.fround(opA.globalScale * opB.globalScale);
  const rowScalesB = !opB.fine && opB.scales !== null;
  if (rowScalesB) for (let j = 0; j < n; j++) sbK[j] = (opB.scales as Float32Array)[(opB.layout as CellLayout).index(j, 0)] as number;
  for (let i = 0; i < m; i++) {
    const sa = !opA.fine && opA.scales ? (opA.scales[(opA.layout as CellLayout).index(i, 0)] as number) : null;
    for (let j = 0; j < n; j++) {
      const sb = rowScalesB ? (sbK[j] as number) : null;
      let v = total[i * n + j] as number;
      if (sb !== null) v = Math.fround(sb * v);
      if (sa !== null) v = Math.fround(sa * v);
      if (global !== 1) v = Math.fround(v * global);
      out[i * n + j] = v;
    }
  }
  if (options.outFormat !== undefined && options.outFormat !== 'fp32') fakeQuant(options.outFormat, out, { profile: 'ieee' }, out);
  return out;
}
