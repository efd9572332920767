// Scale rules as a table: per ScaleRule kind, its checks against the element format and cell layout, and its
// per-cell parameters (dequant scale, element factor, zero point) from the cell statistics. Not the element loop.

import { type FloatFormat, type IntFormat } from './formats.js';
import { type CellLayout, type CellStats, checkSize } from './quant-cells.js';
import type {
  AmaxScaleRule,
  DelayedScaleRule,
  DelayedScalingState,
  ElementFormat,
  MinMaxScaleRule,
  QuantCodes,
  QuantSpec,
  QuantizeOptions,
  QuantizedTensor,
  ScaleRule,
  ScalingOp,
} from './quant-spec.js';
import { formatMax, roundInt } from './quant-spec.js';
import { FLT_MAX, float32Exponent, fmaxf, fminf, pow2Exponent } from './scales.js';
import { nvfp4Params } from './nvfp4-rule.js';

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
export function delayedScalingUpdate(
  rule: DelayedScaleRule,
  state: DelayedScalingState,
  amax: number,
  maxFinite: number,
): DelayedScalingState {
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

/** Per-cell quantization parameters: dequant scale, element op, zero point. */
export interface CellParams {
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

function minmaxParams(
  rule: MinMaxScaleRule,
  fmt: IntFormat,
  stats: CellStats,
  count: number,
): { scales: Float32Array; zeroPoints: Int32Array } {
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

/** The element factors of an amax/minmax/static rule per its {@link ScalingOp} (the scales are already set). */
function paramsByScaling(c: ScaleContext, rule: ScaleRule, zeroPoints?: Int32Array): CellParams {
  const { scaling, fmax, stats, scales, factors, count } = c;
  if (scaling === 'divide')
    return zeroPoints ? { scales, factors: scales, op: 'div', zeroPoints } : { scales, factors: scales, op: 'div' };
  for (let i = 0; i < count; i++) {
    if (scaling === 'reciprocal') factors[i] = fr(1 / (scales[i] as number));
    else {
      const a = stats.amax[i] as number;
      const divisor = rule.kind === 'amax' ? (rule.divisor ?? fmax) : fmax;
      factors[i] = a === 0 ? 0 : fr(divisor / a);
    }
  }
  return zeroPoints ? { scales, factors, op: 'mul', zeroPoints } : { scales, factors, op: 'mul' };
}

/** What a rule's parameter computation reads and where it writes (arrays of at least `count` cells). */
export interface ScaleContext {
  readonly spec: QuantSpec;
  readonly fmt: ElementFormat;
  readonly layout: CellLayout;
  readonly stats: CellStats;
  readonly options: QuantizeOptions;
  /** Cells. */
  readonly count: number;
  /** Largest finite magnitude of the element format. */
  readonly fmax: number;
  /** @defaultValue 'divide' resolved */
  readonly scaling: ScalingOp;
  /** Dequant scales per cell: the result's array (returned in {@link CellParams}). */
  readonly scales: Float32Array;
  /** Element factors per cell: scratch, written before it is read (or the scales are used instead). */
  readonly factors: Float32Array;
  /** The elements (row-major, `cols` per row), for rules that choose a scale by its error (NVFP4 4over6). */
  readonly elements?: { readonly x: Float32Array; readonly cols: number };
}

/** One {@link ScaleRule} kind: its checks and its per-cell parameters. */
export interface ScaleRuleEntry<R extends ScaleRule> {
  /** Throws an error naming the field and value unless the rule fits the spec's element format and cell layout. */
  readonly validate: (rule: R, c: ScaleContext) => void;
  /** Per-cell dequant scales and element factors (and zero points, scale codes, global scale, state). */
  readonly params: (rule: R, c: ScaleContext) => CellParams;
}

/** The scale rules by kind: a mapped type, so every kind has exactly its own entry. */
export type ScaleRuleTable = { readonly [K in ScaleRule['kind']]: ScaleRuleEntry<Extract<ScaleRule, { kind: K }>> };

function needsFloat(kind: string, fmt: ElementFormat): void {
  if (fmt.kind !== 'float') throw new Error(`scale.kind '${kind}' needs a float element format, got '${fmt.name}'`);
}

/** `amax` rule: s = clamp(amax, floor, ceiling)/divisor, floored, optionally a power of two, per cell. */
function amaxScales(rule: AmaxScaleRule, c: ScaleContext): void {
  const { stats, scales, count } = c;
  const divisor = rule.divisor ?? c.fmax;
  const [eLo, eHi] = rule.pow2Range ?? [-127, 127];
  for (let i = 0; i < count; i++) {
    let a = stats.amax[i] as number;
    if (rule.amaxFloor !== undefined && (a === a || rule.amaxFloorNan !== 'propagate'))
      a = fmaxf(a, fr(rule.amaxFloor));
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
}

const noChecks = (): void => {};

/**
 * Every scale rule: validation and cell parameters. Formulas and sources are on the rule types
 * ({@link AmaxScaleRule} …); docs/quantization.md has the edge cases.
 */
export const scaleRules: ScaleRuleTable = Object.freeze({
  none: {
    validate: noChecks,
    params: (_rule, c) => {
      c.scales.fill(1);
      return { scales: c.scales, factors: c.scales, op: 'mul' };
    },
  },
  static: {
    validate: (rule, c) => {
      if (typeof rule.scale !== 'number' && rule.scale.length !== c.count)
        throw new Error(`scale.scale: ${rule.scale.length} scales for ${c.count} cells`);
      if (rule.zeroPoint !== undefined && c.fmt.kind !== 'int')
        throw new Error(`scale.zeroPoint: only integer formats take a zero point, got '${c.fmt.name}'`);
    },
    params: (rule, c) => {
      for (let i = 0; i < c.count; i++)
        c.scales[i] = typeof rule.scale === 'number' ? rule.scale : (rule.scale[i] ?? Number.NaN);
      let zeroPoints: Int32Array | undefined;
      if (rule.zeroPoint !== undefined) {
        zeroPoints = new Int32Array(c.count);
        for (let i = 0; i < c.count; i++)
          zeroPoints[i] = typeof rule.zeroPoint === 'number' ? rule.zeroPoint : (rule.zeroPoint[i] ?? 0);
      }
      return paramsByScaling(c, rule, zeroPoints);
    },
  },
  amax: {
    validate: noChecks,
    params: (rule, c) => {
      amaxScales(rule, c);
      return paramsByScaling(c, rule);
    },
  },
  minmax: {
    validate: (_rule, c) => {
      if (c.fmt.kind !== 'int') throw new Error(`scale.kind 'minmax' needs an integer format, got '${c.fmt.name}'`);
    },
    params: (rule, c) => {
      const { scales: s, zeroPoints } = minmaxParams(rule, c.fmt as IntFormat, c.stats, c.count);
      c.scales.set(s);
      return paramsByScaling(c, rule, zeroPoints);
    },
  },
  mx: {
    validate: (_rule, c) => needsFloat('mx', c.fmt),
    params: (rule, c) => {
      const { stats, scales, factors, count } = c;
      const fmt = c.fmt as FloatFormat;
      const scaleCodes = new Uint8Array(count);
      const invMax = fr(1 / fmt.maxFinite);
      for (let i = 0; i < count; i++) {
        const amax = stats.amax[i] as number;
        let e: number;
        if (!Number.isFinite(amax)) e = Number.NaN;
        else if (rule.exponent === 'floor') e = float32Exponent(amax) - fmt.emax;
        else {
          const ratio = rule.ratio ?? (rule.exponent === 'ceil-bits' ? 'reciprocal' : 'divide');
          const s = ratio === 'reciprocal' ? fr(amax * invMax) : fr(amax / fmt.maxFinite);
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
        // NeMo-RL reshard: byte 0 stored as 1 after the cast (the factor, i.e. the elements, stay those of byte 0).
        if (e === -127 && rule.zeroByte === 'one') {
          scaleCodes[i] = 1;
          scales[i] = 2 ** -126;
        }
      }
      return { scales, factors, op: 'mul', scaleCodes };
    },
  },
  multiplier: {
    validate: noChecks,
    params: (rule, c) => {
      const { stats, scales, factors, count } = c;
      const maxScaled = fr(c.fmax * 2 ** -(rule.margin ?? 0));
      for (let i = 0; i < count; i++) {
        let a = stats.amax[i] as number;
        if (rule.amaxFloor !== undefined)
          a = (rule.precision ?? 'fp32') === 'fp64' ? Math.max(a, rule.amaxFloor) : fmaxf(a, fr(rule.amaxFloor));
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
    },
  },
  delayed: {
    validate: (rule, c) => {
      needsFloat('delayed', c.fmt);
      if (c.layout.count !== 1)
        throw new Error(
          `scale.kind 'delayed' is per tensor: granularity must be 'tensor', got '${c.spec.granularity.kind}'`,
        );
      const state = c.options.state;
      if (state !== undefined && state.amaxHistory.length !== (rule.historyLength ?? 1024)) {
        throw new Error(
          `state.amaxHistory: length ${state.amaxHistory.length} ≠ scale.historyLength ${rule.historyLength ?? 1024}`,
        );
      }
    },
    params: (rule, c) => {
      const state = c.options.state ?? delayedScalingState(rule);
      c.factors[0] = state.scale;
      c.scales[0] = state.scaleInv;
      const next = delayedScalingUpdate(rule, state, c.stats.amax[0] as number, c.fmax);
      return { scales: c.scales, factors: c.factors, op: 'mul', state: next };
    },
  },
  nvfp4: {
    validate: (rule, c) => {
      needsFloat('nvfp4', c.fmt);
      if ((rule.rowScaled || rule.fourOverSix) && c.spec.granularity.kind !== 'group')
        throw new Error(
          `scale.rowScaled/fourOverSix: granularity must be 'group' (1×16 blocks), got '${c.spec.granularity.kind}'`,
        );
      const bound = rule.tensorBound ?? 448;
      if (bound !== 448 && bound !== 256)
        throw new Error(`scale.tensorBound: expected 448 or 256, got ${String(bound)}`);
      const six = rule.fourOverSix;
      if (six !== undefined && (!['mae', 'mse'].includes(six.error) || !['te', 'flashinfer'].includes(six.dequant)))
        throw new Error(`scale.fourOverSix: error must be 'mae' or 'mse', dequant 'te' or 'flashinfer'`);
    },
    params: (rule, c) =>
      nvfp4Params(rule, {
        spec: c.spec,
        stats: c.stats,
        count: c.count,
        perRow: c.layout.perRow,
        fmax: c.fmax,
        x: c.elements?.x ?? null,
        cols: c.elements?.cols ?? 0,
        scales: c.scales,
        factors: c.factors,
      }),
  },
} satisfies ScaleRuleTable);

/** What {@link cellParams} reads: a {@link ScaleContext} less what it derives (cell count, format maximum, scaling). */
export type CellParamsInput = Pick<
  ScaleContext,
  'spec' | 'fmt' | 'layout' | 'stats' | 'options' | 'scales' | 'factors' | 'elements'
>;

/**
 * The cell parameters of `spec` from the cell statistics: the rule's entry checks, then computes.
 * `scales` is the result's scale array, `factors` scratch (both of at least `layout.count` cells).
 */
export function cellParams(cells: CellParamsInput): CellParams {
  const { spec, fmt, stats, layout, options, scales, factors, elements } = cells;
  const rule = spec.scale;
  const entry = (scaleRules as Record<string, ScaleRuleEntry<ScaleRule> | undefined>)[rule.kind];
  if (entry === undefined) throw new Error(`scale.kind: unknown '${(rule as { kind: string }).kind}'`);
  const c: ScaleContext = {
    spec,
    fmt,
    layout,
    stats,
    options,
    count: layout.count,
    fmax: formatMax(fmt),
    scaling: spec.scaling ?? 'divide',
    scales,
    factors,
    ...(elements ? { elements } : {}),
  };
  entry.validate(rule, c);
  return entry.params(rule, c);
}

/** The {@link QuantizedTensor} of codes and cell parameters (optional fields present only when the rule set them). */
export function quantizedTensor(
  spec: QuantSpec,
  rows: number,
  cols: number,
  codes: QuantCodes,
  params: CellParams,
  scaleShape: readonly number[],
): QuantizedTensor {
  return {
    spec,
    shape: [rows, cols],
    codes,
    scales: params.scales,
    scaleShape,
    ...(params.scaleCodes ? { scaleCodes: params.scaleCodes } : {}),
    ...(params.zeroPoints ? { zeroPoints: params.zeroPoints } : {}),
    ...(params.globalScale !== undefined ? { globalScale: params.globalScale } : {}),
    ...(params.state ? { state: params.state } : {}),
  };
}
