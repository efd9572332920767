// Loss aggregation: the per-token coefficients c with loss = Σ c·tokenLoss, for each verl mode.
// Not the losses themselves; aggregation is linear, so its gradient is the coefficient array.

import type { Estimate, BatchShape } from './types.js';
import { rowCounts } from './types.js';

/** Parameters of an aggregation mode. */
export interface AggregationParams {
  /**
   * Constant normaliser of `seq-mean-token-sum-norm` (Dr. GRPO's max length).
   * @defaultValue T, the padded row length (verl `loss_scale_factor` default)
   */
  readonly normalizer?: number | undefined;
}

/**
 * An aggregation mode: denominator mask `(B, T)` → coefficients `(B, T)` such that the
 * aggregated loss is `Σ_k c_k · tokenLoss_k`; `c` is 0 wherever the mask is 0.
 * Sequences with no valid token are left out of every sequence mean (as verl).
 */
export type AggregationFn<P = never> = (
  denominatorMask: Float64Array,
  shape: BatchShape,
  params: P,
) => Estimate<Float64Array>;

function counts(denominatorMask: Float64Array, shape: BatchShape): { n: Float64Array; tokens: number; seqs: number } {
  const n = rowCounts(denominatorMask, shape);
  let tokens = 0;
  let seqs = 0;
  for (const c of n) {
    tokens += c;
    if (c > 0) seqs += 1;
  }
  return { n, tokens, seqs };
}

function fill(denominatorMask: Float64Array, shape: BatchShape, perRow: (i: number) => number): Float64Array {
  const { B, T } = shape;
  const c = new Float64Array(B * T);
  for (let i = 0; i < B; i++) {
    const v = perRow(i);
    for (let t = 0; t < T; t++) if (denominatorMask[i * T + t] === 1) c[i * T + t] = v;
  }
  return c;
}

/** `token-mean`: Σ L·m / Σ m (verl default; DAPO). */
export const tokenMean: AggregationFn<AggregationParams> = (denominatorMask, shape) => {
  const { tokens, seqs } = counts(denominatorMask, shape);
  return {
    value: fill(denominatorMask, shape, () => (tokens > 0 ? 1 / tokens : 0)),
    metrics: { 'actor/valid_tokens': tokens, 'actor/valid_seqs': seqs },
  };
};

/** `seq-mean-token-sum`: mean over sequences of Σ_t L·m. */
export const seqMeanTokenSum: AggregationFn<AggregationParams> = (denominatorMask, shape) => {
  const { tokens, seqs } = counts(denominatorMask, shape);
  return {
    value: fill(denominatorMask, shape, () => 1 / seqs),
    metrics: { 'actor/valid_tokens': tokens, 'actor/valid_seqs': seqs },
  };
};

/** `seq-mean-token-mean`: mean over sequences of Σ_t L·m / Σ_t m (GRPO paper; forced by verl for GSPO/SAPO). */
export const seqMeanTokenMean: AggregationFn<AggregationParams> = (denominatorMask, shape) => {
  const { n, tokens, seqs } = counts(denominatorMask, shape);
  return {
    value: fill(denominatorMask, shape, (i) => 1 / (seqs * n[i]!)),
    metrics: { 'actor/valid_tokens': tokens, 'actor/valid_seqs': seqs },
  };
};

/**
 * `seq-mean-token-sum-norm` (Dr. GRPO): mean over sequences of Σ_t L·m, divided by a constant
 * normaliser K (verl-project ≥ PR #5417; volcengine ≤ Feb 2026 omitted the sequence mean).
 */
export const seqMeanTokenSumNorm: AggregationFn<AggregationParams> = (denominatorMask, shape, params) => {
  const { tokens, seqs } = counts(denominatorMask, shape);
  const K = params.normalizer ?? shape.T;
  return {
    value: fill(denominatorMask, shape, () => 1 / (seqs * K)),
    metrics: { 'actor/valid_tokens': tokens, 'actor/valid_seqs': seqs, 'actor/loss_scale_factor': K },
  };
};

/**
 * `slime-per-token` (slime `--calculate-per-token-loss`): Σ L·m / Σ_i max(n_i, 1) over all B rows, so a
 * row without a loss token adds one to the denominator. slime 624b824 sums the masked token losses
 * (`sum_of_token`, slime/backends/megatron_utils/cp_utils.py l.83–88, l.124) and hands Megatron the
 * normaliser Σ_i clamp_min(loss_mask_i.sum(), 1) (loss.py l.1317, l.1365). Equals `token-mean` when no
 * row is empty.
 */
export const slimePerToken: AggregationFn<AggregationParams> = (denominatorMask, shape) => {
  const { n, tokens, seqs } = counts(denominatorMask, shape);
  let denom = 0;
  for (const c of n) denom += Math.max(c, 1);
  return {
    value: fill(denominatorMask, shape, () => 1 / denom),
    metrics: { 'actor/valid_tokens': tokens, 'actor/valid_seqs': seqs },
  };
};

/** Every aggregation mode by its config name. */
export const aggregations = {
  'token-mean': tokenMean,
  'seq-mean-token-sum': seqMeanTokenSum,
  'seq-mean-token-mean': seqMeanTokenMean,
  'seq-mean-token-sum-norm': seqMeanTokenSumNorm,
  'slime-per-token': slimePerToken,
} as const satisfies Record<string, AggregationFn>;

/** Config name of an aggregation mode. */
export type AggregationName = keyof typeof aggregations;

/** Σ_k c_k·x_k: applies aggregation coefficients to per-token values. */
export function aggregate(coefficients: Float64Array, values: Float64Array): number {
  let s = 0;
  for (let k = 0; k < values.length; k++) if (coefficients[k] !== 0) s += coefficients[k]! * values[k]!;
  return s;
}
