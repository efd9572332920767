// Single-position attention decode step over a K/V cache (forward only), for token-by-token rollouts.
// Not a cache manager: the caller owns the (B, tCap, C) buffers and the position counter.

import { allocLike, type FloatArray } from './array.js';
import { gatherHead, headSize, softmaxRow } from './attention-common.js';
import {
  sequentialAttentionGemms,
  type AttentionDecodeBatch,
  type AttentionGemms,
  type AttentionOptions,
} from './attention.js';
import { ropeForward } from './rope.js';

/**
 * Decode step, part 1: writes the new token's key (after RoPE at position `tPast`) and value into
 * row `tPast` of the caches. A quantized KV cache may round these rows before part 2 reads them.
 *
 * @param kCache - (B, tCap, C) roped keys; row tPast is written
 * @param vCache - (B, tCap, C) values; row tPast is written
 * @param k - (B, C) new key, before RoPE
 * @param v - (B, C) new value
 * @param tPast - number of tokens already cached (the new token's position)
 */
export function attentionDecodeAppend(
  kCache: FloatArray,
  vCache: FloatArray,
  k: FloatArray,
  v: FloatArray,
  tPast: number,
  B: number,
  tCap: number,
  C: number,
  H: number,
  opts: AttentionOptions = {},
): void {
  if (!Number.isInteger(tPast) || tPast < 0 || tPast >= tCap)
    throw new Error(`attentionDecodeAppend: tPast must be in [0, ${tCap}), got ${tPast}`);
  const rope = opts.rope ?? false;
  headSize(C, H, rope);
  const kRow = allocLike(kCache, B * C); // (B, C)
  if (rope) ropeForward(kRow, k, B, 1, C, H, opts.ropeBase, tPast);
  else kRow.set(k.subarray(0, B * C));
  for (let b = 0; b < B; b++) {
    const o = (b * tCap + tPast) * C;
    for (let c = 0; c < C; c++) {
      kCache[o + c] = kRow[b * C + c]!;
      vCache[o + c] = v[b * C + c]!;
    }
  }
}

/**
 * Decode step, part 2 (forward only): the query of position `tLen − 1` attends causally over the
 * first `tLen` cached rows. Uses the same GEMM sites, softmax row and rounding points as
 * {@link attentionForward}, so with a sequential GEMM it reproduces the full causal forward at that
 * position (up to the sign of an exact zero, see docs/nn.md).
 *
 * @param out - (B, C)
 * @param att - (B, H, tLen) probabilities, or null
 * @param q - (B, C) query before RoPE
 * @param kCache - (B, tCap, C) roped keys, rows [0, tLen) valid
 * @param vCache - (B, tCap, C) values, rows [0, tLen) valid
 */
export function attentionDecodeForward(
  out: FloatArray,
  att: FloatArray | null,
  q: FloatArray,
  kCache: FloatArray,
  vCache: FloatArray,
  tLen: number,
  B: number,
  tCap: number,
  C: number,
  H: number,
  opts: AttentionOptions = {},
): void {
  if (!Number.isInteger(tLen) || tLen < 1 || tLen > tCap)
    throw new Error(`attentionDecodeForward: tLen must be in [1, ${tCap}], got ${tLen}`);
  if ((opts.causal ?? true) === false)
    throw new Error('attentionDecodeForward: causal must be true for incremental decoding, got false');
  const rope = opts.rope ?? false;
  const gemms = opts.gemms ?? sequentialAttentionGemms;
  const hs = headSize(C, H, rope);
  const scale = 1 / Math.sqrt(hs);
  const qRot = allocLike(q, B * C); // (B, C)
  if (rope) ropeForward(qRot, q, B, 1, C, H, opts.ropeBase, tLen - 1);
  else qRot.set(q.subarray(0, B * C));
  const batch = decodeBatchOf(gemms, qRot, kCache, vCache);
  if (batch !== null) {
    decodeBatched(
      batch,
      out,
      att,
      qRot as Float32Array,
      kCache as Float32Array,
      vCache as Float32Array,
      tLen,
      B,
      tCap,
      C,
      H,
      hs,
      scale,
    ); // float32: checked by decodeBatchOf
    return;
  }
  const fast = decodeRoundingOf(gemms, kCache, vCache);
  const kSrc = fast ? roundedRows(fast, kCache as Float32Array, vCache as Float32Array, tLen, B, tCap, C) : null; // float32: checked by decodeRoundingOf
  const kRead = kSrc ? kSrc.k : kCache;
  const vRead = kSrc ? kSrc.v : vCache;
  const qk = fast ? fast.qkRoundedB : gemms.qk;
  const pv = fast ? fast.pvRoundedB : gemms.pv;
  const qh = allocLike(q, hs); // (1, hs)
  const Kh = allocLike(q, tLen * hs); // (tLen, hs)
  const VhT = allocLike(q, hs * tLen); // (hs, tLen)
  const S = allocLike(q, tLen); // (1, tLen)
  const P = allocLike(q, tLen); // (1, tLen)
  const oh = allocLike(q, hs); // (1, hs)
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      for (let d = 0; d < hs; d++) qh[d] = qRot[b * C + h * hs + d]!;
      gatherHead(Kh, 0, hs, 1, kRead, b * tCap * C, tLen, C, h, hs);
      qk(S, qh, Kh, 1, tLen, hs);
      softmaxRow(P, 0, S, 0, tLen, tLen, scale);
      if (att) att.set(P, (b * H + h) * tLen);
      // Head h of the value rows, gathered straight into (hs, tLen).
      gatherHead(VhT, 0, 1, tLen, vRead, b * tCap * C, tLen, C, h, hs);
      pv(oh, P, VhT, 1, hs, tLen);
      for (let d = 0; d < hs; d++) out[b * C + h * hs + d] = oh[d]!;
    }
  }
}

/** The gemms' decode batch when it applies (it still describes `qk`/`pv`, float32 query and caches), else null. */
function decodeBatchOf(
  gemms: AttentionGemms,
  qRot: FloatArray,
  kCache: FloatArray,
  vCache: FloatArray,
): AttentionDecodeBatch | null {
  const d = gemms.decodeBatch;
  if (d === undefined || d.qk !== gemms.qk || d.pv !== gemms.pv) return null;
  return qRot instanceof Float32Array && kCache instanceof Float32Array && vCache instanceof Float32Array ? d : null;
}

/** Scratch of {@link decodeBatched}, grown on demand (the batch GEMMs it calls do not re-enter it). */
const batchScratch = {
  k: new Float32Array(0),
  vT: new Float32Array(0),
  s: new Float32Array(0),
  p: new Float32Array(0),
  o: new Float32Array(0),
};

function scratchOf(name: keyof typeof batchScratch, n: number): Float32Array {
  if (batchScratch[name].length < n) batchScratch[name] = new Float32Array(Math.max(n, 2 * batchScratch[name].length));
  return batchScratch[name].subarray(0, n);
}

/**
 * The decode step's attention with one `qk` and one `pv` call for all B·H (sequence, head) pairs: the
 * operands of pair p = b·H + h laid end to end (Q rows are qRot's heads as they lie, K (tLen, hs) and
 * Vᵀ (hs, tLen) gathered per pair), the same softmax row per pair, the outputs in (B, C) order.
 */
function decodeBatched(
  batch: AttentionDecodeBatch,
  out: FloatArray,
  att: FloatArray | null,
  qRot: Float32Array,
  kCache: Float32Array,
  vCache: Float32Array,
  tLen: number,
  B: number,
  tCap: number,
  C: number,
  H: number,
  hs: number,
  scale: number,
): void {
  const count = B * H;
  const K = scratchOf('k', count * tLen * hs); // (count, tLen, hs)
  const VT = scratchOf('vT', count * hs * tLen); // (count, hs, tLen)
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const p = b * H + h;
      gatherHead(K, p * tLen * hs, hs, 1, kCache, b * tCap * C, tLen, C, h, hs);
      gatherHead(VT, p * hs * tLen, 1, tLen, vCache, b * tCap * C, tLen, C, h, hs);
    }
  }
  const S = scratchOf('s', count * tLen); // (count, tLen)
  const P = scratchOf('p', count * tLen); // (count, tLen)
  batch.qkBatch(S, qRot, K, count, 1, tLen, hs);
  for (let p = 0; p < count; p++) softmaxRow(P, p * tLen, S, p * tLen, tLen, tLen, scale);
  if (att) att.set(P); // (B, H, tLen): pair p's row at p·tLen
  const O = scratchOf('o', count * hs); // (count, hs) = (B, C)
  batch.pvBatch(O, P, VT, count, 1, hs, tLen);
  for (let i = 0; i < B * C; i++) out[i] = O[i]!;
}

type DecodeRounding = NonNullable<AttentionGemms['decodeRounding']>;

/** The gemms' decode rounding when it applies (it still describes `qk`/`pv`, float32 caches), else null. */
function decodeRoundingOf(gemms: AttentionGemms, kCache: FloatArray, vCache: FloatArray): DecodeRounding | null {
  const r = gemms.decodeRounding;
  if (r === undefined || r.qk !== gemms.qk || r.pv !== gemms.pv) return null;
  return kCache instanceof Float32Array && vCache instanceof Float32Array ? r : null;
}

/**
 * Rounded copies of a K/V cache pair, kept per cache array: `raw` holds the cache bits each rounded
 * row was made from, so a row is rounded again exactly when its bits changed (appended, rewritten by
 * a KV hook, reused by a later rollout) or when the rounding differs.
 */
interface RoundedCache {
  roundB: DecodeRounding['roundB'];
  readonly vCache: Float32Array;
  readonly k: Float32Array;
  readonly v: Float32Array;
  readonly rawK: Float32Array;
  readonly rawV: Float32Array;
  /** The row layout the valid prefixes refer to. */
  readonly tCap: number;
  readonly C: number;
  /** Per sequence: rows [0, valid[b]) hold the rounding of rawK/rawV (every call rounds a prefix). */
  readonly valid: Int32Array;
}

const roundedCaches = new WeakMap<Float32Array, RoundedCache>();

/** Brings the rounded rows [0, tLen) of every sequence up to date with the caches; returns them. */
function roundedRows(
  r: DecodeRounding,
  kCache: Float32Array,
  vCache: Float32Array,
  tLen: number,
  B: number,
  tCap: number,
  C: number,
): RoundedCache {
  let rc = roundedCaches.get(kCache);
  if (
    rc === undefined ||
    rc.vCache !== vCache ||
    rc.k.length !== kCache.length ||
    rc.v.length !== vCache.length ||
    rc.valid.length !== B ||
    rc.tCap !== tCap ||
    rc.C !== C
  ) {
    rc = {
      roundB: r.roundB,
      vCache,
      k: new Float32Array(kCache.length),
      v: new Float32Array(vCache.length),
      rawK: new Float32Array(kCache.length),
      rawV: new Float32Array(vCache.length),
      tCap,
      C,
      valid: new Int32Array(B),
    };
    roundedCaches.set(kCache, rc);
  } else if (rc.roundB !== r.roundB) {
    rc.roundB = r.roundB;
    rc.valid.fill(0);
  }
  const [kw, rkw, vw, rvw] = [viewsOf(kCache), viewsOf(rc.rawK), viewsOf(vCache), viewsOf(rc.rawV)];
  const round = (row: number): void => {
    const o = row * C;
    rc.rawK.set(kCache.subarray(o, o + C), o);
    rc.rawV.set(vCache.subarray(o, o + C), o);
    r.roundB(rc.k.subarray(o, o + C), kCache.subarray(o, o + C));
    r.roundB(rc.v.subarray(o, o + C), vCache.subarray(o, o + C));
  };
  for (let b = 0; b < B; b++) {
    const first = b * tCap;
    const checked = Math.min(tLen, rc.valid[b]!);
    // Rows [0, checked): scan the sequence's K and V runs for the first changed element, round its row, go on after it.
    const end = (first + checked) * C;
    let pos = first * C;
    let nextK = -1;
    let nextV = -1;
    while (pos < end) {
      if (nextK < pos) nextK = firstChanged(kw, rkw, pos, end);
      if (nextV < pos) nextV = firstChanged(vw, rvw, pos, end);
      const at = Math.min(nextK, nextV);
      if (at >= end) break;
      const row = Math.floor(at / C);
      round(row);
      pos = (row + 1) * C;
    }
    for (let t = checked; t < tLen; t++) round(first + t);
    if (rc.valid[b]! < tLen) rc.valid[b] = tLen;
  }
  return rc;
}

/** 64-bit views of a float32 array (null unless its bytes start on an 8-byte boundary), by array. */
const wideViews = new WeakMap<Float32Array, WideViews>();

interface WideViews {
  readonly f64: Float64Array | null;
  readonly i32: Int32Array;
}

function viewsOf(x: Float32Array): WideViews {
  let v = wideViews.get(x);
  if (v === undefined) {
    const f64 = x.byteOffset % 8 === 0 ? new Float64Array(x.buffer, x.byteOffset, x.length >> 1) : null;
    v = { f64, i32: new Int32Array(x.buffer, x.byteOffset, x.length) };
    wideViews.set(x, v);
  }
  return v;
}

/**
 * The first index in [from, end) where the arrays behind `va` and `vb` differ in bits, or `end`. Two
 * float32 elements at a time as one double where both arrays allow it: equal doubles have equal bits
 * except ±0 (then their words are compared); NaN doubles compare unequal, so a NaN pair counts as
 * changed (its row is rounded again: the same result, more work).
 */
function firstChanged(va: WideViews, vb: WideViews, from: number, end: number): number {
  const ia = va.i32;
  const ib = vb.i32;
  let i = from;
  if (va.f64 !== null && vb.f64 !== null) {
    if ((i & 1) === 1) {
      if (ia[i] !== ib[i]) return i;
      i++;
    }
    const da = va.f64;
    const db = vb.f64;
    const wEnd = end >> 1;
    let w = i >> 1;
    for (; w < wEnd; w++) {
      const x = da[w]!;
      if (x !== db[w]! || (x === 0 && (ia[2 * w] !== ib[2 * w] || ia[2 * w + 1] !== ib[2 * w + 1]))) break;
    }
    if (w < wEnd) return ia[2 * w] !== ib[2 * w] || Number.isNaN(da[w]!) ? 2 * w : 2 * w + 1;
    i = Math.max(i, end & ~1);
  }
  for (; i < end; i++) if (ia[i] !== ib[i]) return i;
  return end;
}
