// The rollout engine's top-k log-probs at a sampled position, and the trainer's ℓ at the same ids:
// what the estimators that read the sampler's distribution need (src/rl/topk.ts).
// Not a sampler: it reads the row and the kept set the sampler left, and draws no random numbers.

import type { FloatArray } from '../../nn/array.js';
import { rowLogSumExp } from '../../nn/row-logprob.js';

/**
 * Writes the K most likely ids of the row at `off` (logit desc, id asc) among the kept ids (`keep`
 * null: all V) into `ids[at … at+K)` (−1 past the kept set) and their log-probs into `logp`:
 * `processed`, z_v/τ − log Σ_kept exp(z/τ) (the distribution the token was drawn from); `raw`,
 * log softmax(z)_v at τ = 1 (the kind of ℓroll).
 */
export function recordTopk(
  logits: FloatArray,
  off: number,
  V: number,
  tau: number,
  keep: Uint8Array | null,
  report: 'processed' | 'raw',
  K: number,
  ids: Int32Array,
  logp: Float64Array,
  at: number,
): void {
  const order: number[] = [];
  for (let v = 0; v < V; v++) if (keep === null || keep[v]) order.push(v);
  order.sort((a, b) => logits[off + b]! - logits[off + a]! || a - b);
  const t = report === 'processed' ? tau : 1;
  const lse = rowLogSumExp(logits, off, V, t, report === 'processed' ? keep : null);
  for (let j = 0; j < K; j++) {
    const v = j < order.length ? order[j]! : -1;
    ids[at + j] = v;
    logp[at + j] = v < 0 ? 0 : logits[off + v]! / t - lse;
  }
}

/**
 * The trainer's ℓ at the engine's ids of one scored position: z_v/sm − lse (the same log-sum-exp as
 * the sampled token's ℓ), divided by τ when τ enters after the log-softmax; 0 at an empty slot.
 */
export function trainerTopk(
  logits: FloatArray,
  off: number,
  sm: number,
  lse: number,
  after: number | null,
  K: number,
  ids: ArrayLike<number>,
  idsAt: number,
  out: Float64Array,
  at: number,
): void {
  for (let j = 0; j < K; j++) {
    const v = ids[idsAt + j]!;
    if (v < 0) continue;
    const l = logits[off + v]! / sm - lse;
    out[at + j] = after === null ? l : l / after;
  }
}
