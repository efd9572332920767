// The three methods `qrl-sim check` calls on an implementation, computed by qrl-sim: `estimate`,
// `cast` and `quantize`, each taking and returning the JSON of the matching CLI command, and the
// cast rows and quantized arrays those commands print. Not the commands' parsing or text layout.

import { UsageError } from '../core/errors.js';
import { decode, floatFormat, type FloatFormat } from '../numerics/formats.js';
import {
  castProfile,
  profileCovers,
  roundingModes,
  type CastProfile,
  type RoundingMode,
} from '../numerics/profiles.js';
import { quantPreset, type QuantPresetParams } from '../numerics/presets.js';
import { dequantize, quantize, type QuantizedTensor, type QuantSpec } from '../numerics/quantize.js';
import { scalarEncoder } from '../numerics/round.js';
import { formatValue, parseFloat32, parseQuantizeInput, quantizationStats } from '../numerics/values.js';
import { estimateJson } from '../rl/estimate.js';
import { createRng } from '../core/rng.js';
import { rngStreams } from '../core/rng-streams.js';

/** Params of `cast`: format, profile, mode and the inputs as the strings `qrl-sim cast` prints. */
export interface CastParams {
  readonly format: string;
  readonly profile: string;
  readonly mode?: RoundingMode;
  readonly inputs: readonly string[];
}

/** One value of `qrl-sim cast`: the float32 input, the code, its hex and the decoded value (as text, so NaN, ±Infinity and −0 survive JSON). */
export interface CastRow {
  readonly input: string;
  readonly code: number;
  readonly hex: string;
  readonly value: string;
}

/**
 * Casts each float32 `input` to `format` under `profile` and `mode`. Stochastic rounding draws one
 * uint32 per value from the stream `createRng(seed).fork('cast')`; the other modes ignore `seed`.
 */
export function castRows(
  format: FloatFormat,
  profile: CastProfile,
  mode: RoundingMode,
  inputs: readonly number[],
  seed = 0,
): CastRow[] {
  const encoder = scalarEncoder(format, profile, mode);
  const rng = createRng(seed).fork(rngStreams.golden.castBits);
  const width = Math.ceil(format.bits / 4);
  return inputs.map((input) => {
    const code = encoder(input, mode === 'stochastic' ? rng.uint32() : undefined);
    return {
      input: formatValue(input),
      code,
      hex: `0x${code.toString(16).padStart(width, '0')}`,
      value: formatValue(decode(format, code)),
    };
  });
}

/** The `qrl-sim cast --json` object for `params` (stochastic rounding is not a check method). */
export function castJson(params: CastParams): { format: string; profile: string; mode: string; results: CastRow[] } {
  const format = floatFormat(params.format);
  const profile = castProfile(params.profile);
  if (!profileCovers(profile, format))
    throw new UsageError(`profile: '${profile.name}' does not apply to format '${format.name}'`);
  const mode = params.mode ?? profile.mode;
  if (!roundingModes.includes(mode) || mode === 'stochastic')
    throw new UsageError(`mode: expected rne, rtz, rha or rhz, got '${mode}'`);
  return {
    format: format.name,
    profile: profile.name,
    mode,
    results: castRows(format, profile, mode, params.inputs.map(parseFloat32)),
  };
}

/** Params of `quantize`: the preset, its block and the `--input` JSON array. */
export interface QuantizeParams {
  readonly preset: string;
  readonly block?: number;
  readonly input: unknown;
}

const jsonNumber = (v: number): number | string => (Object.is(v, -0) ? '-0' : Number.isFinite(v) ? v : String(v));

function shaped<T>(values: T[], rows: number, cols: number, oneD: boolean): T[] | T[][] {
  if (oneD) return values;
  return Array.from({ length: rows }, (_, r) => values.slice(r * cols, (r + 1) * cols));
}

/** An array quantized with a preset, its dequantized values and error statistics, and the `qrl-sim quantize --json` object of them. */
export interface QuantizedArray {
  readonly spec: QuantSpec;
  readonly q: QuantizedTensor;
  /** The dequantized values, (rows, cols) row-major. */
  readonly y: Float32Array;
  readonly stats: ReturnType<typeof quantizationStats>;
  /** The `--json` object: codes and dequantized values in the input's shape, scales in theirs, non-finite numbers as strings. */
  readonly json: Record<string, unknown>;
}

/** Quantizes `input` (as {@link parseQuantizeInput} reads it) with preset `preset` and `params`, and dequantizes it. */
export function quantizeArray(
  preset: string,
  params: QuantPresetParams,
  input: { readonly x: Float32Array; readonly shape: [number, number]; readonly oneD: boolean },
): QuantizedArray {
  const { x, shape, oneD } = input;
  const spec = quantPreset(preset, params);
  const q = quantize(spec, x, shape);
  const y = dequantize(q);
  const stats = quantizationStats(x, y);
  const [rows, cols] = shape;
  const scaleShape = oneD && q.scaleShape.length === 2 ? [q.scaleShape[1] as number] : q.scaleShape;
  const scaleList = (a: ArrayLike<number>, f: (v: number) => number | string): unknown =>
    scaleShape.length === 0
      ? f(a[0] as number)
      : scaleShape.length === 1
        ? Array.from(a, f)
        : shaped(Array.from(a, f), scaleShape[0] as number, scaleShape[1] as number, false);
  const json = {
    preset,
    ...(params.block !== undefined ? { block: params.block } : {}),
    codes: shaped(Array.from(q.codes as ArrayLike<number>), rows, cols, oneD),
    scales: scaleList(q.scales, jsonNumber),
    ...(q.zeroPoints ? { zeroPoints: scaleList(q.zeroPoints, (v) => v) } : {}),
    ...(q.globalScale !== undefined ? { globalScale: q.globalScale } : {}),
    dequantized: shaped(Array.from(y, jsonNumber), rows, cols, oneD),
    // every statistic the CLI prints, in its order (new ones carry over; check does not compare them)
    stats: Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, jsonNumber(v)])),
  };
  return { spec, q, y, stats, json };
}

/** The `qrl-sim quantize --json` object for `params`. */
export function quantizeJson(params: QuantizeParams): Record<string, unknown> {
  return quantizeArray(
    params.preset,
    params.block !== undefined ? { block: params.block } : {},
    parseQuantizeInput(JSON.stringify(params.input)),
  ).json;
}

/** qrl-sim's answer to each check method. */
export const referenceMethods: Readonly<Record<'estimate' | 'cast' | 'quantize', (params: unknown) => unknown>> = {
  estimate: (p) => estimateJson(p),
  cast: (p) => castJson(p as CastParams),
  quantize: (p) => quantizeJson(p as QuantizeParams),
};
