// Multi-head scaled dot-product attention (causal or bidirectional, optional RoPE): forward/backward,
// plus a forward-only single-position decode step over a K/V cache. Not the q/k/v/o projections.

import { allocLike, transpose, type FloatArray } from './array.js';
import { gemmSequential, type GemmFn } from './gemm.js';

/**
 * The six GEMM sites of attention, per (batch, head), all in `A · Bᵀ` form
 * (hs = head size, Tq queries, Tk keys):
 * `qk`: S (Tq×Tk) = Q (Tq×hs) · K (Tk×hs)ᵀ; `pv`: O (Tq×hs) = P (Tq×Tk) · Vᵀ (hs×Tk)ᵀ;
 * backward `dScores`: dP = dO · Vᵀ; `dValues`: dV = Pᵀ · dO; `dQuery`: dQ = dS · K; `dKey`: dK = dSᵀ · Q.
 */
export interface AttentionGemms {
  /** S = Q·Kᵀ: `qk(S, Q, K, Tq, Tk, hs)`. */
  readonly qk: GemmFn;
  /** O = P·V: `pv(O, P, Vᵀ, Tq, hs, Tk)`. */
  readonly pv: GemmFn;
  /** dP = dO·Vᵀ: `dScores(dP, dO, V, T, T, hs)`. */
  readonly dScores: GemmFn;
  /** dV = Pᵀ·dO: `dValues(dV, Pᵀ, dOᵀ, T, hs, T)`. */
  readonly dValues: GemmFn;
  /** dQ = dS·K: `dQuery(dQ, dS, Kᵀ, T, hs, T)`. */
  readonly dQuery: GemmFn;
  /** dK = dSᵀ·Q: `dKey(dK, dSᵀ, Qᵀ, T, hs, T)`. */
  readonly dKey: GemmFn;
}

/** The default {@link AttentionGemms}: {@link gemmSequential} at all six sites. */
export const sequentialAttentionGemms: AttentionGemms = Object.freeze({
  qk: gemmSequential,
  pv: gemmSequential,
  dScores: gemmSequential,
  dValues: gemmSequential,
  dQuery: gemmSequential,
  dKey: gemmSequential,
});

/** Options of the attention layer. */
export interface AttentionOptions {
  /**
   * Causal mask (query t sees keys t2 ≤ t) or bidirectional (all keys).
   * @defaultValue true
   */
  readonly causal?: boolean;
  /**
   * Rotary position embedding on q and k (RoFormer, interleaved pairs (2i, 2i+1) inside each head,
   * θ_i = ropeBase^(−2i/hs)). Requires an even head size.
   * @defaultValue false
   */
  readonly rope?: boolean;
  /** RoPE base. @defaultValue 10000 */
  readonly ropeBase?: number;
  /** GEMM sites. @defaultValue {@link sequentialAttentionGemms} */
  readonly gemms?: AttentionGemms;
}

/** What {@link attentionForward} keeps for {@link attentionBackward}. */
export interface AttentionCache {
  /** (B, T, C) queries after RoPE (equal to the input q without RoPE). */
  readonly q: FloatArray;
  /** (B, T, C) keys after RoPE. */
  readonly k: FloatArray;
  /** (B, H, T, T) attention probabilities P (0 where masked). */
  readonly att: FloatArray;
}

/** Allocates an {@link AttentionCache} of the element type of `like`. */
export function createAttentionCache(like: FloatArray, B: number, T: number, C: number, H: number): AttentionCache {
  return { q: allocLike(like, B * T * C), k: allocLike(like, B * T * C), att: allocLike(like, B * H * T * T) };
}

function headSize(C: number, H: number, rope: boolean): number {
  if (!Number.isInteger(H) || H < 1 || C % H !== 0) throw new Error(`attention: H must divide C, got C=${C}, H=${H}`);
  const hs = C / H;
  if (rope && hs % 2 !== 0) throw new Error(`attention: rope needs an even head size, got C/H=${hs}`);
  return hs;
}

/**
 * RoPE forward: rotates each pair (2i, 2i+1) of each head of row (b, t) by the angle
 * `(pos0 + t)·base^(−2i/hs)`. `out` may alias `inp`.
 *
 * @param out - (B, T, C)
 * @param inp - (B, T, C)
 * @param pos0 - position of t = 0 (the decode step passes the number of cached tokens)
 */
export function ropeForward(
  out: FloatArray,
  inp: FloatArray,
  B: number,
  T: number,
  C: number,
  H: number,
  base = 10000,
  pos0 = 0,
): void {
  ropeApply(out, inp, B, T, C, H, base, pos0, 1, false);
}

/**
 * RoPE backward, accumulating: the transpose (inverse) rotation of `dout` is added to `dinp`.
 *
 * @param dinp - (B, T, C) accumulated
 * @param dout - (B, T, C)
 */
export function ropeBackward(
  dinp: FloatArray,
  dout: FloatArray,
  B: number,
  T: number,
  C: number,
  H: number,
  base = 10000,
  pos0 = 0,
): void {
  ropeApply(dinp, dout, B, T, C, H, base, pos0, -1, true);
}

function ropeApply(
  out: FloatArray,
  inp: FloatArray,
  B: number,
  T: number,
  C: number,
  H: number,
  base: number,
  pos0: number,
  sign: 1 | -1,
  accumulate: boolean,
): void {
  const hs = headSize(C, H, true);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      const pos = pos0 + t;
      for (let h = 0; h < H; h++) {
        const o = (b * T + t) * C + h * hs;
        for (let i = 0; i < hs / 2; i++) {
          const angle = pos * Math.pow(base, (-2 * i) / hs);
          const cos = Math.cos(angle);
          const sin = sign * Math.sin(angle);
          const x0 = inp[o + 2 * i]!;
          const x1 = inp[o + 2 * i + 1]!;
          const y0 = x0 * cos - x1 * sin;
          const y1 = x0 * sin + x1 * cos;
          out[o + 2 * i] = accumulate ? out[o + 2 * i]! + y0 : y0;
          out[o + 2 * i + 1] = accumulate ? out[o + 2 * i + 1]! + y1 : y1;
        }
      }
    }
  }
}

/** Copies head h of rows [0, rows) of a (rows, C) slab starting at `off` into dst (rows, hs). */
function gatherHead(dst: FloatArray, src: FloatArray, off: number, rows: number, C: number, h: number, hs: number): void {
  for (let t = 0; t < rows; t++) {
    const s = off + t * C + h * hs;
    for (let d = 0; d < hs; d++) dst[t * hs + d] = src[s + d]!;
  }
}

/**
 * One row of the attention softmax, shared by the full and the decode paths so both round alike:
 * `P[t2] = exp(scale·S[t2] − m) / Σ exp(scale·S[t3] − m)` over t2 < len (doubles, increasing order),
 * `P[t2] = 0` for len ≤ t2 < width.
 */
function softmaxRow(P: FloatArray, pOff: number, S: FloatArray, sOff: number, len: number, width: number, scale: number): void {
  let m = -Infinity;
  for (let t2 = 0; t2 < len; t2++) m = Math.max(m, scale * S[sOff + t2]!);
  let sum = 0;
  for (let t2 = 0; t2 < len; t2++) sum += Math.exp(scale * S[sOff + t2]! - m);
  for (let t2 = 0; t2 < len; t2++) P[pOff + t2] = Math.exp(scale * S[sOff + t2]! - m) / sum;
  for (let t2 = len; t2 < width; t2++) P[pOff + t2] = 0;
}

/**
 * Attention forward (llm.c `attention_forward`, with separate q/k/v inputs): per batch b and head h,
 * `S = Q·Kᵀ`, `P = softmax(S/√hs)` row-wise over the visible keys, `O = P·V`; heads are concatenated.
 *
 * @param out - (B, T, C) attention output (before the output projection)
 * @param cache - filled: roped q, k (B, T, C) and P (B, H, T, T)
 * @param q - (B, T, C)
 * @param k - (B, T, C)
 * @param v - (B, T, C)
 */
export function attentionForward(
  out: FloatArray,
  cache: AttentionCache,
  q: FloatArray,
  k: FloatArray,
  v: FloatArray,
  B: number,
  T: number,
  C: number,
  H: number,
  opts: AttentionOptions = {},
): void {
  const causal = opts.causal ?? true;
  const rope = opts.rope ?? false;
  const gemms = opts.gemms ?? sequentialAttentionGemms;
  const hs = headSize(C, H, rope);
  const scale = 1 / Math.sqrt(hs);
  if (rope) {
    ropeForward(cache.q, q, B, T, C, H, opts.ropeBase, 0);
    ropeForward(cache.k, k, B, T, C, H, opts.ropeBase, 0);
  } else {
    cache.q.set(q.subarray(0, B * T * C));
    cache.k.set(k.subarray(0, B * T * C));
  }
  const Qh = allocLike(q, T * hs); // (T, hs)
  const Kh = allocLike(q, T * hs); // (T, hs)
  const Vh = allocLike(q, T * hs); // (T, hs)
  const VhT = allocLike(q, hs * T); // (hs, T)
  const S = allocLike(q, T * T); // (T, T) raw scores
  const Oh = allocLike(q, T * hs); // (T, hs)
  for (let b = 0; b < B; b++) {
    const off = b * T * C;
    for (let h = 0; h < H; h++) {
      gatherHead(Qh, cache.q, off, T, C, h, hs);
      gatherHead(Kh, cache.k, off, T, C, h, hs);
      gatherHead(Vh, v, off, T, C, h, hs);
      gemms.qk(S, Qh, Kh, T, T, hs);
      const pOff = (b * H + h) * T * T; // P slab (T, T)
      for (let t = 0; t < T; t++) softmaxRow(cache.att, pOff + t * T, S, t * T, causal ? t + 1 : T, T, scale);
      transpose(VhT, Vh, T, hs);
      gemms.pv(Oh, cache.att.subarray(pOff, pOff + T * T), VhT, T, hs, T);
      for (let t = 0; t < T; t++) {
        for (let d = 0; d < hs; d++) out[off + t * C + h * hs + d] = Oh[t * hs + d]!;
      }
    }
  }
}

/**
 * Attention backward (llm.c `attention_backward` in matrix form), accumulating into dq, dk, dv:
 * `dP = dO·Vᵀ`, `dV += Pᵀ·dO`, `dS = P⊙(dP − rowsum(P⊙dP))/√hs`, `dQ += dS·K`, `dK += dSᵀ·Q`
 * (with RoPE, dQ and dK are rotated back before being added).
 *
 * @param dq - (B, T, C) accumulated
 * @param dk - (B, T, C) accumulated
 * @param dv - (B, T, C) accumulated
 * @param dout - (B, T, C)
 * @param cache - from the forward
 * @param v - (B, T, C) forward input
 */
export function attentionBackward(
  dq: FloatArray,
  dk: FloatArray,
  dv: FloatArray,
  dout: FloatArray,
  cache: AttentionCache,
  v: FloatArray,
  B: number,
  T: number,
  C: number,
  H: number,
  opts: AttentionOptions = {},
): void {
  const rope = opts.rope ?? false;
  const gemms = opts.gemms ?? sequentialAttentionGemms;
  const hs = headSize(C, H, rope);
  const scale = 1 / Math.sqrt(hs);
  const dqRot = rope ? allocLike(dout, B * T * C) : dq; // (B, T, C) gradient w.r.t. roped q
  const dkRot = rope ? allocLike(dout, B * T * C) : dk; // (B, T, C)
  const Qh = allocLike(dout, T * hs); // (T, hs)
  const Kh = allocLike(dout, T * hs); // (T, hs)
  const Vh = allocLike(dout, T * hs); // (T, hs)
  const dOh = allocLike(dout, T * hs); // (T, hs)
  const QhT = allocLike(dout, hs * T); // (hs, T)
  const KhT = allocLike(dout, hs * T); // (hs, T)
  const dOhT = allocLike(dout, hs * T); // (hs, T)
  const PT = allocLike(dout, T * T); // (T, T)
  const dP = allocLike(dout, T * T); // (T, T)
  const dS = allocLike(dout, T * T); // (T, T)
  const dST = allocLike(dout, T * T); // (T, T)
  const dQh = allocLike(dout, T * hs); // (T, hs)
  const dKh = allocLike(dout, T * hs); // (T, hs)
  const dVh = allocLike(dout, T * hs); // (T, hs)
  for (let b = 0; b < B; b++) {
    const off = b * T * C;
    for (let h = 0; h < H; h++) {
      gatherHead(Qh, cache.q, off, T, C, h, hs);
      gatherHead(Kh, cache.k, off, T, C, h, hs);
      gatherHead(Vh, v, off, T, C, h, hs);
      gatherHead(dOh, dout, off, T, C, h, hs);
      const pOff = (b * H + h) * T * T;
      const P = cache.att.subarray(pOff, pOff + T * T); // (T, T)
      gemms.dScores(dP, dOh, Vh, T, T, hs);
      transpose(PT, P, T, T);
      transpose(dOhT, dOh, T, hs);
      gemms.dValues(dVh, PT, dOhT, T, hs, T);
      for (let t = 0; t < T; t++) {
        let dot = 0;
        for (let t2 = 0; t2 < T; t2++) dot += P[t * T + t2]! * dP[t * T + t2]!;
        for (let t2 = 0; t2 < T; t2++) dS[t * T + t2] = scale * P[t * T + t2]! * (dP[t * T + t2]! - dot);
      }
      transpose(KhT, Kh, T, hs);
      gemms.dQuery(dQh, dS, KhT, T, hs, T);
      transpose(dST, dS, T, T);
      transpose(QhT, Qh, T, hs);
      gemms.dKey(dKh, dST, QhT, T, hs, T);
      for (let t = 0; t < T; t++) {
        for (let d = 0; d < hs; d++) {
          const i = off + t * C + h * hs + d;
          const j = t * hs + d;
          dqRot[i] = dqRot[i]! + dQh[j]!;
          dkRot[i] = dkRot[i]! + dKh[j]!;
          dv[i] = dv[i]! + dVh[j]!;
        }
      }
    }
  }
  if (rope) {
    ropeBackward(dq, dqRot, B, T, C, H, opts.ropeBase, 0);
    ropeBackward(dk, dkRot, B, T, C, H, opts.ropeBase, 0);
  }
}

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
  if (!Number.isInteger(tPast) || tPast < 0 || tPast >= tCap) throw new Error(`attentionDecodeAppend: tPast must be in [0, ${tCap}), got ${tPast}`);
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
  if (!Number.isInteger(tLen) || tLen < 1 || tLen > tCap) throw new Error(`attentionDecodeForward: tLen must be in [1, ${tCap}], got ${tLen}`);
  if ((opts.causal ?? true) === false) throw new Error('attentionDecodeForward: causal must be true for incremental decoding, got false');
  const rope = opts.rope ?? false;
  const gemms = opts.gemms ?? sequentialAttentionGemms;
  const hs = headSize(C, H, rope);
  const scale = 1 / Math.sqrt(hs);
  const qRot = allocLike(q, B * C); // (B, C)
  if (rope) ropeForward(qRot, q, B, 1, C, H, opts.ropeBase, tLen - 1);
  else qRot.set(q.subarray(0, B * C));
  const qh = allocLike(q, hs); // (1, hs)
  const Kh = allocLike(q, tLen * hs); // (tLen, hs)
  const Vh = allocLike(q, tLen * hs); // (tLen, hs)
  const VhT = allocLike(q, hs * tLen); // (hs, tLen)
  const S = allocLike(q, tLen); // (1, tLen)
  const P = allocLike(q, tLen); // (1, tLen)
  const oh = allocLike(q, hs); // (1, hs)
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      for (let d = 0; d < hs; d++) qh[d] = qRot[b * C + h * hs + d]!;
      gatherHead(Kh, kCache, b * tCap * C, tLen, C, h, hs);
      gatherHead(Vh, vCache, b * tCap * C, tLen, C, h, hs);
      gemms.qk(S, qh, Kh, 1, tLen, hs);
      softmaxRow(P, 0, S, 0, tLen, tLen, scale);
      if (att) att.set(P, (b * H + h) * tLen);
      transpose(VhT, Vh, tLen, hs);
      gemms.pv(oh, P, VhT, 1, hs, tLen);
      for (let d = 0; d < hs; d++) out[b * C + h * hs + d] = oh[d]!;
    }
  }
}
