// Quantizers as data: a spec (element format, granularity, scale rule, scaling op, clamp, cast profile) and one
// generic quantize/dequantize pair for row-major 2-D tensors. Not GEMM (gemm.ts), not the named presets (presets.ts).

import type { Rng } from '../rng.js';
import { type FloatFormat, type FloatFormatName, type IntFormat, type IntFormatName, floatFormats, intFormats, signBit } from './formats.js';
import { type CastProfile, type CastProfileName, type RoundingMode, castProfile } from './profiles.js';
import { FLT_MAX, type Pow2Rounding, float32Exponent, fmaxf, fminf, pow2Exponent } from './scales.js';
import { type CodeArray, decodeTable, encodeArray } from './vector.js';
import { type ScalarEncoder, scalarEncoder } from './round.js';

/** Element formats a quantizer can target: every float format and every integer format. */
export type ElementFormatName = FloatFormatName | IntFormatName;

/**
 * Which elements share one scale, for a row-major (rows, cols) tensor. Rows are tokens
 * (activations) or output channels (weights); groups and blocks run along a row (the K dimension).
 * A last group or block shorter than its size is allowed (ONNX blocked quantization: ceil).
 */
export type Granularity =
  /** One scale for the whole tensor; scale shape []. */
  | { readonly kind: 'tensor' }
  /** One scale per row (per token / per output channel); scale shape [rows]. */
  | { readonly kind: 'row' }
  /** 1×G groups along each row (DeepSeek 1×128 activations, MX 1×32, NVFP4 1×16, GPTQ g128); scale shape [rows, ⌈cols/G⌉]. */
  | { readonly kind: 'group'; readonly size: number }
  /** B×B blocks (DeepSeek 128×128 weights); scale shape [⌈rows/B⌉, ⌈cols/B⌉]. */
  | { readonly kind: 'block'; readonly size: number };

/** No scaling: elements are rounded to the format as they are (s = 1). */
export interface NoScaleRule {
  readonly kind: 'none';
}

/** A given dequant scale (and zero point) for every cell: ONNX QuantizeLinear, vLLM static scales. */
export interface StaticScaleRule {
  readonly kind: 'static';
  /** One dequant scale for all cells, or one per cell (row-major over the scale shape). */
  readonly scale: number | Float32Array;
  /** Integer zero point(s) for integer formats. @defaultValue 0 */
  readonly zeroPoint?: number | Int32Array;
}

/**
 * Symmetric absmax scaling: `s = clamp(amax, amaxFloor, amaxCeiling) / divisor`, then
 * `s = max(s, scaleFloor)`, then optionally a power of two. All ops in float32.
 */
export interface AmaxScaleRule {
  readonly kind: 'amax';
  /** @defaultValue the format's largest finite value (448 for e4m3fn, 127 for int8) */
  readonly divisor?: number;
  /** Lower clamp of amax (DeepGEMM 1e-4, vLLM group eps 1e-10). @defaultValue none */
  readonly amaxFloor?: number;
  /** Upper clamp of amax (vLLM `scale_ub`). @defaultValue none */
  readonly amaxCeiling?: number;
  /** Lower clamp of s (vLLM per-token `1/(448·512)`). @defaultValue none */
  readonly scaleFloor?: number;
  /** Round s to a power of two (UE8M0 scales) with this rule. @defaultValue none */
  readonly pow2?: Pow2Rounding;
  /** Clamp of the power-of-two exponent. @defaultValue [-127, 127] (DeepGEMM `ceil_to_ue8m0`: [-126, 127]) */
  readonly pow2Range?: readonly [number, number];
  /** What `amaxFloor` makes of a NaN amax: the floor (`fmaxf`, CUDA kernels) or NaN (`torch.clamp`, DeepGEMM). @defaultValue 'floor' */
  readonly amaxFloorNan?: 'floor' | 'propagate';
  /**
   * A NaN or infinite s under `pow2`: kept as it is, or rounded from its float32 bits like a finite
   * one (exponent field 255, plus one for a NaN's mantissa; DeepGEMM `ceil_to_ue8m0`) and clamped
   * to `pow2Range`. @defaultValue 'keep'
   */
  readonly pow2NonFinite?: 'keep' | 'bits';
}

/**
 * MX shared scale (OCP MX v1.0): an E8M0 power of two per block. `floor` is the OCP rule
 * `2^(⌊log2 amax⌋ − emax_elem)`; the other roundings apply to `s = amax / max_elem` (TE/torchao
 * RCEIL compute it as `amax · fl(1/max)`, used for `ceil-bits`). Exponent clamped to [−127, 127];
 * a non-finite amax gives the NaN scale 0xFF (the whole block decodes to NaN).
 */
export interface MxScaleRule {
  readonly kind: 'mx';
  readonly exponent: Pow2Rounding;
}

/**
 * A quantization multiplier (TransformerEngine current scaling, torchao float8): elements are
 * `x · mult` with `mult = (max · 2^-margin) / max(amax, amaxFloor)`; the dequant scale stored is
 * `fl(1 / mult)` (TE `scale_inv`).
 */
export interface MultiplierScaleRule {
  readonly kind: 'multiplier';
  /** Lower clamp of amax. @defaultValue none */
  readonly amaxFloor?: number;
  /** Margin in powers of two. @defaultValue 0 */
  readonly margin?: number;
  /** Round the multiplier down to a power of two from its bits (TE `force_pow_2_scales`: `bits & 0xFF800000`). @defaultValue false */
  readonly pow2Down?: boolean;
  /** Round the multiplier to a power of two with this rule instead (torchao `exp2(floor(log2 s))`: `exp2-floor-log2`). @defaultValue none */
  readonly pow2?: Pow2Rounding;
  /**
   * `one`: a zero or non-finite amax gives mult = 1 (TE kernel); `zero`: only a zero amax gives 1, a
   * NaN or infinite one the division as written (TE's PyTorch reference); `literal`: the division as
   * written (torchao). @defaultValue 'one'
   */
  readonly invalidAmax?: 'one' | 'zero' | 'literal';
  /** Precision of the division `max / amax`: float32 (TE `__fdiv_rn`) or double then float32 (torchao). @defaultValue 'fp32' */
  readonly precision?: 'fp32' | 'fp64';
}

/**
 * TransformerEngine delayed scaling: the multiplier comes from an amax history of earlier steps;
 * the state lives in a {@link DelayedScalingState} passed to and returned by {@link quantize}.
 */
export interface DelayedScaleRule {
  readonly kind: 'delayed';
  /** @defaultValue 1024 */
  readonly historyLength?: number;
  /** @defaultValue 0 */
  readonly margin?: number;
  /** `max` over the window, or the `most-recent` amax. @defaultValue 'max' */
  readonly algorithm?: 'max' | 'most-recent';
}

/**
 * Asymmetric min/max scaling with a zero point (integer formats): `s = (max − min) / (qmax − qmin)`,
 * `zp = clamp(round(qmin − min/s), qmin, qmax)`; GPTQ, AWQ and vLLM's azp int8 are instances.
 */
export interface MinMaxScaleRule {
  readonly kind: 'minmax';
  /** Extend the range to contain 0 (GPTQ). @defaultValue false */
  readonly includeZero?: boolean;
  /** GPTQ `sym`: range ±max(|min|, max) (min only when negative) and zero point at the middle code. @defaultValue false */
  readonly symmetric?: boolean;
  /** Lower clamp of max − min (AWQ 1e-5). @defaultValue none */
  readonly rangeFloor?: number;
  /** GPTQ: a range with min = max = 0 becomes (−1, +1). @defaultValue false */
  readonly unitIfZero?: boolean;
}

/**
 * NVFP4 two-level scaling (TransformerEngine): per-tensor `S_enc = min(448·6 / amax, FLT_MAX)` (1 if
 * amax is 0 or S_enc is 0), `S_dec = fl(1/S_enc)`; per block an E4M3 (satfinite) scale
 * `e4m3(block_amax · fl(S_enc · fl(1/6)))`; elements `x · min(fl(1/(s_block · S_dec)), FLT_MAX)`.
 */
export interface Nvfp4ScaleRule {
  readonly kind: 'nvfp4';
  /**
   * When `S_enc` becomes 1: `kernel` = global amax 0, `S_enc` 0 or NaN (TE `core_nvfp4.cuh`);
   * `reference` = `S_enc` 0 only, so an all-zero tensor keeps FLT_MAX and a NaN amax gives NaN
   * (TE `reference_nvfp4.py`). @defaultValue 'kernel'
   */
  readonly unitEncode?: 'kernel' | 'reference';
}

/** How a scale is chosen. */
export type ScaleRule =
  | NoScaleRule
  | StaticScaleRule
  | AmaxScaleRule
  | MxScaleRule
  | MultiplierScaleRule
  | DelayedScaleRule
  | MinMaxScaleRule
  | Nvfp4ScaleRule;

/**
 * How `amax`/`minmax`/`static` scales are applied to the elements (float32 ops):
 * `divide` = `x / s` (vLLM per-token and group, DeepSeek Triton, ONNX, GPTQ);
 * `reciprocal` = `x · fl(1/s)` (vLLM per-tensor, DeepGEMM);
 * `max-over-amax` = `x · fl(divisor/amax)`, 0 when amax is 0 (vLLM `dynamic_scaled_int8_quant`).
 * Multiplier, delayed, MX and NVFP4 rules always multiply.
 */
export type ScalingOp = 'divide' | 'reciprocal' | 'max-over-amax';

/**
 * A clamp of the scaled value to ±max before the cast: `fminf-first` = `fmaxf(−max, fminf(v, max))`
 * (vLLM `scaled_fp8_conversion`: NaN → +max); `fmaxf-first` = `fminf(fmaxf(v, −max), max)` (vLLM
 * per-token-group: NaN → −max); `propagate-nan` = `torch.clamp` (NaN stays NaN).
 */
export type PreCastClamp = 'none' | 'fminf-first' | 'fmaxf-first' | 'propagate-nan';

/** A quantizer: plain data; {@link quantize} interprets it. */
export interface QuantSpec {
  /** Preset or user name, for messages and reports. */
  readonly name?: string;
  readonly format: ElementFormatName;
  readonly granularity: Granularity;
  readonly scale: ScaleRule;
  /** @defaultValue 'divide' */
  readonly scaling?: ScalingOp;
  /** @defaultValue 'none' */
  readonly clamp?: PreCastClamp;
  /** Cast profile of float element formats. @defaultValue 'satfinite' */
  readonly profile?: CastProfileName | CastProfile;
  /** Rounding mode (float: the profile's by default; integer: `rne`, `rtz` or `rha`). */
  readonly mode?: RoundingMode;
  /** Integer formats: NaN becomes the format's minimum (ONNX Runtime) or 0 (PTX `cvt.rni.sat`). @defaultValue 'min' */
  readonly intNan?: 'min' | 'zero';
  /** Whether a NaN element makes amax/min/max NaN (`torch.amax`) or is skipped (CUDA `fmaxf`). @defaultValue 'ignore' */
  readonly amaxNan?: 'ignore' | 'propagate';
  /** A scaled element that is exactly −0 before the cast: kept, or made +0 (TE's NVFP4 reference tests `x >= 0.0` first). @defaultValue 'keep' */
  readonly negativeZero?: 'keep' | 'positive';
}

/** Explicit state of TransformerEngine delayed scaling (never hidden inside the quantizer). */
export interface DelayedScalingState {
  /** amax history, index 0 = the step being recorded (TE layout). */
  readonly amaxHistory: Float32Array;
  /** The multiplier used for the next quantization (TE `scale`). */
  readonly scale: number;
  /** fl(1/scale), the dequant scale (TE `scale_inv`). */
  readonly scaleInv: number;
}

/** Codes of a quantized tensor: float formats as bit codes, integer formats as their integer values. */
export type QuantCodes = CodeArray | Int8Array;

/** The result of {@link quantize}: codes, scales and everything needed to dequantize. */
export interface QuantizedTensor {
  readonly spec: QuantSpec;
  /** (rows, cols) of the original tensor. */
  readonly shape: readonly [number, number];
  /** One code per element, row-major. */
  readonly codes: QuantCodes;
  /** Dequant scale per cell (x ≈ (q − zp)·s, times `globalScale` when present); NaN for a NaN MX scale. */
  readonly scales: Float32Array;
  /** Shape of `scales`: [] per tensor, [rows], [rows, groups] or [blockRows, blockCols]. */
  readonly scaleShape: readonly number[];
  /** Codes of the scales in their own format: E8M0 (MX) or E4M3FN (NVFP4). */
  readonly scaleCodes?: Uint8Array;
  /** Integer zero point per cell (asymmetric integer quantization). */
  readonly zeroPoints?: Int32Array;
  /** Second-level dequant scale (NVFP4 `S_dec`). */
  readonly globalScale?: number;
  /** Updated delayed-scaling state (delayed rules only). */
  readonly state?: DelayedScalingState;
}

/** Options of {@link quantize}. */
export interface QuantizeOptions {
  /** Delayed scaling: the state from the previous step. @defaultValue {@link delayedScalingState}(rule) */
  readonly state?: DelayedScalingState;
  /** Random bits for `stochastic` float casts (one uint32 per element, or a stream). */
  readonly randomBits?: Uint32Array | Rng;
}

/** The record of an element format: a float format or an integer format. */
export type ElementFormat = FloatFormat | IntFormat;

/** The element format record of a spec. */
export function elementFormat(name: ElementFormatName): ElementFormat {
  const f = (floatFormats as Record<string, FloatFormat>)[name] ?? (intFormats as Record<string, IntFormat>)[name];
  if (f === undefined) {
    throw new Error(`format: unknown element format '${name}' (known: ${[...Object.keys(floatFormats), ...Object.keys(intFormats)].join(', ')})`);
  }
  return f;
}

/** Largest finite magnitude of the element format (int: its max). */
function formatMax(f: ElementFormat): number {
  return f.kind === 'float' ? f.maxFinite : f.max;
}

/** Cell layout of a granularity over (rows, cols). */
export interface CellLayout {
  readonly count: number;
  readonly shape: readonly number[];
  /** Cells per row of the scale grid (1 for tensor/row). */
  readonly perRow: number;
  /** Index of the cell holding element (r, c). */
  index(r: number, c: number): number;
  /** Elements per cell along K (Infinity for tensor/row: the scale is constant along K). */
  readonly kSize: number;
}

/**
 * A {@link CellLayout} as one class (one object shape, `index` on the prototype, no closure per
 * call): cell of (r, c) = ⌊r / rowDiv⌋ · rowStride + ⌊c / colDiv⌋.
 */
class GridLayout implements CellLayout {
  constructor(
    readonly count: number,
    readonly shape: readonly number[],
    readonly perRow: number,
    readonly kSize: number,
    private readonly rowDiv: number,
    private readonly rowStride: number,
    private readonly colDiv: number,
  ) {}

  index(r: number, c: number): number {
    return Math.floor(r / this.rowDiv) * this.rowStride + Math.floor(c / this.colDiv);
  }
}

/** The scale cells of `granularity` over a (rows, cols) tensor. */
export function cellLayout(granularity: Granularity, rows: number, cols: number): CellLayout {
  switch (granularity.kind) {
    case 'tensor':
      return new GridLayout(1, [], 1, Infinity, 1, 0, Infinity);
    case 'row':
      return new GridLayout(rows, [rows], 1, Infinity, 1, 1, Infinity);
    case 'group': {
      const g = checkSize(granularity.size, 'granularity.size');
      const ng = Math.ceil(cols / g);
      return new GridLayout(rows * ng, [rows, ng], ng, g, 1, ng, g);
    }
    case 'block': {
      const b = checkSize(granularity.size, 'granularity.size');
      const nbr = Math.ceil(rows / b);
      const nbc = Math.ceil(cols / b);
      return new GridLayout(nbr * nbc, [nbr, nbc], nbc, b, b, nbc, b);
    }
    default:
      throw new Error(`granularity.kind: unknown '${(granularity as { kind: string }).kind}' (known: tensor, row, group, block)`);
  }
}

function checkSize(size: number, field: string): number {
  if (!Number.isInteger(size) || size < 1) throw new Error(`${field}: expected a positive integer, got ${size}`);
  return size;
}

/** Checks a (rows, cols) shape against a data length; throws an error naming the field. */
export function checkShape2d(field: string, length: number, shape: readonly number[]): readonly [number, number] {
  const [rows, cols] = shape;
  if (shape.length !== 2 || rows === undefined || cols === undefined || !Number.isInteger(rows) || !Number.isInteger(cols) || rows < 0 || cols < 0) {
    throw new Error(`${field} shape: expected [rows, cols] of non-negative integers, got [${shape.join(', ')}]`);
  }
  if (rows * cols !== length) throw new Error(`${field}: ${length} elements do not fill shape [${rows}, ${cols}] (${rows * cols})`);
  return [rows, cols];
}

/**
 * Initial TransformerEngine delayed-scaling state for `rule`: an all-zero history and scale 1.
 *
 * @example
 * ```ts
 * const state = delayedScalingState({ kind: 'delayed', historyLength: 16 });
 * ```
 */
export function delayedScalingState(rule: DelayedScaleRule): DelayedScalingState {
  const len = checkSize(rule.historyLength ?? 1024, 'scale.historyLength');
  return { amaxHistory: new Float32Array(len), scale: 1, scaleInv: 1 };
}

/**
 * One TransformerEngine `amax_and_scale_update` step: records `amax` as the newest history entry,
 * rolls the history (the newest moves to the end, slot 0 is cleared for the next step), takes the
 * window max (`fmaxf`, NaN skipped) or the newest amax, and sets `scale = (maxFinite·2^-margin)/amax`
 * when that amax is finite and > 0, else keeps the previous scale; an infinite scale becomes FLT_MAX.
 * Source: NVIDIA/TransformerEngine `common/recipe/delayed_scaling.cu : kernel`.
 */
export function delayedScalingUpdate(rule: DelayedScaleRule, state: DelayedScalingState, amax: number, maxFinite: number): DelayedScalingState {
  const hist = state.amaxHistory;
  const len = hist.length;
  const last = Math.fround(amax);
  const next = new Float32Array(len);
  let windowMax = 0;
  for (let i = 0; i < len; i++) {
    const a = i < len - 1 ? (hist[i + 1] as number) : last;
    windowMax = fmaxf(windowMax, a);
    next[i] = i > 0 ? a : 0;
  }
  const used = (rule.algorithm ?? 'max') === 'most-recent' ? last : windowMax;
  const scaledMax = Math.fround(maxFinite * 2 ** -(rule.margin ?? 0));
  let scale = Number.isFinite(used) && used > 0 ? Math.fround(scaledMax / used) : state.scale;
  if (scale === Infinity) scale = Math.fround(FLT_MAX);
  return { amaxHistory: next, scale, scaleInv: Math.fround(1 / scale) };
}

/** Per-cell statistics of x. */
interface CellStats {
  amax: Float32Array;
  min: Float32Array;
  max: Float32Array;
}

/**
 * Scratch of one {@link quantize} call (per-cell statistics and element factors, the scaled
 * elements), grown on demand and never returned: small calls repeated per decode step allocate
 * only what the result keeps.
 */
const scratch: Record<'amax' | 'min' | 'max' | 'factors' | 'scaled', Float32Array<ArrayBuffer>> = { amax: new Float32Array(64), min: new Float32Array(64), max: new Float32Array(64), factors: new Float32Array(64), scaled: new Float32Array(1024) };

function grown(a: Float32Array<ArrayBuffer>, n: number): Float32Array<ArrayBuffer> {
  return a.length >= n ? a : new Float32Array(Math.max(n, 2 * a.length));
}

/** Per-cell statistics of x, in the scratch arrays (valid for indices below `layout.count`). */
function cellStats(x: Float32Array, rows: number, cols: number, layout: CellLayout, propagateNan: boolean, needRange: boolean): CellStats {
  if (!needRange) return cellAmax(x, rows, cols, layout, propagateNan);
  const count = layout.count;
  const amax = (scratch.amax = grown(scratch.amax, count));
  const min = (scratch.min = grown(scratch.min, count));
  const max = (scratch.max = grown(scratch.max, count));
  amax.fill(0, 0, count);
  min.fill(Infinity, 0, count);
  max.fill(-Infinity, 0, count);
  const kSize = layout.kSize;
  // A cell covers `seg` consecutive elements of a row: index(r, c) = index(r, 0) + ⌊c / kSize⌋ for every layout.
  const seg = Number.isFinite(kSize) ? kSize : Math.max(cols, 1);
  for (let r = 0; r < rows; r++) {
    const rowCell = layout.index(r, 0);
    const base = r * cols;
    for (let c0 = 0, cell = rowCell; c0 < cols; c0 += seg, cell++) {
      const cEnd = Math.min(cols, c0 + seg);
      let am = amax[cell] as number;
      let mn = min[cell] as number;
      let mx = max[cell] as number;
      let nan = false;
      for (let c = c0; c < cEnd; c++) {
        const v = x[base + c] as number;
        if (v !== v) {
          nan = true;
          continue;
        }
        const a = Math.abs(v);
        if (a > am) am = a;
        if (v < mn) mn = v;
        if (v > mx) mx = v;
      }
      if (nan && propagateNan) {
        am = Number.NaN;
        mn = Number.NaN;
        mx = Number.NaN;
      }
      amax[cell] = am;
      min[cell] = mn;
      max[cell] = mx;
    }
  }
  // Empty cells (only possible for empty tensors) have amax 0 and min = max = 0.
  for (let i = 0; i < count; i++) {
    if (min[i] === Infinity) min[i] = 0;
    if (max[i] === -Infinity) max[i] = 0;
  }
  return { amax, min, max };
}

/** {@link cellStats} for rules that read only amax (every rule but `minmax`): min and max are left unset. */
function cellAmax(x: Float32Array, rows: number, cols: number, layout: CellLayout, propagateNan: boolean): CellStats {
  const count = layout.count;
  const amax = (scratch.amax = grown(scratch.amax, count));
  amax.fill(0, 0, count);
  // One cell (per-tensor scale): the whole tensor is one run of elements.
  const flat = count === 1;
  const seg = flat ? Math.max(rows * cols, 1) : Number.isFinite(layout.kSize) ? layout.kSize : Math.max(cols, 1);
  for (let r = 0; r < (flat ? Math.min(rows, 1) : rows); r++) {
    const rowCell = flat ? 0 : layout.index(r, 0);
    const base = r * cols;
    const width = flat ? rows * cols : cols;
    for (let c0 = 0, cell = rowCell; c0 < width; c0 += seg, cell++) {
      const end = base + Math.min(width, c0 + seg);
      let am = amax[cell] as number;
      let nan = false;
      for (let i = base + c0; i < end; i++) {
        const a = Math.abs(x[i] as number);
        if (a > am) am = a; // false for NaN: skipped
        else if (a !== a) nan = true;
      }
      amax[cell] = nan && propagateNan ? Number.NaN : am;
    }
  }
  return { amax, min: scratch.min, max: scratch.max };
}

/** Per-cell quantization parameters: dequant scale, element op, zero point. */
interface CellParams {
  /** Dequant scale per cell. */
  scales: Float32Array;
  /** Per cell: the divisor (op 'div') or multiplier (op 'mul') applied to elements. */
  factors: Float32Array;
  op: 'div' | 'mul';
  zeroPoints?: Int32Array;
  scaleCodes?: Uint8Array;
  globalScale?: number;
  state?: DelayedScalingState;
}

const fr = Math.fround;

function minmaxParams(rule: MinMaxScaleRule, fmt: ElementFormat, stats: CellStats, count: number): { scales: Float32Array; zeroPoints: Int32Array } {
  if (fmt.kind !== 'int') throw new Error(`scale.kind 'minmax' needs an integer format, got '${fmt.name}'`);
  const levels = fmt.max - fmt.min;
  const scales = new Float32Array(count);
  const zeroPoints = new Int32Array(count);
  for (let i = 0; i < count; i++) {
    let lo = stats.min[i] as number;
    let hi = stats.max[i] as number;
    if (rule.includeZero) {
      lo = Math.min(lo, 0);
      hi = Math.max(hi, 0);
      if (Number.isNaN(stats.min[i] as number)) lo = hi = Number.NaN;
    }
    if (rule.symmetric) {
      hi = Math.max(Math.abs(lo), hi);
      if (lo < 0) lo = -hi;
    }
    if (rule.unitIfZero && lo === 0 && hi === 0) {
      lo = -1;
      hi = 1;
    }
    let range = fr(hi - lo);
    if (rule.rangeFloor !== undefined && range < rule.rangeFloor) range = fr(rule.rangeFloor);
    const s = fr(range / levels);
    scales[i] = s;
    const zp = rule.symmetric ? (levels + 1) / 2 + fmt.min : roundInt(fr(fmt.min - fr(lo / s)), 'rne');
    zeroPoints[i] = Number.isNaN(zp) ? fmt.min : Math.min(fmt.max, Math.max(fmt.min, zp));
  }
  return { scales, zeroPoints };
}

/** The NVFP4 block-scale cast (E4M3, satfinite), resolved once: `encode` per cell re-resolves the profile. */
let e4m3SatfiniteEncoder: ScalarEncoder | null = null;
function e4m3Satfinite(x: number): number {
  e4m3SatfiniteEncoder ??= scalarEncoder(floatFormats.e4m3fn, 'satfinite');
  return e4m3SatfiniteEncoder(x);
}

/** The element factors of an amax/minmax/static rule per its {@link ScalingOp} (the scales are already set). */
function paramsByScaling(
  scaling: ScalingOp, rule: ScaleRule, fmax: number, stats: CellStats, scales: Float32Array, factors: Float32Array, count: number, zeroPoints?: Int32Array,
): CellParams {
  if (scaling === 'divide') return zeroPoints ? { scales, factors: scales, op: 'div', zeroPoints } : { scales, factors: scales, op: 'div' };
  for (let i = 0; i < count; i++) {
    if (scaling === 'reciprocal') factors[i] = fr(1 / (scales[i] as number));
    else {
      const a = stats.amax[i] as number;
      const divisor = rule.kind === 'amax' ? rule.divisor ?? fmax : fmax;
      factors[i] = a === 0 ? 0 : fr(divisor / a);
    }
  }
  return zeroPoints ? { scales, factors, op: 'mul', zeroPoints } : { scales, factors, op: 'mul' };
}

function cellParams(spec: QuantSpec, fmt: ElementFormat, stats: CellStats, layout: CellLayout, options: QuantizeOptions, scalesDst?: Float32Array): CellParams {
  const count = layout.count;
  const rule = spec.scale;
  const scales = scalesDst ?? new Float32Array(count);
  // Every path writes factors[0, count) before use (or aliases the scales): scratch, not returned.
  const factors = (scratch.factors = grown(scratch.factors, count));
  const fmax = formatMax(fmt);
  const scaling = spec.scaling ?? 'divide';
  switch (rule.kind) {
    case 'none':
      scales.fill(1);
      return { scales, factors: scales, op: 'mul' };
    case 'static': {
      for (let i = 0; i < count; i++) scales[i] = typeof rule.scale === 'number' ? rule.scale : (rule.scale[i] ?? Number.NaN);
      if (typeof rule.scale !== 'number' && rule.scale.length !== count) {
        throw new Error(`scale.scale: ${rule.scale.length} scales for ${count} cells`);
      }
      let zeroPoints: Int32Array | undefined;
      if (rule.zeroPoint !== undefined) {
        if (fmt.kind !== 'int') throw new Error(`scale.zeroPoint: only integer formats take a zero point, got '${fmt.name}'`);
        zeroPoints = new Int32Array(count);
        for (let i = 0; i < count; i++) zeroPoints[i] = typeof rule.zeroPoint === 'number' ? rule.zeroPoint : (rule.zeroPoint[i] ?? 0);
      }
      return paramsByScaling(scaling, rule, fmax, stats, scales, factors, count, zeroPoints);
    }
    case 'amax': {
      const divisor = rule.divisor ?? fmax;
      const [eLo, eHi] = rule.pow2Range ?? [-127, 127];
      for (let i = 0; i < count; i++) {
        let a = stats.amax[i] as number;
        if (rule.amaxFloor !== undefined && (a === a || rule.amaxFloorNan !== 'propagate')) a = fmaxf(a, fr(rule.amaxFloor));
        if (rule.amaxCeiling !== undefined) a = fminf(a, fr(rule.amaxCeiling));
        let s = fr(a / divisor);
        if (rule.scaleFloor !== undefined) s = fmaxf(s, fr(rule.scaleFloor));
        if (rule.pow2 !== undefined && s > 0 && Number.isFinite(s)) {
          s = 2 ** Math.min(eHi, Math.max(eLo, pow2Exponent(s, rule.pow2)));
        } else if (rule.pow2 !== undefined && rule.pow2NonFinite === 'bits' && !Number.isFinite(s)) {
          s = 2 ** Math.min(eHi, Math.max(eLo, s !== s ? 129 : 128)); // field 255 (+1 for a NaN's mantissa) − 127
        }
        scales[i] = s;
      }
      return paramsByScaling(scaling, rule, fmax, stats, scales, factors, count);
    }
    case 'minmax': {
      const { scales: s, zeroPoints } = minmaxParams(rule, fmt, stats, count);
      scales.set(s);
      return paramsByScaling(scaling, rule, fmax, stats, scales, factors, count, zeroPoints);
    }
    case 'mx': {
      if (fmt.kind !== 'float') throw new Error(`scale.kind 'mx' needs a float element format, got '${fmt.name}'`);
      const scaleCodes = new Uint8Array(count);
      const invMax = fr(1 / fmt.maxFinite);
      for (let i = 0; i < count; i++) {
        const amax = stats.amax[i] as number;
        let e: number;
        if (!Number.isFinite(amax)) e = Number.NaN;
        else if (rule.exponent === 'floor') e = float32Exponent(amax) - fmt.emax;
        else {
          const s = rule.exponent === 'ceil-bits' ? fr(amax * invMax) : fr(amax / fmt.maxFinite);
          e = s > 0 ? pow2Exponent(s, rule.exponent) : -127;
        }
        if (Number.isNaN(e)) {
          scaleCodes[i] = 0xff;
          scales[i] = Number.NaN;
          factors[i] = Number.NaN;
          continue;
        }
        e = Math.min(127, Math.max(-127, e));
        scaleCodes[i] = e + 127;
        scales[i] = 2 ** e;
        factors[i] = 2 ** -e; // the E8M0 reciprocal: exact
      }
      return { scales, factors, op: 'mul', scaleCodes };
    }
    case 'multiplier': {
      const maxScaled = fr(fmax * 2 ** -(rule.margin ?? 0));
      for (let i = 0; i < count; i++) {
        let a = stats.amax[i] as number;
        if (rule.amaxFloor !== undefined) a = (rule.precision ?? 'fp32') === 'fp64' ? Math.max(a, rule.amaxFloor) : fmaxf(a, fr(rule.amaxFloor));
        let m: number;
        const invalid = rule.invalidAmax ?? 'one';
        if ((invalid === 'one' && !(a > 0 && Number.isFinite(a))) || (invalid === 'zero' && a === 0)) m = 1;
        else m = fr(maxScaled / a);
        if (m === Infinity) m = fr(FLT_MAX);
        if (rule.pow2 !== undefined && Number.isFinite(m) && m > 0) m = 2 ** pow2Exponent(m, rule.pow2);
        else if (rule.pow2Down && Number.isFinite(m) && m > 0) m = 2 ** float32Exponent(m);
        // A NaN amax is |x| (positive), and max/NaN propagates it: the multiplier is +NaN, whatever sign V8 gave it.
        if (m !== m) m = Number.NaN;
        factors[i] = m;
        scales[i] = fr(1 / m);
      }
      return { scales, factors, op: 'mul' };
    }
    case 'delayed': {
      if (fmt.kind !== 'float') throw new Error(`scale.kind 'delayed' needs a float element format, got '${fmt.name}'`);
      if (layout.count !== 1) throw new Error(`scale.kind 'delayed' is per tensor: granularity must be 'tensor', got '${spec.granularity.kind}'`);
      const state = options.state ?? delayedScalingState(rule);
      if (state.amaxHistory.length !== (rule.historyLength ?? 1024)) {
        throw new Error(`state.amaxHistory: length ${state.amaxHistory.length} ≠ scale.historyLength ${rule.historyLength ?? 1024}`);
      }
      factors[0] = state.scale;
      scales[0] = state.scaleInv;
      const next = delayedScalingUpdate(rule, state, stats.amax[0] as number, fmt.maxFinite);
      return { scales, factors, op: 'mul', state: next };
    }
    case 'nvfp4': {
      if (fmt.kind !== 'float') throw new Error(`scale.kind 'nvfp4' needs a float element format, got '${fmt.name}'`);
      let globalAmax = 0;
      for (let i = 0; i < count; i++) globalAmax = fmaxf(globalAmax, stats.amax[i] as number);
      // With amaxNan 'propagate' a NaN block amax (torch.max over the tensor) makes the global amax NaN.
      if ((spec.amaxNan ?? 'ignore') === 'propagate' && stats.amax.subarray(0, count).some((a) => a !== a)) globalAmax = Number.NaN;
      const fp4Max = fmt.maxFinite;
      let sEnc = Math.min(fr(fr(448 * fp4Max) / globalAmax), fr(FLT_MAX));
      if ((rule.unitEncode ?? 'kernel') === 'kernel' ? globalAmax === 0 || sEnc === 0 || Number.isNaN(sEnc) : sEnc === 0) sEnc = 1;
      const sDec = fr(1 / sEnc);
      const encTimesInv6 = fr(sEnc * fr(1 / fp4Max));
      const scaleCodes = new Uint8Array(count);
      const e4m3 = floatFormats.e4m3fn;
      const table = decodeTable(e4m3);
      for (let i = 0; i < count; i++) {
        const code = e4m3Satfinite(fr((stats.amax[i] as number) * encTimesInv6));
        scaleCodes[i] = code;
        const sb = table[code] as number;
        scales[i] = sb;
        factors[i] = Math.min(fr(1 / fr(sb * sDec)), fr(FLT_MAX));
      }
      return { scales, factors, op: 'mul', scaleCodes, globalScale: sDec };
    }
    default:
      throw new Error(`scale.kind: unknown '${(rule as { kind: string }).kind}'`);
  }
}

/** Rounds a finite or infinite number to an integer with `mode` (no clamping; NaN stays NaN). */
export function roundInt(v: number, mode: RoundingMode): number {
  if (!Number.isFinite(v)) return v;
  switch (mode) {
    case 'rne': {
      const f = Math.floor(v);
      const d = v - f;
      return d > 0.5 || (d === 0.5 && f % 2 !== 0) ? f + 1 : f;
    }
    case 'rtz':
      return Math.trunc(v);
    case 'rha':
      return v < 0 ? -Math.floor(-v + 0.5) : Math.floor(v + 0.5);
    case 'stochastic':
      throw new Error("mode: 'stochastic' is not supported for integer formats");
  }
}

/** {@link PreCastClamp} as the small integer the element loop switches on. */
const clampCodes: Readonly<Record<PreCastClamp, number>> = Object.freeze({ none: 0, 'fminf-first': 1, 'fmaxf-first': 2, 'propagate-nan': 3 });

function clampScaled(v: number, clamp: PreCastClamp, max: number): number {
  switch (clamp) {
    case 'none':
      return v;
    case 'fminf-first':
      return fmaxf(-max, fminf(v, max));
    case 'fmaxf-first':
      return fminf(fmaxf(v, -max), max);
    case 'propagate-nan':
      return Number.isNaN(v) ? v : Math.min(max, Math.max(-max, v));
  }
}

/**
 * Quantizes a row-major (rows, cols) float32 tensor with `spec`: per cell computes the scale from
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
export function quantize(spec: QuantSpec, x: Float32Array, shape: readonly [number, number], options: QuantizeOptions = {}): QuantizedTensor {
  return quantizeWith(spec, x, shape, options, null);
}

/** Per-slot code and scale scratch of {@link quantizeTransient}. */
const transientBuffers: [{ codes: Uint8Array; scales: Float32Array<ArrayBuffer> }, { codes: Uint8Array; scales: Float32Array<ArrayBuffer> }] = [
  { codes: new Uint8Array(1024), scales: new Float32Array(64) },
  { codes: new Uint8Array(1024), scales: new Float32Array(64) },
];

/**
 * {@link quantize} whose codes (float formats of at most 8 bits) and scales live in scratch owned by
 * `slot`: valid only until the next call with the same slot. For callers that consume the tensor at
 * once and keep nothing of it (gemm's own operand quantization); the values are those of quantize.
 * @internal
 */
export function quantizeTransient(spec: QuantSpec, x: Float32Array, shape: readonly [number, number], slot: 0 | 1): QuantizedTensor {
  return quantizeWith(spec, x, shape, {}, slot);
}

function quantizeWith(spec: QuantSpec, x: Float32Array, shape: readonly [number, number], options: QuantizeOptions, slot: 0 | 1 | null): QuantizedTensor {
  const [rows, cols] = checkShape2d('x', x.length, shape);
  const fmt = elementFormat(spec.format);
  const layout = cellLayout(spec.granularity, rows, cols);
  const stats = cellStats(x, rows, cols, layout, (spec.amaxNan ?? 'ignore') === 'propagate', spec.scale.kind === 'minmax');
  let scalesDst: Float32Array | undefined;
  if (slot !== null) {
    const t = transientBuffers[slot];
    t.scales = grown(t.scales, layout.count);
    scalesDst = t.scales.subarray(0, layout.count);
  }
  const params = cellParams(spec, fmt, stats, layout, options, scalesDst);
  const clamp = spec.clamp ?? 'none';
  const fmax = formatMax(fmt);
  const n = rows * cols;
  scratch.scaled = grown(scratch.scaled, n);
  const scaled = scratch.scaled.subarray(0, n);
  const scaledBits = new Uint32Array(scaled.buffer, 0, n);
  const { factors, op } = params;
  const kSize = layout.kSize;
  const isDiv = op === 'div';
  // The clamp as a small code, its C semantics inlined below (the same fminf/fmaxf decisions as clampScaled).
  const cl = clampCodes[clamp];
  if (cl === undefined) throw new Error(`clamp: unknown '${String(clamp)}' (known: ${Object.keys(clampCodes).join(', ')})`);
  const negMax = -fmax;
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
      for (let i = base + c0; i < end; i++) {
        const v = x[i] as number;
        const p = isDiv ? fr(v / f) : fr(v * f);
        let s = p;
        if (cl === 1) {
          const t = p !== p ? fmax : p < fmax ? p : fmax; // fminf(p, max)
          s = negMax > t ? negMax : t; // fmaxf(−max, t), t never NaN
        } else if (cl === 2) {
          const t = p !== p ? negMax : p > negMax ? p : negMax; // fmaxf(p, −max)
          s = t < fmax ? t : fmax; // fminf(t, max), t never NaN
        } else if (cl === 3) s = clampScaled(p, clamp, fmax);
        // A NaN after scaling is written by bits with x86 SSE's rule: the first NaN operand (the
        // element, then the factor) propagates, and an invalid operation (0/0, ∞·0) gives the default
        // NaN 0xffc00000. V8 reorders NaN·NaN operands differently in its tiers, so the engine's own
        // result is not deterministic.
        if (s !== s) scaledBits[i] = v !== v ? (signBit(v) ? 0xffc00000 : 0x7fc00000) : f !== f ? (signBit(f) ? 0xffc00000 : 0x7fc00000) : 0xffc00000;
        else scaled[i] = s;
      }
    }
  }
  if ((spec.negativeZero ?? 'keep') === 'positive') {
    for (let i = 0; i < n; i++) if (scaledBits[i] === 0x80000000) scaledBits[i] = 0;
  }
  let codes: QuantCodes;
  if (fmt.kind === 'float') {
    const profile = spec.profile ?? 'satfinite';
    const prof = typeof profile === 'string' ? castProfile(profile) : profile;
    let codesDst: Uint8Array | undefined;
    if (slot !== null && fmt.bits <= 8) {
      const t = transientBuffers[slot];
      if (t.codes.length < n) t.codes = new Uint8Array(Math.max(n, 2 * t.codes.length));
      codesDst = t.codes.subarray(0, n);
    }
    codes = encodeArray(fmt, scaled, { profile: prof, mode: spec.mode ?? prof.mode, ...(options.randomBits ? { randomBits: options.randomBits } : {}) }, codesDst);
  } else {
    const mode = spec.mode ?? 'rne';
    const nanValue = (spec.intNan ?? 'min') === 'min' ? fmt.min : 0;
    const out = fmt.signed ? new Int8Array(n) : new Uint8Array(n);
    const zps = params.zeroPoints;
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const i = r * cols + c;
        const v = scaled[i] as number;
        if (Number.isNaN(v)) {
          out[i] = nanValue;
          continue;
        }
        const q = roundInt(v, mode) + (zps ? (zps[layout.index(r, c)] as number) : 0);
        out[i] = Math.min(fmt.max, Math.max(fmt.min, q));
      }
    }
    codes = out;
  }
  return {
    spec,
    shape: [rows, cols],
    codes,
    scales: params.scales,
    scaleShape: layout.shape,
    ...(params.scaleCodes ? { scaleCodes: params.scaleCodes } : {}),
    ...(params.zeroPoints ? { zeroPoints: params.zeroPoints } : {}),
    ...(params.globalScale !== undefined ? { globalScale: params.globalScale } : {}),
    ...(params.state ? { state: params.state } : {}),
  };
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
