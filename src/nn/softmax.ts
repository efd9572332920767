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
 * Writes `map(z_v/τ − lse)` for every v of row i (`lse` from {@link rowLogSumExp}) and returns `lse`:
 * the row of softmax (`map` = exp), log-softmax (identity) and cross-entropy's forward.
 */
function logSoftmaxRowMapped(
  out: FloatArray,
  logits: FloatArray,
  i: number,
  V: number,
  tau: number,
  map: (x: number) => number,
): number {
  const lse = rowLogSumExp(logits, i, V, tau);
  for (let v = 0; v < V; v++) out[i * V + v] = map(logits[i * V + v]! / tau - lse);
  return lse;
}

const identity = (x: number): number => x;

/** Runs `row(i, r, τ)` for every row i of N (offset `r = i·V`), τ the checked temperature of `opts`. */
function forEachRow(
  N: number,
  V: number,
  opts: SoftmaxOptions | undefined,
  row: (i: number, r: number, tau: number) => void,
): void {
  const tau = temperatureOf(opts);
  for (let i = 0; i < N; i++) row(i, i * V, tau);
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
  forEachRow(N, V, opts, (i, _r, tau) => logSoftmaxRowMapped(probs, logits, i, V, tau, Math.exp));
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
  forEachRow(N, V, opts, (_i, r, tau) => {
    let dot = 0;
    for (let v = 0; v < V; v++) dot += probs[r + v]! * dprobs[r + v]!;
    for (let v = 0; v < V; v++) dlogits[r + v] = dlogits[r + v]! + (probs[r + v]! * (dprobs[r + v]! - dot)) / tau;
  });
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
  forEachRow(N, V, opts, (i, _r, tau) => logSoftmaxRowMapped(logp, logits, i, V, tau, identity));
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
  forEachRow(N, V, opts, (_i, r, tau) => {
    let s = 0;
    for (let v = 0; v < V; v++) s += dlogp[r + v]!;
    for (let v = 0; v < V; v++) dlogits[r + v] = dlogits[r + v]! + (dlogp[r + v]! - Math.exp(logp[r + v]!) * s) / tau;
  });
}

/** Checks targets (integers in [0, V)) and weights (at least N) of a cross-entropy call; returns the weights or null. */
function checkTargets(
  targets: ArrayLike<number>,
  N: number,
  V: number,
  opts: CrossEntropyOptions | undefined,
): FloatArray | null {
  const weights = opts?.weights ?? null;
  if (targets.length < N)
    throw new Error(`crossEntropy: targets must have at least N=${N} entries, got ${targets.length}`);
  if (weights && weights.length < N)
    throw new Error(`crossEntropy: weights must have at least N=${N} entries, got ${weights.length}`);
  for (let i = 0; i < N; i++) {
    const y = targets[i]!;
    if (!Number.isInteger(y) || y < 0 || y >= V)
      throw new Error(`crossEntropy: targets[${i}] must be an integer in [0, ${V}), got ${y}`);
  }
  return weights;
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
  const w = checkTargets(targets, N, V, opts);
  let total = 0;
  forEachRow(N, V, opts, (i, r, tau) => {
    const lse = logSoftmaxRowMapped(probs, logits, i, V, tau, Math.exp);
    losses[i] = lse - logits[r + targets[i]!]! / tau;
    total += (w ? w[i]! : 1 / N) * losses[i]!;
  });
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
  const w = checkTargets(targets, N, V, opts);
  forEachRow(N, V, opts, (i, r, tau) => {
    const g = (dloss * (w ? w[i]! : 1 / N)) / tau;
    const y = targets[i]!;
    for (let v = 0; v < V; v++) dlogits[r + v] = dlogits[r + v]! + g * (probs[r + v]! - (v === y ? 1 : 0));
  });
}
