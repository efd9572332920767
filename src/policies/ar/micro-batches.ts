// The trainer's recompute split into micro-batches (TRL / verl `micro_batch_size`): one forward per chunk of
// sequences, so a kernel whose choice or scale follows the GEMM's rows sees the chunk, not the whole batch.
// Only the per-token log-probs; the backward of a chunked recompute is not modelled.

import type { PolicyNumerics } from '../numerics.js';
import { computeLogprobs } from './logprobs.js';
import type { ArPolicy } from './model.js';

/** The batch a micro-batched recompute scores: (B, P + L) tokens and the (B, L) response mask. */
export interface RecomputeBatch {
  /** (B, P + L) prompt then response tokens. */
  readonly tokens: ArrayLike<number>;
  /** Sequences. */
  readonly B: number;
  /** Prompt length. */
  readonly P: number;
  /** (B, L) 1 for response tokens to score. */
  readonly responseMask: ArrayLike<number>;
}

/**
 * (B, L) trainer log-probs of B sequences recomputed `microBatch` sequences at a time (the last chunk
 * may be shorter), each chunk one forward of microBatch·T rows with `numerics`; with `microBatch` ≥ B
 * this is {@link computeLogprobs} bit for bit. Sequences are not padded (they share one length here).
 */
export function microBatchedLogprobs(
  policy: ArPolicy,
  batch: RecomputeBatch,
  numerics: PolicyNumerics,
  microBatch: number,
): Float64Array {
  const { tokens, B, P, responseMask } = batch;
  if (!Number.isInteger(microBatch) || microBatch < 1)
    throw new Error(`microBatch: expected a positive integer, got ${microBatch}`);
  const T = tokens.length / B;
  const L = T - P;
  const logp = new Float64Array(B * L);
  const tok = Int32Array.from(tokens);
  const mask = Float64Array.from(responseMask);
  for (let b0 = 0; b0 < B; b0 += microBatch) {
    const n = Math.min(microBatch, B - b0);
    const lp = computeLogprobs(policy, tok.subarray(b0 * T, (b0 + n) * T), n, P, mask.subarray(b0 * L, (b0 + n) * L), {
      numerics,
    });
    logp.set(lp.logp, b0 * L);
  }
  return logp;
}

/**
 * The share of scored tokens whose ratio exp(ℓa − ℓb) lies outside [lo, hi], and the mean ratio (TRL #6789
 * reports the share outside [0.9, 1.1] between micro-batch chunk 1 and 8).
 */
export function ratioOutside(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  mask: ArrayLike<number>,
  lo = 0.9,
  hi = 1.1,
): { readonly share: number; readonly meanRatio: number; readonly tokens: number } {
  let n = 0;
  let out = 0;
  let sum = 0;
  for (let i = 0; i < a.length; i++) {
    if (!mask[i]) continue;
    const r = Math.exp((a[i] as number) - (b[i] as number));
    n++;
    sum += r;
    if (r < lo || r > hi) out++;
  }
  return { share: n === 0 ? 0 : out / n, meanRatio: n === 0 ? 1 : sum / n, tokens: n };
}
