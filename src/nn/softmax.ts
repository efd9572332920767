// Softmax, log-softmax and cross-entropy over the last axis, with temperature and per-token weights.
// Not a sampler (no top-k/top-p) and not the GRPO loss; those build on these.

import type { FloatArray } from './array.js';

/** Options shared by the softmax-family layers. */
export interface SoftmaxOptions {
  /**
   * Logits are divided by this before the softmax: `softmax(z/τ)`.
   * @defaultValue 1
   */
  readonly temperature?: number;
}

/** Options of {@link crossEntropyForward} and {@link crossEntropyBackward}. */
export interface CrossEntropyOptions extends SoftmaxOptions {
  /**
   * Per-token weights w (N): the loss is `Σ_n w_n·loss_n`. Null or absent means the mean,
   * `w_n = 1/N`. A weight of 0 masks a token; negative weights turn the loss into a log-prob
   * objective (e.g. policy-gradient coefficients).
   */
  readonly weights?: FloatArray | null;
}

function temperatureOf(opts: SoftmaxOptions | undefined): number {
  const tau = opts?.temperature ?? 1;
  if (!(tau > 0) || !Number.isFinite(tau)) throw new Error(`softmax: temperature must be finite and > 0, got ${tau}`);
  return tau;
}

/**
 * Row-wise stable log-sum-exp of `z/τ` for row `i`: returns `m + log Σ_v exp(z_v/τ − m)`
 * with `m` the row max, summing over v in increasing order in doubles.
 */
function rowLogSumExp(logits: FloatArray, i: number, V: number, tau: number): number {
  const z = i * V;
  let m = -Infinity;
  for (let v = 0; v < V; v++) m = Math.max(m, logits[z + v]! / tau);
  let s = 0;
  for (let v = 0; v < V; v++) s += Math.exp(logits[z + v]! / tau - m);
  return m + Math.log(s);
}

/**
 * Softmax forward: `probs[i] = softmax(logits[i]/τ)`, computed as `exp(z/τ − lse)` (stable).
 *
 * @param probs - (N, V)
 * @param logits - (N, V)
 */
export function softmaxForward(
  probs: FloatArray,
  logits: FloatArray,
  N: number,
  V: number,
  opts?: SoftmaxOptions,
): void {
  const tau = temperatureOf(opts);
  for (let i = 0; i < N; i++) {
    const lse = rowLogSumExp(logits, i, V, tau);
    for (let v = 0; v < V; v++) probs[i * V + v] = Math.exp(logits[i * V + v]! / tau - lse);
  }
}

/**
 * Softmax backward, accumulating: `dlogits += p⊙(dprobs − Σ_v p_v·dprobs_v)/τ`.
 *
 * @param dlogits - (N, V) accumulated
 * @param dprobs - (N, V)
 * @param probs - (N, V) forward output (the cache)
 */
export function softmaxBackward(
  dlogits: FloatArray,
  dprobs: FloatArray,
  probs: FloatArray,
  N: number,
  V: number,
  opts?: SoftmaxOptions,
): void {
  const tau = temperatureOf(opts);
  for (let i = 0; i < N; i++) {
    const r = i * V;
    let dot = 0;
    for (let v = 0; v < V; v++) dot += probs[r + v]! * dprobs[r + v]!;
    for (let v = 0; v < V; v++) dlogits[r + v] = dlogits[r + v]! + (probs[r + v]! * (dprobs[r + v]! - dot)) / tau;
  }
}

/**
 * Log-softmax forward: `logp[i] = logits[i]/τ − logsumexp(logits[i]/τ)` (stable).
 *
 * @param logp - (N, V)
 * @param logits - (N, V)
 */
export function logSoftmaxForward(
  logp: FloatArray,
  logits: FloatArray,
  N: number,
  V: number,
  opts?: SoftmaxOptions,
): void {
  const tau = temperatureOf(opts);
  for (let i = 0; i < N; i++) {
    const lse = rowLogSumExp(logits, i, V, tau);
    for (let v = 0; v < V; v++) logp[i * V + v] = logits[i * V + v]! / tau - lse;
  }
}

/**
 * Log-softmax backward, accumulating: `dlogits += (dlogp − exp(logp)·Σ_v dlogp_v)/τ`.
 *
 * @param dlogits - (N, V) accumulated
 * @param dlogp - (N, V)
 * @param logp - (N, V) forward output (the cache)
 */
export function logSoftmaxBackward(
  dlogits: FloatArray,
  dlogp: FloatArray,
  logp: FloatArray,
  N: number,
  V: number,
  opts?: SoftmaxOptions,
): void {
  const tau = temperatureOf(opts);
  for (let i = 0; i < N; i++) {
    const r = i * V;
    let s = 0;
    for (let v = 0; v < V; v++) s += dlogp[r + v]!;
    for (let v = 0; v < V; v++) dlogits[r + v] = dlogits[r + v]! + (dlogp[r + v]! - Math.exp(logp[r + v]!) * s) / tau;
  }
}

function checkTargets(targets: ArrayLike<number>, N: number, V: number, weights: FloatArray | null): void {
  if (targets.length < N)
    throw new Error(`crossEntropy: targets must have at least N=${N} entries, got ${targets.length}`);
  if (weights && weights.length < N)
    throw new Error(`crossEntropy: weights must have at least N=${N} entries, got ${weights.length}`);
  for (let i = 0; i < N; i++) {
    const y = targets[i]!;
    if (!Number.isInteger(y) || y < 0 || y >= V)
      throw new Error(`crossEntropy: targets[${i}] must be an integer in [0, ${V}), got ${y}`);
  }
}

/**
 * Cross-entropy forward (llm.c `crossentropy_forward`, made stable with log-sum-exp):
 * `losses[n] = logsumexp(z_n/τ) − z_n[y_n]/τ = −log softmax(z_n/τ)[y_n]`; the probabilities are
 * cached for the backward. Returns the weighted total `Σ_n w_n·losses[n]`, summed in doubles in
 * increasing n.
 *
 * @param losses - (N) per-token loss
 * @param probs - (N, V) cache: softmax(z/τ)
 * @param logits - (N, V)
 * @param targets - (N) ids in [0, V)
 */
export function crossEntropyForward(
  losses: FloatArray,
  probs: FloatArray,
  logits: FloatArray,
  targets: ArrayLike<number>,
  N: number,
  V: number,
  opts?: CrossEntropyOptions,
): number {
  const tau = temperatureOf(opts);
  const w = opts?.weights ?? null;
  checkTargets(targets, N, V, w);
  let total = 0;
  for (let i = 0; i < N; i++) {
    const lse = rowLogSumExp(logits, i, V, tau);
    for (let v = 0; v < V; v++) probs[i * V + v] = Math.exp(logits[i * V + v]! / tau - lse);
    losses[i] = lse - logits[i * V + targets[i]!]! / tau;
    total += (w ? w[i]! : 1 / N) * losses[i]!;
  }
  return total;
}

/**
 * Fused softmax + cross-entropy backward (llm.c `crossentropy_softmax_backward`), accumulating:
 * `dlogits[n,v] += dloss·w_n·(p[n,v] − 1[v = y_n])/τ`, the gradient of the weighted total returned
 * by {@link crossEntropyForward}.
 *
 * @param dlogits - (N, V) accumulated
 * @param probs - (N, V) from the forward
 * @param targets - (N)
 * @param dloss - gradient of the objective with respect to the weighted total; @defaultValue 1
 */
export function crossEntropyBackward(
  dlogits: FloatArray,
  probs: FloatArray,
  targets: ArrayLike<number>,
  N: number,
  V: number,
  opts?: CrossEntropyOptions,
  dloss = 1,
): void {
  const tau = temperatureOf(opts);
  const w = opts?.weights ?? null;
  checkTargets(targets, N, V, w);
  for (let i = 0; i < N; i++) {
    const g = (dloss * (w ? w[i]! : 1 / N)) / tau;
    const y = targets[i]!;
    for (let v = 0; v < V; v++) {
      const r = i * V + v;
      dlogits[r] = dlogits[r]! + g * (probs[r]! - (v === y ? 1 : 0));
    }
  }
}
