// Sampling-support replay: log-prob of a token under logits renormalised over the sampler's kept set, and its gradient.
// Not a sampler (no top-k/top-p selection here) and not the engines' wiring: the kept sets arrive as plain data.

/**
 * Kept set of one generated position: the token ids the rollout sampler could draw after top-k /
 * top-p truncation, strictly ascending, as plain JSON-able data.
 */
export type KeptSet = readonly number[];

/**
 * What a rollout records so that the trainer can replay its sampling support: one kept set per
 * generated position of one response (`kept[t]` for position t). Positions with no truncation may
 * hold the full vocabulary `[0, …, V − 1]`.
 */
export interface SupportRecord {
  /** Kept set per generated position. */
  readonly kept: readonly KeptSet[];
}

/** Log-prob over the kept set and its gradient with respect to the (untempered) logits. */
export interface SupportLogProb {
  /** log p_K(y) = z_y/τ − log Σ_{j∈K} exp(z_j/τ). */
  readonly logp: number;
  /** d logp / d z, `(V)`: (1[j = y] − p_K(j))/τ for j ∈ K, 0 outside K. */
  readonly gradLogits: Float64Array;
}

/**
 * Log-probability of `token` under softmax(z/τ) renormalised over `kept` (TRL issue 6789 / PR 7269,
 * prime-rl PR 2601: the trainer scores the rollout's token under the same truncated support the
 * sampler used, so ℓold and ℓroll describe one distribution), with its exact gradient.
 * Throws when `kept` is empty, not strictly ascending, out of range, or does not contain `token`.
 * @example supportLogProb([0, 0, 0, 0], [1, 3], 3).logp // log(1/2)
 */
export function supportLogProb(
  logits: ArrayLike<number>,
  kept: KeptSet,
  token: number,
  temperature = 1,
): SupportLogProb {
  const V = logits.length;
  if (!(temperature > 0) || !Number.isFinite(temperature))
    throw new Error(`supportLogProb: temperature must be finite and > 0, got ${temperature}`);
  if (kept.length === 0) throw new Error('supportLogProb: kept set is empty');
  let inSet = false;
  for (let i = 0; i < kept.length; i++) {
    const j = kept[i]!;
    if (!Number.isInteger(j) || j < 0 || j >= V)
      throw new Error(`supportLogProb: kept[${i}] = ${j} is not a token id in [0, ${V})`);
    if (i > 0 && j <= kept[i - 1]!)
      throw new Error(`supportLogProb: kept set must be strictly ascending, got ${kept[i - 1]} then ${j} at ${i}`);
    if (j === token) inSet = true;
  }
  if (!inSet) throw new Error(`supportLogProb: token ${token} is not in the kept set`);
  // z/τ over K, max-shifted log-sum-exp
  let m = -Infinity;
  for (const j of kept) m = Math.max(m, (logits[j] as number) / temperature);
  let s = 0;
  for (const j of kept) s += Math.exp((logits[j] as number) / temperature - m);
  const lse = m + Math.log(s);
  const grad = new Float64Array(V);
  for (const j of kept) grad[j] = -Math.exp((logits[j] as number) / temperature - lse) / temperature;
  grad[token] = (grad[token] as number) + 1 / temperature;
  return { logp: (logits[token] as number) / temperature - lse, gradLogits: grad };
}
