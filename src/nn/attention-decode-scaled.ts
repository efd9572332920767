// The decode step's attention with scaled GEMMs (q·Kᵀ, p·V with one per-tensor quantizer): all heads of a sequence in
// one call, each cached K/V row's amax taken once. Not a quantizer and not a GEMM: numerics computes every code and sum.

import { castProfile } from '../numerics/profiles.js';
import { cellLayout, cellStats, type CellStatsScratch } from '../numerics/quant-cells.js';
import { elementFormat, quantize, type QuantSpec } from '../numerics/quantize.js';
import type { GemmFn } from './gemm.js';

/**
 * Says that `qk` and `pv` quantize both operands per call with the per-tensor quantizer `spec`, and
 * gives the same GEMM with other operand quantizers. The decode step then multiplies all heads of a
 * sequence in one call, each head's rows quantized with that head's own scale (see
 * {@link attentionDecodeScaled}). It applies only while `qk` and `pv` are the functions named here.
 */
export interface ScaledDecodeGemms {
  /** The `qk` this describes. */
  readonly qk: GemmFn;
  /** The `pv` this describes. */
  readonly pv: GemmFn;
  /** The quantizer of both operands of `qk` and `pv`. */
  readonly spec: QuantSpec;
  /** `qk`/`pv` (same accumulator) with A quantized by `aQuant` and B by `bQuant`: out (m×n) = A (m×k) · B (n×k)ᵀ. */
  readonly gemm: (out: Float32Array, a: Float32Array, b: Float32Array, m: number, n: number, k: number, aQuant: QuantSpec, bQuant: QuantSpec) => void;
}

/**
 * Whether a tensor quantized with `spec` can be quantized in pieces: one scale per tensor from the
 * `amax` rule, elements scaled by that scale or its reciprocal (never by a factor read from the
 * statistics), no random bits. Then the scale is a function of the amax alone, the element factor a
 * function of the scale, and each code a function of its element and the factor: a row quantized with
 * a static scale equal to its tensor's gets the codes the whole tensor's quantization gives it.
 */
export function rowwiseQuantizable(spec: QuantSpec): boolean {
  if (spec.granularity.kind !== 'tensor' || spec.scale.kind !== 'amax' || (spec.scaling ?? 'divide') === 'max-over-amax') return false;
  elementFormat(spec.format); // throws on an unknown format, as the per-call path would
  const profile = spec.profile ?? 'satfinite';
  const mode = spec.mode ?? (typeof profile === 'string' ? castProfile(profile) : profile).mode;
  return mode !== 'stochastic';
}

/** The same quantizer with one scale per row: row r's codes and scale are those of row r quantized alone. */
function perRow(spec: QuantSpec): QuantSpec {
  let s = perRowSpecs.get(spec);
  if (s === undefined) {
    s = Object.freeze({ ...spec, granularity: Object.freeze({ kind: 'row' as const }) });
    perRowSpecs.set(spec, s);
  }
  return s;
}
const perRowSpecs = new WeakMap<QuantSpec, QuantSpec>();

/** `spec` with one static dequant scale per row (row r quantized as its head's whole tensor would be). */
function staticRows(spec: QuantSpec, scales: Float32Array): QuantSpec {
  return { ...perRow(spec), scale: { kind: 'static', scale: scales } };
}

/**
 * The per-head amax of one (B, tCap, C) cache: head h of sequence b has its amax over rows [0, rows)
 * (the statistic the per-tensor quantizer reads), and the scale `spec` gives that amax. `raw` holds
 * the cache bits the amax was taken from, so a head is measured again when a row's bits changed (a
 * KV hook, a reused cache).
 */
interface HeadScales {
  readonly spec: QuantSpec;
  readonly B: number;
  readonly tCap: number;
  readonly C: number;
  readonly H: number;
  /** (B, tCap, C) cache bits the amax was taken from. */
  readonly raw: Uint32Array;
  /** (B, H) rows measured. */
  readonly rows: Int32Array;
  /** (B, H) amax over those rows. */
  readonly amax: Float32Array;
}

const headScalesByCache = new WeakMap<Float32Array, HeadScales>();

/** Scratch of {@link headScales}: the new rows (grown on demand; nothing it calls re-enters it). */
let newRows = new Float32Array(256);
const statsScratch: CellStatsScratch = { amax: new Float32Array(16), min: new Float32Array(16), max: new Float32Array(16) };

/** amax of two amaxes of the same rule: NaN (a propagated NaN) wins, else the larger. */
function combineAmax(a: number, b: number): number {
  return a !== a || b !== b ? Number.NaN : a > b ? a : b;
}

/**
 * The (B·H) dequant scales `spec` gives the heads' (tLen, hs) matrices of `cache` (B, tCap, C): head
 * h of sequence b at index b·H + h. Each row's amax is taken once (again only when its bits change);
 * a scale is the one of the head's amax, computed by quantizing that amax alone (the amax of {a} is a).
 */
export function headScales(spec: QuantSpec, cache: Float32Array, tLen: number, B: number, tCap: number, C: number, H: number): Float32Array {
  const hs = C / H;
  let sc = headScalesByCache.get(cache);
  if (sc === undefined || sc.spec !== spec || sc.B !== B || sc.tCap !== tCap || sc.C !== C || sc.H !== H || sc.raw.length !== cache.length) {
    sc = { spec, B, tCap, C, H, raw: new Uint32Array(cache.length), rows: new Int32Array(B * H), amax: new Float32Array(B * H) };
    headScalesByCache.set(cache, sc);
  }
  const bits = new Uint32Array(cache.buffer, cache.byteOffset, cache.length);
  // 1. Per head: the rows still measured (bits unchanged, within tLen); the rows after them are new.
  let nNew = 0;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const i = b * H + h;
      let r = sc.rows[i]!;
      if (r > tLen) r = 0;
      for (let t = 0; t < r; t++) {
        const o = (b * tCap + t) * C + h * hs;
        let same = true;
        for (let d = 0; same && d < hs; d++) same = bits[o + d] === sc.raw[o + d];
        if (!same) r = 0;
      }
      sc.rows[i] = r;
      nNew += tLen - r;
    }
  }
  if (nNew > 0) {
    // 2. The amax of every new row (the spec's NaN rule) in one statistics pass, folded into its head's.
    if (newRows.length < nNew * hs) newRows = new Float32Array(Math.max(nNew * hs, 2 * newRows.length));
    let n = 0;
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < H; h++) {
        for (let t = sc.rows[b * H + h]!; t < tLen; t++, n++) {
          const o = (b * tCap + t) * C + h * hs;
          for (let d = 0; d < hs; d++) newRows[n * hs + d] = cache[o + d]!;
        }
      }
    }
    const rowAmax = cellStats(newRows, nNew, hs, cellLayout({ kind: 'row' }, nNew, hs), (spec.amaxNan ?? 'ignore') === 'propagate', false, statsScratch).amax;
    n = 0;
    for (let i = 0; i < B * H; i++) {
      const r = sc.rows[i]!;
      let amax = r === 0 ? 0 : sc.amax[i]!;
      for (let t = r; t < tLen; t++, n++) amax = combineAmax(amax, rowAmax[n]!);
      sc.amax[i] = amax;
      sc.rows[i] = tLen;
    }
    for (let b = 0; b < B; b++) sc.raw.set(bits.subarray(b * tCap * C, (b * tCap + tLen) * C), b * tCap * C);
  }
  return quantize(perRow(spec), sc.amax, [B * H, 1]).scales;
}

/**
 * The attention of the decode step (after RoPE) with scaled GEMMs, one `qk` and one `pv` call per
 * sequence for all its heads: row h of Q (H, hs) against the keys of every head (H·tLen, hs), of
 * which block h is used, and likewise P (H, tLen) against Vᵀ of every head (H·hs, tLen). Queries and
 * probabilities are quantized row by row (each row as the tensor it is per head); key and value rows
 * with their head's scale ({@link headScales}), which is what quantizing the head's matrix gives
 * element by element. Each output is a dot product of one row of A and one of B with its two scales
 * applied after the sum, so it equals the per-head call's.
 *
 * @param out - (B, C)
 * @param att - (B, H, tLen) probabilities, or null
 * @param qRot - (B, C) query after RoPE
 * @param kCache - (B, tCap, C) roped keys, rows [0, tLen) valid
 * @param vCache - (B, tCap, C) values, rows [0, tLen) valid
 */
export function attentionDecodeScaled(
  out: Float32Array,
  att: Float32Array | null,
  qRot: Float32Array,
  kCache: Float32Array,
  vCache: Float32Array,
  tLen: number,
  B: number,
  tCap: number,
  C: number,
  H: number,
  scale: number,
  g: ScaledDecodeGemms,
  softmax: (P: Float32Array, pOff: number, S: Float32Array, sOff: number, len: number, width: number, scale: number) => void,
): void {
  const hs = C / H;
  const rowSpec = perRow(g.spec);
  const kScale = headScales(g.spec, kCache, tLen, B, tCap, C, H); // (B·H)
  const vScale = headScales(g.spec, vCache, tLen, B, tCap, C, H); // (B·H)
  const Kb = new Float32Array(H * tLen * hs); // (H·tLen, hs): row h·tLen + t = head h of key t
  const kRowScale = new Float32Array(H * tLen); // (H·tLen)
  const Sb = new Float32Array(H * H * tLen); // (H, H·tLen): block (h, h) is head h's scores
  const P = new Float32Array(H * tLen); // (H, tLen)
  const VbT = new Float32Array(H * hs * tLen); // (H·hs, tLen): row h·hs + d = element d of head h of every value
  const vRowScale = new Float32Array(H * hs); // (H·hs)
  const Ob = new Float32Array(H * H * hs); // (H, H·hs): block (h, h) is head h's output
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      kRowScale.fill(kScale[b * H + h]!, h * tLen, (h + 1) * tLen);
      vRowScale.fill(vScale[b * H + h]!, h * hs, (h + 1) * hs);
      for (let t = 0; t < tLen; t++) {
        const o = (b * tCap + t) * C + h * hs;
        for (let d = 0; d < hs; d++) {
          Kb[(h * tLen + t) * hs + d] = kCache[o + d]!;
          VbT[(h * hs + d) * tLen + t] = vCache[o + d]!;
        }
      }
    }
    g.gemm(Sb, qRot.subarray(b * C, (b + 1) * C), Kb, H, H * tLen, hs, rowSpec, staticRows(g.spec, kRowScale));
    for (let h = 0; h < H; h++) softmax(P, h * tLen, Sb, h * H * tLen + h * tLen, tLen, tLen, scale);
    if (att) att.set(P, b * H * tLen);
    g.gemm(Ob, P, VbT, H, H * hs, tLen, rowSpec, staticRows(g.spec, vRowScale));
    for (let h = 0; h < H; h++) out.set(Ob.subarray(h * H * hs + h * hs, h * H * hs + (h + 1) * hs), b * C + h * hs);
  }
}
