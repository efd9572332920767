// Per-position scoring shared by the sampler and the estimators: log softmax(z/τ)[y], softmax(z)[y] and Gumbel-max sampling, in doubles.
// Not an estimator: which positions and which masked views are scored is decided in estimators.ts.

import { rowLogSumExp } from '../../nn/row-logprob.js';
import type { Rng } from '../../core/rng.js';

/*
 * Every function takes an optional `exclude` id (the policy passes MASK): that entry is treated as a
 * logit of −∞ — never sampled, probability 0, no gradient — so the policy is a distribution over the
 * vocabulary without MASK on both the rollout and the trainer side. The optional `keep` (V, 0/1) is
 * a top-k/top-p kept set: the distribution is renormalised over it (sampling-support replay).
 */

/**
 * Index of the largest entry of a row, the lowest index on ties (PyTorch `argmax` convention).
 */
export function argmaxRow(row: ArrayLike<number>, offset: number, V: number, exclude = -1): number {
  let best = -1;
  let bestValue = -Infinity;
  for (let v = 0; v < V; v++) {
    if (v === exclude) continue;
    const z = row[offset + v]!;
    if (best < 0) {
      best = v;
      bestValue = z;
      continue;
    }
    if (z > bestValue) {
      best = v;
      bestValue = z;
    }
  }
  return best;
}

/**
 * One sample from `softmax(z/τ)` by the Gumbel-max trick (LLaDA `add_gumbel_noise`, float64 noise):
 * `argmax_v z_v/τ + g_v` with `g_v = −log(−log U_v)`, `U_v = rng.uniformOpen()` drawn for
 * v = 0 … V−1 in increasing order (exactly V draws); ties go to the lowest index. `τ = 0` is plain
 * argmax of `z` and draws nothing. `exclude` (the policy passes MASK) still consumes its draw but
 * can never win, so the sample is from the softmax over the other ids; likewise every id outside
 * `keep` (top-k/top-p): V draws are consumed whatever the kept set, and the sample is from the
 * softmax renormalised over the kept ids.
 *
 * LLaDA scores `exp(z)/(−log U)^τ`; its argmax equals this one (take logs and divide by τ).
 *
 * @example
 * ```ts
 * const token = gumbelArgmax(logits, row * V, V, 0.9, rng);
 * ```
 */
export function gumbelArgmax(
  logits: ArrayLike<number>,
  offset: number,
  V: number,
  temperature: number,
  rng: Rng,
  exclude = -1,
  keep: Uint8Array | null = null,
): number {
  if (temperature === 0) return argmaxRow(logits, offset, V, exclude);
  let best = -1;
  let bestScore = -Infinity;
  for (let v = 0; v < V; v++) {
    const g = -Math.log(-Math.log(rng.uniformOpen()));
    if (v === exclude || (keep && !keep[v])) continue;
    const score = logits[offset + v]! / temperature + g;
    if (best < 0 || score > bestScore) {
      best = v;
      bestScore = score;
    }
  }
  return best;
}

/** `softmax(z)[y]` at temperature 1, in doubles (the low-confidence remasking score). */
export function tokenProb(logits: ArrayLike<number>, offset: number, V: number, y: number, exclude = -1): number {
  if (y === exclude) return 0;
  return Math.exp(logits[offset + y]! - rowLogSumExp(logits, offset, V, 1, null, exclude));
}
