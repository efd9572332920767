// Log-probability, entropy and log-prob gradient of one logits row under softmax(z/τ), optionally over
// a kept subset or without one excluded id: the one row implementation both policies score tokens with.
// Not the sampler (top-k/top-p selection lives with each policy) and not a batched layer.

import type { FloatArray } from './array.js';

/**
 * Stable `log Σ_{v included} exp(z_v/τ)` of the row at `off`: `m + log Σ exp(z_v/τ − m)` with `m` the
 * max over the included entries, summed over v in increasing order in doubles. Included: every v
 * with `keep[v]` set (all V when `keep` is null) other than `exclude` (−1: none).
 *
 * @example rowLogSumExp(new Float32Array([0, 0]), 0, 2, 1) // ln 2
 */
export function rowLogSumExp(
  logits: ArrayLike<number>,
  off: number,
  V: number,
  tau: number,
  keep: Uint8Array | null = null,
  exclude = -1,
): number {
  let m = -Infinity;
  for (let v = 0; v < V; v++) if ((!keep || keep[v]) && v !== exclude) m = Math.max(m, logits[off + v]! / tau);
  let s = 0;
  for (let v = 0; v < V; v++) if ((!keep || keep[v]) && v !== exclude) s += Math.exp(logits[off + v]! / tau - m);
  return m + Math.log(s);
}

/**
 * `z_y/τ − rowLogSumExp(…)`: the log-probability of token `y` (−∞ when `y` is the excluded id).
 *
 * @example rowLogProb(new Float32Array([0, 0]), 0, 2, 1, 1) // −ln 2
 */
export function rowLogProb(
  logits: ArrayLike<number>,
  off: number,
  V: number,
  y: number,
  tau: number,
  keep: Uint8Array | null = null,
  exclude = -1,
): number {
  if (y === exclude) return -Infinity;
  return logits[off + y]! / tau - rowLogSumExp(logits, off, V, tau, keep, exclude);
}

/**
 * Entropy `−Σ_v p_v log p_v` of softmax(z/τ) over every id but `exclude`, in doubles, summed in
 * increasing v (the entropy metric of both policies). With `keep`, of the distribution renormalised
 * over the kept ids (sampling-support replay): ids outside the set have p_v = 0 and add nothing.
 *
 * @example rowEntropy(new Float32Array([0, 0]), 0, 2, 1) // ln 2
 */
export function rowEntropy(
  logits: ArrayLike<number>,
  off: number,
  V: number,
  tau: number,
  exclude = -1,
  keep: Uint8Array | null = null,
): number {
  const lse = rowLogSumExp(logits, off, V, tau, keep, exclude);
  let h = 0;
  for (let v = 0; v < V; v++) {
    if (v === exclude || (keep && !keep[v])) continue;
    const lp = logits[off + v]! / tau - lse;
    h -= Math.exp(lp) * lp;
  }
  return h;
}

/**
 * `Σ_v p_v²` of softmax(z/τ), in doubles, summed in increasing v, with p_v = exp(z_v/τ − lse) and
 * `lse` the row's {@link rowLogSumExp} (pass the one the log-prob used, so both come from the same
 * softmax row): veRL's `sum_pi_squared`, the input of its optimal token baseline. With `keep`, of
 * the distribution renormalised over the kept ids (the rest have p_v = 0).
 *
 * @example rowProbSqSum(new Float32Array([0, 0]), 0, 2, 1, Math.LN2) // 0.5
 */
export function rowProbSqSum(
  logits: ArrayLike<number>,
  off: number,
  V: number,
  tau: number,
  lse: number,
  keep: Uint8Array | null = null,
): number {
  let s = 0;
  for (let v = 0; v < V; v++) {
    if (keep && !keep[v]) continue;
    const p = Math.exp(logits[off + v]! / tau - lse);
    s += p * p;
  }
  return s;
}

/**
 * Backward of {@link rowLogProb}, accumulating into `dlogits`:
 * `dz[v] += g·(1[v = y] − p_v)/τ` for every v but `exclude`, with p = softmax(z/τ), or with `keep`
 * the softmax renormalised over the kept ids and p_v = 0 outside them (their dz gets nothing).
 */
export function rowLogProbBackward(
  dlogits: FloatArray,
  logits: ArrayLike<number>,
  off: number,
  V: number,
  y: number,
  tau: number,
  g: number,
  exclude = -1,
  keep: Uint8Array | null = null,
): void {
  const lse = rowLogSumExp(logits, off, V, tau, keep, exclude);
  for (let v = 0; v < V; v++) {
    if (v === exclude) continue;
    const p = keep && !keep[v] ? 0 : Math.exp(logits[off + v]! / tau - lse);
    dlogits[off + v] = dlogits[off + v]! + (g * ((v === y ? 1 : 0) - p)) / tau;
  }
}
