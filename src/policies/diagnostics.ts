// Rollout–trainer mismatch diagnostics over masked per-token log-probs (k1, k3, |Δp|, |δ|, ESS), as the
// mismatch probes print them. Not the estimator library's full metric set (χ², CV, clip fractions, …).

import { mismatchDiagnostics, weightStats } from '../rl/diagnostics.js';

/** Mismatch between ℓroll (rollout engine) and ℓold (trainer) over the tokens with mask 1. */
export interface MismatchDiagnostics {
  /** Number of tokens with mask 1. */
  readonly tokens: number;
  /** k1 = mean(ℓroll − ℓold): the k1 estimate of KL(μ_roll ‖ π_old) on rollout samples. */
  readonly k1: number;
  /** k3 = mean(e^{−x} − 1 + x), x = ℓroll − ℓold (verl `k3_kl`): non-negative per token. */
  readonly k3: number;
  /** mean |e^ℓold − e^ℓroll|. */
  readonly meanAbsDp: number;
  /** mean |δ|, δ = ℓold − ℓroll. */
  readonly meanAbsDelta: number;
  /** max |δ|. */
  readonly maxAbsDelta: number;
  /** ESS ratio 1 / mean((w / mean w)²) with w = exp(δ) = ρ; 1 when the engines agree. */
  readonly ess: number;
  /** Fraction of tokens with |δ| > 1e-3. */
  readonly 'fracAbsDeltaGt1e-3': number;
}

/**
 * The diagnostics of docs/estimators.md "Diagnostics" that need only ℓroll and ℓold, as token means
 * over the mask, computed with the estimator library (`rollout_corr/kl`, `k3_kl`,
 * `prob_abs_diff_mean`, `logp_abs_diff_mean|max`, and the ESS ratio of the unclipped w = e^(ℓold − ℓroll)).
 * Both policies' mismatch probes report these.
 *
 * @param logpRollout - ℓroll per token
 * @param logpOld - ℓold per token, same layout
 * @param mask - 1 where the token counts
 * @example
 * ```ts
 * probeDiagnostics([-1, -2], [-1, -2], [1, 1]).k3; // 0
 * ```
 */
export function probeDiagnostics(
  logpRollout: ArrayLike<number>,
  logpOld: ArrayLike<number>,
  mask: ArrayLike<number>,
): MismatchDiagnostics {
  const n = mask.length;
  if (logpOld.length !== n || logpRollout.length !== n) {
    throw new Error(
      `probeDiagnostics: logpRollout, logpOld and mask must have one length, got ${logpRollout.length}, ${logpOld.length}, ${n}`,
    );
  }
  const old = Float64Array.from(logpOld);
  const roll = Float64Array.from(logpRollout);
  const m = Float64Array.from(mask, (x) => (x ? 1 : 0));
  const d = mismatchDiagnostics({ shape: { B: 1, T: n }, logpOld: old, logpRollout: roll, responseMask: m }).metrics;
  const w = old.map((o, k) => Math.exp(o - (roll[k] as number)));
  let tokens = 0;
  let big = 0;
  for (let k = 0; k < n; k++) {
    if (m[k] !== 1) continue;
    tokens += 1;
    if (Math.abs((old[k] as number) - (roll[k] as number)) > 1e-3) big += 1;
  }
  const ws = weightStats(w, m);
  return {
    tokens,
    k1: d['rollout_corr/kl'] as number,
    k3: d['rollout_corr/k3_kl'] as number,
    meanAbsDp: d['rollout_corr/prob_abs_diff_mean'] as number,
    meanAbsDelta: d['rollout_corr/logp_abs_diff_mean'] as number,
    maxAbsDelta: d['rollout_corr/logp_abs_diff_max'] as number,
    ess: ws['rollout_corr/weights_ess_ratio'] as number,
    'fracAbsDeltaGt1e-3': tokens > 0 ? big / tokens : 0,
  };
}
