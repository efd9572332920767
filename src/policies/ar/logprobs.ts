// The trainer's side of the AR policy: per-token log-probs ℓ of given responses by full-sequence
// recompute, their backward for any per-token coefficients dL/dℓ, and per-token entropy. Not a loss.

import { allocLike, type FloatArray } from '../../nn/array.js';
import { rowEntropy, rowProbSqSum } from '../../nn/row-logprob.js';
import type { PolicyNumerics } from '../numerics.js';
import { arBackward, arForward, type ArForwardCache, type ArPolicy } from './model.js';
import { logSumExp } from './sampler.js';
import { trainerTopk } from './topk.js';

/** Options of {@link computeLogprobs}. */
export interface TrainerLogprobOptions {
  /** The trainer's numerics (from the plan's trainer side, built after the last weight change). */
  readonly numerics: PolicyNumerics;
  /** ℓ = log softmax(z/τ)[y]: the same τ the rollout engine sampled with. @defaultValue 1 */
  readonly temperature?: number;
  /**
   * (B, L, V) sampling-support replay ({@link Rollout.support}): score each token under softmax(z/τ)
   * renormalised over the rollout's kept set, as the sampler's processed log-prob (TRL issue 6789,
   * prime-rl PR 2601), and report the entropy of that renormalised distribution. Absent: the full
   * vocabulary.
   */
  readonly support?: Uint8Array | undefined;
  /**
   * MoE routing replay: per layer, (B, P + L, k) experts to use instead of the router's top-k
   * (R3: the rollout's `moeRouting`; R2: the routing an earlier trainer pass used). A row of −1
   * keeps this pass's own top-k. Absent: every position routes by its own top-k.
   */
  readonly routing?: readonly Int32Array[] | undefined;
  /**
   * Where τ enters: `before-log-softmax`, ℓ = log softmax(z/τ)[y]; `after-log-softmax`,
   * ℓ = log softmax(z)[y] / τ (a mis-wired recompute; the entropy and the backward follow it: the
   * entropy is of softmax(z)). @defaultValue 'before-log-softmax'
   */
  readonly temperatureAt?: 'before-log-softmax' | 'after-log-softmax';
  /** Also return Σ_v π(v)² at each scored position ({@link TrainerLogprobs.probSqSum}). @defaultValue false */
  readonly probSqSum?: boolean | undefined;
  /**
   * Also score the rollout engine's top-k ids ({@link TrainerLogprobs.topkLogp}): `ids` (B, L, K),
   * −1 = empty slot, each scored from the same row and log-sum-exp as the sampled token.
   */
  readonly topk?: { readonly K: number; readonly ids: Int32Array } | undefined;
}

/** Per-token log-probs of B responses, and what {@link backwardLogprobs} needs. */
export interface TrainerLogprobs {
  /** Number of sequences. */
  readonly B: number;
  /** Prompt length P. */
  readonly promptLength: number;
  /** Response slots L. */
  readonly responseLength: number;
  /** (B, L) ℓ_t = log π(y_t | y_<t) at temperature τ; 0 where the mask is 0. */
  readonly logp: Float64Array;
  /**
   * (B, L) entropy of softmax(z/τ) at each response position, over the kept set when `support` is
   * replayed; 0 where the mask is 0 (a metric).
   */
  readonly entropy: Float64Array;
  /**
   * (B, L) Σ_v π(v)² of softmax(z/τ) (over the kept set when `support` is replayed), from the same
   * row and log-sum-exp as `logp`; 0 where the mask is 0. Only when `probSqSum` was asked.
   */
  readonly probSqSum?: Float64Array | undefined;
  /** (B, L, K) ℓ at the engine's top-k ids (0 at an empty slot or where the mask is 0), when `topk` was given. */
  readonly topkLogp?: Float64Array | undefined;
  /** The top-k ids scored, when `topk` was given (the backward reads them). */
  readonly topk?: { readonly K: number; readonly ids: Int32Array } | undefined;
  /** (B, L) the response mask used. */
  readonly mask: ArrayLike<number>;
  /** τ. */
  readonly temperature: number;
  /** Where τ entered ({@link TrainerLogprobOptions.temperatureAt}); absent = before the log-softmax. */
  readonly temperatureAt?: 'after-log-softmax';
  /** (B, L, V) kept sets replayed, if any. */
  readonly support?: Uint8Array | undefined;
  /** The forward caches (logits (B, P + L, V)). */
  readonly cache: ArForwardCache;
  /** The numerics of the forward, reused by the backward. */
  readonly numerics: PolicyNumerics;
}

/**
 * Trainer recompute: one full forward over prompts + responses (B, T = P + L) and, for every response
 * slot k with mask 1, `ℓ[b,k] = log softmax(z[b, P+k−1]/τ)[tokens[b, P+k]]`, evaluated by the same
 * routine as the sampler's processed log-prob without filters (so equal numerics give equal ℓ).
 *
 * @param tokens - (B, P + L) prompt then response tokens (e.g. {@link Rollout.tokens})
 * @param responseMask - (B, L) 1 for response tokens to score
 */
export function computeLogprobs(
  policy: ArPolicy,
  tokens: ArrayLike<number>,
  B: number,
  P: number,
  responseMask: ArrayLike<number>,
  opts: TrainerLogprobOptions,
): TrainerLogprobs {
  const tau = opts.temperature ?? 1;
  if (!(tau > 0) || !Number.isFinite(tau))
    throw new Error(`computeLogprobs: temperature must be finite and > 0, got ${tau}`);
  if (!Number.isInteger(P) || P < 1) throw new Error(`computeLogprobs: P must be a positive integer, got ${P}`);
  const T = tokens.length / B;
  if (!Number.isInteger(T) || T <= P)
    throw new Error(`computeLogprobs: tokens must hold B=${B} rows longer than P=${P}, got length ${tokens.length}`);
  const L = T - P;
  if (responseMask.length !== B * L)
    throw new Error(`computeLogprobs: responseMask must have B·L = ${B * L} entries, got ${responseMask.length}`);
  const V = policy.config.vocabSize;
  const support = opts.support;
  if (support !== undefined && support.length !== B * L * V)
    throw new Error(`computeLogprobs: support must have B·L·V = ${B * L * V} entries, got ${support.length}`);
  const after = opts.temperatureAt === 'after-log-softmax';
  if (opts.temperatureAt !== undefined && !after && opts.temperatureAt !== 'before-log-softmax')
    throw new Error(
      `computeLogprobs: temperatureAt must be before-log-softmax or after-log-softmax, got ${JSON.stringify(opts.temperatureAt)}`,
    );
  const sm = after ? 1 : tau; // the temperature inside the softmax
  const cache = arForward(policy, tokens, B, T, opts.numerics, opts.routing ?? null);
  const logp = new Float64Array(B * L); // (B, L)
  const entropy = new Float64Array(B * L); // (B, L)
  const probSqSum = opts.probSqSum === true ? new Float64Array(B * L) : undefined; // (B, L)
  const topk = opts.topk;
  if (topk !== undefined && topk.ids.length !== B * L * topk.K)
    throw new Error(`computeLogprobs: topk.ids must have B·L·K = ${B * L * topk.K} entries, got ${topk.ids.length}`);
  const topkLogp = topk === undefined ? undefined : new Float64Array(B * L * topk.K); // (B, L, K)
  for (let b = 0; b < B; b++) {
    for (let k = 0; k < L; k++) {
      if (!responseMask[b * L + k]) continue;
      const off = (b * T + P + k - 1) * V; // logits row predicting tokens[b, P+k]
      const y = tokens[b * T + P + k]!;
      const keep = support === undefined ? null : support.subarray((b * L + k) * V, (b * L + k + 1) * V);
      const lse = logSumExp(cache.logits, off, V, sm, keep);
      const l = cache.logits[off + y]! / sm - lse;
      logp[b * L + k] = after ? l / tau : l;
      entropy[b * L + k] = rowEntropy(cache.logits, off, V, sm, -1, keep);
      if (probSqSum !== undefined) probSqSum[b * L + k] = rowProbSqSum(cache.logits, off, V, sm, lse, keep);
      if (topk !== undefined && topkLogp !== undefined) {
        const at = (b * L + k) * topk.K;
        trainerTopk(cache.logits, off, sm, lse, after ? tau : null, topk.K, topk.ids, at, topkLogp, at);
      }
    }
  }
  return {
    B,
    promptLength: P,
    responseLength: L,
    logp,
    entropy,
    probSqSum,
    ...(topk !== undefined ? { topk, topkLogp } : {}),
    mask: responseMask,
    temperature: tau,
    ...(after ? { temperatureAt: 'after-log-softmax' as const } : {}),
    support,
    cache,
    numerics: opts.numerics,
  };
}

/**
 * Accumulates into `policy.params.grads` the gradient of `Σ_{b,k} dLdLogp[b,k] · ℓ[b,k]` (masked slots
 * contribute nothing): per scored slot, `dz[b, P+k−1, v] = g·(1[v = y] − softmax(z/τ)_v)/τ`
 * (reference/policies.md §3.2; softmax(z) when τ entered after the log-softmax), then the model backward. This is how the GRPO loop backprops the
 * estimator library's gradient with respect to ℓθ.
 *
 * @param dLdLogp - (B, L) dL/dℓ per token
 */
export function backwardLogprobs(
  policy: ArPolicy,
  lp: TrainerLogprobs,
  dLdLogp: ArrayLike<number>,
  dLdTopk?: ArrayLike<number>,
): void {
  const { B, promptLength: P, responseLength: L, temperature: tau, cache } = lp;
  if (dLdLogp.length !== B * L)
    throw new Error(`backwardLogprobs: dLdLogp must have B·L = ${B * L} entries, got ${dLdLogp.length}`);
  const topk = dLdTopk === undefined ? undefined : lp.topk;
  if (dLdTopk !== undefined && (topk === undefined || dLdTopk.length !== B * L * topk.K))
    throw new Error(
      `backwardLogprobs: dLdTopk needs a pass with topk and B·L·K entries, got ${dLdTopk.length} (K = ${lp.topk?.K ?? 'none'})`,
    );
  const V = policy.config.vocabSize;
  const T = P + L;
  const dlogits = allocLike(policy.params.grads, B * T * V) as FloatArray; // (B, T, V)
  for (let b = 0; b < B; b++) {
    for (let k = 0; k < L; k++) {
      const g = dLdLogp[b * L + k]!;
      if (topk !== undefined && dLdTopk !== undefined && lp.mask[b * L + k]) {
        backwardTopkRow(lp, dlogits, b, k, V, g, topk, dLdTopk);
        continue;
      }
      if (!lp.mask[b * L + k] || g === 0) continue;
      const off = (b * T + P + k - 1) * V;
      const y = cache.tokens[b * T + P + k]!;
      const keep = lp.support === undefined ? null : lp.support.subarray((b * L + k) * V, (b * L + k + 1) * V);
      const sm = lp.temperatureAt === 'after-log-softmax' ? 1 : tau; // the temperature inside the softmax
      const lse = logSumExp(cache.logits, off, V, sm, keep);
      for (let v = 0; v < V; v++) {
        // replayed support: p is renormalised over the kept set and 0 outside it
        const p = keep !== null && !keep[v] ? 0 : Math.exp(cache.logits[off + v]! / sm - lse);
        dlogits[off + v] = (g * ((v === y ? 1 : 0) - p)) / tau;
      }
    }
  }
  arBackward(policy, cache, dlogits, lp.numerics);
}

/**
 * One scored slot of {@link backwardLogprobs} with top-k coefficients: dz_v = (g·1[v = y] +
 * Σ_j g_j·1[v = id_j] − (g + Σ_j g_j)·p_v)/τ, the sum of the sampled token's and every top-k id's
 * log-softmax gradient.
 */
function backwardTopkRow(
  lp: TrainerLogprobs,
  dlogits: FloatArray,
  b: number,
  k: number,
  V: number,
  g: number,
  topk: { readonly K: number; readonly ids: Int32Array },
  dLdTopk: ArrayLike<number>,
): void {
  const { promptLength: P, responseLength: L, temperature: tau, cache } = lp;
  const T = P + L;
  const off = (b * T + P + k - 1) * V;
  const y = cache.tokens[b * T + P + k]!;
  const keep = lp.support === undefined ? null : lp.support.subarray((b * L + k) * V, (b * L + k + 1) * V);
  const sm = lp.temperatureAt === 'after-log-softmax' ? 1 : tau;
  const lse = logSumExp(cache.logits, off, V, sm, keep);
  const at = (b * L + k) * topk.K;
  let total = g;
  for (let j = 0; j < topk.K; j++) if (topk.ids[at + j]! >= 0) total += dLdTopk[at + j]!;
  if (total === 0 && g === 0 && !Array.from({ length: topk.K }, (_, j) => dLdTopk[at + j]).some((x) => x !== 0)) return;
  for (let v = 0; v < V; v++) {
    const p = keep !== null && !keep[v] ? 0 : Math.exp(cache.logits[off + v]! / sm - lse);
    dlogits[off + v] = ((v === y ? g : 0) - total * p) / tau;
  }
  for (let j = 0; j < topk.K; j++) {
    const v = topk.ids[at + j]!;
    if (v >= 0) dlogits[off + v] = dlogits[off + v]! + dLdTopk[at + j]! / tau;
  }
}
