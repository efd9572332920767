// Next-token sampling from one row of logits: temperature, top-k, top-p, greedy, and the log-probs the
// rollout engine reports (processed or raw). Not the decoding loop (rollout.ts) and not differentiable.

import type { FloatArray } from '../../nn/array.js';
import { rowEntropy as nnRowEntropy, rowLogProb, rowLogSumExp } from '../../nn/row-logprob.js';
import type { Rng } from '../../core/rng.js';
import { truncatedSupport } from '../truncation.js';

/** How the next token is chosen from the logits. */
export interface SamplerOptions {
  /** Logits are divided by τ before the softmax (ignored when greedy). @defaultValue 1 */
  readonly temperature?: number;
  /** Keep only the k most likely tokens (ties: the lower id first); 0 = off. @defaultValue 0 */
  readonly topK?: number;
  /** Keep the smallest most-likely prefix whose probability reaches p (nucleus); 1 = off. @defaultValue 1 */
  readonly topP?: number;
  /** Pick the argmax of the raw logits (ties: the lowest id); draws no random numbers. @defaultValue false */
  readonly greedy?: boolean;
}

/** {@link SamplerOptions} with defaults filled in and validated. */
export interface ResolvedSampler {
  /** τ. */
  readonly temperature: number;
  /** k (0 = off). */
  readonly topK: number;
  /** p (1 = off). */
  readonly topP: number;
  /** Greedy. */
  readonly greedy: boolean;
}

/** Fills the defaults of `opts` and throws an error naming a bad field. */
export function resolveSampler(opts: SamplerOptions = {}): ResolvedSampler {
  const temperature = opts.temperature ?? 1;
  const topK = opts.topK ?? 0;
  const topP = opts.topP ?? 1;
  const greedy = opts.greedy ?? false;
  if (!(temperature > 0) || !Number.isFinite(temperature))
    throw new Error(`sampler: temperature must be finite and > 0, got ${temperature}`);
  if (!Number.isInteger(topK) || topK < 0)
    throw new Error(`sampler: topK must be a non-negative integer (0 = off), got ${topK}`);
  if (!(topP > 0 && topP <= 1)) throw new Error(`sampler: topP must be in (0, 1] (1 = off), got ${topP}`);
  if (typeof greedy !== 'boolean') throw new Error(`sampler: greedy must be a boolean, got ${JSON.stringify(greedy)}`);
  return { temperature, topK, topP, greedy };
}

/**
 * Stable `log Σ_{v kept} exp(z_v/τ)` of the row at `off` ({@link rowLogSumExp} of nn, the one row implementation both policies use): `m + log Σ exp(z_v/τ − m)` with `m` the
 * max over the kept entries, summed over v in increasing order in doubles (the same loop as the
 * nn softmax layers). `keep` null = all V entries.
 */
export function logSumExp(
  logits: FloatArray,
  off: number,
  V: number,
  tau: number,
  keep: Uint8Array | null = null,
): number {
  return rowLogSumExp(logits, off, V, tau, keep);
}

/** `log softmax(z/τ)[y]` of the row at `off` = `z_y/τ − logSumExp(z/τ)`: the trainer's per-token ℓ. */
export function tokenLogprob(logits: FloatArray, off: number, V: number, y: number, tau: number): number {
  return rowLogProb(logits, off, V, y, tau);
}

/** Entropy `−Σ_v p_v log p_v` of `softmax(z/τ)` of the row at `off` (a metric). */
export function rowEntropy(logits: FloatArray, off: number, V: number, tau: number): number {
  return nnRowEntropy(logits, off, V, tau);
}

/**
 * The support of the processed distribution (vLLM order: temperature, then top-k, then top-p),
 * written into `keep` (V) as 0/1: {@link truncatedSupport} with nothing excluded. top-k keeps
 * exactly the k first ids by (logit desc, id asc); top-p then walks that order and keeps an id while
 * the probability mass before it (renormalized over the top-k set) is < p — the smallest prefix
 * whose mass reaches p, at least one id.
 */
export function processedSupport(
  logits: FloatArray,
  off: number,
  V: number,
  s: ResolvedSampler,
  keep: Uint8Array,
): void {
  truncatedSupport(logits, off, V, s.temperature, s.topK, s.topP, keep);
}

/** One sampled token and its log-probs. */
export interface SampledToken {
  /** The chosen id. */
  readonly token: number;
  /** log-prob under the processed distribution it was drawn from (0 for greedy: a point mass). */
  readonly logpProcessed: number;
  /** log-prob under the raw distribution, `log softmax(z)` at temperature 1. */
  readonly logpRaw: number;
}

/**
 * Draws the next token from the row at `off`: greedy = argmax of the raw logits (ties: lowest id, no
 * draw); otherwise one `rng.uniform()` u and the inverse CDF of the processed distribution over the
 * kept ids in increasing id order (the first id whose cumulative probability exceeds u; the last
 * kept id if rounding leaves u above the total).
 *
 * @param keep - (V) scratch for the support
 */
export function sampleToken(
  logits: FloatArray,
  off: number,
  V: number,
  s: ResolvedSampler,
  rng: Rng,
  keep: Uint8Array,
): SampledToken {
  if (s.greedy) {
    let best = 0;
    for (let v = 1; v < V; v++) if (logits[off + v]! > logits[off + best]!) best = v;
    return { token: best, logpProcessed: 0, logpRaw: tokenLogprob(logits, off, V, best, 1) };
  }
  const tau = s.temperature;
  processedSupport(logits, off, V, s, keep);
  const lse = logSumExp(logits, off, V, tau, keep);
  const u = rng.uniform();
  let cum = 0;
  let token = -1;
  for (let v = 0; v < V; v++) {
    if (!keep[v]) continue;
    token = v;
    cum += Math.exp(logits[off + v]! / tau - lse);
    if (u < cum) break;
  }
  return { token, logpProcessed: logits[off + token]! / tau - lse, logpRaw: tokenLogprob(logits, off, V, token, 1) };
}
