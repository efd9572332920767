// Top-k KL (EMA-PG, arXiv 2602.04417; LunjunZhang/ema-pg `compute_memory_efficient_kl`): the exact KL over
// the top-k ids plus a sampled tail correction at the sampled token when it lies outside them, here between
// the trainer πθ and the rollout engine μ over the engine's top-k. Not a policy loss of its own:
// policyObjective adds it to any loss (`config.topkKl`); not the sampled KL-to-reference (kl.ts).

import { UsageError } from '../../core/errors.js';
import type { MetricRecord } from '../types.js';
import { LOG_RATIO_BOUND } from '../types.js';
import type { TopkBatch } from '../topk.js';

/** Parameters of the top-k KL term (`config.topkKl`; ema-pg verl actor config names in brackets). */
export interface TopkKlParams {
  /**
   * `full_reverse`: KL(πθ‖μ), the head Σ_j p_j·(ℓθ_j − ℓμ_j); `full_forward`: KL(μ‖πθ), the head
   * Σ_j q_j·(ℓμ_j − ℓθ_j) (`kl_loss_type`). @defaultValue 'full_reverse'
   */
  readonly type: 'full_reverse' | 'full_forward';
  /** Coefficient of the aggregated term (`kl_loss_coef`). @defaultValue 0.001 */
  readonly coef: number;
  /** Add the sampled tail term at a sampled token outside the top-k (`kl_use_tail_sampling`). @defaultValue true */
  readonly tailSampling: boolean;
  /** Multiply the tail term by sg[exp(clamp(ℓθ − ℓold, ±20))] (`use_kl_iw`). @defaultValue false */
  readonly iw: boolean;
  /**
   * Bounds of that weight, clamp(w, lower, upper) with either bound optional (`kl_iw_clip_lower`,
   * `kl_iw_clip_upper`; torch.clamp). Read only with `iw`. @defaultValue none (no bound)
   */
  readonly iwClip?: { readonly lower?: number | undefined; readonly upper?: number | undefined } | undefined;
}

/** What {@link topkKlTerm} adds: per-token values and gradients (before `coef`). */
export interface TopkKlValue {
  /** Per-token KL estimate L1 + iw·L2 `(B, T)`, 0 outside the mask. */
  readonly tokenKl: Float64Array;
  /** d(Σ_k u_k·tokenKl_k)/dℓθ at the top-k ids `(B, T, K)`. */
  readonly gradTopk: Float64Array;
  /** d(Σ_k u_k·tokenKl_k)/dℓθ at the sampled tokens `(B, T)` (the tail term). */
  readonly gradLogpTheta: Float64Array;
}

const clampLog = (x: number): number => Math.min(LOG_RATIO_BOUND, Math.max(-LOG_RATIO_BOUND, x));

/** The `iw` weight sg[exp(clamp(ℓθ − ℓold, ±20))] within `iwClip` (dp_actor.py l.1056–1066), 1 without `iw`. */
function iwWeight(params: TopkKlParams, logRatio: number): number {
  if (!params.iw) return 1;
  const w = Math.exp(clampLog(logRatio));
  const lower = params.iwClip?.lower ?? -Infinity;
  const upper = params.iwClip?.upper ?? Infinity;
  return Math.min(Math.max(w, lower), upper);
}

/** The sampled token's log-probs {@link topkKlTerm} reads, all `(B, T)` (an estimate input has them). */
export interface TopkKlSides {
  /** ℓθ at the sampled token (carries gradient). */
  readonly logpTheta: Float64Array;
  /** Point at which detached factors are evaluated. @defaultValue logpTheta */
  readonly logpThetaDetached?: Float64Array | undefined;
  /** ℓroll at the sampled token. */
  readonly logpRollout: Float64Array;
  /** ℓold at the sampled token (the `iw` weight's anchor). */
  readonly logpOld: Float64Array;
}

/**
 * The top-k KL of every token k with `mask` 1 (ema-pg math/verl/verl/trainer/ppo/core_algos.py @f9b9776,
 * `compute_memory_efficient_kl` l.1656–1782; the importance weight of workers/actor/dp_actor.py
 * l.1056–1066, l.1108–1111, l.1162–1165), over the valid slots j with ℓθ_j (gradient) and ℓμ_j, the
 * sampled token y with ℓθ_y (gradient), its detached value sg ℓθ_y and ℓroll_y, and o = [y ∉ top-k]:
 * - `full_reverse`: L1 = Σ_j e^{ℓθ_j}·(ℓθ_j − ℓμ_j) (gradient e^{ℓθ_j}·(ℓθ_j − ℓμ_j + 1));
 *   L2 = o·sg(ℓθ_y − ℓroll_y)·exp(ℓθ_y − sg ℓθ_y) (value sg(ℓθ_y − ℓroll_y), gradient the same);
 * - `full_forward`: L1 = Σ_j e^{ℓμ_j}·(ℓμ_j − ℓθ_j) (gradient −e^{ℓμ_j}); with
 *   lw = clamp(ℓroll_y − ℓθ_y, ±20), L2 = o·(e^{sg lw}·lw + ℓθ_y − sg ℓθ_y) (the K4 estimator, gradient
 *   1 − e^{lw} inside the clamp, 1 outside).
 *
 * tokenKl = L1 + iw·L2 (iw = 1 unless `iw`, clamped to `iwClip` when given); gradients scaled by `upstream` (aggregation coefficient × coef).
 * Metrics (means over the masked tokens): `actor/topk_kl/head` (L1), `actor/topk_kl/tail` (iw·L2),
 * `actor/topk_kl/tail_frac` (the fraction with y outside the top-k).
 */
export function topkKlTerm(
  topk: TopkBatch,
  sides: TopkKlSides,
  mask: Float64Array,
  upstream: Float64Array,
  params: TopkKlParams,
): { value: TopkKlValue; metrics: MetricRecord } {
  const { logpTheta, logpThetaDetached, logpRollout, logpOld } = sides;
  const { K } = topk;
  if (params.tailSampling && topk.tokens === undefined)
    throw new UsageError(
      'topk.tokens: required by config.topkKl with tailSampling (the tail term reads the sampled id)',
    );
  const n = mask.length;
  const det = logpThetaDetached ?? logpTheta;
  const tokenKl = new Float64Array(n);
  const gradTopk = new Float64Array(n * K);
  const grad = new Float64Array(n);
  const sums = { head: 0, tail: 0, outside: 0 };
  let count = 0;
  for (let k = 0; k < n; k++) {
    if (mask[k] !== 1) continue;
    const u = upstream[k]!;
    let head = 0;
    let outside = params.tailSampling;
    for (let j = 0; j < K; j++) {
      const id = topk.ids[k * K + j]!;
      if (id < 0) continue;
      if (params.tailSampling && id === topk.tokens![k]) outside = false;
      const lt = topk.logpTheta[k * K + j]!;
      const lq = topk.logpRollout[k * K + j]!;
      if (params.type === 'full_reverse') {
        const p = Math.exp(lt);
        head += p * (lt - lq);
        gradTopk[k * K + j] = u * p * (lt - lq + 1);
      } else {
        const q = Math.exp(lq);
        head += q * (lq - lt);
        gradTopk[k * K + j] = -u * q;
      }
    }
    let tail = 0;
    if (outside) {
      if (topk.tokens![k]! < 0)
        throw new UsageError(`topk.tokens: config.topkKl needs the sampled id of every token, got -1 at ${k}`);
      const w = iwWeight(params, det[k]! - logpOld[k]!);
      let dTail: number;
      if (params.type === 'full_reverse') {
        const c = det[k]! - logpRollout[k]!;
        tail = c * Math.exp(logpTheta[k]! - det[k]!);
        dTail = c * Math.exp(logpTheta[k]! - det[k]!);
      } else {
        const raw = logpRollout[k]! - logpTheta[k]!;
        const lw = clampLog(raw);
        const e = Math.exp(clampLog(logpRollout[k]! - det[k]!));
        tail = e * lw + (logpTheta[k]! - det[k]!);
        dTail = (lw === raw ? -e : 0) + 1;
      }
      tail *= w;
      grad[k] = u * w * dTail;
    }
    tokenKl[k] = head + tail;
    count++;
    sums.head += head;
    sums.tail += tail;
    sums.outside += outside ? 1 : 0;
  }
  const m = (x: number): number => (count > 0 ? x / count : 0);
  return {
    value: { tokenKl, gradTopk, gradLogpTheta: grad },
    metrics: {
      'actor/topk_kl/head': m(sums.head),
      'actor/topk_kl/tail': m(sums.tail),
      'actor/topk_kl/tail_frac': m(sums.outside),
    },
  };
}
