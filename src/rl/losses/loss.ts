// The policy-loss contract (input, per-token value, signature) and the helpers every loss shares.
// Not a loss: the ratio surrogates live in ratio.ts, the detached-coefficient losses in score-function.ts, the table in ../losses.ts.

import type { Estimate, BatchShape } from '../types.js';
import { LOG_RATIO_BOUND } from '../types.js';
import type { TopkBatch } from '../topk.js';

/** Inputs of every policy loss (all `(B, T)` flat). */
export interface PolicyLossInput {
  /** EstimateBatch shape. */
  readonly shape: BatchShape;
  /** ℓθ: current policy log-probs (carries gradient). */
  readonly logpTheta: Float64Array;
  /** ℓold: trainer log-probs at θ_old. */
  readonly logpOld: Float64Array;
  /** ℓroll: rollout-engine log-probs (used by `tbpo`). */
  readonly logpRollout: Float64Array;
  /** Per-token advantages A (before any AIS rectification; AIS enters through `upstream`). */
  readonly advantages: Float64Array;
  /** Loss mask m ∈ {0, 1}: the tokens whose policy loss counts (the aggregated loss's numerator). */
  readonly lossMask: Float64Array;
  /**
   * d(total loss)/d(tokenLoss) per token: aggregation coefficient × correction weight × loss mask.
   * The returned gradient is Σ_k upstream_k · d tokenLoss_k / dℓθ.
   */
  readonly upstream: Float64Array;
  /** Point at which stop-gradient terms (`cispo`'s sg[clip(r)]) are evaluated. @defaultValue logpTheta */
  readonly logpThetaDetached?: Float64Array | undefined;
  /** Per-row rewards `(B)`, when the batch has them (`topr` splits rows by reward sign). */
  readonly rewards?: Float64Array | undefined;
  /**
   * Tokens the `actor/*` token metrics average over, a superset of `lossMask`. verl averages them over the
   * `response_mask` handed to the loss, which is qrl-sim's denominator mask (IcePop-zeroed tokens stay
   * in it). @defaultValue lossMask
   */
  readonly metricMask?: Float64Array | undefined;
  /** The sampler's top-k ids, ℓμ and the trainer's ℓθ at them (read by `trpl`; src/rl/topk.ts). */
  readonly topk?: TopkBatch | undefined;
}

/** Per-token policy loss and gradient. */
export interface PolicyLossValue {
  /** Unweighted per-token policy loss, `(B, T)`, 0 outside `lossMask` (sequence losses broadcast). */
  readonly tokenLoss: Float64Array;
  /** d(Σ upstream·tokenLoss)/dℓθ, `(B, T)`, 0 outside `lossMask`. */
  readonly gradLogpTheta: Float64Array;
  /** d(Σ upstream·tokenLoss)/dℓθ at the top-k ids, `(B, T, K)`, when the loss reads `topk` (`trpl`). */
  readonly gradTopkLogpTheta?: Float64Array | undefined;
}

/** A policy loss. */
export type LossFn<P = never> = (input: PolicyLossInput, params: P) => Estimate<PolicyLossValue>;

export function clampLog(x: number): number {
  return Math.min(LOG_RATIO_BOUND, Math.max(-LOG_RATIO_BOUND, x));
}

export function clip(x: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, x));
}

/**
 * Running masked means of a fixed set of metric names: every name is reported, 0 when no token was
 * added (verl's `masked_mean` over an all-zero mask is 0/(0 + 1e-8) = 0).
 */
export class Means {
  private readonly sums = new Map<string, number>();
  private n = 0;
  constructor(names: readonly string[]) {
    for (const k of names) this.sums.set(k, 0);
  }
  add(values: Record<string, number>): void {
    this.n += 1;
    for (const [k, v] of Object.entries(values)) this.sums.set(k, (this.sums.get(k) ?? 0) + v);
  }
  result(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [k, v] of this.sums) out[k] = this.n > 0 ? v / this.n : 0;
    return out;
  }
}

/** True where a token enters the loss (`lossMask`) or only the metrics (`metricMask`). */
export function visited(input: PolicyLossInput, k: number): boolean {
  return input.lossMask[k] === 1 || (input.metricMask !== undefined && input.metricMask[k] === 1);
}

/** True where a token's metrics count. */
export function counted(input: PolicyLossInput, k: number): boolean {
  return (input.metricMask ?? input.lossMask)[k] === 1;
}

/**
 * Token k of a score-function loss L_k = −c·A_k·ℓθ_k whose coefficient c is detached: writes `tokenLoss[k]`
 * and its gradient `upstream_k·(−c·A_k)`, on loss tokens (`lossMask` = 1) only (`reinforce`: c = 1; `cispo`:
 * c = clip(r); `vespo`: c = φ; `topr`: c = w⁺ or w⁻·clamp(r, 0, 1)).
 */
export function scoreFunctionToken(
  input: PolicyLossInput,
  k: number,
  c: number,
  tokenLoss: Float64Array,
  grad: Float64Array,
): void {
  if (input.lossMask[k] !== 1) return;
  const A = input.advantages[k]!;
  tokenLoss[k] = -c * A * input.logpTheta[k]!;
  grad[k] = input.upstream[k]! * -c * A;
}
