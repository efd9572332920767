// The reference GEMM: out(m×n) = A(m×k)·B(n×k)ᵀ with operand rounding/quantization, scales where real kernels apply
// them and named accumulator models, one output at a time in plain loops. Written for clarity, not speed (gemm.ts).

import { type FloatFormatName, decode, exponentOf, floatFormat } from './formats.js';
import { type CellLayout, cellLayout } from './quant-cells.js';
import { type QuantSpec, type QuantizedTensor, elementFormat } from './quant-spec.js';
import { dequantizeReference, quantizeReference, quantizedValuesReference } from './quantize-reference.js';
import { scalarEncoder } from './round.js';
import { fma32 } from './scales.js';

/**
 * How products are summed along K:
 * - `fp32`: each product rounded to float32, sequential float32 adds in increasing k (default);
 * - `pairwise`: float32 products summed as a balanced binary tree (left half + right half);
 * - `fp32-fma`: fused multiply-adds into one float32 accumulator in increasing k, c = fmaf(a_k, b_k, c)
 *   (each product unrounded): MKL's AVX-512 sgemm on torch 2.13's CPU `_scaled_mm` layout (docs/golden.md);
 * - `fp32-fma-x2`: two float32 accumulators, even and odd k (counted from the segment's start), each
 *   `fp32-fma`, added even + odd at the end: MKL's AVX2 sgemm on the same layout;
 * - `fp64`: products summed in double, rounded to float32 once;
 * - `int32`: exact integer products, int32 adds that wrap modulo 2^32 (integer operands only);
 * - `hopper-fp8`: MMA-Sim model of Hopper FP8 `wgmma` (per K-chunk of 32: products and incoming
 *   accumulator aligned to the largest exponent and truncated to 13 fractional bits, summed
 *   exactly, truncated to an e8m13 float), promoted to a float32 accumulator every
 *   `promoteEvery` chunks.
 */
export type AccumulatorModel = 'fp32' | 'fp32-fma' | 'fp32-fma-x2' | 'pairwise' | 'fp64' | 'int32' | 'hopper-fp8';

/** Every accumulator model. */
export const accumulatorModels: readonly AccumulatorModel[] = Object.freeze([
  'fp32',
  'fp32-fma',
  'fp32-fma-x2',
  'pairwise',
  'fp64',
  'int32',
  'hopper-fp8',
]);

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
   * Run `gemmReference` (gemm-reference.ts: plain loops) instead of the fast kernels (pre-decoded tables,
   * tiles, WebAssembly). Both give the same bits; the reference is the oracle of the tests. @defaultValue false
   */
  readonly reference?: boolean;
}

/** The validated scalar settings of one GEMM call. */
export interface GemmSettings {
  readonly model: AccumulatorModel;
  readonly splitK: number;
  readonly chunk: number;
  readonly promoteEvery: number;
  readonly fractionBits: number;
}

/** A prepared operand: element values and where its scales go. */
export interface GemmOperand {
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
}

/** @internal Whether a GEMM operand is a QuantizedTensor (else a Float32Array). */
export function isQuantized(x: Float32Array | QuantizedTensor): x is QuantizedTensor {
  return !(x instanceof Float32Array);
}

/** @internal Whether a GEMM operand is a QuantizedTensor with scales. */
export function isScaled(x: Float32Array | QuantizedTensor): boolean {
  return isQuantized(x) && x.spec.scale.kind !== 'none';
}

/** @internal The rounding format of a Float32Array operand given a format name, else null. */
export function roundingFormatOf(
  x: Float32Array | QuantizedTensor,
  quant: OperandQuant | undefined,
): FloatFormatName | null {
  return !isQuantized(x) && typeof quant === 'string' ? quant : null;
}

/** @internal An operand of plain values (rounded to `format`, or float32 as is when null): no scales. */
export function plainOperand(values: Float32Array, format: FloatFormatName | null): GemmOperand {
  const emin = format === null ? -126 : floatFormat(format).emin;
  return { values, emin, integer: false, scales: null, layout: null, fine: false, globalScale: 1 };
}

/** @internal The operand of a QuantizedTensor used with its scales: element values, scales and their layout. */
export function scaledOperand(q: QuantizedTensor, values: Float32Array, rows: number, k: number): GemmOperand {
  const fmt = elementFormat(q.spec.format);
  const emin = fmt.kind === 'float' ? fmt.emin : 0;
  const integer = fmt.kind === 'int';
  if (q.spec.scale.kind === 'none')
    return { values, emin, integer, scales: null, layout: null, fine: false, globalScale: 1 };
  const layout = cellLayout(q.spec.granularity, rows, k);
  const fine = Number.isFinite(layout.kSize) && layout.kSize < k;
  return { values, emin, integer, scales: q.scales, layout, fine, globalScale: q.globalScale ?? 1 };
}

/** @internal Throws unless out(m×n) = A(m×k)·B(n×k)ᵀ fits the arrays; the message names every size. */
export function checkShapes(
  out: Float32Array,
  a: Float32Array | QuantizedTensor,
  b: Float32Array | QuantizedTensor,
  m: number,
  n: number,
  k: number,
): void {
  const dims = Number.isInteger(m) && m >= 0 && Number.isInteger(n) && n >= 0 && Number.isInteger(k) && k >= 0;
  const aOk = isQuantized(a) ? a.shape[0] === m && a.shape[1] === k : a.length === m * k;
  const bOk = isQuantized(b) ? b.shape[0] === n && b.shape[1] === k : b.length === n * k;
  if (!dims || !aOk || !bOk || out.length !== m * n) {
    const shapeOf = (x: Float32Array | QuantizedTensor): string =>
      isQuantized(x) ? `[${x.shape.join(', ')}]` : `${x.length} elements`;
    throw new Error(
      `gemm: shapes do not match out(m×n) = A(m×k)·B(n×k)ᵀ with m = ${m}, n = ${n}, k = ${k}: ` +
        `out has ${out.length} elements (need ${m * n}), A is ${shapeOf(a)} (need ${m}×${k}), B is ${shapeOf(b)} (need ${n}×${k})`,
    );
  }
}

/** @internal The accumulator model and its integer settings with defaults, each checked; errors name the option. */
export function gemmSettings(options: GemmOptions): GemmSettings {
  const model = options.accumulator ?? 'fp32';
  if (!accumulatorModels.includes(model))
    throw new Error(`accumulator: unknown model '${model}' (known: ${accumulatorModels.join(', ')})`);
  const splitK = options.splitK ?? 1;
  if (!Number.isInteger(splitK) || splitK < 1) throw new Error(`splitK: expected a positive integer, got ${splitK}`);
  const chunk = options.chunk ?? 32;
  const promoteEvery = options.promoteEvery ?? 4;
  const fractionBits = options.fractionBits ?? 13;
  if (!Number.isInteger(chunk) || chunk < 1) throw new Error(`chunk: expected a positive integer, got ${chunk}`);
  if (!Number.isInteger(promoteEvery) || promoteEvery < 0)
    throw new Error(`promoteEvery: expected a non-negative integer, got ${promoteEvery}`);
  return { model, splitK, chunk, promoteEvery, fractionBits };
}

/**
 * @internal Checks the prepared operands against the model (int32 needs integers; hopper-fp8 scale
 * groups must be whole chunks) and returns the K-segment steps: every `kSize` of a fine-grained
 * operand and the hopper-fp8 promotion interval (Infinity: no boundary from that source).
 */
export function segmentSteps(opA: GemmOperand, opB: GemmOperand, s: GemmSettings): number[] {
  if (s.model === 'int32' && !(opA.integer && opB.integer)) {
    throw new Error(`accumulator: 'int32' needs integer operands (int8/uint8/int4/uint4 quantizers on both A and B)`);
  }
  if (s.model === 'hopper-fp8') {
    for (const op of [opA, opB]) {
      if (op.fine && op.layout !== null && op.layout.kSize % s.chunk !== 0) {
        throw new Error(
          `chunk: hopper-fp8 needs scale groups that are multiples of the chunk (group ${op.layout.kSize}, chunk ${s.chunk}); pass { chunk: ${op.layout.kSize} }`,
        );
      }
    }
  }
  return [
    opA.fine && opA.layout ? opA.layout.kSize : Infinity,
    opB.fine && opB.layout ? opB.layout.kSize : Infinity,
    s.model === 'hopper-fp8' && s.promoteEvery > 0 ? s.promoteEvery * s.chunk : Infinity,
  ];
}

// ---------------------------------------------------------------------------------------------------
// The accumulator models: one output's sum over the K-range [k0, k1), as the float32 the partial buffer holds.

function pairwiseSum(A: Float32Array, B: Float32Array, ra: number, rb: number, lo: number, hi: number): number {
  if (hi - lo === 1) return Math.fround((A[ra + lo] as number) * (B[rb + lo] as number));
  const mid = lo + ((hi - lo) >> 1);
  return Math.fround(pairwiseSum(A, B, ra, rb, lo, mid) + pairwiseSum(A, B, ra, rb, mid, hi));
}

/** Exponent MMA-Sim assigns to an input value: ⌊log2|v|⌋, floored at the format's emin (zeros and subnormals). @internal */
export function inputExponent(v: number, emin: number): number {
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

/** Σ_{kk ∈ [k0, k1)} A(ra + kk)·B(rb + kk) under `model`, from zero, as a float32 value. @internal */
export function referenceDot(
  model: AccumulatorModel,
  A: Float32Array,
  B: Float32Array,
  ra: number,
  rb: number,
  k0: number,
  k1: number,
  s: GemmSettings,
  eminA: number,
  eminB: number,
): number {
  const fr = Math.fround;
  if (k1 <= k0) return 0;
  switch (model) {
    case 'fp32': {
      let acc = 0;
      for (let kk = k0; kk < k1; kk++) acc = fr(acc + fr((A[ra + kk] as number) * (B[rb + kk] as number)));
      return acc;
    }
    case 'fp32-fma': {
      let acc = 0;
      for (let kk = k0; kk < k1; kk++) acc = fma32(A[ra + kk] as number, B[rb + kk] as number, acc);
      return acc;
    }
    case 'fp32-fma-x2': {
      let even = 0;
      let odd = 0;
      for (let kk = k0; kk < k1; kk += 2) {
        even = fma32(A[ra + kk] as number, B[rb + kk] as number, even);
        if (kk + 1 < k1) odd = fma32(A[ra + kk + 1] as number, B[rb + kk + 1] as number, odd);
      }
      return fr(even + odd);
    }
    case 'pairwise':
      return pairwiseSum(A, B, ra, rb, k0, k1);
    case 'fp64': {
      let acc = 0;
      for (let kk = k0; kk < k1; kk++) acc += (A[ra + kk] as number) * (B[rb + kk] as number);
      return fr(acc);
    }
    case 'int32': {
      let acc = 0;
      for (let kk = k0; kk < k1; kk++) acc = (acc + (A[ra + kk] as number) * (B[rb + kk] as number)) | 0;
      return fr(acc); // int32 → float32 conversion (RNE), as the kernels' epilogue does
    }
    case 'hopper-fp8': {
      let c = 0;
      for (let lo = k0; lo < k1; lo += s.chunk)
        c = hopperFusedDotAdd(c, A, B, ra, rb, lo, Math.min(lo + s.chunk, k1), eminA, eminB, s.fractionBits);
      return fr(c); // an e8m13 value is a float32 value (NaN and ±Inf stay)
    }
  }
}

/** Segment boundaries of [lo, hi): every multiple inside it of each finite step, plus lo and hi, ascending. @internal */
export function segmentBoundaries(lo: number, hi: number, steps: readonly number[]): number[] {
  const set = new Set<number>([lo, hi]);
  for (const s of steps) {
    if (!Number.isFinite(s) || s <= 0) continue;
    for (let b = Math.ceil(lo / s) * s; b < hi; b += s) if (b > lo) set.add(b);
  }
  return [...set].sort((x, y) => x - y);
}

/** The operand's scale at (row, kk), or 1 when it has none there. */
function scaleAt(op: GemmOperand, row: number, kk: number): number {
  return op.scales !== null && op.layout !== null ? (op.scales[op.layout.index(row, kk)] as number) : 1;
}

/** Rounds every element to `format` with the scalar reference cast (RNE, IEEE overflow); null or fp32: as is. */
function roundedCopy(x: Float32Array, format: FloatFormatName | null): Float32Array {
  if (format === null || format === 'fp32') return x;
  const fmt = floatFormat(format);
  const encode = scalarEncoder(fmt, 'ieee');
  return Float32Array.from(x, (v) => decode(fmt, encode(v)));
}

/**
 * The operands of {@link gemmReference}: a Float32Array is rounded (format name) or quantized (QuantSpec);
 * both scaled: element values with their scales; one scaled (weight-only): that one dequantized and
 * rounded to the other operand's format; otherwise plain values.
 */
function referenceOperands(
  a: Float32Array | QuantizedTensor,
  b: Float32Array | QuantizedTensor,
  m: number,
  n: number,
  k: number,
  options: GemmOptions,
): [GemmOperand, GemmOperand] {
  const prep = (
    x: Float32Array | QuantizedTensor,
    rows: number,
    quant: OperandQuant | undefined,
  ): Float32Array | QuantizedTensor =>
    isQuantized(x) || quant === undefined || typeof quant === 'string' ? x : quantizeReference(quant, x, [rows, k]);
  const qa = prep(a, m, options.aQuant);
  const qb = prep(b, n, options.bQuant);
  const fa = roundingFormatOf(qa, options.aQuant);
  const fb = roundingFormatOf(qb, options.bQuant);
  const oneSided = isScaled(qa) !== isScaled(qb);
  const operand = (
    x: Float32Array | QuantizedTensor,
    rows: number,
    f: FloatFormatName | null,
    otherF: FloatFormatName | null,
  ): GemmOperand => {
    if (!isQuantized(x)) return plainOperand(roundedCopy(x, f), f);
    if (oneSided && isScaled(x)) return plainOperand(roundedCopy(dequantizeReference(x), otherF), otherF);
    return scaledOperand(x, quantizedValuesReference(x), rows, k);
  };
  return [operand(qa, m, fa, fb), operand(qb, n, fb, fa)];
}

/**
 * The reference of {@link gemm}, one output at a time:
 *
 * ```
 * for each output (i, j):
 *   total = 0
 *   for each split-K part [lo, hi):                      // summed from zero, parts added in order
 *     acc = 0
 *     for each K-segment [k0, k1) of the part:           // cut at scale groups and hopper-fp8 promotions
 *       partial = dot_model(A(i, k0..k1), B(j, k0..k1))  // the accumulator model, as a float32
 *       acc = fine scales ? fmaf(fl(s_a·s_b), partial, acc) : fl(acc + partial)
 *     total = first part ? acc : fl(total + acc)
 *   out = fl(global · fl(s_a · fl(s_b · total)))         // per-row/tensor scales, B first; NVFP4 global last
 * out = round(out, outFormat)
 * ```
 *
 * Same arguments, errors and bits as {@link gemm} (tests compare them with `Object.is`).
 */
export function gemmReference(
  out: Float32Array,
  a: Float32Array | QuantizedTensor,
  b: Float32Array | QuantizedTensor,
  m: number,
  n: number,
  k: number,
  options: GemmOptions = {},
): Float32Array {
  const fr = Math.fround;
  checkShapes(out, a, b, m, n, k);
  const settings = gemmSettings(options);
  const [opA, opB] = referenceOperands(a, b, m, n, k, options);
  const steps = segmentSteps(opA, opB, settings);
  const fine = opA.fine || opB.fine;
  const partSize = Math.ceil(k / settings.splitK);
  const global = fr(opA.globalScale * opB.globalScale);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let total = 0;
      for (let p = 0; p < settings.splitK; p++) {
        const lo = Math.min(k, p * partSize);
        const hi = Math.min(k, lo + partSize);
        const bounds = segmentBoundaries(lo, hi, steps);
        let acc = 0;
        for (let s = 0; s + 1 < bounds.length; s++) {
          const k0 = bounds[s] as number;
          const k1 = bounds[s + 1] as number;
          const partial = referenceDot(
            settings.model,
            opA.values,
            opB.values,
            i * k,
            j * k,
            k0,
            k1,
            settings,
            opA.emin,
            opB.emin,
          );
          if (!fine) acc = fr(acc + partial);
          else {
            const sa = opA.fine ? scaleAt(opA, i, k0) : 1;
            const sb = opB.fine ? scaleAt(opB, j, k0) : 1;
            acc = fma32(fr(sa * sb), partial, acc);
          }
        }
        total = p === 0 ? acc : fr(total + acc);
      }
      // Epilogue: per-tensor / per-row scales (B first, then A), then the global scales.
      let v = total;
      if (!opB.fine && opB.scales !== null) v = fr(scaleAt(opB, j, 0) * v);
      if (!opA.fine && opA.scales !== null) v = fr(scaleAt(opA, i, 0) * v);
      if (global !== 1) v = fr(v * global);
      out[i * n + j] = v;
    }
  }
  if (options.outFormat !== undefined && options.outFormat !== 'fp32') out.set(roundedCopy(out, options.outFormat));
  return out;
}
