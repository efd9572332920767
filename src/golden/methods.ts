// The three methods `qrl-sim check` calls on an implementation, computed by qrl-sim: `estimate`,
// `cast` and `quantize`, each taking and returning the JSON of the matching CLI command.

import { UsageError } from '../errors.js';
import { decode, floatFormat } from '../numerics/formats.js';
import { castProfile, profileCovers, roundingModes, type RoundingMode } from '../numerics/profiles.js';
import { quantPreset } from '../numerics/presets.js';
import { dequantize, quantize } from '../numerics/quantize.js';
import { scalarEncoder } from '../numerics/round.js';
import { formatValue, parseFloat32, parseQuantizeInput, quantizationStats } from '../numerics/values.js';
import { estimateJson } from '../rl/estimate.js';

/** Params of `cast`: format, profile, mode and the inputs as the strings `qrl-sim cast` prints. */
export interface CastParams {
  readonly format: string;
  readonly profile: string;
  readonly mode?: RoundingMode;
  readonly inputs: readonly string[];
}

/** The `qrl-sim cast --json` object for `params` (stochastic rounding is not a check method). */
export function castJson(params: CastParams): { format: string; profile: string; mode: string; results: { input: string; code: number; hex: string; value: string }[] } {
  const format = floatFormat(params.format);
  const profile = castProfile(params.profile);
  if (!profileCovers(profile, format)) throw new UsageError(`profile: '${profile.name}' does not apply to format '${format.name}'`);
  const mode = params.mode ?? profile.mode;
  if (!roundingModes.includes(mode) || mode === 'stochastic') throw new UsageError(`mode: expected rne, rtz or rha, got '${mode}'`);
  const encoder = scalarEncoder(format, profile, mode);
  const width = Math.ceil(format.bits / 4);
  const results = params.inputs.map((text) => {
    const input = parseFloat32(text);
    const code = encoder(input);
    return { input: formatValue(input), code, hex: `0x${code.toString(16).padStart(width, '0')}`, value: formatValue(decode(format, code)) };
  });
  return { format: format.name, profile: profile.name, mode, results };
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

/** The `qrl-sim quantize --json` object for `params`. */
export function quantizeJson(params: QuantizeParams): Record<string, unknown> {
  const { x, shape, oneD } = parseQuantizeInput(JSON.stringify(params.input));
  const spec = quantPreset(params.preset, params.block !== undefined ? { block: params.block } : {});
  const q = quantize(spec, x, shape);
  const y = dequantize(q);
  const stats = quantizationStats(x, y);
  const [rows, cols] = shape;
  const scaleShape = oneD && q.scaleShape.length === 2 ? [q.scaleShape[1] as number] : q.scaleShape;
  const scaleList = (a: ArrayLike<number>, f: (v: number) => number | string): unknown =>
    scaleShape.length === 0 ? f(a[0] as number) : scaleShape.length === 1 ? Array.from(a, f) : shaped(Array.from(a, f), scaleShape[0] as number, scaleShape[1] as number, false);
  return {
    preset: params.preset,
    ...(params.block !== undefined ? { block: params.block } : {}),
    codes: shaped(Array.from(q.codes as ArrayLike<number>), rows, cols, oneD),
    scales: scaleList(q.scales, jsonNumber),
    ...(q.zeroPoints ? { zeroPoints: scaleList(q.zeroPoints, (v) => v) } : {}),
    ...(q.globalScale !== undefined ? { globalScale: q.globalScale } : {}),
    dequantized: shaped(Array.from(y, jsonNumber), rows, cols, oneD),
    // every statistic the CLI prints, in its order (new ones carry over; check does not compare them)
    stats: Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, jsonNumber(v)])),
  };
}

/** qrl-sim's answer to each check method. */
export const referenceMethods: Readonly<Record<'estimate' | 'cast' | 'quantize', (params: unknown) => unknown>> = {
  estimate: (p) => estimateJson(p),
  cast: (p) => castJson(p as CastParams),
  quantize: (p) => quantizeJson(p as QuantizeParams),
};
