// The masked-diffusion policy as the GRPO loop's RlEngine (sync, generate, logprobs, backward) and its PolicyFactory.
// Not the sampler or the estimators themselves (sampler.ts, estimators.ts): this file only wires them to the loop's contract.

import { z } from 'zod';
import { UsageError } from '../../core/errors.js';
import { createParamStore, type ParamStore } from '../../nn/params.js';
import type { Rng } from '../../core/rng.js';
import type { RunConfig } from '../../rl/grpo/config.js';
import type { PlanSideName } from '../../core/backend-contract.js';
import {
  type EngineBatch,
  type EngineLogprobs,
  type EngineRoutingReplay,
  type PolicyFactory,
  type RlEngine,
  warmStartMetrics,
} from '../engine.js';
import { flipRatesAt, gatherRoutingRows, replayRouting } from '../moe-replay.js';
import { moeModelSchema } from '../moe-config.js';
import type { MetricRecord } from '../../rl/types.js';
import { makeTaskFromConfig } from '../../tasks/registry.js';
import { PAD } from '../../tasks/tokenizer.js';
import type { Task } from '../../tasks/task.js';
import type { PolicyNumerics } from '../numerics.js';
import { numericsFor, planNeedsWeights, planOfConfig, type PrecisionPlan } from '../plans.js';
import {
  diffusionCompletionMask,
  diffusionLogprobs,
  type DiffusionEstimatorName,
  type DiffusionLogprobs,
} from './estimators.js';
import { createDiffusionModel, diffusionModelDefaults, type DiffusionModel } from './model.js';
import { sampleDiffusion, type DiffusionSamplerConfig, type DiffusionSequence } from './sampler.js';
import { diffusionWarmStartAsync } from './warmstart.js';
import { diffusionModelOptions, diffusionModelPresetNames, diffusionModelPresets } from './presets.js';

/**
 * What a diffusion {@link EngineBatch} carries in `record`: everything the trainer-side estimator
 * needs to score the same views the rollout engine scored.
 */
export interface DiffusionEngineRecord {
  readonly kind: 'diffusion';
  /** The sampled sequences (full responses, past EOS too) with the step that committed each slot. */
  readonly sequences: readonly DiffusionSequence[];
  /** Estimator run on both sides. */
  readonly estimator: DiffusionEstimatorName;
  /** Seed of the d1 prompt masks and ELBO views (with each sequence's id): the same on both sides. */
  readonly estimatorSeed: string;
  /** τ of every log-prob of this batch: the sampling temperature, or 1 for greedy batches. */
  readonly temperature: number;
  /**
   * (B, N, V) with `policy.sampler.supportReplay` and a truncating sampler (top-k/top-p): the kept
   * set of the draw that committed each response slot (1 = could be drawn). The trainer renormalises
   * every estimator's softmax at slot j over it.
   */
  readonly support?: Uint8Array;
  /**
   * MoE only (absent for a dense model): the routing of the rollout-side forward whose logits give
   * ℓroll, one (B, R/B·(P+N), k) array per layer in the layout of the estimator's forward rows
   * ({@link DiffusionLogprobs.routing}): for `trajectory` the sampler's step passes (B, S, P+N, k),
   * for `d1` the rollout-side d1 pass (B, P+N, k), for `elbo` its M views (B, M, P+N, k).
   */
  readonly moeRouting?: readonly Int32Array[];
}

/** The diffusion engine: an {@link RlEngine} that also exposes its model, plan and sampler settings. */
export interface DiffusionEngine extends RlEngine {
  readonly kind: 'diffusion';
  /** The bidirectional toy transformer (its layout is `params`'). */
  readonly model: DiffusionModel;
  /** The precision plan (rollout side for `generate`, trainer side for `logprobs`). */
  readonly plan: PrecisionPlan;
  /** Sampler settings of sampled (non-greedy) generations. */
  readonly sampler: DiffusionSamplerConfig;
  /** Per-token log-prob estimator used on both sides. */
  readonly estimator: DiffusionEstimatorName;
}

/** Model options accepted under `config.policy.model` for the diffusion policy (every one optional). */
const modelOptionsSchema = z.strictObject({
  preset: z.string().optional(),
  maxLen: z.number().int().positive().optional(),
  layers: z.number().int().positive().optional(),
  C: z.number().int().positive().optional(),
  H: z.number().int().positive().optional(),
  hidden: z.number().int().positive().optional(),
  moe: moeModelSchema,
});

/** Keys of the diffusion model's own config that `policy.model` spells the shared way. */
const RENAMED_MODEL_KEYS: Readonly<Record<string, string>> = Object.freeze({ nLayer: 'layers', maxSeqLen: 'maxLen' });

function fail(field: string, value: unknown, reason: string): never {
  throw new UsageError(`config.${field}: ${reason}, got ${JSON.stringify(value)}`);
}

function taskOf(config: RunConfig): Task {
  try {
    return makeTaskFromConfig(config.task);
  } catch (error) {
    throw new UsageError(`config.task.options: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** The model a config implies: `config.policy.model` over the toy defaults, maxLen ≥ prompt + generation. */
export function diffusionModelFor(config: RunConfig, task: Task): DiffusionModel {
  const { preset, maxLen, moe, ...fields } = modelOptionsSchema.parse(config.policy.model);
  const options = diffusionModelOptions(preset, fields);
  const length =
    maxLen ?? Math.max(diffusionModelDefaults.maxLen, task.promptLength + config.policy.diffusion.generationLength);
  return createDiffusionModel({
    ...options,
    ...(moe !== undefined ? { moe } : {}),
    maxLen: length,
    vocabSize: task.vocabSize,
  });
}

/** Sampler settings from `config.policy.diffusion` and `config.policy.sampler.temperature`. */
function samplerFor(config: RunConfig): DiffusionSamplerConfig {
  const d = config.policy.diffusion;
  return Object.freeze({
    genLength: d.generationLength,
    blockLength: d.blockLength,
    steps: d.steps,
    temperature: config.policy.sampler.temperature,
    remasking: d.remasking === 'low-confidence' ? 'low_confidence' : 'random',
    cfgScale: 0,
    topK: config.policy.sampler.topK,
    topP: config.policy.sampler.topP,
  });
}

/**
 * Checks the diffusion policy's part of a run config before anything runs: model options (known
 * keys `layers`, `C`, `H`, `hidden`, `maxLen` (the old `nLayer`/`maxSeqLen` are refused naming the new key), positive integers, C divisible by H, maxLen ≥ prompt + generation), the sampler's
 * divisibility rules (blockLength divides generationLength, blocks divide steps, at most
 * blockLength steps per block), generationLength ≥ the task's response length (the gold answer must
 * fit the warm start), the sampler option the diffusion sampler does not have (raw log-probs) and
 * the plan name. Throws a `UsageError` naming the field and value.
 *
 * @example
 * ```ts
 * validateDiffusionConfig(resolveRunConfig({ policy: { kind: 'diffusion', diffusion: { steps: 5 } } }));
 * // UsageError: config.policy.diffusion.steps: must be a multiple of the number of blocks 3 (generationLength/blockLength), got 5
 * ```
 */
export function validateDiffusionConfig(config: RunConfig): void {
  if (config.policy.kind !== 'diffusion')
    fail('policy.kind', config.policy.kind, "must be 'diffusion' for the diffusion policy");
  const task = taskOf(config);
  const d = config.policy.diffusion;
  for (const [old, now] of Object.entries(RENAMED_MODEL_KEYS)) {
    if (Object.hasOwn(config.policy.model, old))
      fail(
        `policy.model.${old}`,
        config.policy.model[old],
        `is now '${now}' (one model vocabulary for both policies: layers, C, H, hidden, maxLen)`,
      );
  }
  const preset = (config.policy.model as Record<string, unknown>)['preset'];
  if (preset !== undefined && (typeof preset !== 'string' || !Object.hasOwn(diffusionModelPresets, preset))) {
    fail('policy.model.preset', preset, `must be one of ${diffusionModelPresetNames.join(', ')}`);
  }
  const parsed = modelOptionsSchema.safeParse(config.policy.model);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const key = issue.path.length > 0 ? `.${issue.path.join('.')}` : '';
    const value =
      issue.path.length > 0
        ? (config.policy.model as Record<string, unknown>)[String(issue.path[0])]
        : config.policy.model;
    const reason =
      issue.code === 'unrecognized_keys'
        ? `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `'${k}'`).join(', ')} (known: ${Object.keys(modelOptionsSchema.shape).join(', ')})`
        : 'must be a positive integer';
    fail(`policy.model${issue.code === 'unrecognized_keys' ? '' : key}`, value, reason);
  }
  const { preset: _preset, maxLen: _maxLen, moe: _moe, ...sizes } = parsed.data;
  const m = { ...parsed.data, ...diffusionModelOptions(parsed.data.preset, sizes) };
  if (m.moe && m.moe.topK > m.moe.experts)
    fail('policy.model.moe.topK', m.moe.topK, `must be at most policy.model.moe.experts = ${m.moe.experts}`);
  const C = m.C ?? diffusionModelDefaults.C;
  const H = m.H ?? diffusionModelDefaults.H;
  if (C % H !== 0) fail('policy.model.H', H, `must divide C = ${C}`);
  const need = task.promptLength + d.generationLength;
  if (m.maxLen !== undefined && m.maxLen < need)
    fail(
      'policy.model.maxLen',
      m.maxLen,
      `must be ≥ prompt length ${task.promptLength} + generationLength ${d.generationLength} = ${need}`,
    );
  if (d.generationLength < task.responseLength) {
    fail(
      'policy.diffusion.generationLength',
      d.generationLength,
      `must be ≥ task ${task.name}'s response length ${task.responseLength} (the gold answer must fit)`,
    );
  }
  if (d.generationLength % d.blockLength !== 0)
    fail('policy.diffusion.blockLength', d.blockLength, `must divide generationLength ${d.generationLength}`);
  const blocks = d.generationLength / d.blockLength;
  if (d.steps % blocks !== 0)
    fail(
      'policy.diffusion.steps',
      d.steps,
      `must be a multiple of the number of blocks ${blocks} (generationLength/blockLength)`,
    );
  if (d.steps / blocks > d.blockLength)
    fail(
      'policy.diffusion.steps',
      d.steps,
      `must be ≤ blocks·blockLength = ${blocks * d.blockLength} (a step would commit no token)`,
    );
  const s = config.policy.sampler;
  if (s.logprob !== 'processed')
    fail(
      'policy.sampler.logprob',
      s.logprob,
      "must be 'processed' for the diffusion policy (ℓroll is of the distribution sampled from)",
    );
  let plan: PrecisionPlan;
  try {
    plan = planOfConfig(config.plan);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (planNeedsWeights(plan))
    fail(
      'plan',
      'refit',
      'refit chains and precision overrides are for the ar policy only (engine execution, temperatureAt, microBatch and padding too)',
    );
}

function recordOf(batch: EngineBatch): DiffusionEngineRecord {
  const r = batch.record as Partial<DiffusionEngineRecord> | undefined;
  if (!r || r.kind !== 'diffusion' || !Array.isArray(r.sequences) || r.sequences.length !== batch.B) {
    throw new Error(
      'diffusion engine: batch.record must be the DiffusionEngineRecord of a batch this engine generated',
    );
  }
  return r as DiffusionEngineRecord;
}

/**
 * Builds the diffusion policy's {@link RlEngine} for a run config: a fresh model (weights from
 * `<config.seed>/diffusion-policy`), the configured plan, sampler and estimator. The engine is
 * synced once on creation; call `sync()` after changing the weights and before `generate`.
 *
 * - `sync()` snapshots the master weights into the rollout engine's own copy and rebuilds the
 *   rollout numerics (numerics cache weights by array identity).
 * - `generate` samples with {@link sampleDiffusion} under the chosen side (`rollout`: the synced copy
 *   and rollout numerics; `trainer`: the master weights and fresh trainer numerics); greedy = temperature 0.
 *   `logpRollout` is the sampler's inline log-prob for `trajectory`, else the estimator run under the
 *   same side's numerics on the sampled sequences; `mask` is d1's completion mask.
 * - `logprobs` runs the same estimator under fresh trainer numerics (built at every call, since the
 *   optimizer changes the weights between calls) with the record's seed and temperature.
 * - `state()` is null: the engine holds nothing beyond the weights that a checkpoint must keep
 *   (no KV cache, no calibrated scales; the rollout copy is rebuilt by `sync()`).
 *
 * @example
 * ```ts
 * const engine = createDiffusionEngine(resolveRunConfig({ policy: { kind: 'diffusion' }, task: { name: 'sudoku4' } }), makeTask('sudoku4'));
 * const batch = engine.generate(prompts, createRng(1));
 * const { logp } = engine.logprobs(batch, [0, 1], { grad: true });
 * ```
 */
export function createDiffusionEngine(config: RunConfig, task: Task): DiffusionEngine {
  const model = diffusionModelFor(config, task);
  const plan = planOfConfig(config.plan);
  const sampler = samplerFor(config);
  const replay = config.policy.sampler.supportReplay;
  const estimator = config.policy.diffusion.estimator;
  const N = sampler.genLength;
  const topK = model.block.moe?.topK ?? 0;
  const params: ParamStore = createParamStore(model.specs, `${config.seed}/diffusion-policy`);
  let rolloutWeights = Float32Array.from(params.data);
  let rolloutNumerics: PolicyNumerics = numericsFor(plan.rollout);
  let last: { readonly lp: DiffusionLogprobs; readonly mask: Float64Array } | null = null;

  const generate = (
    prompts: readonly (readonly number[])[],
    rng: Rng,
    options: { greedy?: boolean; side?: PlanSideName } = {},
  ): EngineBatch => {
    const side = options.side ?? 'rollout';
    const weights = side === 'rollout' ? rolloutWeights : params.data;
    const numerics = side === 'rollout' ? rolloutNumerics : numericsFor(plan.trainer);
    const cfg = options.greedy ? { ...sampler, temperature: 0 } : sampler;
    const rollout = sampleDiffusion({ model, params: weights, numerics }, prompts, cfg, rng, {
      recordRouting: topK > 0 && estimator === 'trajectory',
    });
    const B = prompts.length;
    const estimatorSeed = rng.path;
    const mask = diffusionCompletionMask(rollout.sequences); // (B, N)
    // ℓroll and the routing of the forward that gave it: the sampler's passes (trajectory) or the
    // rollout-side estimator's pass over the same views the trainer scores (d1, elbo)
    const scored =
      estimator === 'trajectory'
        ? null
        : diffusionLogprobs(estimator, model, weights, rollout.sequences, numerics, {
            seed: estimatorSeed,
            temperature: rollout.logpTemperature,
            support: rollout.support,
          });
    const logpRollout = scored === null ? Float64Array.from(rollout.logpRollout) : scored.logp; // (B, N)
    const moeRouting = scored === null ? rollout.routing : scored.routing;
    const responses = new Int32Array(B * N); // (B, N), PAD past the mask
    rollout.sequences.forEach((s, r) => {
      for (let j = 0; j < N; j++) {
        const k = r * N + j;
        responses[k] = mask[k] === 1 ? s.response[j]! : PAD;
        if (mask[k] !== 1) logpRollout[k] = 0;
      }
    });
    const record: DiffusionEngineRecord = {
      kind: 'diffusion',
      sequences: rollout.sequences,
      estimator,
      estimatorSeed,
      temperature: rollout.logpTemperature,
      ...(replay && rollout.support !== null ? { support: rollout.support } : {}),
      ...(moeRouting === null ? {} : { moeRouting: moeRouting.map((r) => Int32Array.from(r)) }),
    };
    return { B, T: N, prompts, responses, mask, logpRollout, record };
  };

  const logprobs = (
    batch: EngineBatch,
    rows: readonly number[],
    options: { grad: boolean; weights?: Float32Array; routing?: EngineRoutingReplay },
  ): EngineLogprobs => {
    const record = recordOf(batch);
    if (batch.T !== N) throw new Error(`diffusion engine: batch.T must be generationLength ${N}, got ${batch.T}`);
    if (options.grad && options.weights !== undefined)
      throw new Error('diffusion engine: logprobs with grad: true must use the master weights (no options.weights)');
    rows.forEach((r, i) => {
      if (!Number.isInteger(r) || r < 0 || r >= batch.B)
        throw new Error(`diffusion engine: rows[${i}] must be a row of the batch in [0, ${batch.B}), got ${r}`);
    });
    last = null;
    if (rows.length === 0) return { logp: new Float64Array(0), entropy: new Float64Array(0) };
    const sequences = rows.map((r) => record.sequences[r]!);
    const V = model.config.vocabSize;
    let support: Uint8Array | null = null; // (rows, N, V) replayed kept sets
    if (record.support instanceof Uint8Array) {
      if (record.support.length !== batch.B * N * V)
        throw new Error(
          `diffusion engine: record.support must have B·N·V = ${batch.B * N * V} entries, got ${record.support.length}`,
        );
      const all = record.support;
      support = new Uint8Array(rows.length * N * V);
      rows.forEach((r, i) => support!.set(all.subarray(r * N * V, (r + 1) * N * V), i * N * V));
    }
    const recordedAll = record.moeRouting;
    const rowSize = recordedAll === undefined ? 0 : (recordedAll[0]?.length ?? 0) / batch.B; // R/B·T·k per sequence
    const recorded = recordedAll === undefined ? undefined : gatherRoutingRows(recordedAll, rows, rowSize);
    const replay = replayRouting(options.routing, recorded, rows.length * rowSize, model.config.layers, topK);
    const lp = diffusionLogprobs(
      record.estimator,
      model,
      options.weights ?? params.data,
      sequences,
      numericsFor(plan.trainer),
      {
        seed: record.estimatorSeed,
        temperature: record.temperature,
        support,
        routing: replay,
      },
    );
    const mask = new Float64Array(rows.length * N); // (rows, N)
    rows.forEach((r, i) => mask.set(batch.mask.subarray(r * N, r * N + N), i * N));
    const logp = Float64Array.from(lp.logp, (v, k) => (mask[k] === 1 ? v : 0));
    const entropy = Float64Array.from(lp.entropy, (v, k) => (mask[k] === 1 ? v : 0));
    if (options.grad) last = { lp, mask };
    if (lp.routing === null) return { logp, entropy };
    const used = lp.routing.map((r) => Int32Array.from(r));
    if (recorded === undefined) return { logp, entropy, routing: used };
    // the (row, position) pairs whose outputs score a response slot with mask 1
    const scoredAt = Array.from(lp.scoredAt).filter((_, e) => mask[lp.scoredSlot[e]!] === 1);
    return { logp, entropy, routing: used, routingFlipRate: flipRatesAt(recorded, used, topK, scoredAt) };
  };

  const backward = (gradLogp: Float64Array): void => {
    if (last === null) throw new Error('diffusion engine: backward needs a preceding logprobs(…, { grad: true }) call');
    const { lp, mask } = last;
    if (gradLogp.length !== mask.length)
      throw new Error(`diffusion engine: gradLogp must have rows·T = ${mask.length} entries, got ${gradLogp.length}`);
    lp.backward(
      Float64Array.from(gradLogp, (g, k) => (mask[k] === 1 ? g : 0)),
      params.grads,
    );
  };

  const engine: DiffusionEngine = {
    kind: 'diffusion',
    model,
    plan,
    sampler,
    estimator,
    params,
    sync() {
      rolloutWeights = Float32Array.from(params.data);
      rolloutNumerics = numericsFor(plan.rollout);
    },
    generate,
    logprobs,
    backward,
    state: () => null,
    restore(state) {
      if (state !== null && state !== undefined)
        throw new Error(`diffusion engine: restore expects the null state of state(), got ${JSON.stringify(state)}`);
    },
  };
  return engine;
}

/** True when `engine` was built by {@link createDiffusionEngine}. */
export function isDiffusionEngine(engine: RlEngine): engine is DiffusionEngine {
  return (
    (engine as Partial<DiffusionEngine>).kind === 'diffusion' &&
    (engine as Partial<DiffusionEngine>).model !== undefined
  );
}

/**
 * The diffusion policy for `qrl-sim run`: `create` = {@link createDiffusionEngine}; `warmStart` =
 * {@link diffusionWarmStart} (LLaDA masked-token SFT, fp32 numerics) with `config.sft.{steps,
 * batchSize, lr}`, gold answers padded to `generationLength` with EOS and seed `<config.seed>`,
 * then a `sync()`; `validate` = {@link validateDiffusionConfig}.
 */
export const diffusionPolicyFactory: PolicyFactory = Object.freeze({
  create(config: RunConfig, task: Task): RlEngine {
    return createDiffusionEngine(config, task);
  },
  async warmStart(
    engine: RlEngine,
    config: RunConfig,
    task: Task,
    onProgress?: (done: number, total: number) => void,
  ): Promise<MetricRecord> {
    if (!isDiffusionEngine(engine))
      throw new Error('diffusionPolicyFactory.warmStart: engine must come from createDiffusionEngine');
    const { losses } = await diffusionWarmStartAsync(
      engine.model,
      task,
      {
        steps: config.sft.steps,
        batchSize: config.sft.batchSize,
        lr: config.sft.lr,
        genLength: engine.sampler.genLength,
        seed: `${config.seed}`,
        ...(onProgress ? { onProgress } : {}),
      },
      engine.params,
    );
    engine.sync();
    return warmStartMetrics(losses);
  },
  validate(config: RunConfig): void {
    validateDiffusionConfig(config);
  },
});
