// The NVFP4 scale rule: two-level scaling (per-tensor or per-row FP32 S_enc, per-16-block E4M3 scale) and the
// "4over6" block-scale choice (TransformerEngine, FlashInfer). Cell parameters only; the element loop is quantize.ts.

import { floatFormats } from './formats.js';
import type { CellStats } from './quant-cells.js';
import type { Nvfp4ScaleRule, QuantSpec } from './quant-spec.js';
import { type ScalarEncoder, scalarEncoder } from './round.js';
import { FLT_MAX, fmaxf, fminf } from './scales.js';
import { decodeTable } from './vector.js';

const fr = Math.fround;

/** What {@link nvfp4Params} reads: the spec, the cell statistics and, for 4over6 or per-row scales, the elements. */
export interface Nvfp4Context {
  readonly spec: QuantSpec;
  readonly stats: CellStats;
  readonly count: number;
  /** Cells per tensor row (the group layout's `perRow`). */
  readonly perRow: number;
  /** Largest E2M1 magnitude (6). */
  readonly fmax: number;
  /** The elements, row-major (rows × cols), or null when the caller has none (then 4over6 is refused). */
  readonly x: Float32Array | null;
  readonly cols: number;
  readonly scales: Float32Array;
  readonly factors: Float32Array;
}

/** The cell parameters of an NVFP4 rule (the fields of scale-rules' `CellParams` it sets). */
export interface Nvfp4Params {
  readonly scales: Float32Array;
  readonly factors: Float32Array;
  readonly op: 'mul';
  readonly scaleCodes: Uint8Array;
  readonly globalScale?: number;
}

let e4m3Encoder: ScalarEncoder | null = null;
let e2m1Encoder: ScalarEncoder | null = null;
/** E4M3 satfinite (RNE): the block-scale cast of every NVFP4 path (`__nv_fp8_e4m3(float)`, torch `.to(float8_e4m3fn)` after a ±448 clamp). */
function e4m3(x: number): number {
  e4m3Encoder ??= scalarEncoder(floatFormats.e4m3fn, 'satfinite');
  return e4m3Encoder(x);
}
/** E2M1 satfinite (RNE): PTX `cvt.rn.satfinite.e2m1x2.f32`, the candidates' cast in both 4over6 kernels. */
function e2m1(x: number): number {
  e2m1Encoder ??= scalarEncoder(floatFormats.e2m1, 'satfinite');
  return e2m1Encoder(x);
}

/**
 * `S_enc` of one global amax: `min(fl(bound·6/amax), FLT_MAX)`, 1 when the amax is 0 or `S_enc` 0 or NaN
 * (`kernel`, TE `compute_global_encode_scaling_factor_FP4`) or only when `S_enc` is 0 (`reference`).
 */
function encodeScale(rule: Nvfp4ScaleRule, amax: number, fp4Max: number): number {
  const bound = rule.tensorBound ?? 448;
  let sEnc = Math.min(fr(fr(bound * fp4Max) / amax), fr(FLT_MAX));
  const kernel = (rule.unitEncode ?? 'kernel') === 'kernel';
  if (kernel ? amax === 0 || sEnc === 0 || Number.isNaN(sEnc) : sEnc === 0) sEnc = 1;
  return sEnc;
}

/**
 * Per-cell NVFP4 parameters. Per tensor: `globalScale = S_dec`, `scales` the E4M3 block scales. Per row
 * (`rowScaled`): each row's `S_dec` folded into its block scales (`scales = fl(s_b·S_dec_row)`, no global
 * scale), so dequantization `fl(q·fl(s_b·S_dec))` is unchanged. With `fourOverSix` each block keeps the
 * candidate of lower float32 error (map-to-6 on ties).
 */
export function nvfp4Params(rule: Nvfp4ScaleRule, c: Nvfp4Context): Nvfp4Params {
  const { stats, scales, factors, count, fmax: fp4Max } = c;
  const rowScaled = rule.rowScaled ?? false;
  const groups = rowScaled ? Math.max(1, count / Math.max(1, c.perRow)) : 1;
  const perGroup = rowScaled ? c.perRow : count;
  const propagate = (c.spec.amaxNan ?? 'ignore') === 'propagate';
  const scaleCodes = new Uint8Array(count);
  const table = decodeTable(floatFormats.e4m3fn);
  const six = rule.fourOverSix;
  if (six !== undefined && c.x === null)
    throw new Error('scale.fourOverSix: needs the elements (quantize passes them)');
  let globalScale = 1;
  for (let g = 0; g < groups; g++) {
    const from = g * perGroup;
    const to = Math.min(count, from + perGroup);
    let amax = 0;
    for (let i = from; i < to; i++) amax = fmaxf(amax, stats.amax[i] as number);
    // With amaxNan 'propagate' a NaN block amax (torch.max over the tensor or row) makes the global amax NaN.
    if (propagate && stats.amax.subarray(from, to).some((a) => a !== a)) amax = Number.NaN;
    const sEnc = encodeScale(rule, amax, fp4Max);
    const sDec = fr(1 / sEnc);
    if (!rowScaled) globalScale = sDec;
    const encTimesInv6 = fr(sEnc * fr(1 / fp4Max));
    for (let i = from; i < to; i++) {
      const blockAmax = stats.amax[i] as number;
      let code: number;
      if (six === undefined) code = e4m3(fr(blockAmax * encTimesInv6));
      else code = fourOverSixCode(rule, c, { cell: i, blockAmax, globalAmax: amax, sEnc, sDec });
      scaleCodes[i] = code;
      const sb = table[code] as number;
      scales[i] = rowScaled ? fr(sb * sDec) : sb;
      factors[i] = Math.min(fr(1 / fr(sb * sDec)), fr(FLT_MAX));
    }
  }
  return rowScaled
    ? { scales, factors, op: 'mul', scaleCodes }
    : { scales, factors, op: 'mul', scaleCodes, globalScale };
}

/** One 16-block of {@link fourOverSixCode}: its cell, its amax, and the tensor (or row) amax with its scales. */
interface FourOverSixBlock {
  readonly cell: number;
  readonly blockAmax: number;
  readonly globalAmax: number;
  /** The encode scale S_enc and the decode scale S_dec of the tensor (or row). */
  readonly sEnc: number;
  readonly sDec: number;
}

/**
 * The E4M3 code of block `cell` under 4over6: `b = fl(fl(amax_b/6)·S_enc)`, candidates
 * `e4m3(min(fl(b·1.5), 448))` (map-to-4) and `e4m3(min(b, 448))` (map-to-6); each candidate's elements
 * `e2m1(fl(x·min(fl(1/fl(s·S_dec)), FLT_MAX)))`, dequantized per `fourOverSix.dequant`, and the float32
 * sum of |d| or d² over the block in element order; map-to-4 only when its sum is strictly lower.
 */
function fourOverSixCode(rule: Nvfp4ScaleRule, c: Nvfp4Context, block: FourOverSixBlock): number {
  const { cell, blockAmax, globalAmax, sEnc, sDec } = block;
  const six = rule.fourOverSix!;
  const fp4Max = c.fmax;
  const base = fr(fr(blockAmax / fp4Max) * sEnc);
  const code4 = e4m3(fminf(fr(base * 1.5), 448));
  const code6 = e4m3(fminf(base, 448));
  const e4m3Values = decodeTable(floatFormats.e4m3fn);
  const e2m1Values = decodeTable(floatFormats.e2m1);
  const s4 = e4m3Values[code4] as number;
  const s6 = e4m3Values[code6] as number;
  const inv4 = Math.min(fr(1 / fr(s4 * sDec)), fr(FLT_MAX));
  const inv6 = Math.min(fr(1 / fr(s6 * sDec)), fr(FLT_MAX));
  // TE divides by 6·bound with the tensor (or row) amax; FlashInfer multiplies by S_dec (per-token rows: as TE).
  const teForm = six.dequant === 'te' || (rule.rowScaled ?? false);
  const denom = fr(fp4Max * (rule.tensorBound ?? 448));
  const mse = six.error === 'mse';
  const x = c.x as Float32Array;
  const row = Math.floor(cell / c.perRow);
  const k0 = (cell - row * c.perRow) * blockWidth(c);
  const k1 = Math.min(c.cols, k0 + blockWidth(c));
  let err4 = 0;
  let err6 = 0;
  for (let k = k0; k < k1; k++) {
    const v = x[row * c.cols + k] as number;
    const q4 = e2m1Values[e2m1(fr(v * inv4))] as number;
    const q6 = e2m1Values[e2m1(fr(v * inv6))] as number;
    const d4 = fr((teForm ? fr(fr(fr(q4 * s4) * globalAmax) / denom) : fr(fr(q4 * s4) * sDec)) - v);
    const d6 = fr((teForm ? fr(fr(fr(q6 * s6) * globalAmax) / denom) : fr(fr(q6 * s6) * sDec)) - v);
    err4 = fr(err4 + (mse ? fr(d4 * d4) : Math.abs(d4)));
    err6 = fr(err6 + (mse ? fr(d6 * d6) : Math.abs(d6)));
  }
  return err4 < err6 ? code4 : code6;
}

/** Elements per block along K (the group size of the spec). */
function blockWidth(c: Nvfp4Context): number {
  const g = c.spec.granularity;
  return g.kind === 'group' ? g.size : c.cols;
}
