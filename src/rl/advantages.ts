// Outcome advantages for GRPO-style training: one scalar per sequence from rewards and group ids.
// Not token-level credit assignment (no critic, no GAE) and not reward shaping.

import { UsageError } from '../core/errors.js';
import type { Estimate } from './types.js';

/** Input of every advantage estimator: per-sequence rewards and group ids, both of length B. */
export interface AdvantageInput {
  /** Scalar reward of each sequence, `(B)`. */
  readonly rewards: Float64Array;
  /** Group id of each sequence (sequences sharing a prompt share an id), `(B)`. */
  readonly groups: readonly (string | number)[];
  /**
   * Valid tokens per sequence `(B)`, used by the token-level whitening of `reinforce++` and
   * `reinforce++-baseline` (verl whitens over every valid token). @defaultValue 1 per sequence
   */
  readonly lengths?: Float64Array | undefined;
  /**
   * Per-token inputs of the token-level estimator `optimal_token_baseline` (ignored by the others).
   * With them that estimator returns `(B, T)` advantages instead of `(B)`.
   */
  readonly tokens?: TokenAdvantageInput | undefined;
}

/** Per-token inputs of a token-level advantage estimator, each `(B, T)` row-major like the batch. */
export interface TokenAdvantageInput {
  /** Positions per sequence. */
  readonly T: number;
  /** Response mask `(B, T)`, entries 0 or 1. */
  readonly mask: Float64Array;
  /** ℓold `(B, T)`: log-prob of each sampled token under the policy the advantages are computed for. */
  readonly logpOld: Float64Array;
  /**
   * Σ_v π(v)² `(B, T)`: the sum over the vocabulary of the squared token probabilities of that policy
   * at each position (veRL `sum_pi_squared`). Required by `optimal_token_baseline`.
   */
  readonly probSqSum?: Float64Array | undefined;
}

/**
 * What a group of size 1 gets: `'zero'` — A = 0 (its only member is its own mean; qrl-sim default);
 * `'verl'` — mean 0 and std 1, so A = R/(1 + eps) for `grpo` and A = R for `drgrpo`
 * (verl `compute_grpo_outcome_advantage`, core_algos.py l.315–317).
 */
export type SingletonRule = 'zero' | 'verl';

/** Parameters of `grpo` and `batch-std`. */
export interface StdAdvantageParams {
  /**
   * Added to the standard deviation before dividing.
   * @defaultValue 1e-6 (verl `compute_grpo_outcome_advantage`)
   */
  readonly eps: number;
  /** Rule for groups of size 1 (`grpo` only). @defaultValue 'zero' */
  readonly singleton?: SingletonRule | undefined;
}

/** Parameters of `drgrpo`. */
export interface DrGrpoParams {
  /** Rule for groups of size 1. @defaultValue 'zero' */
  readonly singleton?: SingletonRule | undefined;
}

/** An advantage estimator: per-sequence rewards → per-sequence advantages `(B)`. */
export type AdvantageFn<P = never> = (input: AdvantageInput, params: P) => Estimate<Float64Array>;

interface GroupStats {
  /** Group index of each sequence `(B)`. */
  readonly index: Int32Array;
  /** Per group: mean, unbiased std, size. */
  readonly mean: Float64Array;
  readonly std: Float64Array;
  readonly size: Float64Array;
}

function groupStats(input: AdvantageInput, singleton: SingletonRule = 'zero'): GroupStats {
  const B = input.rewards.length;
  const ids = new Map<string, number>();
  const index = new Int32Array(B);
  for (let i = 0; i < B; i++) {
    const g = input.groups[i]!;
    const key = `${typeof g}:${g}`;
    let k = ids.get(key);
    if (k === undefined) {
      k = ids.size;
      ids.set(key, k);
    }
    index[i] = k;
  }
  const groupCount = ids.size;
  const sum = new Float64Array(groupCount);
  const size = new Float64Array(groupCount);
  for (let i = 0; i < B; i++) {
    sum[index[i]!]! += input.rewards[i]!;
    size[index[i]!]! += 1;
  }
  // two-pass mean: the correction term makes the mean of a constant group exactly that constant
  const mean = sum.map((s, g) => s / size[g]!);
  const corr = new Float64Array(groupCount);
  for (let i = 0; i < B; i++) corr[index[i]!]! += input.rewards[i]! - mean[index[i]!]!;
  for (let g = 0; g < groupCount; g++) mean[g] = mean[g]! + corr[g]! / size[g]!;
  const sq = new Float64Array(groupCount);
  for (let i = 0; i < B; i++) {
    const d = input.rewards[i]! - mean[index[i]!]!;
    sq[index[i]!]! += d * d;
  }
  const std = sq.map((s, g) => (size[g]! > 1 ? Math.sqrt(s / (size[g]! - 1)) : 0));
  if (singleton === 'verl') {
    // verl core_algos.py l.315–317: a lone response gets mean 0 and std 1
    for (let g = 0; g < groupCount; g++) {
      if (size[g] !== 1) continue;
      mean[g] = 0;
      std[g] = 1;
    }
  }
  return { index, mean, std, size };
}

/** Unbiased standard deviation of a whole vector (0 when it has fewer than 2 entries). */
function batchStdOf(x: Float64Array): number {
  const n = x.length;
  if (n < 2) return 0;
  let m = 0;
  for (const v of x) m += v;
  m /= n;
  let s = 0;
  for (const v of x) s += (v - m) * (v - m);
  return Math.sqrt(s / (n - 1));
}

function summary(a: Float64Array, frac: number): Estimate<Float64Array> {
  let mean = 0;
  let max = -Infinity;
  let min = Infinity;
  for (const v of a) {
    mean += v;
    max = Math.max(max, v);
    min = Math.min(min, v);
  }
  mean = a.length > 0 ? mean / a.length : 0;
  return {
    value: a,
    metrics: {
      'advantages/mean': mean,
      'advantages/std': batchStdOf(a),
      'advantages/max': a.length > 0 ? max : 0,
      'advantages/min': a.length > 0 ? min : 0,
      'advantages/zero_std_group_fraction': frac,
    },
  };
}

function zeroStdFraction(st: GroupStats): number {
  let z = 0;
  st.std.forEach((s, g) => {
    if (s === 0 || st.size[g] === 1) z += 1;
  });
  return st.std.length > 0 ? z / st.std.length : 0;
}

/**
 * GRPO advantage: `A = (R − mean_g) / (std_g + eps)`, `std_g` unbiased; a group of size 1 gets A = 0
 * (its only member equals its mean), or with `singleton: 'verl'` mean 0 and std 1, A = R/(1 + eps).
 * Source: DeepSeekMath GRPO; verl `compute_grpo_outcome_advantage`.
 * @example grpoAdvantage({ rewards: Float64Array.of(1, 0), groups: [0, 0] }, { eps: 1e-6 }).value // ≈ [0.7071, -0.7071]
 */
export const grpoAdvantage: AdvantageFn<StdAdvantageParams> = (input, params) => {
  const st = groupStats(input, params.singleton ?? 'zero');
  const a = input.rewards.map((r, i) => {
    const g = st.index[i]!;
    return (r - st.mean[g]!) / (st.std[g]! + params.eps);
  });
  return summary(a, zeroStdFraction(st));
};

/**
 * Dr. GRPO advantage (also the AIS paper's choice): `A = R − mean_g`, no std normalisation
 * (a singleton group: A = 0, or A = R with `singleton: 'verl'`).
 * Source: Liu et al., "Understanding R1-Zero-Like Training" (arXiv 2503.20783).
 * @example drgrpoAdvantage({ rewards: Float64Array.of(1, 0, 0, 0), groups: [0, 0, 0, 0] }, {}).value // [0.75, -0.25, -0.25, -0.25]
 */
export const drgrpoAdvantage: AdvantageFn<DrGrpoParams> = (input, params) => {
  const st = groupStats(input, params.singleton ?? 'zero');
  const a = input.rewards.map((r, i) => r - st.mean[st.index[i]!]!);
  return summary(a, zeroStdFraction(st));
};

/**
 * Group mean, batch std: `A = (R − mean_g) / (std_batch + eps)` with the unbiased std of all B rewards
 * (TRL `scale_rewards="batch"`; verl has no equivalent).
 */
export const batchStdAdvantage: AdvantageFn<StdAdvantageParams> = (input, params) => {
  const st = groupStats(input);
  const s = batchStdOf(input.rewards);
  const a = input.rewards.map((r, i) => (r - st.mean[st.index[i]!]!) / (s + params.eps));
  return summary(a, zeroStdFraction(st));
};

/**
 * RLOO (arXiv 2402.14740; verl `compute_rloo_outcome_advantage`): leave-one-out baseline,
 * A_i = R_i − mean_{j≠i} R_j = (R_i − mean_g)·n/(n − 1). A singleton gets 0, or R with `singleton: 'verl'`.
 * @example rlooAdvantage({ rewards: Float64Array.of(1, 0, 0), groups: [0, 0, 0] }, {}).value // [1, -0.5, -0.5]
 */
export const rlooAdvantage: AdvantageFn<DrGrpoParams> = (input, params) => {
  const rule = params.singleton ?? 'zero';
  const st = groupStats(input, rule);
  const a = input.rewards.map((r, i) => {
    const g = st.index[i]!;
    const n = st.size[g]!;
    if (n === 1) return rule === 'verl' ? r : 0;
    return ((r - st.mean[g]!) * n) / (n - 1);
  });
  return summary(a, zeroStdFraction(st));
};

/**
 * verl `masked_whiten` over the valid tokens of a per-sequence value broadcast to `lengths[i]` tokens:
 * (x − μ)/√(var + 1e-8), μ and the unbiased var weighted by token counts.
 */
function tokenWhiten(x: Float64Array, lengths: Float64Array): Float64Array {
  let n = 0;
  let s = 0;
  x.forEach((v, i) => {
    n += lengths[i]!;
    s += lengths[i]! * v;
  });
  if (n === 0) return new Float64Array(x.length);
  let mu = s / n;
  // two-pass mean, as groupStats: a constant input gives exactly μ = x and A = 0
  let corr = 0;
  x.forEach((v, i) => (corr += lengths[i]! * (v - mu)));
  mu += corr / n;
  let q = 0;
  x.forEach((v, i) => (q += lengths[i]! * (v - mu) * (v - mu)));
  const variance = n > 1 ? (q / n) * (n / (n - 1)) : 0;
  const scale = 1 / Math.sqrt(variance + 1e-8);
  return x.map((v) => (v - mu) * scale);
}

/**
 * REINFORCE++ (arXiv 2501.03262; verl `compute_reinforce_plus_plus_outcome_advantage`, γ = 1, outcome reward):
 * the return R_i on every valid token, whitened over all valid tokens of the batch:
 * A_i = (R_i − μ_tok)/√(var_tok + 1e-8), μ_tok, var_tok (unbiased) weighted by `lengths`.
 */
export const reinforcePlusPlusAdvantage: AdvantageFn<Record<string, never>> = (input) => {
  const st = groupStats(input);
  const lengths = input.lengths ?? new Float64Array(input.rewards.length).fill(1);
  return summary(tokenWhiten(input.rewards, lengths), zeroStdFraction(st));
};

/**
 * REINFORCE++-baseline (verl `compute_reinforce_plus_plus_baseline_outcome_advantage`): subtract the group
 * mean (a singleton's mean is 0 in verl, so it keeps R; `singleton: 'zero'` gives it R − R = 0), then
 * whiten over all valid tokens of the batch as {@link reinforcePlusPlusAdvantage}.
 */
export const reinforcePlusPlusBaselineAdvantage: AdvantageFn<DrGrpoParams> = (input, params) => {
  const st = groupStats(input, params.singleton ?? 'zero');
  const lengths = input.lengths ?? new Float64Array(input.rewards.length).fill(1);
  const centred = input.rewards.map((r, i) => r - st.mean[st.index[i]!]!);
  return summary(tokenWhiten(centred, lengths), zeroStdFraction(st));
};

/** Parameters of `passk`. */
export interface PassKParams {
  /** Divide by (std_g + eps) (verl `norm_adv_by_std_in_grpo`). @defaultValue true */
  readonly normalize: boolean;
  /** @defaultValue 1e-6 */
  readonly eps: number;
}

/**
 * Pass@k advantage (arXiv 2503.19595; verl `compute_grpo_passk_outcome_advantage`): only the best
 * response of each group gets a non-zero advantage, r_max − r_second (÷ (std_g + eps) when `normalize`);
 * ties for the maximum go to the first response of the group in batch order. Groups need ≥ 2 responses.
 */
export const passkAdvantage: AdvantageFn<PassKParams> = (input, params) => {
  const st = groupStats(input);
  const B = input.rewards.length;
  const best = new Int32Array(st.size.length).fill(-1);
  const second = new Float64Array(st.size.length).fill(-Infinity);
  for (let i = 0; i < B; i++) {
    const g = st.index[i]!;
    const r = input.rewards[i]!;
    const b = best[g]!;
    if (b < 0) best[g] = i;
    else if (r > input.rewards[b]!) {
      second[g] = input.rewards[b]!;
      best[g] = i;
    } else second[g] = Math.max(second[g]!, r);
  }
  const a = new Float64Array(B);
  st.size.forEach((n, g) => {
    if (n < 2)
      throw new UsageError(
        `groups: passk needs at least 2 responses per group, group ${input.groups[best[g]!]} has ${n}`,
      );
    const i = best[g]!;
    const diff = input.rewards[i]! - second[g]!;
    a[i] = params.normalize ? diff / (st.std[g]! + params.eps) : diff;
  });
  return summary(a, zeroStdFraction(st));
};

/** Parameters of `optimal_token_baseline` (veRL `compute_optimal_token_baseline_advantage`). */
export interface OptimalTokenBaselineParams {
  /** Added to the baseline's denominator. @defaultValue 1e-8 (veRL `epsilon`) */
  readonly epsilon: number;
  /**
   * Zero the baseline of a group's unique longest sequence from column `second-longest length` on
   * (veRL `handle_zero_tail`). @defaultValue true
   */
  readonly handleZeroTail: boolean;
}

/**
 * veRL's optimal token baseline (OTB; `compute_optimal_token_baseline_advantage`, verl-project 1dda039
 * `verl/trainer/ppo/core_algos.py` l.871–987, PR #4678): per token, with the outcome reward R on the last
 * valid token, G_t = Σ_{s≥t} r_s·m_s (= R up to the last valid token), w_t = 1 − 2·exp(ℓold_t) + Σπ²_t,
 * W_t = Σ_{s≤t} w_s·m_s, and per group and column B_t = Σ_i G_t·W·m / (Σ_i W·m + ε); A_t = (G_t − B_t)·m_t.
 * A singleton group keeps B = 0 (A = G_t, the return). With `handleZeroTail`, a group's unique longest sequence gets
 * B = 0 from column L₂ on (L₂ = the second-largest mask sum). Returns `(B, T)` advantages; needs
 * `input.tokens` with `probSqSum` (`UsageError` naming `probSqSum` otherwise). veRL's ρ̄² scaling of w by
 * `rollout_is_weights` is not applied (advantages precede the correction stages here).
 */
export const optimalTokenBaselineAdvantage: AdvantageFn<OptimalTokenBaselineParams> = (input, params) => {
  const tok = input.tokens;
  if (tok?.probSqSum === undefined) {
    throw new UsageError(
      'probSqSum: required when advantage.name is optimal_token_baseline (Σ_v π(v)² per token, shaped like mask)',
    );
  }
  const st = groupStats(input);
  const B = input.rewards.length;
  const { T, mask, logpOld, probSqSum } = tok;
  const n = B * T;
  // returns: reward on the last valid token, reverse cumulative sum of reward·mask (core_algos.py l.924)
  const returns = new Float64Array(n);
  const W = new Float64Array(n);
  const len = new Float64Array(B);
  for (let i = 0; i < B; i++) {
    let last = -1;
    for (let t = 0; t < T; t++) if (mask[i * T + t] === 1) last = t;
    for (let t = 0; t <= last; t++) returns[i * T + t] = input.rewards[i]!;
    let acc = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      // l.927–928: w = 1 − 2π + Σπ²; l.938: W = cumsum(w·mask)
      acc += (1 - 2 * Math.exp(logpOld[k]!) + probSqSum[k]!) * mask[k]!;
      W[k] = acc;
      len[i]! += mask[k]!;
    }
  }
  const baseline = new Float64Array(n);
  const members: number[][] = Array.from({ length: st.size.length }, () => []);
  for (let i = 0; i < B; i++) members[st.index[i]!]!.push(i);
  for (const idx of members) {
    if (idx.length === 1) continue; // l.949–951: a lone trajectory has no baseline
    for (let t = 0; t < T; t++) {
      let num = 0;
      let den = 0;
      for (const i of idx) {
        const k = i * T + t;
        num += returns[k]! * W[k]! * mask[k]!;
        den += W[k]! * mask[k]!;
      }
      const b = num / (den + params.epsilon);
      for (const i of idx) baseline[i * T + t] = b;
    }
    if (params.handleZeroTail) {
      // l.972–983: the unique longest trajectory gets B = 0 from column L₂ (second-largest length) on
      const sorted = idx.map((i) => len[i]!).sort((a, b) => a - b);
      const max = sorted[sorted.length - 1]!;
      const second = sorted[sorted.length - 2]!;
      const longest = idx.filter((i) => len[i] === max);
      if (longest.length === 1 && max > second) baseline.fill(0, longest[0]! * T + second, longest[0]! * T + T);
    }
  }
  const a = new Float64Array(n);
  const valid: number[] = [];
  for (let k = 0; k < n; k++) {
    a[k] = (returns[k]! - baseline[k]!) * mask[k]!;
    if (mask[k] === 1) valid.push(a[k]!);
  }
  const s = summary(Float64Array.from(valid), zeroStdFraction(st));
  return { value: a, metrics: s.metrics };
};

/** Config names of the estimators whose advantages are per token `(B, T)` rather than per sequence `(B)`. */
export const tokenLevelAdvantageNames: readonly string[] = ['optimal_token_baseline'];

/**
 * Config names of the estimators that subtract the group's mean reward: with one response per prompt
 * (`rollout.groupSize` 1) every advantage is 0 and the policy gradient vanishes.
 */
export const groupMeanAdvantageNames: readonly string[] = ['grpo', 'drgrpo', 'reinforce++-baseline'];

/** Every advantage estimator by its config name. */
export const advantages = {
  grpo: grpoAdvantage,
  drgrpo: drgrpoAdvantage,
  'batch-std': batchStdAdvantage,
  rloo: rlooAdvantage,
  'reinforce++': reinforcePlusPlusAdvantage,
  'reinforce++-baseline': reinforcePlusPlusBaselineAdvantage,
  passk: passkAdvantage,
  optimal_token_baseline: optimalTokenBaselineAdvantage,
} as const satisfies Record<string, AdvantageFn>;

/** Config name of an advantage estimator. */
export type AdvantageName = keyof typeof advantages;
