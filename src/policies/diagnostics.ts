// Rollout–trainer mismatch diagnostics over masked per-token log-probs (k1, k3, |Δp|, |δ|, ESS), as the
// mismatch probe prints them. Not the estimator library's full metric set (χ², CV, clip fractions, …).

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
 * The diagnostics of `spec/estimators.md` "Diagnostics" that need only ℓroll and ℓold, as token means
 * over the mask (sums in doubles in index order). With no masked-in token every mean is NaN.
 *
 * @param logpRollout - ℓroll per token
 * @param logpOld - ℓold per token, same layout
 * @param mask - 1 where the token counts
 * @example
 * ```ts
 * mismatchDiagnostics([-1, -2], [-1, -2], [1, 1]).k3; // 0
 * ```
 */
export function mismatchDiagnostics(logpRollout: ArrayLike<number>, logpOld: ArrayLike<number>, mask: ArrayLike<number>): MismatchDiagnostics {
  if (logpOld.length !== logpRollout.length || mask.length !== logpRollout.length) {
    throw new Error(`mismatchDiagnostics: logpRollout, logpOld and mask must have one length, got ${logpRollout.length}, ${logpOld.length}, ${mask.length}`);
  }
  let n = 0, k1 = 0, k3 = 0, dp = 0, ad = 0, maxAd = 0, gt = 0, w1 = 0, w2 = 0;
  for (let i = 0; i < mask.length; i++) {
    if (!mask[i]) continue;
    const roll = logpRollout[i]!;
    const old = logpOld[i]!;
    const x = roll - old;
    const delta = old - roll;
    const w = Math.exp(delta);
    n += 1;
    k1 += x;
    k3 += Math.exp(-x) - 1 + x;
    dp += Math.abs(Math.exp(old) - Math.exp(roll));
    ad += Math.abs(delta);
    maxAd = Math.max(maxAd, Math.abs(delta));
    if (Math.abs(delta) > 1e-3) gt += 1;
    w1 += w;
    w2 += w * w;
  }
  const meanW = w1 / n;
  return {
    tokens: n,
    k1: k1 / n,
    k3: k3 / n,
    meanAbsDp: dp / n,
    meanAbsDelta: ad / n,
    maxAbsDelta: n > 0 ? maxAd : Number.NaN,
    ess: (meanW * meanW) / (w2 / n),
    'fracAbsDeltaGt1e-3': gt / n,
  };
}
