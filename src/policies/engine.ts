// The in-process engine contract: the synchronous operations the reference backend
// (src/backend/reference.ts) wraps, and the factory that builds an engine for a run config.
// Not the loop's contract (src/core/backend-contract.ts) and not an implementation (policies/*/engine.ts).

import type { PlanSideName, SampledBatch } from '../core/backend-contract.js';
import type { ParamStore } from '../nn/params.js';
import type { RunConfig } from '../rl/grpo/config.js';
import type { Rng } from '../core/rng.js';
import type { Task } from '../tasks/task.js';

/** A batch the in-process engine sampled: the shared fields and the engine's own record. */
export interface EngineBatch extends SampledBatch {
  /** Policy-specific record the trainer-side estimators need (diffusion states and seeds). */
  readonly record?: unknown;
}

/** Per-token trainer log-probs of some rows of a batch. */
export interface EngineLogprobs {
  /** ℓ `(rows, T)`, 0 where the mask is 0. */
  readonly logp: Float64Array;
  /** Entropy of the policy at each position `(rows, T)`, 0 where the mask is 0. */
  readonly entropy: Float64Array;
  /** Σ_v π(v)² at each position `(rows, T)`, 0 where the mask is 0, when `probSqSum` was asked (AR only). */
  readonly probSqSum?: Float64Array;
  /** ℓ at the batch's top-k ids `(rows, T, K)`, when `topk` was asked (AR only). */
  readonly topkLogp?: Float64Array;
  /**
   * MoE only: the experts this pass used, one array per layer in the layout of the record's
   * `moeRouting`, restricted to the requested rows (what R2 replays in the update passes).
   */
  readonly routing?: readonly Int32Array[];
  /**
   * MoE only, when the batch's record carries the rollout's `moeRouting`: per layer, the share of
   * router decisions at the positions whose outputs score a response token (mask 1) that differ
   * between the rollout record and this pass (`routingFlipRate`, src/nn/moe.ts; 0 under R3 replay).
   */
  readonly routingFlipRate?: readonly number[];
}

/**
 * MoE routing replay of a trainer log-prob pass: `'rollout'` replays the batch record's
 * `moeRouting` (R3); an array per layer (the record's layout, restricted to the requested rows)
 * replays exactly that routing (R2: what the ℓold pass returned). A row of −1 keeps the pass's own
 * top-k (positions the rollout engine never ran).
 */
export type EngineRoutingReplay = 'rollout' | readonly Int32Array[];

/** A synchronous in-process policy engine. One engine owns the FP32 master weights. */
export interface RlEngine {
  /** FP32 master weights and their gradients. */
  readonly params: ParamStore;
  /** Step 1: rebuild the rollout engine from the master weights (re-quantize, recalibrate KV scales). */
  sync(): void;
  /**
   * Samples one response per prompt with the given side's engine (`rollout` by default), or the
   * greedy response when `greedy` is set. All randomness comes from `rng`.
   */
  generate(
    prompts: readonly (readonly number[])[],
    rng: Rng,
    options?: { greedy?: boolean; side?: PlanSideName; topkLogprobs?: number },
  ): EngineBatch;
  /**
   * Trainer-side log-probs of `rows` of `batch` under `weights` (the master weights by default,
   * or a frozen copy such as the reference policy). With `grad`, caches what {@link backward} needs.
   * With an MoE model, `routing` replays a routing ({@link EngineRoutingReplay}; none by default).
   * With `probSqSum`, an engine that can also returns Σ_v π(v)² per position (the AR engine does;
   * the diffusion engine, whose per-token log-probs are estimator averages, does not).
   */
  logprobs(
    batch: EngineBatch,
    rows: readonly number[],
    options: {
      grad: boolean;
      weights?: Float32Array;
      routing?: EngineRoutingReplay;
      probSqSum?: boolean;
      topk?: boolean;
    },
  ): EngineLogprobs;
  /**
   * Accumulates d(Σ g·ℓ + Σ g_topk·ℓ_topk)/dθ into `params.grads` for the last
   * `logprobs(…, { grad: true })` call (`gradTopk` only after one with `topk`).
   */
  backward(gradLogp: Float64Array, gradTopk?: Float64Array): void;
  /** Engine state beyond the weights (e.g. KV-cache scales), JSON-safe, for checkpoints. */
  state(): unknown;
  /** Restores what {@link RlEngine.state} returned. */
  restore(state: unknown): void;
}

/** An in-process policy: builds the engine a reference backend wraps and warm-starts it. */
export interface PolicyFactory {
  /** Checks the policy-specific fields of a config (model, sampler, plan) before anything runs. */
  validate(config: RunConfig): void;
  /** A fresh engine with seeded initial weights. */
  create(config: RunConfig, task: Task): RlEngine;
  /**
   * Supervised warm start of `engine` in place (deterministic for a given config); returns
   * {@link warmStartMetrics} (`sft/steps`, `sft/loss_first`, `sft/loss_last`, `sft/loss_last10`).
   * `onProgress` (optional) is called with (steps done, total) for display only. The loop yields to
   * the event loop between steps, so a minutes-long warm start keeps timers, signals and RPC served.
   */
  warmStart(
    engine: RlEngine,
    config: RunConfig,
    task: Task,
    onProgress?: (done: number, total: number) => void,
  ): Promise<Record<string, number>>;
}

/**
 * The warm-start metrics every policy reports, from its per-step losses: `sft/steps`,
 * `sft/loss_first`, `sft/loss_last` and `sft/loss_last10` (mean of the last 10; NaN without steps).
 */
export function warmStartMetrics(losses: readonly number[]): Record<string, number> {
  const n = losses.length;
  const tail = losses.slice(Math.max(0, n - 10));
  return {
    'sft/steps': n,
    'sft/loss_first': n > 0 ? (losses[0] as number) : Number.NaN,
    'sft/loss_last': n > 0 ? (losses[n - 1] as number) : Number.NaN,
    'sft/loss_last10': n > 0 ? tail.reduce((a, b) => a + b, 0) / tail.length : Number.NaN,
  };
}
