// Sequence and token masks of single stacks: OPSM, ROLL's Δp filter, M2PO, AReaL's rejection sampling, NeMo-RL's sequence gate.
// Not the ratio-threshold families of veRL (rejection.ts): each stage here follows its own stack's statistic and metrics.

import type { MetricRecord } from '../types.js';
import { maskedMean, rowCounts, rowMaskedSums } from '../types.js';
import type { CorrectionFn, CorrectionLevel } from './stage.js';
import { broadcastRows, factorOneOffResponse, maskMetrics, ones, rowKeepMask, validMax } from './stage.js';

/**
 * Which two policies `opsm` compares: `deepseek` — the row KL mean_t(ℓroll − ℓold) of the rollout
 * against the old policy, dropping rows with mean advantage < 0 (DeepSeek-V3.2, TRL); `slime` — slime
 * without `--use-rollout-logprobs`: the row KL mean_t(ℓold − ℓθ) of the old policy against the current
 * one (ℓθ detached), dropping the tokens with A_t < 0 of such rows (slime `compute_opsm_mask`).
 */
export type OpsmForm = 'deepseek' | 'slime';
/** `opsm` threshold (DeepSeek-V3.2 off-policy sequence masking). */
export interface OpsmParams {
  /** Drop a sequence with mean advantage < 0 when its row KL > delta. @defaultValue 1e-4 (slime `--opsm-delta`) */
  readonly delta: number;
  /** Which policies the row KL compares. @defaultValue 'deepseek' */
  readonly form?: OpsmForm | undefined;
}
/** `dp-filter` band on Δp = e^ℓold − e^ℓroll. */
export interface DpFilterParams {
  /** @defaultValue -0.2 */
  readonly lo: number;
  /** @defaultValue 0.2 */
  readonly hi: number;
  /** @defaultValue 'token' */
  readonly level: DpFilterLevel;
}
/**
 * Level of `dp-filter`: `token` (each token on its own Δp), `sequence` (a row passes iff every valid
 * token passes), or ROLL's aggregated levels `roll-geometric` / `roll-sequence` (the masked mean /
 * masked sum of Δp over the row's valid tokens, broadcast to the row).
 */
export type DpFilterLevel = CorrectionLevel | 'roll-geometric' | 'roll-sequence';
/** `m2po` second-moment budget. */
export interface M2poParams {
  /** Largest allowed mean of δ² over the kept tokens. @defaultValue 0.04 */
  readonly tau: number;
}

/**
 * OPSM, DeepSeek-V3.2's off-policy sequence masking (arXiv 2512.02556; TRL `get_off_policy_mask`,
 * grpo_trainer.py l.2920–2938; slime `--use-opsm`): drop row i iff its mean advantage is < 0 and
 * mean_t(ℓroll − ℓold) > delta. With `mode: "bypass"` the stage sees ℓθ (detached) as ℓold, which is
 * TRL's form (`sampling_per_token_logps − per_token_logps`) and slime's with `--use-rollout-logprobs`.
 * `form: "slime"` is slime without `--use-rollout-logprobs` (slime 624b824 `compute_opsm_mask`,
 * slime/utils/ppo_utils.py l.79–89, fed with ℓθ and the trainer's ℓold by loss.py l.965, l.1011–1017):
 * row KL mean_t(ℓold − ℓθ) over max(n_i, 1) tokens, and token t of such a row is dropped iff A_t < 0.
 */
export const opsm: CorrectionFn<OpsmParams> = (input, params) => {
  const { B, T } = input.shape;
  const slime = params.form === 'slime';
  if (slime && input.logpTheta === undefined)
    throw new Error('opsm: form "slime" needs logpTheta (ℓθ detached) in the correction input');
  const n = rowCounts(input.responseMask, input.shape);
  const logRatio = slime
    ? (k: number) => input.logpOld[k]! - input.logpTheta![k]!
    : (k: number) => input.logpRollout[k]! - input.logpOld[k]!;
  const kl = rowMaskedSums(input.responseMask, input.shape, logRatio).sums.map((s, i) => s / Math.max(n[i]!, 1));
  const adv = rowMaskedSums(input.responseMask, input.shape, (k) => input.advantages[k]!).sums.map(
    (a, i) => a / Math.max(n[i]!, 1),
  );
  const keep = slime
    ? input.advantages.map((a, k) => (a < 0 && kl[Math.floor(k / T)]! > params.delta ? 0 : 1))
    : rowKeepMask((i) => adv[i]! >= 0 || kl[i]! <= params.delta, input.shape);
  return {
    value: { factor: ones(B * T), keep, rectifiesAdvantage: false },
    metrics: {
      ...maskMetrics(input, keep),
      seq_kl_mean: maskedMean(broadcastRows(kl, input.shape), input.responseMask),
    },
  };
};

/**
 * ROLL's row aggregates of Δp (`roll/utils/train_infer_corrections.py` l.25 and l.30, commit 8eb27cc):
 * the masked mean and masked sum over the row's n valid tokens, 0 for an empty row (`masked_mean` /
 * `masked_sum` in `roll/utils/functionals.py` l.285–297).
 */
const rollDpAggregates = {
  'roll-geometric': (sum: number, n: number): number => (n > 0 ? sum / n : 0),
  'roll-sequence': (sum: number): number => sum,
} as const satisfies Record<Exclude<DpFilterLevel, CorrectionLevel>, (sum: number, n: number) => number>;

/**
 * Δp filter (ROLL `train_infer_corrections.py` `diff_low/high`): with Δp_t = e^ℓold − e^ℓroll, keep
 * a token iff lo ≤ Δp_t ≤ hi (`token`), a row iff all its tokens pass (`sequence`), or a row iff
 * lo ≤ agg_i ≤ hi for ROLL's row aggregate agg_i = mean (`roll-geometric`) or sum (`roll-sequence`)
 * of Δp over its valid tokens.
 */
export const dpFilter: CorrectionFn<DpFilterParams> = (input, params) => {
  const dp = input.logpOld.map((o, k) => Math.exp(o) - Math.exp(input.logpRollout[k]!));
  const inBand = (x: number): boolean => x >= params.lo && x <= params.hi;
  const pass = (k: number): boolean => inBand(dp[k]!);
  const { T } = input.shape;
  const level = params.level;
  const keep =
    level === 'token'
      ? dp.map((_, k) => (input.responseMask[k] !== 1 || pass(k) ? 1 : 0))
      : level === 'sequence'
        ? rowKeepMask((i) => {
            for (let t = 0; t < T; t++) if (input.responseMask[i * T + t] === 1 && !pass(i * T + t)) return false;
            return true;
          }, input.shape)
        : rowKeepMask((i) => {
            let sum = 0;
            let n = 0;
            for (let t = 0; t < T; t++) {
              if (input.responseMask[i * T + t] !== 1) continue;
              sum += dp[i * T + t]!;
              n += 1;
            }
            return inBand(rollDpAggregates[level](sum, n));
          }, input.shape);
  return {
    value: { factor: ones(dp.length), keep, rectifiesAdvantage: false },
    metrics: {
      ...maskMetrics(input, keep),
      dp_mean: maskedMean(dp, input.responseMask),
      dp_abs_max: validMax(dp.map(Math.abs), input.responseMask),
    },
  };
};

/**
 * M2PO second-moment mask (arXiv 2510.01161; AReaL `actor.m2_threshold`, `_get_m2po_loss_mask` in
 * areal/trainer/ppo/actor.py l.813–850): while the mean of δ_t² over the kept valid tokens is not below
 * tau, reject the kept token with the largest δ_t² (ties: the earliest), keeping at least one token.
 */
export const m2po: CorrectionFn<M2poParams> = (input, params) => {
  const sq = input.logpOld.map((o, k) => (o - input.logpRollout[k]!) ** 2);
  const order: number[] = [];
  for (let k = 0; k < sq.length; k++) if (input.responseMask[k] === 1) order.push(k);
  order.sort((a, b) => sq[b]! - sq[a]! || a - b);
  let sum = 0;
  for (const k of order) sum += sq[k]!;
  let kept = order.length;
  const keep = ones(sq.length);
  const m2Before = kept > 0 ? sum / kept : 0;
  for (const k of order) {
    if (kept <= 1 || sum / kept < params.tau) break;
    keep[k] = 0;
    sum -= sq[k]!;
    kept -= 1;
  }
  return {
    value: { factor: ones(sq.length), keep, rectifiesAdvantage: false },
    metrics: { ...maskMetrics(input, keep), m2_before: m2Before, m2_after: kept > 0 ? Math.max(0, sum) / kept : 0 },
  };
};

/** AReaL `actor.rejection_sampling` parameters, as AReaL spells them (areal/api/cli_args.py l.1505–1600). */
export interface ArealRsParams {
  /** @defaultValue 'token' */
  readonly level: CorrectionLevel;
  /** @defaultValue 'mask' */
  readonly action: 'mask' | 'clamp';
  /** @defaultValue 'ratio' */
  readonly metric: 'ratio' | 'kl_k1' | 'kl_k2' | 'kl_k3' | 'binary_kl';
  /** Sequence aggregation (level `sequence` only). @defaultValue 'mean' */
  readonly agg: 'sum' | 'mean' | 'max';
  /** @defaultValue 5 */
  readonly upper: number;
  /** @defaultValue null (none; 0 for `action: clamp`) */
  readonly lower: number | null;
}

/** Bernoulli KL(P‖Q) from log-probs with p, q clamped to [1e-8, 1 − 1e-8] (AReaL compute_binary_kl_divergence). */
function binaryKl(logP: number, logQ: number): number {
  const eps = 1e-8;
  const p = Math.min(1 - eps, Math.max(eps, Math.exp(logP)));
  const q = Math.min(1 - eps, Math.max(eps, Math.exp(logQ)));
  return p * Math.log(p / q) + (1 - p) * Math.log((1 - p) / (1 - q));
}

/**
 * AReaL's rejection sampling (`apply_rejection_sampling`, areal/utils/functional/functional.py l.190–433 at
 * AReaL cbff54d, 2-D padded path): with lr = ℓold − ℓroll (non-finite → 0) the metric is `ratio` e^lr,
 * `kl_k1` lr, `kl_k2` ½lr², `kl_k3` e^(−lr) − 1 + lr (AReaL's KLEstimator sign, areal/utils/data.py
 * l.1677–1694; not veRL's k3), or `binary_kl` max(KL(p_old‖p_roll), KL(p_roll‖p_old)) of Bernoullis (KPop,
 * l.248–258, l.440–449). Sequence level aggregates per row (ratio in log space: exp(sum|mean|max lr);
 * others arithmetic; counts clamped at 1; an empty row aggregates to 0) and the ratio metric's weight becomes
 * the row's geometric mean exp(mean lr). The weight is the behaviour importance weight e^lr (unclamped);
 * `mask` keeps lower ≤ metric ≤ upper, `clamp` (ratio only) clamps the weight into [lower ?? 0, upper] on the
 * out-of-bounds tokens / rows.
 */
export const arealRejectionSampling: CorrectionFn<ArealRsParams> = (input, params) => {
  const { B, T } = input.shape;
  const n = B * T;
  const lr = new Float64Array(n);
  for (let k = 0; k < n; k++) {
    const d = input.logpOld[k]! - input.logpRollout[k]!;
    lr[k] = Number.isFinite(d) ? d : 0;
  }
  const metricOf = (k: number): number => {
    const x = lr[k]!;
    switch (params.metric) {
      case 'ratio':
        return Math.exp(x);
      case 'kl_k1':
        return x;
      case 'kl_k2':
        return (x * x) / 2;
      case 'kl_k3':
        return Math.exp(-x) - 1 + x;
      case 'binary_kl':
        return Math.max(
          binaryKl(input.logpOld[k]!, input.logpRollout[k]!),
          binaryKl(input.logpRollout[k]!, input.logpOld[k]!),
        );
    }
  };
  const inBounds = (v: number): boolean =>
    params.lower !== null ? v >= params.lower && v <= params.upper : v <= params.upper;
  const weight = new Float64Array(n);
  for (let k = 0; k < n; k++) weight[k] = Math.exp(lr[k]!);
  const original = Float64Array.from(weight);
  const keep = ones(n);
  const ratio = params.metric === 'ratio';
  const lo = params.lower ?? 0;
  if (params.level === 'token') {
    for (let k = 0; k < n; k++) {
      if (input.responseMask[k] !== 1) continue;
      if (params.action === 'mask') keep[k] = inBounds(metricOf(k)) ? 1 : 0;
      else weight[k] = Math.min(params.upper, Math.max(lo, weight[k]!));
    }
  } else {
    for (let i = 0; i < B; i++) {
      let sum = 0;
      let c = 0;
      let max = -Infinity;
      let lsum = 0;
      for (let t = 0; t < T; t++) {
        const k = i * T + t;
        if (input.responseMask[k] !== 1) continue;
        const v = ratio ? lr[k]! : metricOf(k);
        sum += v;
        lsum += lr[k]!;
        max = Math.max(max, v);
        c += 1;
      }
      if (ratio) {
        const g = Math.exp(lsum / Math.max(c, 1));
        for (let t = 0; t < T; t++) weight[i * T + t] = g;
        for (let t = 0; t < T; t++) original[i * T + t] = g;
      }
      const agg = params.agg === 'sum' ? sum : params.agg === 'mean' ? sum / Math.max(c, 1) : c === 0 ? 0 : max;
      const ok = inBounds(ratio ? Math.exp(agg) : agg);
      if (ok) continue;
      for (let t = 0; t < T; t++) {
        const k = i * T + t;
        if (input.responseMask[k] !== 1) continue;
        if (params.action === 'mask') keep[k] = 0;
        else weight[k] = Math.min(params.upper, Math.max(lo, weight[k]!));
      }
    }
  }
  let valid = 0;
  let changed = 0;
  for (let k = 0; k < n; k++) {
    if (input.responseMask[k] !== 1) continue;
    valid += 1;
    if (params.action === 'mask' ? keep[k] === 0 : original[k] !== weight[k]) changed += 1;
  }
  return {
    value: { factor: factorOneOffResponse(weight, input.responseMask), keep, rectifiesAdvantage: false },
    metrics: { ...maskMetrics(input, keep), filtered_fraction: changed / Math.max(valid, 1) },
  };
};

/** NeMo-RL's sequence gate on the multiplicative probability error. */
export interface SeqLogprobErrorParams {
  /** Keep a row iff mean_t e^|ℓold − ℓroll| ≤ threshold. @defaultValue 2 (NeMo-RL Nemotron 3 Nano recipe; the config default is null = off) */
  readonly threshold: number;
}

/**
 * NeMo-RL `grpo.seq_logprob_error_threshold` (`compute_and_apply_seq_logprob_error_masking`,
 * nemo_rl/algorithms/grpo.py l.2513–2630 at 7ea279a): per row the multiplicative probability error
 * e_i = Σ_t m·e^|ℓold − ℓroll| / n_i (the per-row `token_mult_prob_error`); a row is kept iff e_i ≤ threshold
 * (its `sample_mask` is zeroed otherwise). Metrics under NeMo-RL's names: `max|mean|min_seq_mult_prob_error`
 * (non-empty rows), the same `_after_mask` over the kept non-empty rows (0 when none), `num_masked_seqs`.
 */
export const seqLogprobError: CorrectionFn<SeqLogprobErrorParams> = (input, params) => {
  const { B, T } = input.shape;
  const err: number[] = [];
  const kept: number[] = [];
  let masked = 0;
  const keep = rowKeepMask((i) => {
    let s = 0;
    let n = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.responseMask[k] !== 1) continue;
      s += Math.exp(Math.abs(input.logpOld[k]! - input.logpRollout[k]!));
      n += 1;
    }
    const e = n > 0 ? s / n : 0;
    const ok = e <= params.threshold;
    if (n > 0) {
      err.push(e);
      if (ok) kept.push(e);
    }
    if (!ok) masked += 1;
    return ok;
  }, input.shape);
  const stats = (xs: number[], suffix: string): MetricRecord => ({
    [`max_seq_mult_prob_error${suffix}`]: xs.length > 0 ? Math.max(...xs) : 0,
    [`mean_seq_mult_prob_error${suffix}`]: xs.length > 0 ? xs.reduce((a, b) => a + b, 0) / xs.length : 0,
    [`min_seq_mult_prob_error${suffix}`]: xs.length > 0 ? Math.min(...xs) : 0,
  });
  return {
    value: { factor: ones(B * T), keep, rectifiesAdvantage: false },
    metrics: { ...maskMetrics(input, keep), ...stats(err, ''), ...stats(kept, '_after_mask'), num_masked_seqs: masked },
  };
};
