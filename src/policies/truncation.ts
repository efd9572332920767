// The kept set of top-k / top-p truncation of one logits row (vLLM order: temperature, top-k, top-p),
// shared by the AR and the diffusion samplers. Not a sampler and not a log-prob: it only marks ids 0/1.

import type { FloatArray } from '../nn/array.js';
import { rowLogSumExp } from '../nn/row-logprob.js';

/** Ids 0 … V−1 other than `exclude`, ordered by logit descending, ties by id ascending. */
function rankByLogit(logits: ArrayLike<number>, off: number, V: number, exclude: number): number[] {
  const ids: number[] = [];
  for (let v = 0; v < V; v++) if (v !== exclude) ids.push(v);
  return ids.sort((a, b) => logits[off + b]! - logits[off + a]! || a - b);
}

/**
 * True when top-k or top-p removes anything from a row of V ids with `exclude` (−1: none) left out:
 * 0 < topK < number of candidate ids, or topP < 1.
 */
export function truncationActive(V: number, topK: number, topP: number, exclude = -1): boolean {
  const n = exclude >= 0 && exclude < V ? V - 1 : V;
  return (topK > 0 && topK < n) || topP < 1;
}

/**
 * Writes into `keep` (V) the support of the truncated distribution as 0/1. top-k keeps exactly the
 * k first ids by (logit desc, id asc); top-p then walks that order and keeps an id while the
 * probability mass of softmax(z/τ) before it (renormalised over the top-k set) is < p: the
 * smallest prefix whose mass reaches p, at least one id. `exclude` (the diffusion policy's MASK) is
 * never kept and takes no part in the ranking. With neither active every id is kept (but `exclude`).
 *
 * @example
 * ```ts
 * const keep = new Uint8Array(4);
 * truncatedSupport(new Float32Array([3, 1, 2, 0]), 0, 4, 1, 2, 1, keep); // keep = [1, 0, 1, 0]
 * ```
 */
export function truncatedSupport(
  logits: FloatArray | ArrayLike<number>,
  off: number,
  V: number,
  tau: number,
  topK: number,
  topP: number,
  keep: Uint8Array,
  exclude = -1,
): void {
  if (!truncationActive(V, topK, topP, exclude)) {
    keep.fill(1, 0, V);
    if (exclude >= 0 && exclude < V) keep[exclude] = 0;
    return;
  }
  const order = rankByLogit(logits, off, V, exclude);
  keep.fill(0, 0, V);
  const k = topK > 0 && topK < order.length ? topK : order.length;
  for (let i = 0; i < k; i++) keep[order[i]!] = 1;
  if (!(topP < 1)) return;
  const lse = rowLogSumExp(logits, off, V, tau, keep);
  let before = 0;
  for (let i = 0; i < k; i++) {
    const v = order[i]!;
    if (i > 0 && !(before < topP)) keep[v] = 0;
    before += Math.exp(logits[off + v]! / tau - lse);
  }
}
