// The fast quantizer: quantize/dequantize of row-major 2-D tensors per a QuantSpec, by runs of a cell's elements,
// with the vector casts and explicit scratch. Not a semantics of its own: quantize-reference.ts is the definition.

import { type FloatFormat, type IntFormat, signBit } from './formats.js';
import { type RoundingMode, castProfile } from './profiles.js';
import {
  type CellStatsScratch,
  cellLayout,
  cellStats,
  checkShape2d,
  grown,
  overrideTensorAmax,
} from './quant-cells.js';
import {
  type QuantSpec,
  type QuantizeOptions,
  type QuantizedTensor,
  clampScaled,
  elementFormat,
  formatMax,
  clampCodes,
  roundInt,
} from './quant-spec.js';
import { cellParams, quantizedTensor } from './scale-rules.js';
import { type CodeArray, type FastEncoder, allocCodes, decodeTable, encodeArray, fastEncoder } from './vector.js';

export {
  type AmaxScaleRule,
  type DelayedScaleRule,
  type DelayedScalingState,
  type ElementFormat,
  type ElementFormatName,
  type Granularity,
  type MinMaxScaleRule,
  type MultiplierScaleRule,
  type MxScaleRule,
  type NoScaleRule,
  type Nvfp4ScaleRule,
  type FourOverSixRule,
  type PreCastClamp,
  type QuantCodes,
  type QuantSpec,
  type QuantizeOptions,
  type QuantizedTensor,
  type ScaleRule,
  type ScalingOp,
  type StaticScaleRule,
  elementFormat,
  roundInt,
} from './quant-spec.js';
export { type CellLayout, cellLayout, checkShape2d } from './quant-cells.js';
export { delayedScalingState, delayedScalingUpdate } from './scale-rules.js';

const fr = Math.fround;

/**
 * Scratch of quantize calls, grown on demand: per-cell statistics and element factors and the scaled
 * elements (never part of a result), plus the codes and scales of a {@link quantizeTransient} result.
 * One scratch per caller that needs its transient result alive; never shared between threads.
 */
export interface QuantizeScratch extends CellStatsScratch {
  factors: Float32Array<ArrayBuffer>;
  scaled: Float32Array<ArrayBuffer>;
  codes: Uint8Array;
  scales: Float32Array<ArrayBuffer>;
}

/**
 * A {@link QuantizeScratch} with room for `elements` elements and `cells` cells (it grows past them).
 * @example
 * ```ts
 * const scratch = createQuantizeScratch();
 * const q = quantizeTransient(spec, x, [rows, cols], scratch); // valid until scratch is used again
 * ```
 */
export function createQuantizeScratch(elements = 1024, cells = 64): QuantizeScratch {
  const cell = (): Float32Array<ArrayBuffer> => new Float32Array(cells);
  const scratch: ScratchViews = {
    amax: cell(),
    min: cell(),
    max: cell(),
    factors: cell(),
    scaled: new Float32Array(elements),
    codes: new Uint8Array(elements),
    scales: cell(),
    views: { scaledOf: null, scaledBits: null, codes: { base: null, list: [] }, scales: { base: null, list: [] } },
  };
  return scratch;
}

/**
 * A {@link QuantizeScratch} made by {@link createQuantizeScratch}, with typed-array views it reuses: creating a
 * view costs more than quantizing the few elements of a decode step's operand. `scaledBits` views the
 * whole `scaled` array (`scaledOf`); `codes` and `scales` keep the last {@link RECENT_VIEWS} views of each (a decode
 * step alternates a handful of operand shapes). A scratch made elsewhere has no `views` and makes them per call.
 */
interface ScratchViews extends QuantizeScratch {
  readonly views?: {
    scaledOf: Float32Array | null;
    scaledBits: Uint32Array | null;
    readonly codes: RecentViews<Uint8Array>;
    readonly scales: RecentViews<Float32Array>;
  };
}

/** Views `base.subarray(0, n)` of one array `base` (a grown scratch array is a new base: the views are dropped). */
interface RecentViews<T> {
  base: T | null;
  readonly list: T[];
}
const RECENT_VIEWS = 4;

/** `base.subarray(0, n)`: a view kept in `recent` when there is one of that length on `base`. */
function viewOf<T extends Uint8Array | Float32Array>(recent: RecentViews<T> | undefined, base: T, n: number): T {
  if (recent === undefined) return base.subarray(0, n) as T;
  const list = recent.list;
  if (recent.base !== base) {
    recent.base = base;
    list.length = 0;
  }
  for (let i = 0; i < list.length; i++) if ((list[i] as T).length === n) return list[i] as T;
  const v = base.subarray(0, n) as T;
  if (list.length >= RECENT_VIEWS) list.pop();
  list.unshift(v);
  return v;
}

/**
 * The temporaries of {@link quantize} (statistics, factors, scaled elements), reused across calls: a
 * quantize result never holds any of them (its codes and scales are fresh arrays), so this object is
 * invisible to callers; allocating them per call doubles the cost of a decode-step quantization
 * (docs/decisions.md, "Numerics: reference and fast-path files").
 */
const temporaries = createQuantizeScratch();

/**
 * Quantizes a row-major (rows, cols) float32 tensor with `spec` (the definition, step by step, is
 * `quantizeReference` in quantize-reference.ts; this computes the same bits by runs of a cell's elements): per cell computes the scale from
 * the rule, applies it in float32 (`x / s` or `x · factor`), clamps if the spec says so, and casts
 * to the element format (float formats through the cast profile; integer formats by rounding,
 * adding the zero point and saturating). The result keeps the dequant scale per cell.
 *
 * Edge cases (documented in docs/quantization.md): an empty tensor gives empty codes (scales from
 * amax 0); NaN and ±Inf follow the spec's `amaxNan`, clamp and cast profile literally, as the
 * modelled kernel does.
 *
 * @example
 * ```ts
 * const q = quantize(quantPreset('vllm-fp8-token'), x, [tokens, hidden]);
 * const y = dequantize(q); // x ≈ y
 * ```
 */
export function quantize(
  spec: QuantSpec,
  x: Float32Array,
  shape: readonly [number, number],
  options: QuantizeOptions = {},
): QuantizedTensor {
  return quantizeWith(spec, x, shape, options, temporaries, 'kept');
}

/**
 * {@link quantize} whose codes (float formats of at most 8 bits) and scales live in `scratch`: valid only
 * until the next call with the same scratch. For callers that consume the tensor at once and keep
 * nothing of it (gemm's own operand quantization); the values are those of quantize.
 * @internal
 */
export function quantizeTransient(
  spec: QuantSpec,
  x: Float32Array,
  shape: readonly [number, number],
  scratch: QuantizeScratch,
): QuantizedTensor {
  return quantizeWith(spec, x, shape, {}, scratch, 'transient');
}

/**
 * The quantizer of {@link quantize} ('kept': new code and scale arrays) and {@link quantizeTransient} ('transient':
 * codes of ≤ 8-bit formats and scales in `scratch`, valid until its next use).
 */
function quantizeWith(
  spec: QuantSpec,
  x: Float32Array,
  shape: readonly [number, number],
  options: QuantizeOptions,
  scratch: ScratchViews,
  lifetime: 'kept' | 'transient',
): QuantizedTensor {
  const transient = lifetime === 'transient';
  const [rows, cols] = checkShape2d('x', x.length, shape);
  const fmt = elementFormat(spec.format);
  const layout = cellLayout(spec.granularity, rows, cols);
  const stats = cellStats(x, rows, cols, layout, spec, scratch);
  if (options.tensorAmax !== undefined) overrideTensorAmax(stats.amax, layout.count, options.tensorAmax);
  let scales: Float32Array;
  const views = scratch.views;
  if (transient) {
    scratch.scales = grown(scratch.scales, layout.count);
    scales = viewOf(views?.scales, scratch.scales, layout.count);
  } else scales = new Float32Array(layout.count);
  scratch.factors = grown(scratch.factors, layout.count);
  const params = cellParams({
    spec,
    fmt,
    stats,
    layout,
    options,
    scales,
    factors: scratch.factors,
    elements: { x, cols },
  });
  const clamp = spec.clamp ?? 'none';
  const cl = clampCodes[clamp];
  if (cl === undefined)
    throw new Error(`clamp: unknown '${String(clamp)}' (known: ${Object.keys(clampCodes).join(', ')})`);
  const fmax = formatMax(fmt);
  const n = rows * cols;
  // Integer formats: codes in the same pass (intRun); float formats: scaled elements (scaleRun), then the vector cast.
  const ints = fmt.kind === 'int' ? intRunSettings(fmt, spec, n) : null;
  // The scaled elements: the first n of the scratch's `scaled` (the whole buffer, no view per call).
  if (ints === null && scratch.scaled.length < n) scratch.scaled = grown(scratch.scaled, n);
  const scaled = scratch.scaled;
  let scaledBits = views?.scaledBits;
  if (scaledBits === undefined || scaledBits === null || views?.scaledOf !== scaled) {
    scaledBits = new Uint32Array(scaled.buffer, scaled.byteOffset, scaled.length);
    if (views !== undefined) {
      views.scaledBits = scaledBits;
      views.scaledOf = scaled;
    }
  }
  const { factors, op, zeroPoints } = params;
  const kSize = layout.kSize;
  const isDiv = op === 'div';
  // Literals of one fixed key order (no spread): one object shape per kind of run in the hot loop.
  const floatRun: FloatRun = { x, isDiv, cl, fmax, scaled, scaledBits };
  const intCells: IntRun | null =
    ints === null
      ? null
      : {
          x,
          isDiv,
          cl,
          fmax,
          out: ints.out,
          mode: ints.mode,
          rne: ints.rne,
          nanValue: ints.nanValue,
          lo: ints.lo,
          hi: ints.hi,
        };
  // Elements of one cell are consecutive in a row (in the whole tensor for one cell): the factor is read once per run.
  const flat = layout.count === 1;
  const seg = flat ? Math.max(n, 1) : Number.isFinite(kSize) ? kSize : Math.max(cols, 1);
  for (let r = 0; r < (flat ? Math.min(rows, 1) : rows); r++) {
    const base = r * cols;
    const rowCell = flat ? 0 : layout.index(r, 0);
    const width = flat ? n : cols;
    for (let c0 = 0, cell = rowCell; c0 < width; c0 += seg, cell++) {
      const f = factors[cell] as number;
      const end = base + Math.min(width, c0 + seg);
      if (ints === null) scaleRun(floatRun, base + c0, end, f);
      else intRun(intCells as IntRun, base + c0, end, f, zeroPoints ? (zeroPoints[cell] as number) : 0);
    }
  }
  if (fmt.kind === 'int') return quantizedTensor(spec, rows, cols, (ints as IntRunSettings).out, params, layout.shape);
  const zeroRule = spec.negativeZero ?? 'keep';
  if (zeroRule === 'positive') {
    for (let i = 0; i < n; i++) if (scaledBits[i] === 0x80000000) scaledBits[i] = 0;
  } else if (zeroRule === 'negative') {
    for (let i = 0; i < n; i++) if (scaledBits[i] === 0) scaledBits[i] = 0x80000000;
  }
  let codesDst: Uint8Array | undefined;
  if (transient && fmt.bits <= 8) {
    if (scratch.codes.length < n) scratch.codes = new Uint8Array(Math.max(n, 2 * scratch.codes.length));
    codesDst = viewOf(views?.codes, scratch.codes, n);
  }
  const enc = encoderOf(spec, fmt);
  let codes: CodeArray;
  if (enc !== null) {
    codes = codesDst ?? allocCodes(fmt, n);
    enc.encodeBitsInto(scaledBits, n, codes);
  } else {
    const profile = spec.profile ?? 'satfinite';
    const prof = typeof profile === 'string' ? castProfile(profile) : profile;
    codes = encodeArray(
      fmt,
      scaled.subarray(0, n),
      {
        profile: prof,
        mode: spec.mode ?? prof.mode,
        ...(options.randomBits ? { randomBits: options.randomBits } : {}),
      },
      codesDst,
    );
  }
  return quantizedTensor(spec, rows, cols, codes, params, layout.shape);
}

/** The last (format, built-in profile name, mode) {@link encoderOf} resolved, and its encoder. */
let lastEncoder: {
  readonly format: string;
  readonly profile: string;
  readonly mode: RoundingMode | undefined;
  readonly enc: FastEncoder;
} | null = null;

/**
 * The {@link FastEncoder} of a float spec's cast, or null when it rounds stochastically (encodeArray draws
 * its bits). A built-in profile (a name) is resolved once per (format, profile, mode) in a row; a profile
 * record on each call, as encodeArray does.
 */
function encoderOf(spec: QuantSpec, fmt: FloatFormat): FastEncoder | null {
  const profile = spec.profile ?? 'satfinite';
  const last = lastEncoder;
  if (last !== null && last.format === spec.format && last.profile === profile && last.mode === spec.mode)
    return last.enc;
  const prof = typeof profile === 'string' ? castProfile(profile) : profile;
  const mode = spec.mode ?? prof.mode;
  if (mode === 'stochastic') return null;
  const enc = fastEncoder(fmt, prof, mode);
  if (typeof profile === 'string') lastEncoder = { format: spec.format, profile, mode: spec.mode, enc };
  return enc;
}

/** What every cell run of one quantize call shares: the input, the scaling op and the pre-cast clamp. */
interface RunScaling {
  readonly x: Float32Array;
  /** Divide by the cell's factor (else multiply). */
  readonly isDiv: boolean;
  /** The pre-cast clamp's code ({@link clampCodes}). */
  readonly cl: number;
  /** The element format's largest finite magnitude. */
  readonly fmax: number;
}

/** A float format's cell runs: the scaled elements and their bits (one buffer). */
interface FloatRun extends RunScaling {
  readonly scaled: Float32Array;
  readonly scaledBits: Uint32Array;
}

/** Scaled elements x[i]·f (or x[i]/f) of one cell run [from, end), pre-cast clamped, into `scaled`. */
function scaleRun(run: FloatRun, from: number, end: number, f: number): void {
  const { x, scaled, scaledBits, isDiv, cl, fmax } = run;
  for (let i = from; i < end; i++) {
    const v = x[i] as number;
    const p = isDiv ? fr(v / f) : fr(v * f);
    const s = clampScaled(p, cl, fmax);
    // A NaN after scaling is written by bits with x86 SSE's rule: the first NaN operand (the
    // element, then the factor) propagates, and an invalid operation (0/0, ∞·0) gives the default
    // NaN 0xffc00000. V8 reorders NaN·NaN operands differently in its tiers, so the engine's own
    // result is not deterministic.
    if (s !== s)
      scaledBits[i] =
        v !== v
          ? signBit(v)
            ? 0xffc00000
            : 0x7fc00000
          : f !== f
            ? signBit(f)
              ? 0xffc00000
              : 0x7fc00000
            : 0xffc00000;
    else scaled[i] = s;
  }
}

/** What {@link intRun} needs of an integer spec: the codes array it fills, the rounding and the saturation bounds. */
interface IntRunSettings {
  readonly out: Int8Array | Uint8Array;
  readonly mode: RoundingMode;
  readonly rne: boolean;
  readonly nanValue: number;
  readonly lo: number;
  readonly hi: number;
}

/** An integer format's cell runs: the shared scaling and the integer settings. */
interface IntRun extends RunScaling, IntRunSettings {}

function intRunSettings(fmt: IntFormat, spec: QuantSpec, n: number): IntRunSettings {
  const mode = spec.mode ?? 'rne';
  const nanValue = (spec.intNan ?? 'min') === 'min' ? fmt.min : 0;
  return {
    out: fmt.signed ? new Int8Array(n) : new Uint8Array(n),
    mode,
    rne: mode === 'rne',
    nanValue,
    lo: fmt.min,
    hi: fmt.max,
  };
}

/** 1.5·2^52: for |v| < 2^51, (v + RNE_MAGIC) − RNE_MAGIC is v rounded to an integer, ties to even (the double sum's own rounding). */
const RNE_MAGIC = 6755399441055744;

/**
 * The integer codes of one cell run [from, end) in one pass: scale, pre-cast clamp, round with the spec's
 * mode, add the cell's zero point `zp`, saturate; a NaN gives the spec's NaN code. Each step is the one a
 * float format takes through its `scaled` array (a float32 value, stored and read back unchanged), so the
 * codes are those of roundInt and the clamp; `negativeZero` cannot matter (±0 both round to code 0).
 */
function intRun(run: IntRun, from: number, end: number, f: number, zp: number): void {
  const { x, isDiv, cl, fmax, out, mode, rne, nanValue, lo, hi } = run;
  for (let i = from; i < end; i++) {
    const v = x[i] as number;
    const s = clampScaled(isDiv ? fr(v / f) : fr(v * f), cl, fmax);
    if (s !== s) {
      out[i] = nanValue;
      continue;
    }
    // roundInt(s, 'rne') by the magic-number sum (equal up to the sign of a zero, which code 0 does not keep).
    const q = (rne && s > -(2 ** 51) && s < 2 ** 51 ? s + RNE_MAGIC - RNE_MAGIC : roundInt(s, mode)) + zp;
    out[i] = q < lo ? lo : q > hi ? hi : q;
  }
}

/**
 * The element values of a quantized tensor without scales: decoded float codes, or integer codes
 * minus their zero point. `out[i]·scale(i)` is the dequantized value.
 */
export function quantizedValues(q: QuantizedTensor, out?: Float32Array): Float32Array {
  const [rows, cols] = q.shape;
  const n = rows * cols;
  const dst = out ?? new Float32Array(n);
  const fmt = elementFormat(q.spec.format);
  if (fmt.kind === 'float') {
    if (fmt.bits > 19) {
      new Uint32Array(dst.buffer, dst.byteOffset, n).set(q.codes.subarray(0, n));
      return dst;
    }
    const table = decodeTable(fmt);
    for (let i = 0; i < n; i++) dst[i] = table[q.codes[i] as number] as number;
    return dst;
  }
  const layout = cellLayout(q.spec.granularity, rows, cols);
  const zps = q.zeroPoints;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      dst[i] = (q.codes[i] as number) - (zps ? (zps[layout.index(r, c)] as number) : 0);
    }
  }
  return dst;
}

/**
 * Dequantizes: `fl((q − zp) · s)` per element with the cell's dequant scale `s` (NVFP4:
 * `fl(q · fl(s · globalScale))`). A NaN code or a NaN scale gives the canonical NaN 0x7fc00000.
 *
 * @example
 * ```ts
 * const y = dequantize(quantize(spec, x, [rows, cols]));
 * ```
 */
export function dequantize(q: QuantizedTensor, out?: Float32Array): Float32Array {
  const [rows, cols] = q.shape;
  const values = quantizedValues(q, out);
  const layout = cellLayout(q.spec.granularity, rows, cols);
  const g = q.globalScale;
  const eff = g === undefined ? q.scales : q.scales.map((s) => fr(s * g));
  const valueBits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const kSize = layout.kSize;
  for (let r = 0; r < rows; r++) {
    const rowCell = layout.index(r, 0);
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      const y = fr((values[i] as number) * (eff[rowCell + Math.floor(c / kSize)] as number));
      // NaN·NaN takes the sign of whichever operand the engine puts first: store one canonical NaN.
      if (Number.isNaN(y)) valueBits[i] = 0x7fc00000;
      else values[i] = y;
    }
  }
  return values;
}
