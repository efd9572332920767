// The correction-stage contract (input, step, signature) and the masked helpers every family uses.
// Not an estimator: the families live in weights.ts, rejection.ts and masks.ts; the table and the chain in ../correction.ts.

import type { Estimate, MetricRecord, BatchShape } from '../types.js';
import { boundedExp } from '../types.js';

/**
 * Where a rejected token goes: `'kept'` — it leaves the numerator and the denominator of the
 * aggregated loss (verl rollout rejection: the modified `response_mask` is the loss mask);
 * `'original'` — it leaves only the numerator, the denominator still counts it
 * (TRL / NeMo-RL / OpenRLHF / slime masks, verl IcePop zero weights).
 */
export type Denominator = 'kept' | 'original';

/** The parameter that stages which reject tokens add: where their rejected tokens go ({@link Denominator}). */
export interface RejectingStage {
  /** @defaultValue 'kept' ('original' for `icepop` and `opsm`, as verl and TRL/slime count them) */
  readonly denominator: Denominator;
}

/** Inputs shared by every correction estimator (all `(B, T)` flat unless noted). */
export interface CorrectionInput {
  /** EstimateBatch shape. */
  readonly shape: BatchShape;
  /** ℓold: trainer log-probs at θ_old, `(B, T)`. */
  readonly logpOld: Float64Array;
  /** ℓroll: rollout-engine log-probs, `(B, T)`. */
  readonly logpRollout: Float64Array;
  /**
   * Response mask m ∈ {0, 1}, `(B, T)`: the generated tokens of each row (the stages only read it; the
   * loss mask they produce is {@link CorrectionResult.lossMask}).
   */
  readonly responseMask: Float64Array;
  /** Per-token advantages before any rectification, `(B, T)` (used by `ais` and `opsm`). */
  readonly advantages: Float64Array;
  /**
   * ℓθ detached, `(B, T)`: read only by the stages that compare the old policy with the current one
   * (`opsm` with `form: "slime"`; see {@link correctionNeedsTheta}).
   */
  readonly logpTheta?: Float64Array | undefined;
}

/** What one correction stage returns. */
export interface CorrectionStep {
  /** Multiplicative weight factor per token, `(B, T)` (1 where the stage does not reweight). */
  readonly factor: Float64Array;
  /** Keep mask of this stage, `(B, T)`: 0 = rejected, 1 = kept. */
  readonly keep: Float64Array;
  /** True when the factor is an advantage rectification (AIS): it is also folded into the reported advantages. */
  readonly rectifiesAdvantage: boolean;
  /**
   * verl's `rollout_corr/rollout_is_*` metrics (names without the `rollout_corr/` prefix) when the stage
   * is one of verl's `rollout_is` modes (`tis`, `seq-tis`, `icepop`); the first such stage of a chain
   * reports them globally, as verl has one IS stage.
   */
  readonly verlIsMetrics?: MetricRecord | undefined;
  /** Metrics under a stack's own names, reported as `rollout_corr/<name>` without the stage key. */
  readonly stackMetrics?: MetricRecord | undefined;
}

/**
 * One correction estimator: `(input, params, weightsSoFar) → { factor, keep }` plus metrics
 * (metric names without the `rollout_corr/<stage>/` prefix that {@link applyCorrection} adds).
 * `weightsSoFar` is the product of the factors of the previous stages (used by `batch-norm`).
 */
export type CorrectionFn<P = never> = (
  input: CorrectionInput,
  params: P,
  weightsSoFar: Float64Array,
) => Estimate<CorrectionStep>;

/** Token or sequence level. */
export type CorrectionLevel = 'token' | 'sequence';
/** Aggregation level of a verl rejection statistic. */
export type RejectionLevel = 'token' | 'seq-sum' | 'seq-mean' | 'seq-max';

/** `n` ones: the neutral factor and keep mask. */
export function ones(n: number): Float64Array {
  return new Float64Array(n).fill(1);
}

/** Per-row Σ_t m·δ_t over the response mask m, δ = ℓold − ℓroll, `(B)`. */
export function rowLogRatioSums(input: CorrectionInput): Float64Array {
  const { B, T } = input.shape;
  const s = new Float64Array(B);
  for (let i = 0; i < B; i++) {
    let acc = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.responseMask[k] === 1) acc += input.logpOld[k]! - input.logpRollout[k]!;
    }
    s[i] = acc;
  }
  return s;
}

/** Broadcasts a per-row value to every position of its row, `(B, T)`; callers ignore padded positions. */
export function broadcastRows(perRow: Float64Array, shape: BatchShape): Float64Array {
  const { B, T } = shape;
  const out = new Float64Array(B * T);
  for (let i = 0; i < B; i++) out.fill(perRow[i]!, i * T, i * T + T);
  return out;
}

/** Fraction of response tokens where `pred` holds (0 when there is none). */
export function tokenFraction(responseMask: Float64Array, pred: (k: number) => boolean): number {
  let n = 0;
  let c = 0;
  for (let k = 0; k < responseMask.length; k++) {
    if (responseMask[k] !== 1) continue;
    n += 1;
    if (pred(k)) c += 1;
  }
  return n > 0 ? c / n : 0;
}

/** Max of `x` over the response tokens (0 when there is none). */
export function validMax(x: Float64Array, responseMask: Float64Array): number {
  let m = -Infinity;
  for (let k = 0; k < responseMask.length; k++) if (responseMask[k] === 1) m = Math.max(m, x[k]!);
  return m === -Infinity ? 0 : m;
}

/** Min of `x` over the response tokens (0 when there is none). */
export function validMin(x: Float64Array, responseMask: Float64Array): number {
  let m = Infinity;
  for (let k = 0; k < responseMask.length; k++) if (responseMask[k] === 1) m = Math.min(m, x[k]!);
  return m === Infinity ? 0 : m;
}

/** Fraction of rows with ≥ 1 response token having a response token with keep = 0. */
export function seqRejectedFraction(keep: Float64Array, responseMask: Float64Array, shape: BatchShape): number {
  const { B, T } = shape;
  let rows = 0;
  let rej = 0;
  for (let i = 0; i < B; i++) {
    let valid = false;
    let rejected = false;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (responseMask[k] !== 1) continue;
      valid = true;
      if (keep[k] === 0) rejected = true;
    }
    if (valid) rows += 1;
    if (rejected) rej += 1;
  }
  return rows > 0 ? rej / rows : 0;
}

/** Token ratios ρ_t = exp(clamp(ℓold − ℓroll)) on response tokens, 1 elsewhere: `(B, T)`. */
export function tokenRatios(input: CorrectionInput): Float64Array {
  const rho = new Float64Array(input.responseMask.length).fill(1);
  for (let k = 0; k < rho.length; k++) {
    if (input.responseMask[k] === 1) rho[k] = boundedExp(input.logpOld[k]! - input.logpRollout[k]!);
  }
  return rho;
}

/** Sequence ratios exp(clamp(Σ_t ℓold − ℓroll)) broadcast to every position of the row: `(B, T)`. */
export function seqRatios(input: CorrectionInput): Float64Array {
  return broadcastRows(rowLogRatioSums(input).map(boundedExp), input.shape);
}

/**
 * Sets `factor` to 1 (the neutral weight) outside the response mask, in place, and returns it: a stage's
 * factor is only read on response tokens, and 1 there keeps the chain's product unchanged.
 */
export function factorOneOffResponse(factor: Float64Array, responseMask: Float64Array): Float64Array {
  for (let k = 0; k < factor.length; k++) if (responseMask[k] !== 1) factor[k] = 1;
  return factor;
}

/** Per-row keep mask broadcast to tokens (`rowKeep[i]` = 1 keeps row i). */
export function rowKeepMask(rowKeep: (i: number) => boolean, shape: BatchShape): Float64Array {
  const { B, T } = shape;
  const keep = ones(B * T);
  for (let i = 0; i < B; i++) if (!rowKeep(i)) keep.fill(0, i * T, i * T + T);
  return keep;
}

/** Metrics shared by the mask-only stages. */
export function maskMetrics(input: CorrectionInput, keep: Float64Array): MetricRecord {
  return {
    masked_fraction: tokenFraction(input.responseMask, (k) => keep[k] === 0),
    seq_masked_fraction: seqRejectedFraction(keep, input.responseMask, input.shape),
  };
}
