// Multi-head scaled dot-product attention (causal or bidirectional, optional RoPE): forward/backward.
// Not the q/k/v/o projections and not the decode step (attention-decode.ts).

import { allocLike, transpose, type FloatArray } from './array.js';
import { gatherHead, headSize, softmaxRow } from './attention-common.js';
import { gemmSequential, type GemmFn } from './gemm.js';
import { ropeBackward, ropeForward } from './rope.js';

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
  /**
   * Optional, for the decode path: says that `qk` and `pv` round their `b` operand (K rows, Vᵀ
   * rows) element by element with `roundB`, and gives the same GEMMs taking `b` already rounded.
   * The decode step then rounds each cached K/V element once instead of once per step. It applies
   * only while `qk` and `pv` are the functions named here (a copy that replaces them drops it).
   */
  readonly decodeRounding?: {
    /** The `qk` this describes. */
    readonly qk: GemmFn;
    /** The `pv` this describes. */
    readonly pv: GemmFn;
    /** Writes the rounding of every element of `src` to `dst` (same length). */
    readonly roundB: (dst: Float32Array, src: Float32Array) => void;
    /** `qk` with its `b` operand already rounded by `roundB`. */
    readonly qkRoundedB: GemmFn;
    /** `pv` with its `b` operand already rounded by `roundB`. */
    readonly pvRoundedB: GemmFn;
  };
  /**
   * Optional, for the full-sequence forward and backward: says that all six GEMMs round both operands
   * element by element with one function and then multiply the rounded operands, and gives the pieces.
   * Q, K, V, dO and P are then rounded once per call (whole tensors, not per head and per product) and
   * dS once per head. It applies only while the six GEMMs are the functions named here.
   */
  readonly operandRounding?: AttentionOperandRounding;
  /**
   * Optional, for the decode path: gives `qk` and `pv` for all (sequence, head) pairs of a decode step
   * in one call each, every pair's product equal bit for bit to its own `qk`/`pv` call. It applies only
   * while `qk` and `pv` are the functions named here (a copy that replaces them drops it).
   */
  readonly decodeBatch?: AttentionDecodeBatch;
}

/**
 * `count` independent products of one shape: `out[p·m·n …](m×n) = A[p·m·k …](m×k) · B[p·n·k …](n×k)ᵀ`
 * for p in [0, count), float32 operands and output.
 */
export type BatchedGemmFn = (
  out: Float32Array,
  a: Float32Array,
  b: Float32Array,
  count: number,
  m: number,
  n: number,
  k: number,
) => void;

/** See {@link AttentionGemms.decodeBatch}. */
export interface AttentionDecodeBatch {
  /** The `qk` this batches. */
  readonly qk: GemmFn;
  /** The `pv` this batches. */
  readonly pv: GemmFn;
  /** `qk` for every pair: S (count, 1, tLen) = Q (count, 1, hs) · K (count, tLen, hs)ᵀ. */
  readonly qkBatch: BatchedGemmFn;
  /** `pv` for every pair: O (count, 1, hs) = P (count, 1, tLen) · Vᵀ (count, hs, tLen)ᵀ. */
  readonly pvBatch: BatchedGemmFn;
}

/**
 * The operand rounding of the attention GEMMs ({@link AttentionGemms.operandRounding}): the six GEMMs
 * it describes (`qk` … `dKey`), their rounding and their product on rounded operands.
 */
export interface AttentionOperandRounding
  extends Pick<AttentionGemms, 'qk' | 'pv' | 'dScores' | 'dValues' | 'dQuery' | 'dKey'> {
  /** Writes the rounding of every element of `src` to `dst` (same length): what each GEMM does to each operand. */
  readonly round: (dst: Float32Array, src: FloatArray) => void;
  /** The six GEMMs with both operands already rounded by `round` (the same accumulation and output rounding). */
  readonly gemmRounded: GemmFn;
}

/** The {@link AttentionOperandRounding} the full-sequence paths may use for `gemms`, or null (then they call the six GEMMs). */
function operandRoundingOf(g: AttentionGemms): AttentionOperandRounding | null {
  const r = g.operandRounding;
  if (r === undefined) return null;
  const same =
    r.qk === g.qk &&
    r.pv === g.pv &&
    r.dScores === g.dScores &&
    r.dValues === g.dValues &&
    r.dQuery === g.dQuery &&
    r.dKey === g.dKey;
  return same ? r : null;
}

/** round(x[0 … n)) as a new array. */
function rounded(r: AttentionOperandRounding, x: FloatArray, n: number): Float32Array {
  const out = new Float32Array(n);
  r.round(out, x.length === n ? x : x.subarray(0, n));
  return out;
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
  /**
   * The GEMM operands the forward rounded with an {@link AttentionGemms.operandRounding} (the backward
   * reads the same q, k, v and P again); set by {@link attentionForward}, undefined after a forward
   * without one.
   */
  rounded?: RoundedAttentionOperands | undefined;
}

/** round(q), round(k), round(v) and round(P) of one forward ({@link AttentionCache.rounded}). */
export interface RoundedAttentionOperands {
  /** The rounding they were made with. */
  readonly rounding: AttentionOperandRounding;
  /** The forward's `v` input they were made from. */
  readonly vInput: FloatArray;
  /** (B, T, C) round of the cache's q. */
  readonly q: Float32Array;
  /** (B, T, C) round of the cache's k. */
  readonly k: Float32Array;
  /** (B, T, C) round(v). */
  readonly v: Float32Array;
  /** (B, H, T, T) round(P). */
  readonly att: Float32Array;
}

/** Allocates an {@link AttentionCache} of the element type of `like`. */
export function createAttentionCache(like: FloatArray, B: number, T: number, C: number, H: number): AttentionCache {
  return { q: allocLike(like, B * T * C), k: allocLike(like, B * T * C), att: allocLike(like, B * H * T * T) };
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
  // With an operand rounding: q, k, v rounded once here (what qk and pv would do per head), P per
  // head, all kept in the cache for the backward.
  const r = operandRoundingOf(gemms);
  const n = B * T * C;
  const qIn = r ? rounded(r, cache.q, n) : cache.q; // (B, T, C)
  const kIn = r ? rounded(r, cache.k, n) : cache.k; // (B, T, C)
  const vIn = r ? rounded(r, v, n) : v; // (B, T, C)
  const attIn = new Float32Array(r ? B * H * T * T : 0); // (B, H, T, T) round(P), with an operand rounding
  cache.rounded = r
    ? { rounding: r, vInput: v, q: qIn as Float32Array, k: kIn as Float32Array, v: vIn as Float32Array, att: attIn }
    : undefined;
  const like = r ? qIn : q;
  const Qh = allocLike(like, T * hs); // (T, hs)
  const Kh = allocLike(like, T * hs); // (T, hs)
  const Vh = allocLike(like, T * hs); // (T, hs)
  const VhT = allocLike(like, hs * T); // (hs, T)
  const S = allocLike(q, T * T); // (T, T) raw scores
  const Oh = allocLike(q, T * hs); // (T, hs)
  for (let b = 0; b < B; b++) {
    const off = b * T * C;
    for (let h = 0; h < H; h++) {
      gatherHead(Qh, 0, hs, 1, qIn, off, T, C, h, hs);
      gatherHead(Kh, 0, hs, 1, kIn, off, T, C, h, hs);
      gatherHead(Vh, 0, hs, 1, vIn, off, T, C, h, hs);
      (r ? r.gemmRounded : gemms.qk)(S, Qh, Kh, T, T, hs);
      const pOff = (b * H + h) * T * T; // P slab (T, T)
      for (let t = 0; t < T; t++) softmaxRow(cache.att, pOff + t * T, S, t * T, causal ? t + 1 : T, T, scale);
      transpose(VhT, Vh, T, hs);
      const P = cache.att.subarray(pOff, pOff + T * T); // (T, T)
      if (r) {
        const Ph = attIn.subarray(pOff, pOff + T * T); // (T, T)
        r.round(Ph, P);
        r.gemmRounded(Oh, Ph, VhT, T, hs, T);
      } else gemms.pv(Oh, P, VhT, T, hs, T);
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
  // With an operand rounding: q, k, v and P as the forward rounded them (or rounded here), dO once
  // (what the GEMMs would do per head and per product), dS once per head for both dQuery and dKey.
  const r = operandRoundingOf(gemms);
  const n = B * T * C;
  const kept = r !== null && cache.rounded?.rounding === r && cache.rounded.vInput === v ? cache.rounded : undefined;
  const qIn = kept?.q ?? (r ? rounded(r, cache.q, n) : cache.q); // (B, T, C)
  const kIn = kept?.k ?? (r ? rounded(r, cache.k, n) : cache.k); // (B, T, C)
  const vIn = kept?.v ?? (r ? rounded(r, v, n) : v); // (B, T, C)
  const dIn = r ? rounded(r, dout, n) : dout; // (B, T, C)
  const pIn = kept?.att ?? (r ? rounded(r, cache.att, B * H * T * T) : cache.att); // (B, H, T, T) GEMM operand P
  const like = r ? qIn : dout;
  const Qh = allocLike(like, T * hs); // (T, hs)
  const Kh = allocLike(like, T * hs); // (T, hs)
  const Vh = allocLike(like, T * hs); // (T, hs)
  const dOh = allocLike(like, T * hs); // (T, hs)
  const QhT = allocLike(like, hs * T); // (hs, T)
  const KhT = allocLike(like, hs * T); // (hs, T)
  const dOhT = allocLike(like, hs * T); // (hs, T)
  const PT = allocLike(like, T * T); // (T, T)
  const dP = allocLike(dout, T * T); // (T, T)
  const dS = allocLike(dout, T * T); // (T, T)
  const dSIn = r ? new Float32Array(T * T) : dS; // (T, T) round(dS), with an operand rounding
  const dST = allocLike(like, T * T); // (T, T)
  const dQh = allocLike(dout, T * hs); // (T, hs)
  const dKh = allocLike(dout, T * hs); // (T, hs)
  const dVh = allocLike(dout, T * hs); // (T, hs)
  const gemm = (site: GemmFn): GemmFn => (r ? r.gemmRounded : site);
  for (let b = 0; b < B; b++) {
    const off = b * T * C;
    for (let h = 0; h < H; h++) {
      gatherHead(Qh, 0, hs, 1, qIn, off, T, C, h, hs);
      gatherHead(Kh, 0, hs, 1, kIn, off, T, C, h, hs);
      gatherHead(Vh, 0, hs, 1, vIn, off, T, C, h, hs);
      gatherHead(dOh, 0, hs, 1, dIn, off, T, C, h, hs);
      const pOff = (b * H + h) * T * T;
      const P = cache.att.subarray(pOff, pOff + T * T); // (T, T)
      gemm(gemms.dScores)(dP, dOh, Vh, T, T, hs);
      transpose(PT, pIn.subarray(pOff, pOff + T * T), T, T);
      transpose(dOhT, dOh, T, hs);
      gemm(gemms.dValues)(dVh, PT, dOhT, T, hs, T);
      for (let t = 0; t < T; t++) {
        let dot = 0;
        for (let t2 = 0; t2 < T; t2++) dot += P[t * T + t2]! * dP[t * T + t2]!;
        for (let t2 = 0; t2 < T; t2++) dS[t * T + t2] = scale * P[t * T + t2]! * (dP[t * T + t2]! - dot);
      }
      if (r) r.round(dSIn as Float32Array, dS);
      transpose(KhT, Kh, T, hs);
      gemm(gemms.dQuery)(dQh, dSIn, KhT, T, hs, T);
      transpose(dST, dSIn, T, T);
      transpose(QhT, Qh, T, hs);
      gemm(gemms.dKey)(dKh, dST, QhT, T, hs, T);
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
