// The AR policy's forward recorded op by op (embedding, per block norm1, q, k, v, attention, residual,
// norm2, MLP or router/MoE, block output; final norm, logits, token log-probs) and the two sides of a
// plan compared on the same tokens. Not the comparison itself (../diverge.ts) and not the CLI.

import type { FloatArray } from '../../nn/array.js';
import type { StackCache } from '../../nn/stack.js';
import { compareForwards, type DivergeOptions, type DivergeReport, type OpRecord } from '../diverge.js';
import type { PolicyNumerics } from '../numerics.js';
import { sideNumerics, type PrecisionPlan } from '../plans.js';
import { arForward, type ArPolicy } from './model.js';

/** A float32 copy (the caches are reused by nothing, but a record must own its values). */
function f32(x: FloatArray): Float32Array {
  return Float32Array.from(x);
}

/**
 * Log-probability of the next token at every position but the last: `(B, T−1)`, row (b, t) =
 * log softmax(logits[b, t])[tokens[b, t+1]] in float64 (max-shifted log-sum-exp), stored as float32.
 */
export function nextTokenLogprobs(
  logits: FloatArray,
  tokens: ArrayLike<number>,
  B: number,
  T: number,
  V: number,
): Float32Array {
  const out = new Float32Array(B * (T - 1)); // (B, T−1)
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T - 1; t++) {
      const o = (b * T + t) * V;
      let max = -Infinity;
      for (let v = 0; v < V; v++) max = Math.max(max, logits[o + v]!);
      let sum = 0;
      for (let v = 0; v < V; v++) sum += Math.exp(logits[o + v]! - max);
      out[b * (T - 1) + t] = logits[o + tokens[b * T + t + 1]!]! - max - Math.log(sum);
    }
  }
  return out;
}

/**
 * The op records of one forward's caches, in forward order with their data-flow inputs:
 * `embed`; per block l `h<l>.ln1`, `h<l>.q`, `h<l>.k`, `h<l>.v`, `h<l>.attn` (attention output before
 * the output projection), `h<l>.x1` (x + o(attn)), `h<l>.ln2`, then `h<l>.mlp.up`, `h<l>.mlp.gate`
 * (SwiGLU), `h<l>.mlp.act`, `h<l>.mlp` (down projection) — or `h<l>.router` (router logits) and
 * `h<l>.moe` — and `h<l>.out`; finally `lnf`, `logits` and `logp` ({@link nextTokenLogprobs}).
 */
export function arOpRecords(cache: StackCache, V: number): OpRecord[] {
  const { B, T } = cache;
  const N = B * T;
  const rec: OpRecord[] = [];
  const add = (name: string, x: FloatArray, shape: readonly number[], inputs: readonly string[]): void => {
    rec.push({ name, data: f32(x), shape, inputs });
  };
  const C = cache.x[0]!.length / N;
  add('embed', cache.x[0]!, [B, T, C], []);
  let prev = 'embed';
  cache.blocks.forEach((blk, l) => {
    const h = `h${l}`;
    add(`${h}.ln1`, blk.ln1, [B, T, C], [prev]);
    for (const p of ['q', 'k', 'v'] as const) add(`${h}.${p}`, blk[p], [B, T, C], [`${h}.ln1`]);
    add(`${h}.attn`, blk.att, [B, T, C], [`${h}.q`, `${h}.k`, `${h}.v`]);
    add(`${h}.x1`, blk.x1, [B, T, C], [`${h}.attn`, prev]);
    add(`${h}.ln2`, blk.ln2, [B, T, C], [`${h}.x1`]);
    if (blk.mlp !== null) {
      const Hd = blk.mlp.up.length / N;
      add(`${h}.mlp.up`, blk.mlp.up, [B, T, Hd], [`${h}.ln2`]);
      const hasGate = blk.mlp.gate.length > 0;
      if (hasGate) add(`${h}.mlp.gate`, blk.mlp.gate, [B, T, Hd], [`${h}.ln2`]);
      add(`${h}.mlp.act`, blk.mlp.act, [B, T, Hd], hasGate ? [`${h}.mlp.up`, `${h}.mlp.gate`] : [`${h}.mlp.up`]);
      add(`${h}.mlp`, blk.mlpOut, [B, T, C], [`${h}.mlp.act`]);
    } else if (blk.moe !== null) {
      const E = blk.moe.logits.length / N;
      add(`${h}.router`, blk.moe.logits, [B, T, E], [`${h}.ln2`]);
      add(`${h}.moe`, blk.mlpOut, [B, T, C], [`${h}.ln2`, `${h}.router`]);
    }
    add(`${h}.out`, cache.x[l + 1]!, [B, T, C], [`${h}.x1`, blk.mlp !== null ? `${h}.mlp` : `${h}.moe`]);
    prev = `${h}.out`;
  });
  add('lnf', cache.xf, [B, T, C], [prev]);
  add('logits', cache.logits, [B, T, V], ['lnf']);
  if (T > 1) add('logp', nextTokenLogprobs(cache.logits, cache.tokens, B, T, V), [B, T - 1], ['logits']);
  return rec;
}

/** The op records of {@link arForward} of `tokens` (B, T) under `numerics`. */
export function arForwardOps(
  policy: ArPolicy,
  tokens: ArrayLike<number>,
  B: number,
  T: number,
  numerics: PolicyNumerics,
): OpRecord[] {
  return arOpRecords(arForward(policy, tokens, B, T, numerics), policy.config.vocabSize);
}

/** What {@link arDiverge} returns: the report and both sides' recordings. */
export interface ArDivergeResult {
  /** Trainer (reference) vs rollout (candidate). */
  readonly report: DivergeReport;
  /** The trainer side's op records. */
  readonly trainer: readonly OpRecord[];
  /** The rollout side's op records. */
  readonly rollout: readonly OpRecord[];
  /** MoE only: per layer, the share of (token, rank) routing slots whose expert differs between the sides. */
  readonly routingFlips?: readonly number[];
}

/**
 * Runs the full-sequence forward of the plan's trainer side and of its rollout side on the same
 * tokens (B, T) — both prefill-style, so a rollout KV-cache quantizer (applied while decoding) is
 * not part of it — and compares them op by op with {@link compareForwards} (trainer = reference).
 *
 * @example
 * ```ts
 * const { report } = arDiverge(policy, precisionPlan('fp8-rollout'), tokens, 4, 24);
 * report.firstDivergence; // 'h0.q'
 * ```
 */
export function arDiverge(
  policy: ArPolicy,
  plan: PrecisionPlan,
  tokens: ArrayLike<number>,
  B: number,
  T: number,
  options: DivergeOptions = {},
): ArDivergeResult {
  const V = policy.config.vocabSize;
  const tc = arForward(policy, tokens, B, T, sideNumerics(plan.trainer, policy.weights));
  const rc = arForward(policy, tokens, B, T, sideNumerics(plan.rollout, policy.weights));
  const trainer = arOpRecords(tc, V);
  const rollout = arOpRecords(rc, V);
  const report = compareForwards(trainer, rollout, options);
  if (tc.blocks[0]?.moe == null) return { report, trainer, rollout };
  const routingFlips = tc.blocks.map((b, l) => {
    const a = b.moe!.routing;
    const c = rc.blocks[l]!.moe!.routing;
    let n = 0;
    for (let i = 0; i < a.length; i++) if (a[i] !== c[i]) n++;
    return a.length ? n / a.length : 0;
  });
  return { report, trainer, rollout, routingFlips };
}
