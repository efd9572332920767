// FP8 KV-cache quantization (vLLM `--kv-cache-dtype fp8`): K and V scaled per tensor or per head and cast, with the
// scale calibration modes fixed / inference-side / trainer-side kept in an explicit state object. Not attention.

import { type FloatFormat, type FloatFormatName } from './formats.js';
import { type CastProfile, type CastProfileName } from './profiles.js';
import { fmaxf } from './scales.js';
import { decodeTable, encodeArray } from './vector.js';
import { resolveFormat } from './round.js';

/**
 * How the K/V scales are chosen:
 * - `fixed`: a constant scale (vLLM's default 1.0 when the checkpoint has none);
 * - `inference`: computed from the first forward after each weight update (`--calculate-kv-scales`:
 *   `max|K|/kDivisor`, `max|V|/vDivisor` over the whole batch, vLLM defaults 200 and 100), then frozen
 *   until {@link kvCacheWeightUpdate} marks the state stale (verl resets the flag after every update);
 * - `trainer`: computed by the trainer from a calibration batch after each update
 *   ({@link kvCacheCalibrate}) and shipped with the weights.
 */
export type KvCalibration =
  | { readonly mode: 'fixed'; readonly scale?: number }
  | { readonly mode: 'inference'; readonly kDivisor?: number; readonly vDivisor?: number }
  | { readonly mode: 'trainer'; readonly kDivisor?: number; readonly vDivisor?: number };

/** A KV-cache quantizer: plain data. */
export interface KvCacheSpec {
  /** Cache element format. @defaultValue 'e4m3fn' */
  readonly format?: FloatFormatName;
  /** Cast profile of the store (vLLM: `__nv_cvt_float_to_fp8(…, __NV_SATFINITE, …)`). @defaultValue 'satfinite' */
  readonly profile?: CastProfileName | CastProfile;
  /** One scale per tensor, or one per attention head. @defaultValue 'tensor' */
  readonly granularity?: 'tensor' | 'head';
  /** Number of heads; the columns of K and V are `heads × headDim`. @defaultValue 1 */
  readonly heads?: number;
  readonly calibration: KvCalibration;
  /** Round loaded values to this format after `q·scale` (vLLM loads into the model dtype). @defaultValue none */
  readonly loadFormat?: FloatFormatName;
}

/** Explicit calibration state, passed in and returned (never hidden). */
export interface KvCacheState {
  /** Dequant scale of K, one per tensor or per head. */
  readonly kScale: Float32Array;
  /** Dequant scale of V. */
  readonly vScale: Float32Array;
  /** Whether the scales are current for the weights in use (inference mode recomputes when false). */
  readonly calibrated: boolean;
}

/** K or V stored in the cache. */
export interface QuantizedKv {
  /** (tokens, heads·headDim) codes, row-major. */
  readonly codes: Uint8Array;
  readonly scales: Float32Array;
  readonly shape: readonly [number, number];
}

const kvDefaults = { kDivisor: 200, vDivisor: 100 } as const;

function scaleCount(spec: KvCacheSpec): number {
  const heads = spec.heads ?? 1;
  if (!Number.isInteger(heads) || heads < 1) throw new Error(`heads: expected a positive integer, got ${heads}`);
  return (spec.granularity ?? 'tensor') === 'head' ? heads : 1;
}

/**
 * The initial state: scales 1.0 (fixed mode: the configured scale), not yet calibrated except in
 * fixed mode.
 *
 * @example
 * ```ts
 * let state = kvCacheState({ calibration: { mode: 'inference' }, granularity: 'head', heads: 4 });
 * ```
 */
export function kvCacheState(spec: KvCacheSpec): KvCacheState {
  const count = scaleCount(spec);
  const fixed = spec.calibration.mode === 'fixed';
  const s = fixed ? ((spec.calibration as { scale?: number }).scale ?? 1) : 1;
  return { kScale: new Float32Array(count).fill(s), vScale: new Float32Array(count).fill(s), calibrated: fixed };
}

/** Marks the state stale after a weight update (inference mode then recalibrates on the next forward). */
export function kvCacheWeightUpdate(state: KvCacheState): KvCacheState {
  return { ...state, calibrated: false };
}

function checkKv(spec: KvCacheSpec, x: Float32Array, shape: readonly [number, number], field: string): void {
  const [tokens, width] = shape;
  if (!Number.isInteger(tokens) || !Number.isInteger(width) || tokens < 0 || width < 0 || tokens * width !== x.length) {
    throw new Error(`${field}: ${x.length} elements do not fill shape [${shape.join(', ')}]`);
  }
  const heads = spec.heads ?? 1;
  if (width % heads !== 0) throw new Error(`${field}: width ${width} is not a multiple of heads ${heads}`);
}

/** The checked arguments of a store (kvQuantize, kvFakeQuantize): shape, one scale per cell, a format of ≤ 8 bits. */
function storeArgs(
  spec: KvCacheSpec,
  x: Float32Array,
  shape: readonly [number, number],
  scales: Float32Array,
): { tokens: number; width: number; count: number; headDim: number; format: FloatFormat } {
  checkKv(spec, x, shape, 'x');
  const [tokens, width] = shape;
  const count = scaleCount(spec);
  if (scales.length !== count)
    throw new Error(`scales: ${scales.length} scales for ${count} (granularity ${spec.granularity ?? 'tensor'})`);
  const format = resolveFormat(spec.format ?? 'e4m3fn');
  if (format.bits > 8) throw new Error(`format: KV cache formats have at most 8 bits, got '${format.name}'`);
  return { tokens, width, count, headDim: width / (spec.heads ?? 1), format };
}

/** amax per scale (per tensor or per head) with fmaxf (NaN skipped), as vLLM's `max|K|` reduction over finite data. */
function amaxPer(spec: KvCacheSpec, x: Float32Array, shape: readonly [number, number]): Float32Array {
  const count = scaleCount(spec);
  const [tokens, width] = shape;
  const headDim = width / (spec.heads ?? 1);
  const out = new Float32Array(count);
  for (let t = 0; t < tokens; t++) {
    for (let c = 0; c < width; c++) {
      const h = count === 1 ? 0 : Math.floor(c / headDim);
      out[h] = fmaxf(out[h] as number, Math.abs(x[t * width + c] as number));
    }
  }
  return out;
}

/**
 * Computes K and V scales from a batch: `fl(max|K| / kDivisor)`, `fl(max|V| / vDivisor)` per tensor or
 * per head. A scale whose amax is 0 or not finite keeps its previous value (so an all-zero head never
 * gets scale 0). Used by `trainer` mode explicitly and by `inference` mode on the first forward.
 */
export function kvCacheCalibrate(
  spec: KvCacheSpec,
  state: KvCacheState,
  k: Float32Array,
  v: Float32Array,
  shape: readonly [number, number],
): KvCacheState {
  checkKv(spec, k, shape, 'k');
  checkKv(spec, v, shape, 'v');
  if (spec.calibration.mode === 'fixed' || k.length === 0) return state; // nothing to calibrate from
  const kDiv = spec.calibration.kDivisor ?? kvDefaults.kDivisor;
  const vDiv = spec.calibration.vDivisor ?? kvDefaults.vDivisor;
  const update = (prev: Float32Array, amax: Float32Array, div: number): Float32Array =>
    prev.map((p, i) => {
      const a = amax[i] as number;
      return a > 0 && Number.isFinite(a) ? Math.fround(a / div) : p;
    });
  return {
    kScale: update(state.kScale, amaxPer(spec, k, shape), kDiv),
    vScale: update(state.vScale, amaxPer(spec, v, shape), vDiv),
    calibrated: true,
  };
}

/**
 * Stores K or V in the cache: `cast(fl(x / scale))` per element with its tensor or head scale (vLLM
 * `scaled_convert`: division, no prior clamp; satfinite keeps NaN).
 */
export function kvQuantize(
  spec: KvCacheSpec,
  x: Float32Array,
  shape: readonly [number, number],
  scales: Float32Array,
): QuantizedKv {
  const { tokens, width, count, headDim, format } = storeArgs(spec, x, shape, scales);
  const scaled = new Float32Array(x.length);
  for (let t = 0; t < tokens; t++) {
    for (let c = 0; c < width; c++) {
      const s = scales[count === 1 ? 0 : Math.floor(c / headDim)] as number;
      scaled[t * width + c] = Math.fround((x[t * width + c] as number) / s);
    }
  }
  const codes = encodeArray(format, scaled, { profile: spec.profile ?? 'satfinite' }) as Uint8Array;
  return { codes, scales: Float32Array.from(scales), shape: [tokens, width] };
}

/** Loads K or V from the cache: `fl(q · scale)`, then rounded to `loadFormat` when given. */
export function kvDequantize(spec: KvCacheSpec, q: QuantizedKv): Float32Array {
  const [tokens, width] = q.shape;
  const count = q.scales.length;
  const headDim = width / (spec.heads ?? 1);
  const table = decodeTable(spec.format ?? 'e4m3fn');
  const out = new Float32Array(tokens * width);
  for (let t = 0; t < tokens; t++) {
    for (let c = 0; c < width; c++) {
      const s = q.scales[count === 1 ? 0 : Math.floor(c / headDim)] as number;
      out[t * width + c] = Math.fround((table[q.codes[t * width + c] as number] as number) * s);
    }
  }
  if (spec.loadFormat !== undefined && spec.loadFormat !== 'fp32') {
    const f = resolveFormat(spec.loadFormat);
    const lt = encodeArray(f, out, { profile: 'ieee' });
    const dt = decodeTable(f);
    for (let i = 0; i < out.length; i++) out[i] = dt[lt[i] as number] as number;
  }
  return out;
}

/** Loaded values per code for one scale: `kvDequantize` of every code, by spec and scale bits. */
const loadedTables = new WeakMap<KvCacheSpec, Map<number, Float32Array>>();
const scaleBits = new Float32Array(1);
const scaleBitsU32 = new Uint32Array(scaleBits.buffer);

/** The value {@link kvDequantize} loads for each code of the format under dequant scale `s` (a table of 2^bits entries). */
function loadedValues(spec: KvCacheSpec, s: number): Float32Array {
  let byScale = loadedTables.get(spec);
  if (byScale === undefined) {
    byScale = new Map();
    loadedTables.set(spec, byScale);
  }
  scaleBits[0] = s;
  const key = scaleBitsU32[0] as number;
  let lut = byScale.get(key);
  if (lut === undefined) {
    const table = decodeTable(spec.format ?? 'e4m3fn');
    // kvDequantize of a (codeCount, 1) tensor holding every code once, with this one scale.
    const every = {
      codes: Uint8Array.from({ length: table.length }, (_, c) => c),
      scales: Float32Array.of(s),
      shape: [table.length, 1] as const,
    };
    lut = kvDequantize({ ...spec, heads: 1, granularity: 'tensor' }, every);
    if (byScale.size >= 64) byScale.clear(); // scales change at calibration only: a few live at a time
    byScale.set(key, lut);
  }
  return lut;
}

/** Scratch of {@link kvFakeQuantize}: scaled elements and codes, grown on demand (nothing it calls re-enters it). */
let fakeScaled = new Float32Array(256);
let fakeCodes = new Uint8Array(256);

/**
 * `kvDequantize(spec, kvQuantize(spec, x, shape, scales))` into `out`, without the intermediate tensors:
 * each element is scaled and cast as kvQuantize does, and its code then loaded through a table of what
 * kvDequantize gives every code under its scale (the load is a function of code and scale alone).
 * @internal
 */
export function kvFakeQuantize(
  spec: KvCacheSpec,
  x: Float32Array,
  shape: readonly [number, number],
  scales: Float32Array,
  out: Float32Array,
): Float32Array {
  const { tokens, width, count, headDim, format } = storeArgs(spec, x, shape, scales);
  if (out.length < x.length) throw new Error(`out: ${out.length} elements, need ${x.length}`);
  const n = x.length;
  if (fakeScaled.length < n) {
    fakeScaled = new Float32Array(Math.max(n, 2 * fakeScaled.length));
    fakeCodes = new Uint8Array(fakeScaled.length);
  }
  const scaled = fakeScaled.subarray(0, n);
  const cellWidth = count === 1 ? Math.max(width, 1) : headDim;
  for (let t = 0; t < tokens; t++) {
    for (let c0 = 0, cell = 0; c0 < width; c0 += cellWidth, cell++) {
      const s = scales[cell] as number;
      for (let i = t * width + c0, end = t * width + Math.min(width, c0 + cellWidth); i < end; i++)
        scaled[i] = Math.fround((x[i] as number) / s);
    }
  }
  const codes = encodeArray(format, scaled, { profile: spec.profile ?? 'satfinite' }, fakeCodes.subarray(0, n));
  const luts = Array.from(scales, (s) => loadedValues(spec, s));
  for (let t = 0; t < tokens; t++) {
    for (let c0 = 0, cell = 0; c0 < width; c0 += cellWidth, cell++) {
      const lut = luts[cell] as Float32Array;
      for (let i = t * width + c0, end = t * width + Math.min(width, c0 + cellWidth); i < end; i++)
        out[i] = lut[codes[i] as number] as number;
    }
  }
  return out;
}

/**
 * One forward step's cache write: in `inference` mode, calibrates from this K and V when the state is
 * stale (the first forward after a weight update), then quantizes both with the current scales.
 *
 * @example
 * ```ts
 * const spec: KvCacheSpec = { calibration: { mode: 'inference' } };
 * let state = kvCacheState(spec);
 * const step = kvCacheForward(spec, state, k, v, [tokens, width]);
 * state = step.state; // calibrated: later forwards reuse the scales until kvCacheWeightUpdate(state)
 * ```
 */
export function kvCacheForward(
  spec: KvCacheSpec,
  state: KvCacheState,
  k: Float32Array,
  v: Float32Array,
  shape: readonly [number, number],
): { state: KvCacheState; k: QuantizedKv; v: QuantizedKv } {
  const next =
    spec.calibration.mode === 'inference' && !state.calibrated ? kvCacheCalibrate(spec, state, k, v, shape) : state;
  return { state: next, k: kvQuantize(spec, k, shape, next.kScale), v: kvQuantize(spec, v, shape, next.vScale) };
}
