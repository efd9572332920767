// What every stack's mismatch metric set reads (the input and doc types) and the token and row reductions the
// sets share. stack-metrics.ts holds the sets themselves.

import type { AggregationName } from './aggregation.js';
import type { BatchShape, MetricRecord } from './types.js';
import { rowMaskedSums } from './types.js';

/**
 * Inputs of {@link stackMetrics} (all `(B, T)` flat). ℓtrain is the trainer side of the mismatch: ℓold in
 * decoupled mode, ℓθ (detached) in bypass mode, as each stack compares whatever its loss uses as the old policy.
 */
export interface StackMetricInput {
  /** Batch shape. */
  readonly shape: BatchShape;
  /** ℓtrain: the trainer's log-probs compared with the rollout. */
  readonly logpTrain: Float64Array;
  /** ℓroll. */
  readonly logpRollout: Float64Array;
  /** Response mask: the generated tokens of each row, over which the stacks average. */
  readonly responseMask: Float64Array;
  /** Loss mask: the response tokens the correction chain kept (`CorrectionResult.lossMask`). @defaultValue responseMask */
  readonly lossMask?: Float64Array | undefined;
  /** Applied correction weights (0 where rejected). @defaultValue 1 on the loss mask */
  readonly weights?: Float64Array | undefined;
  /** Per-token advantages (prime-rl's DPPO mask reads their sign). @defaultValue 0 */
  readonly advantages?: Float64Array | undefined;
  /**
   * The loss's aggregation mode: a stack whose metrics follow its loss reducer reads it (slime's with
   * `slime-per-token`, its `--calculate-per-token-loss`). @defaultValue the stack's default reducer
   */
  readonly aggregation?: AggregationName | undefined;
}

/** One documented metric of a stack. */
export interface StackMetricDoc {
  /** The metric's formula, in the notation of docs/estimators.md (x = ℓtrain − ℓroll, ρ = e^x). */
  readonly formula: string;
  /** Repository, file and line (at the commit in {@link StackMetricSet.commit}). */
  readonly source: string;
}

/** A stack's set of mismatch metrics. */
export interface StackMetricSet {
  /** The stack's repository and commit the definitions were read at. */
  readonly commit: string;
  /** Every metric name the set emits, with its formula and source. */
  readonly metrics: Readonly<Record<string, StackMetricDoc>>;
  /** Computes the set (every documented name, except where the doc says it is omitted). */
  readonly compute: (input: StackMetricInput) => MetricRecord;
}

/** A response token: its flat index k and x = ℓtrain − ℓroll there. */
export interface Tok {
  readonly k: number;
  readonly x: number;
}

/** Response tokens with x = ℓtrain − ℓroll, in row-major order. */
export function tokens(input: StackMetricInput): Tok[] {
  const { responseMask } = input;
  const out: Tok[] = [];
  for (let k = 0; k < responseMask.length; k++)
    if (responseMask[k] === 1) out.push({ k, x: input.logpTrain[k]! - input.logpRollout[k]! });
  return out;
}

/** The largest value, 0 for none. */
export const max = (xs: readonly number[]): number => (xs.length > 0 ? Math.max(...xs) : 0);
/** The smallest value, 0 for none. */
export const min = (xs: readonly number[]): number => (xs.length > 0 ? Math.min(...xs) : 0);
/** torch.median: the lower middle value. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
}

/** Per-row masked means of f over valid tokens, `(B)`, 0 for an empty row; also the row counts. */
export function rowMeans(input: StackMetricInput, f: (k: number) => number): { means: number[]; counts: number[] } {
  const { sums, counts } = rowMaskedSums(input.responseMask, input.shape, f);
  return { means: Array.from(sums, (s, i) => (counts[i]! > 0 ? s / counts[i]! : 0)), counts: Array.from(counts) };
}

/** Per-row masked sums of f, `(B)`. */
export function rowSums(input: StackMetricInput, f: (k: number) => number): number[] {
  return Array.from(rowMaskedSums(input.responseMask, input.shape, f).sums);
}

/** Mean over the non-empty rows of per-row values (ROLL's `seq-mean-token-mean` over `global_valid_samples`). */
export function overValidRows(values: readonly number[], counts: readonly number[]): number {
  let s = 0;
  let n = 0;
  values.forEach((v, i) => {
    if (counts[i]! > 0) {
      s += v;
      n += 1;
    }
  });
  return n > 0 ? s / n : 0;
}

/** ROLL's segment means: the masked mean of f over each maximal run of valid tokens, per token. */
export function segmentMeans(input: StackMetricInput, f: (k: number) => number): Float64Array {
  const { B, T } = input.shape;
  const out = new Float64Array(B * T);
  for (let i = 0; i < B; i++) {
    let t = 0;
    while (t < T) {
      if (input.responseMask[i * T + t] !== 1) {
        t += 1;
        continue;
      }
      let e = t;
      let s = 0;
      while (e < T && input.responseMask[i * T + e] === 1) s += f(i * T + e++);
      for (let u = t; u < e; u++) out[i * T + u] = s / (e - t);
      t = e;
    }
  }
  return out;
}

/** The k3 estimator of KL at one token, e^x − x − 1. */
export const k3 = (x: number): number => Math.exp(x) - x - 1;
