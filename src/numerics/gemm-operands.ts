// The operands of the fast GEMM (gemm.ts): a Float32Array quantized per the options or a QuantizedTensor given
// quantized, prepared for the scaled path (codes with their scales, decoded once and cached when given) or the
// dequantize-first path (weight-only and unscaled). Not the semantics, which gemm-reference.ts defines.

import type { FloatFormat, FloatFormatName } from './formats.js';
import { type QuantizedTensor, dequantize, elementFormat, quantizeTransient, quantizedValues } from './quantize.js';
import { markGemmOperandImmutable } from './kernels/fp32-kernel.js';
import {
  type GemmOperand,
  type GemmOptions,
  type OperandQuant,
  isQuantized,
  isScaled,
  plainOperand,
  roundingFormatOf,
  scaledOperand,
} from './gemm-reference.js';
import { decodeWithExponents } from './gemm-hopper.js';
import {
  cacheDecoding,
  cachedDecoding,
  cachedDequantized,
  exponentScratch,
  firstSight,
  operandScratch,
  quantizeScratch,
  verifyCachedOperand,
} from './gemm-caches.js';
import { roundArray } from './round-array.js';

/** A prepared operand of the fast path: {@link GemmOperand} plus what its caches need. */
export interface Operand extends GemmOperand {
  /** Whether `values` is the cached decoding of a QuantizedTensor (immutable, so derived tables may be cached too); coded: whether it was given. */
  readonly cached: boolean;
  /** hopper-fp8 input exponents decoded with the values (null: a non-finite value); undefined when not computed in that pass. */
  readonly exponents: Int16Array | null | undefined;
  /** Whether every value is an integer below 2^26 in magnitude: integer codes minus zero points below 2^25 (the int32 kernel's condition). */
  readonly smallIntegers: boolean;
  /**
   * A hopper-fp8 operand of ≤ 8-bit float codes left coded for the one-call kernel, which decodes them itself; `values`
   * is then empty until {@link decodedOperand} decodes it for the other paths. Null: `values` holds the elements.
   */
  readonly coded: QuantizedTensor | null;
}

/** The fields {@link Operand} adds to a {@link GemmOperand}. */
type CacheFields = Pick<Operand, 'cached' | 'exponents' | 'smallIntegers' | 'coded'>;

/** A {@link GemmOperand} with its cache fields, always built in this one key order (one object shape in the hot code). */
function fastOperand(op: GemmOperand, c: CacheFields): Operand {
  return {
    values: op.values,
    emin: op.emin,
    integer: op.integer,
    scales: op.scales,
    layout: op.layout,
    fine: op.fine,
    globalScale: op.globalScale,
    cached: c.cached,
    exponents: c.exponents,
    smallIntegers: c.smallIntegers,
    coded: c.coded,
  };
}

/** Where an operand sits in this call: its rows and K, its scratch slot (0: A, 1: B) and how gemm may treat it. */
interface OperandSite {
  readonly rows: number;
  readonly k: number;
  readonly slot: 0 | 1;
  /** Passed in quantized by the caller (a weight, say), not quantized here: it may be seen again and its derived tables cached. */
  readonly given: boolean;
  /** A hopper-fp8 GEMM: decode with the exponent tables (or leave ≤ 8-bit float codes for the one-call kernel). */
  readonly hopper: boolean;
}

/** The `values` of a coded operand before it is decoded. */
const NO_VALUES = new Float32Array(0);

/**
 * The operand with its elements in `values`: a coded one decoded, a given tensor (`cached`) into its cached decoding
 * (seen again, it is not decoded again), one gemm quantized itself with its exponent table into the slot's scratch.
 */
export function decodedOperand(op: Operand, slot: 0 | 1): Operand {
  const q = op.coded;
  if (q === null) return op;
  if (op.cached) return quantizedOperand(q, { rows: q.shape[0], k: q.shape[1], slot, given: true, hopper: false });
  const len = q.shape[0] * q.shape[1];
  const [values, exponents] = decodeWithExponents(
    q,
    elementFormat(q.spec.format) as FloatFormat,
    operandScratch(slot, len),
    exponentScratch(slot, len),
  );
  return fastOperand({ ...op, values }, { cached: false, exponents, smallIntegers: op.smallIntegers, coded: null });
}

/** Whether a QuantizedTensor's element values are integers below 2^26: an integer format (codes in [−128, 255]) with zero points below 2^25. */
function hasSmallIntegers(q: QuantizedTensor): boolean {
  if (elementFormat(q.spec.format).kind !== 'int') return false;
  const zps = q.zeroPoints;
  if (zps !== undefined) for (let i = 0; i < zps.length; i++) if (Math.abs(zps[i] as number) >= 2 ** 25) return false;
  return true;
}

/** The operand of a QuantizedTensor used with its scales. */
function quantizedOperand(q: QuantizedTensor, site: OperandSite): Operand {
  const { rows, k, slot, given: cache, hopper: wantExponents } = site;
  if (cache) verifyCachedOperand(q);
  const fmt = elementFormat(q.spec.format);
  let values = cache ? cachedDecoding(q) : undefined;
  // hopper-fp8 FP8/FP6/FP4 operands: decoded in the kernel unless a decoding is cached already; a given B is decoded
  // and cached on its second sight (a weight: decoded once, its panels kept)
  if (
    wantExponents &&
    fmt.kind === 'float' &&
    fmt.bits <= 8 &&
    values === undefined &&
    (slot === 0 || !cache || firstSight(q))
  ) {
    return fastOperand(scaledOperand(q, NO_VALUES, rows, k), {
      cached: cache,
      exponents: undefined,
      smallIntegers: false,
      coded: q,
    });
  }
  let exponents: Int16Array | null | undefined;
  if (values === undefined && !cache && wantExponents && fmt.kind === 'float' && fmt.bits <= 8) {
    [values, exponents] = decodeWithExponents(q, fmt, operandScratch(slot, rows * k), exponentScratch(slot, rows * k));
  }
  if (values === undefined) {
    // A tensor gemm quantized itself lives for this call only: decode it into the slot's scratch.
    values = cache ? quantizedValues(q) : quantizedValues(q, operandScratch(slot, rows * k));
    if (cache) cacheDecoding(q, values);
    if (cache) markGemmOperandImmutable(values); // derived once from a tensor nothing writes: its packed panels may be kept
  }
  return fastOperand(scaledOperand(q, values, rows, k), {
    cached: cache,
    exponents,
    smallIntegers: hasSmallIntegers(q),
    coded: null,
  });
}

/** A Float32Array operand with a QuantSpec quantizer, quantized into the slot's scratch (gemm consumes it in this call). */
function prepOperand(
  x: Float32Array | QuantizedTensor,
  rows: number,
  k: number,
  quant: OperandQuant | undefined,
  slot: 0 | 1,
): Float32Array | QuantizedTensor {
  if (isQuantized(x) || quant === undefined || typeof quant === 'string') return x;
  return quantizeTransient(quant, x, [rows, k], quantizeScratch(slot));
}

function roundTo(v: Float32Array, f: FloatFormatName | null): Float32Array {
  return f === null || f === 'fp32' ? v : roundArray(f, v, { profile: 'ieee' });
}

function plainFastOperand(values: Float32Array, format: FloatFormatName | null): Operand {
  return fastOperand(plainOperand(values, format), {
    cached: false,
    exponents: undefined,
    smallIntegers: false,
    coded: null,
  });
}

/** The rounding formats of the unscaled or weight-only path (null: none given), and whether exactly one operand is scaled. */
interface PlainFormats {
  readonly format: FloatFormatName | null;
  readonly otherFormat: FloatFormatName | null;
  readonly weightOnly: boolean;
}

/**
 * The operand of the unscaled or weight-only path. Weight-only (one operand scaled): the quantized
 * operand is dequantized first, then rounded to the other operand's float format when one was
 * given (W4A16 kernels dequantize weights to fp16/bf16 before the MMA).
 */
function plainPathOperand(x: Float32Array | QuantizedTensor, site: OperandSite, formats: PlainFormats): Operand {
  const { format: f, otherFormat: otherF, weightOnly } = formats;
  const cache = site.given;
  if (!isQuantized(x)) return plainFastOperand(roundTo(x, f), f);
  if (weightOnly && x.spec.scale.kind !== 'none') {
    if (!cache) return plainFastOperand(roundTo(dequantize(x), otherF), otherF);
    verifyCachedOperand(x);
    const v = cachedDequantized(x, otherF ?? 'fp32', () => {
      const rounded = roundTo(dequantize(x), otherF);
      markGemmOperandImmutable(rounded); // derived once from a tensor nothing writes: its packed panels may be kept
      return rounded;
    });
    return plainFastOperand(v, otherF);
  }
  return quantizedOperand(x, { ...site, hopper: false }); // unscaled codes: decoded, no exponent tables here
}

/** The options {@link prepareOperands} reads (of the normalized {@link GemmOptions}). */
export interface OperandOptions {
  readonly aQuant: GemmOptions['aQuant'];
  readonly bQuant: GemmOptions['bQuant'];
  readonly accumulator: GemmOptions['accumulator'];
}

/** Prepares both operands: quantize Float32Arrays per options, then choose the scaled or dequantize-first path. */
export function prepareOperands(
  a: Float32Array | QuantizedTensor,
  b: Float32Array | QuantizedTensor,
  m: number,
  n: number,
  k: number,
  options: OperandOptions,
): [Operand, Operand] {
  const qa = prepOperand(a, m, k, options.aQuant, 0);
  const qb = prepOperand(b, n, k, options.bQuant, 1);
  const fa = roundingFormatOf(qa, options.aQuant);
  const fb = roundingFormatOf(qb, options.bQuant);
  const scaledA = isScaled(qa);
  const scaledB = isScaled(qb);
  // `given`: passed in quantized (a === qa), not quantized here, so it may be seen again and its derived tables cached.
  const hopper = options.accumulator === 'hopper-fp8';
  const siteA: OperandSite = { rows: m, k, slot: 0, given: a === qa, hopper };
  const siteB: OperandSite = { rows: n, k, slot: 1, given: b === qb, hopper };
  if (scaledA && scaledB)
    return [quantizedOperand(qa as QuantizedTensor, siteA), quantizedOperand(qb as QuantizedTensor, siteB)];
  const weightOnly = scaledA !== scaledB;
  return [
    plainPathOperand(qa, siteA, { format: fa, otherFormat: fb, weightOnly }),
    plainPathOperand(qb, siteB, { format: fb, otherFormat: fa, weightOnly }),
  ];
}
