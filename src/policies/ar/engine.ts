// The autoregressive policy behind the GRPO loop's engine contract: rollout under the plan's
// rollout side, trainer log-probs and backward under its trainer side, supervised warm start.
// Not the model or the sampler themselves (model.ts, rollout.ts).

import { z } from 'zod';
import { UsageError } from '../../core/errors.js';
import { ParamStore } from '../../nn/params.js';
import {
  type EngineBatch,
  type EngineLogprobs,
  type PolicyFactory,
  type RlEngine,
  warmStartMetrics,
} from '../engine.js';
import { flipRatesAt, gatherRoutingRows, replayRouting } from '../moe-replay.js';
import { moeModelSchema } from '../moe-config.js';
import type { RunConfig } from '../../rl/grpo/config.js';
import { zodIssueLine } from '../../core/errors.js';
import type { Task } from '../../tasks/task.js';
import { makeTaskFromConfig } from '../../tasks/registry.js';
import { type PrecisionPlan, planOfConfig, sideNumerics } from '../plans.js';
import { arConfig, type ArConfig } from './config.js';
import { ArPolicy, createArPolicy } from './model.js';
import { backwardChunked, chunkedLogprobs, chunkedRouting, type ChunkedLogprobs } from './micro-batches.js';
import { arModelOptions, arModelPresetNames, type ArModelPresetName } from './presets.js';
import { rollout } from './rollout.js';
import { trainSupervisedAsync } from './supervised.js';

/** `policy.model` options of the AR policy (every field optional; docs/policies.md). */
export const arModelSchema = z.strictObject({
  preset: z.enum(arModelPresetNames as [ArModelPresetName, ...ArModelPresetName[]]).optional(),
  C: z.number().int().positive().optional(),
  H: z.number().int().positive().optional(),
  layers: z.number().int().positive().optional(),
  hidden: z.number().int().positive().optional(),
  norm: z.enum(['layernorm', 'rmsnorm']).optional(),
  mlp: z.enum(['gelu', 'swiglu']).optional(),
  bias: z.boolean().optional(),
  positions: z.enum(['rope', 'learned']).optional(),
  tiedEmbeddings: z.boolean().optional(),
  moe: moeModelSchema,
  outliers: z.number().int().nonnegative().optional(),
  outlierMagnitude: z.number().positive().optional(),
  /** Longest sequence the model takes (learned position table size; RoPE bound): at least prompt + response. */
  maxLen: z.number().int().positive().optional(),
});

/** The AR config of a run: the task's vocabulary and lengths plus `policy.model`. */
export function arConfigFor(config: RunConfig, task: Task): ArConfig {
  const parsed = arModelSchema.safeParse(config.policy.model);
  if (!parsed.success) throw new UsageError(zodIssueLine(parsed.error, config.policy.model, 'config.policy.model'));
  const { maxLen, ...fields } = parsed.data;
  const model = arModelOptions(fields);
  const needed = task.promptLength + task.responseLength;
  if (maxLen !== undefined && maxLen < needed) {
    throw new UsageError(
      `config.policy.model.maxLen: must be at least prompt + response = ${task.promptLength} + ${task.responseLength} = ${needed} tokens for task '${task.name}', got ${maxLen}`,
    );
  }
  try {
    return arConfig({ ...model, vocabSize: task.vocabSize, maxLen: maxLen ?? needed });
  } catch (error) {
    throw new UsageError(`config.policy.model: ${(error as Error).message}`);
  }
}

/** The plan of a run, or a UsageError naming `config.plan`. */
export function planFor(config: RunConfig): PrecisionPlan {
  try {
    return planOfConfig(config.plan);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** The AR policy's replay record (plain data): prompt and response tokens of every row. */
export interface ArEngineRecord {
  readonly kind: 'ar';
  /** (B, P + L) prompt and response tokens. */
  readonly tokens: Int32Array;
  readonly promptLength: number;
  /**
   * τ of every log-prob of the batch: the sampler's, 1 for a greedy batch (docs/adapter.md, the AR
   * record); `logprobs` scores at it. Absent in a record of an earlier version: the configured τ.
   */
  readonly temperature?: number;
  /** (B, L, V) kept set per sampled slot, with `policy.sampler.supportReplay` (1 = could be drawn). */
  readonly support?: Uint8Array;
  /**
   * MoE only (absent for a dense model): the rollout engine's routing, one (B, P + L, k) array per
   * layer (see `Rollout.routing`; −1 where the engine never ran the position).
   */
  readonly moeRouting?: readonly Int32Array[];
}

/**
 * An {@link RlEngine} over an AR policy. `sync()` copies the master weights into the rollout engine's
 * own copy and rebuilds the rollout numerics (weights re-quantized, KV scales recalibrated), as the
 * diffusion engine does; the rollout side samples with that copy until the next `sync()`; the trainer numerics at each `logprobs` call (the weights
 * change after every optimizer step, and numerics cache rounded weights by array identity).
 */
export function createArEngine(config: RunConfig, task: Task): RlEngine {
  const plan = planFor(config);
  const policy = createArPolicy(arConfigFor(config, task), config.seed);
  const params = policy.params as ParamStore;
  const sampler = config.policy.sampler;
  // The rollout engine's own copy of the weights, refreshed only by sync(): between a step and the
  // next sync it keeps sampling with the weights it served (the contract's weight version).
  const rolloutPolicy = new ArPolicy(policy.config, new ParamStore(params.layout, Float32Array.from(params.data)));
  let rolloutNumerics = sideNumerics(plan.rollout, rolloutPolicy.weights);
  let reference: { weights: Float32Array; policy: ArPolicy } | null = null;
  let last: { lp: ChunkedLogprobs; rows: number } | null = null;
  // The last pass on the master weights without a gradient (the ℓold recompute), for a later pass
  // with the same inputs: with one mini-batch and one epoch the update's ℓθ pass is the ℓold pass
  // again (same rows, same weights), and the forward is a function of the weights' bits, the rows'
  // tokens, mask and kept sets, the replayed routing and the plan, so its caches serve that pass.
  let oldPass: {
    lp: ChunkedLogprobs;
    batch: EngineBatch;
    rows: readonly number[];
    weights: Uint32Array;
    replay: readonly Int32Array[] | undefined;
  } | null = null;
  const sameInputs = (
    kept: NonNullable<typeof oldPass>,
    batch: EngineBatch,
    rows: readonly number[],
    replay: readonly Int32Array[] | undefined,
  ): boolean => {
    if (kept.batch !== batch || kept.rows.length !== rows.length || rows.some((r, i) => r !== kept.rows[i]))
      return false;
    if ((kept.replay === undefined) !== (replay === undefined)) return false;
    if (replay !== undefined && !replay.every((layer, l) => sameBits(layer, kept.replay![l]!))) return false;
    return sameBits(new Uint32Array(params.data.buffer, params.data.byteOffset, params.data.length), kept.weights);
  };

  const recordOf = (batch: EngineBatch): ArEngineRecord => {
    const record = batch.record as ArEngineRecord | undefined;
    if (record === undefined || record.kind !== 'ar' || !(record.tokens instanceof Int32Array))
      throw new Error('ar engine: batch was not generated by an AR engine');
    const tau = record.temperature;
    if (tau !== undefined && !(typeof tau === 'number' && Number.isFinite(tau) && tau > 0))
      throw new Error(`ar engine: batch.record.temperature must be a finite number > 0, got ${JSON.stringify(tau)}`);
    return record;
  };
  const policyFor = (weights: Float32Array | undefined): ArPolicy => {
    if (weights === undefined || weights === params.data) return policy;
    if (reference?.weights !== weights)
      reference = { weights, policy: new ArPolicy(policy.config, new ParamStore(params.layout, weights)) };
    return reference.policy;
  };

  return {
    params,
    sync() {
      rolloutPolicy.params.data.set(params.data);
      // new numerics: the old ones cache rounded weights by array identity, and the array is reused
      rolloutNumerics = sideNumerics(plan.rollout, rolloutPolicy.weights);
    },
    generate(prompts, rng, options = {}) {
      const side = options.side ?? 'rollout';
      const planSide = plan[side];
      const r = rollout(side === 'rollout' ? rolloutPolicy : policy, prompts, {
        maxNewTokens: task.responseLength,
        numerics: side === 'rollout' ? rolloutNumerics : sideNumerics(plan.trainer, policy.weights),
        rng,
        temperature: sampler.temperature,
        ...(sampler.topK > 0 ? { topK: sampler.topK } : {}),
        ...(sampler.topP < 1 ? { topP: sampler.topP } : {}),
        greedy: options.greedy === true,
        decode: planSide.decode ?? 'incremental',
        logprob: sampler.logprob,
        recordSupport: sampler.supportReplay,
        ...(options.topkLogprobs !== undefined && options.topkLogprobs > 0 && options.greedy !== true
          ? { topkLogprobs: options.topkLogprobs }
          : {}),
        ...(side === 'rollout' && planSide.engine !== undefined ? { engine: planSide.engine } : {}),
      });
      const L = r.responseLength;
      const P = r.promptLength;
      const T = P + L;
      const responses = new Int32Array(r.B * L);
      for (let b = 0; b < r.B; b++) responses.set(r.tokens.subarray(b * T + P, (b + 1) * T), b * L);
      const record: ArEngineRecord = {
        kind: 'ar',
        tokens: r.tokens,
        promptLength: P,
        temperature: options.greedy === true ? 1 : sampler.temperature,
        ...(r.support === undefined ? {} : { support: r.support }),
        ...(r.routing ? { moeRouting: r.routing } : {}),
      };
      return {
        B: r.B,
        T: L,
        prompts,
        responses,
        mask: Float64Array.from(r.responseMask),
        logpRollout: r.logpRollout,
        ...(r.topk === undefined ? {} : { topk: r.topk }),
        record,
      };
    },
    logprobs(batch, rows, options): EngineLogprobs {
      const { tokens, promptLength: P, support, moeRouting, temperature = sampler.temperature } = recordOf(batch);
      const V = policy.config.vocabSize;
      const subSupport = support instanceof Uint8Array ? new Uint8Array(rows.length * batch.T * V) : undefined; // (rows, L, V)
      const T = P + batch.T;
      const sub = new Int32Array(rows.length * T);
      const mask = new Float32Array(rows.length * batch.T);
      rows.forEach((r, i) => {
        sub.set(tokens.subarray(r * T, (r + 1) * T), i * T);
        mask.set(batch.mask.subarray(r * batch.T, (r + 1) * batch.T), i * batch.T);
        subSupport?.set((support as Uint8Array).subarray(r * batch.T * V, (r + 1) * batch.T * V), i * batch.T * V);
      });
      const target = policyFor(options.weights);
      let topk: { K: number; ids: Int32Array } | undefined;
      if (options.topk === true) {
        if (batch.topk === undefined)
          throw new Error('ar engine: logprobs topk needs a batch generated with topkLogprobs');
        const K = batch.topk.K;
        const ids = new Int32Array(rows.length * batch.T * K); // (rows, L, K)
        rows.forEach((r, i) =>
          ids.set(batch.topk!.ids.subarray(r * batch.T * K, (r + 1) * batch.T * K), i * batch.T * K),
        );
        topk = { K, ids };
      }
      const k = policy.blockConfig.moe?.topK ?? 0;
      const recorded = moeRouting === undefined ? undefined : gatherRoutingRows(moeRouting, rows, T * k); // layers × (rows, P + L, k)
      const replay = replayRouting(options.routing, recorded, rows.length * T * k, policy.config.layers, k);
      const kept = target === policy ? oldPass : null; // a pass on other weights (ℓref) leaves it
      if (target === policy) oldPass = null;
      const reuse =
        kept !== null &&
        (options.probSqSum !== true || kept.lp.probSqSum !== undefined) &&
        (topk === undefined) === (kept.lp.topk === undefined) &&
        (topk === undefined || sameBits(topk.ids, kept.lp.topk!.ids)) &&
        sameInputs(kept, batch, rows, replay);
      const lp = reuse
        ? kept.lp
        : chunkedLogprobs(target, sub, rows.length, P, mask, {
            numerics: sideNumerics(plan.trainer, target.weights),
            temperature,
            support: subSupport,
            routing: replay,
            probSqSum: options.probSqSum,
            ...(topk !== undefined ? { topk } : {}),
            ...(plan.trainer.temperatureAt !== undefined ? { temperatureAt: plan.trainer.temperatureAt } : {}),
            microBatch: plan.trainer.microBatch,
            padding: plan.trainer.padding,
          });
      const sq = {
        ...(options.probSqSum === true && lp.probSqSum !== undefined ? { probSqSum: lp.probSqSum } : {}),
        ...(topk !== undefined && lp.topkLogp !== undefined
          ? { topkLogp: reuse ? Float64Array.from(lp.topkLogp) : lp.topkLogp }
          : {}),
      };
      last = options.grad && target === policy ? { lp, rows: rows.length } : null;
      if (!options.grad && target === policy)
        oldPass = {
          lp,
          batch,
          rows: [...rows],
          weights: new Uint32Array(params.data.buffer, params.data.byteOffset, params.data.length).slice(),
          replay,
        };
      // a reused pass returns copies: the ℓold pass's arrays stay its caller's
      const logp = reuse ? Float64Array.from(lp.logp) : lp.logp;
      const entropy = reuse ? Float64Array.from(lp.entropy) : lp.entropy;
      if (k === 0) return { logp, entropy, ...sq };
      const used = chunkedRouting(lp); // layers × (rows, P + L, k), fresh arrays
      if (recorded === undefined) return { logp, entropy, ...sq, routing: used };
      // positions whose outputs score a response token: P + j − 1 for every slot j with mask 1
      const scored: number[] = [];
      for (let i = 0; i < rows.length; i++)
        for (let j = 0; j < batch.T; j++) if (mask[i * batch.T + j] === 1) scored.push(i * T + P + j - 1);
      return { logp, entropy, ...sq, routing: used, routingFlipRate: flipRatesAt(recorded, used, k, scored) };
    },
    backward(gradLogp, gradTopk) {
      if (last === null)
        throw new Error('ar engine: backward needs a preceding logprobs(…, { grad: true }) on the master weights');
      backwardChunked(policy, last.lp, gradLogp, gradTopk);
      last = null;
    },
    state() {
      return null;
    },
    restore() {
      // No state beyond the weights: numerics are rebuilt from them.
    },
  };
}

/** The AR policy's factory for `qrl-sim run`. */
export const arPolicyFactory: PolicyFactory = {
  validate(config) {
    planFor(config);
    // Sizes are validated against the task's vocabulary and lengths when the task is known;
    // here the schema and the size rules (H divides C …) are checked with a stand-in vocabulary.
    const parsed = arModelSchema.safeParse(config.policy.model);
    if (!parsed.success) throw new UsageError(zodIssueLine(parsed.error, config.policy.model, 'config.policy.model'));
    const { maxLen: _maxLen, ...fields } = parsed.data;
    try {
      arConfig({ ...arModelOptions(fields), vocabSize: 8, maxLen: 8 });
    } catch (error) {
      throw new UsageError(`config.policy.model: ${(error as Error).message}`);
    }
    // maxLen against the task's lengths (the task options were validated with the run config)
    if (parsed.data.maxLen !== undefined) arConfigFor(config, makeTaskFromConfig(config.task));
  },
  create: createArEngine,
  async warmStart(engine, config, task, onProgress) {
    // The warm start is precision-independent (fp32), so every plan of a sweep starts from the
    // same policy and one cached checkpoint serves them all.
    const policy = new ArPolicy(arConfigFor(config, task), engine.params);
    const { losses } = await trainSupervisedAsync(policy, task, {
      steps: config.sft.steps,
      batchSize: config.sft.batchSize,
      optimizer: { lr: config.sft.lr, weightDecay: 0.01 },
      seed: config.seed,
      ...(onProgress ? { onProgress } : {}),
    });
    return warmStartMetrics(losses);
  },
};

/** True when two typed arrays hold the same bits. */
function sameBits(a: Uint32Array | Int32Array, b: Uint32Array | Int32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
