// The reference quantizer: quantize/dequantize of a row-major (rows, cols) tensor per a QuantSpec, one element at a
// time with the scalar cast and the scale-rule table. Written for clarity, not speed (quantize.ts is the fast path).

import { decode, signBit } from './formats.js';
import { castProfile } from './profiles.js';
import { type AmaxNanRule, type CellStats, cellLayout, checkShape2d, overrideTensorAmax } from './quant-cells.js';
import {
  type QuantCodes,
  type QuantSpec,
  type QuantizeOptions,
  type QuantizedTensor,
  clampCodes,
  clampScaled,
  elementFormat,
  formatMax,
  roundInt,
} from './quant-spec.js';
import { scalarEncoder } from './round.js';
import { cellParams, quantizedTensor } from './scale-rules.js';
import { allocCodes } from './vector.js';

const fr = Math.fround;

/** Per-cell amax, min and max of x, element by element (a NaN is skipped, or makes its cell's statistics NaN). */
function referenceCellStats(
  x: Float32Array,
  rows: number,
  cols: number,
  cellOf: (r: number, c: number) => number,
  count: number,
  amaxNan: AmaxNanRule,
): CellStats {
  const amax = new Float32Array(count);
  const min = new Float32Array(count).fill(Infinity);
  const max = new Float32Array(count).fill(-Infinity);
  const hasNan = new Uint8Array(count);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const cell = cellOf(r, c);
      const v = x[r * cols + c] as number;
      if (Number.isNaN(v)) {
        hasNan[cell] = 1;
        continue;
      }
      // Strict comparisons: the first of +0 and −0 seen stays (C `<`/`>` scans, not fminf/fmaxf).
      if (Math.abs(v) > (amax[cell] as number)) amax[cell] = Math.abs(v);
      if (v < (min[cell] as number)) min[cell] = v;
      if (v > (max[cell] as number)) max[cell] = v;
    }
  }
  for (let i = 0; i < count; i++) {
    if (amaxNan === 'propagate' && hasNan[i] === 1) amax[i] = min[i] = max[i] = Number.NaN;
    // Empty cells (only in empty tensors): min = max = 0.
    if (min[i] === Infinity) min[i] = 0;
    if (max[i] === -Infinity) max[i] = 0;
  }
  return { amax, min, max };
}

/** The float32 NaN with the given bits, as a number (its sign survives the float32 → double read). */
function nanWithBits(bits: number): number {
  return new Float32Array(new Uint32Array([bits]).buffer)[0] as number;
}

/**
 * The reference of {@link quantize}:
 *
 * ```
 * cells  = layout of spec.granularity over (rows, cols)
 * stats  = amax (min, max) per cell
 * params = scaleRules[spec.scale.kind]: validate, then per cell a dequant scale s and a factor f
 * for each element x (cell c):
 *   p = op = 'div' ? fl(x / f_c) : fl(x · f_c)
 *   p = clamp(p, ±max)                      // spec.clamp
 *   p = NaN ? x86 SSE NaN (x's, else f's, else the default −NaN) : p
 *   p = −0 → +0                              // spec.negativeZero 'positive'
 *   p = +0 → −0                              // spec.negativeZero 'negative'
 *   q = float: encode(p) with the cast profile; int: sat(round(p) + zp_c), NaN → intNan
 * ```
 *
 * Same arguments, errors and bits (codes, scales, zero points, scale codes, global scale, state) as
 * {@link quantize}; tests compare them with `Object.is`.
 */
export function quantizeReference(
  spec: QuantSpec,
  x: Float32Array,
  shape: readonly [number, number],
  options: QuantizeOptions = {},
): QuantizedTensor {
  const [rows, cols] = checkShape2d('x', x.length, shape);
  const fmt = elementFormat(spec.format);
  const layout = cellLayout(spec.granularity, rows, cols);
  const cellOf = (r: number, c: number): number => layout.index(r, c);
  const stats = referenceCellStats(x, rows, cols, cellOf, layout.count, spec.amaxNan ?? 'ignore');
  if (options.tensorAmax !== undefined) overrideTensorAmax(stats.amax, layout.count, options.tensorAmax);
  const [scales, factors] = [new Float32Array(layout.count), new Float32Array(layout.count)];
  const params = cellParams({ spec, fmt, stats, layout, options, scales, factors, elements: { x, cols } });
  const clamp = spec.clamp ?? 'none';
  const clampCode = clampCodes[clamp];
  if (clampCode === undefined)
    throw new Error(`clamp: unknown '${String(clamp)}' (known: ${Object.keys(clampCodes).join(', ')})`);
  const fmax = formatMax(fmt);
  const n = rows * cols;
  // The scaled elements, as float32 (NaN bits included).
  const scaled = new Float32Array(n);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      const v = x[i] as number;
      const f = params.factors[cellOf(r, c)] as number;
      let p = clampScaled(params.op === 'div' ? fr(v / f) : fr(v * f), clampCode, fmax);
      // x86 SSE: the first NaN operand (the element, then the factor) propagates; an invalid operation gives 0xffc00000.
      if (Number.isNaN(p))
        p = nanWithBits(
          Number.isNaN(v)
            ? signBit(v)
              ? 0xffc00000
              : 0x7fc00000
            : Number.isNaN(f)
              ? signBit(f)
                ? 0xffc00000
                : 0x7fc00000
              : 0xffc00000,
        );
      if (Object.is(p, -0) && (spec.negativeZero ?? 'keep') === 'positive') p = 0;
      if (Object.is(p, 0) && spec.negativeZero === 'negative') p = -0;
      scaled[i] = p;
    }
  }
  let codes: QuantCodes;
  if (fmt.kind === 'float') {
    const profile = typeof spec.profile === 'object' ? spec.profile : castProfile(spec.profile ?? 'satfinite');
    const mode = spec.mode ?? profile.mode;
    const encode = scalarEncoder(fmt, profile, mode);
    const bits = options.randomBits;
    if (mode === 'stochastic' && bits === undefined)
      throw new Error('encodeArray: stochastic rounding needs randomBits (Uint32Array or Rng)');
    if (mode === 'stochastic' && bits instanceof Uint32Array && bits.length < n)
      throw new Error(`encodeArray: randomBits has ${bits.length} elements, need ${n}`);
    codes = allocCodes(fmt, n);
    for (let i = 0; i < n; i++) {
      const random =
        mode !== 'stochastic' || bits === undefined ? undefined : bits instanceof Uint32Array ? bits[i] : bits.uint32();
      codes[i] = encode(scaled[i] as number, random);
    }
  } else {
    const mode = spec.mode ?? 'rne';
    const out = fmt.signed ? new Int8Array(n) : new Uint8Array(n);
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const i = r * cols + c;
        const v = scaled[i] as number;
        const zp = params.zeroPoints ? (params.zeroPoints[cellOf(r, c)] as number) : 0;
        out[i] = Number.isNaN(v)
          ? (spec.intNan ?? 'min') === 'min'
            ? fmt.min
            : 0
          : Math.min(fmt.max, Math.max(fmt.min, roundInt(v, mode) + zp));
      }
    }
    codes = out;
  }
  return quantizedTensor(spec, rows, cols, codes, params, layout.shape);
}

/**
 * The reference of quantizedValues: per element the decoded float code, or the integer code minus its
 * cell's zero point.
 */
export function quantizedValuesReference(q: QuantizedTensor): Float32Array {
  const [rows, cols] = q.shape;
  const fmt = elementFormat(q.spec.format);
  const layout = cellLayout(q.spec.granularity, rows, cols);
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      const code = q.codes[i] as number;
      out[i] =
        fmt.kind === 'float'
          ? decode(fmt, code)
          : code - (q.zeroPoints ? (q.zeroPoints[layout.index(r, c)] as number) : 0);
    }
  }
  return out;
}

/**
 * The reference of dequantize: `fl(value · s)` per element with its cell's dequant scale `s`
 * (NVFP4: `s = fl(s_block · globalScale)`); any NaN result is the canonical NaN 0x7fc00000.
 */
export function dequantizeReference(q: QuantizedTensor): Float32Array {
  const [rows, cols] = q.shape;
  const layout = cellLayout(q.spec.granularity, rows, cols);
  const values = quantizedValuesReference(q);
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      const s = q.scales[layout.index(r, c)] as number;
      const y = fr((values[i] as number) * (q.globalScale === undefined ? s : fr(s * q.globalScale)));
      out[i] = Number.isNaN(y) ? nanWithBits(0x7fc00000) : y;
    }
  }
  return out;
}
