// The in-process reference backend: today's AR and diffusion engines behind the asynchronous
// PolicyBackend contract, owning the FP32 weights, the reference copy, AdamW and checkpoints.
// Not the GRPO loop (rl/grpo/loop.ts) and not a process boundary (the protocol adds that).

import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AdamW, type AdamWState, clipGradNorm } from '../nn/adamw.js';
import { planOfConfig } from '../policies/plans.js';
import type { EngineBatch, PolicyFactory, RlEngine } from '../policies/engine.js';
import { generationOf, type RunConfig } from '../rl/grpo/config.js';
import { createRng } from '../core/rng.js';
import { BOS, EOS, MASK, PAD, SEP } from '../tasks/tokenizer.js';
import type { Task } from '../tasks/task.js';
import { makeTaskFromConfig } from '../tasks/registry.js';
import { UsageError } from '../core/errors.js';
export type { PolicyFactory } from '../policies/engine.js';
import {
  BACKEND_PROTOCOL,
  type BackendInfo,
  type GenerateRequest,
  type JsonValue,
  type LogprobsRequest,
  type LogprobsResult,
  type PolicyBackend,
  type ReplayRecord,
  type RolloutBatch,
  type StepResult,
  type WarmStartRequest,
} from '../core/backend-contract.js';

/** The file a {@link ReferenceBackend} writes under a checkpoint directory. */
export const REFERENCE_STATE_FILE = 'backend.json';

/** Contents of {@link REFERENCE_STATE_FILE}. */
export interface ReferenceBackendState {
  readonly format: 'qrl-reference/1';
  readonly policy: string;
  readonly parameters: number;
  /** The run config the backend was built with (model, task and plan: enough to rebuild the policy). */
  readonly config: RunConfig;
  readonly weightVersion: number;
  /** FP32 master weights. */
  readonly weights: number[];
  /** Reference (warm-started) weights; null before `setReference`. */
  readonly referenceWeights: number[] | null;
  readonly optimizer: AdamWState;
  /** Engine state beyond the weights. */
  readonly engine: unknown;
}

/** Reads a reference-backend state: a checkpoint directory (run checkpoint or cached warm start) or its `backend.json`. */
export function readReferenceState(path: string): ReferenceBackendState {
  const file = existsSync(path) && statSync(path).isDirectory() ? join(path, REFERENCE_STATE_FILE) : path;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(
      `checkpoint: cannot read '${file}' (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
    );
  }
  let state: ReferenceBackendState;
  try {
    state = JSON.parse(text) as ReferenceBackendState;
  } catch (error) {
    throw new UsageError(`checkpoint: '${file}' is not valid JSON (${(error as Error).message})`);
  }
  if (state?.format !== 'qrl-reference/1' || !Array.isArray(state.weights) || typeof state.config !== 'object') {
    throw new UsageError(
      `checkpoint: '${file}' is not a qrl-reference/1 backend state (format ${JSON.stringify(state?.format)})`,
    );
  }
  return state;
}

interface GradHandle {
  readonly batch: RolloutBatch;
  readonly rows: readonly number[];
  readonly T: number;
  /** Trainer weight version the log-probs were taken at. */
  readonly weightVersion: number;
  /** The routing replay of the call (MoE), repeated when the handle is recomputed. */
  readonly routing: LogprobsRequest['routing'];
  /** The pass scored the batch's top-k ids (`backward` may take their coefficients). */
  readonly topk: boolean;
}

/** Copies a batch to plain data with a JSON-safe record (typed arrays stay typed arrays). */
function plainBatch(batch: EngineBatch, weightVersion: number): RolloutBatch {
  const record = (batch.record ?? { kind: 'none' }) as ReplayRecord;
  return {
    weightVersion,
    B: batch.B,
    T: batch.T,
    prompts: batch.prompts,
    responses: batch.responses,
    mask: batch.mask,
    logpRollout: batch.logpRollout,
    ...(batch.topk === undefined ? {} : { topk: batch.topk }),
    record,
  };
}

/**
 * The reference {@link PolicyBackend}: one in-process engine (AR or diffusion) with its FP32 master
 * weights, a frozen reference copy, AdamW (clipping, zeroing) and the weight versions. Generation
 * RNGs come from the request's `seed` path (`createRng(path)` equals the fork chain that names it),
 * so the draws equal the in-process engine's under the same stream.
 *
 * Handles: `logprobs({ grad: true })` returns a handle to the rows it scored; `backward(handle)`
 * spends it. The engine keeps the state of its most recent grad call; an older handle is
 * recomputed at the same weights (deterministic), and `step` retires every outstanding handle.
 */
export class ReferenceBackend implements PolicyBackend {
  private readonly engine: RlEngine;
  private optimizer: AdamW;
  private referenceWeights: Float32Array | null = null;
  private trainerVersion = 0;
  private rolloutVersion = 0;
  private readonly handles = new Map<string, GradHandle>();
  private lastHandle: string | null = null;
  private nextHandle = 1;
  /** Display-only progress of {@link ReferenceBackend.warmStart}: (steps done, total). */
  onWarmStartProgress: ((done: number, total: number) => void) | undefined = undefined;
  /** True once a backward since the last step accumulated into the gradients. */
  private accumulating = false;

  /** Builds the engine of `config` with `factory` (the config must already be validated). */
  constructor(
    readonly config: RunConfig,
    private readonly factory: PolicyFactory,
    readonly task: Task = makeTaskFromConfig(config.task),
  ) {
    this.engine = factory.create(config, task);
    const o = config.optim;
    this.optimizer = new AdamW(this.engine.params, {
      lr: o.lr,
      beta1: o.beta1,
      beta2: o.beta2,
      eps: o.eps,
      weightDecay: o.weightDecay,
    });
  }

  /** The wrapped engine's FP32 master weights (read-only use: diagnostics and tests). */
  get weights(): Float32Array {
    return this.engine.params.data;
  }

  async info(): Promise<BackendInfo> {
    const plan = planOfConfig(this.config.plan);
    return {
      protocol: BACKEND_PROTOCOL,
      backend: { name: 'qrl-sim reference', version: '1' },
      policy: this.config.policy.kind,
      vocabulary: { size: this.task.vocabSize, pad: PAD, bos: BOS, eos: EOS, sep: SEP, mask: MASK },
      plan: {
        name: plan.name,
        rollout: JSON.parse(JSON.stringify(plan.rollout)) as JsonValue,
        trainer: JSON.parse(JSON.stringify(plan.trainer)) as JsonValue,
      },
      capabilities: {
        logprobs: this.config.policy.kind === 'ar' ? ['processed', 'raw'] : ['processed'],
        entropy: true,
        warmStart: true,
        probSqSum: this.config.policy.kind === 'ar',
        ...(this.config.policy.kind === 'ar' ? { topkLogprobs: true, supportReplay: true } : {}),
      },
      parameters: this.engine.params.data.length,
    };
  }

  async sync(): Promise<{ readonly weightVersion: number }> {
    this.engine.sync();
    this.rolloutVersion = this.trainerVersion;
    return { weightVersion: this.rolloutVersion };
  }

  async generate(request: GenerateRequest): Promise<RolloutBatch> {
    if (typeof request.seed !== 'string' || request.seed.length === 0)
      throw new UsageError(`generate.seed: must be a non-empty RNG path, got ${JSON.stringify(request.seed)}`);
    if (request.sampling !== undefined) {
      const s = this.config.policy.sampler;
      const r = request.sampling;
      if (r.temperature !== s.temperature || r.topK !== s.topK || r.topP !== s.topP || r.logprob !== s.logprob) {
        throw new UsageError(
          `generate.sampling: the reference backend samples with its configured sampler ${JSON.stringify(s)}, got ${JSON.stringify(r)}`,
        );
      }
    }
    if (request.maxNewTokens !== undefined) {
      const limit = generationOf(this.config, this.task).maxNewTokens;
      if (request.maxNewTokens !== limit)
        throw new UsageError(
          `generate.maxNewTokens: the reference backend generates ${limit} response tokens (its run config), got ${request.maxNewTokens}`,
        );
    }
    const side = request.side ?? 'rollout';
    const K = request.topkLogprobs ?? 0;
    if (K !== 0 && (this.config.policy.kind !== 'ar' || !Number.isInteger(K) || K < 0 || K > this.task.vocabSize))
      throw new UsageError(
        this.config.policy.kind !== 'ar'
          ? `generate.topkLogprobs: the ${this.config.policy.kind} policy reports no top-k log-probs (AR only), got ${K}`
          : `generate.topkLogprobs: must be an integer in 0..${this.task.vocabSize} (the vocabulary), got ${K}`,
      );
    const batch = this.engine.generate(request.prompts, createRng(request.seed), {
      greedy: request.greedy === true,
      side,
      ...(K > 0 ? { topkLogprobs: K } : {}),
    });
    return plainBatch(batch, side === 'rollout' ? this.rolloutVersion : this.trainerVersion);
  }

  async logprobs(request: LogprobsRequest): Promise<LogprobsResult> {
    const { batch, rows, policy, routing } = request;
    if (policy === 'reference') {
      if (request.grad)
        throw new UsageError("logprobs.grad: only the 'current' policy takes gradients, got policy 'reference'");
      // The reference policy routes by its own top-k, as veRL's reference pass (docs/moe.md).
      if (routing !== undefined)
        throw new UsageError("logprobs.routing: only the 'current' policy replays a routing, got policy 'reference'");
      if (this.referenceWeights === null)
        throw new UsageError('logprobs.policy: no reference policy yet (call setReference first)');
      const ref = this.engine.logprobs(batch, rows, {
        grad: false,
        weights: this.referenceWeights,
        ...this.probSqSumOption(request),
      });
      return {
        logp: ref.logp,
        entropy: ref.entropy,
        ...(ref.probSqSum === undefined ? {} : { probSqSum: ref.probSqSum }),
      };
    }
    if (policy !== 'current')
      throw new UsageError(`logprobs.policy: must be 'current' or 'reference', got ${JSON.stringify(policy)}`);
    const engineRouting = routing ?? undefined;
    if (request.topk === true && batch.topk === undefined)
      throw new UsageError('logprobs.topk: the batch carries no topk (generate it with topkLogprobs > 0)');
    const topk = request.topk === true ? { topk: true } : {};
    const full = this.engine.logprobs(batch, rows, {
      grad: request.grad === true,
      ...(engineRouting === undefined ? {} : { routing: engineRouting }),
      ...this.probSqSumOption(request),
      ...topk,
    });
    const lp: LogprobsResult = {
      logp: full.logp,
      entropy: full.entropy,
      ...(full.probSqSum === undefined ? {} : { probSqSum: full.probSqSum }),
      ...(full.topkLogp === undefined ? {} : { topkLogp: full.topkLogp }),
      ...(request.returnRouting && full.routing !== undefined ? { routing: full.routing } : {}),
      ...(full.routingFlipRate !== undefined ? { routingFlipRate: full.routingFlipRate } : {}),
    };
    if (!request.grad) {
      this.lastHandle = null;
      return lp;
    }
    const handle = `h${this.nextHandle++}`;
    this.handles.set(handle, {
      batch,
      rows: [...rows],
      T: batch.T,
      weightVersion: this.trainerVersion,
      routing,
      topk: request.topk === true,
    });
    this.lastHandle = handle;
    return { ...lp, handle };
  }

  /** The engine option for `request.probSqSum`; refused by the diffusion policy, whose ℓ is an estimator's average. */
  private probSqSumOption(request: LogprobsRequest): { probSqSum?: boolean } {
    if (request.probSqSum !== true) return {};
    if (this.config.policy.kind !== 'ar')
      throw new UsageError(
        `logprobs.probSqSum: the ${this.config.policy.kind} policy has no single softmax row per token to sum π² over (AR only)`,
      );
    return { probSqSum: true };
  }

  async backward(handle: string, gradLogp: Float64Array, gradTopk?: Float64Array): Promise<void> {
    const h = this.handles.get(handle);
    if (h === undefined)
      throw new UsageError(
        `backward.handle: unknown or spent handle ${JSON.stringify(handle)} (each logprobs({ grad: true }) handle is spent by one backward, and step retires them all)`,
      );
    if (gradLogp.length !== h.rows.length * h.T)
      throw new UsageError(
        `backward.gradLogp: must have rows·T = ${h.rows.length * h.T} entries, got ${gradLogp.length}`,
      );
    if (gradTopk !== undefined) {
      const K = h.batch.topk?.K ?? 0;
      if (!h.topk)
        throw new UsageError(
          'backward.gradTopk: the handle was taken without logprobs.topk (no top-k ℓ to back-propagate)',
        );
      if (gradTopk.length !== h.rows.length * h.T * K)
        throw new UsageError(
          `backward.gradTopk: must have rows·T·K = ${h.rows.length * h.T * K} entries, got ${gradTopk.length}`,
        );
    }
    this.handles.delete(handle);
    if (this.lastHandle !== handle)
      this.engine.logprobs(h.batch, h.rows, {
        grad: true,
        ...(h.routing === undefined ? {} : { routing: h.routing }),
        ...(h.topk ? { topk: true } : {}),
      }); // same weights: same state
    this.lastHandle = null;
    if (!this.accumulating) {
      this.engine.params.zeroGrad();
      this.accumulating = true;
    }
    this.engine.backward(gradLogp, gradTopk);
  }

  async step(request: { readonly maxGradNorm: number }): Promise<StepResult> {
    if (!this.accumulating) this.engine.params.zeroGrad();
    const gradNorm = clipGradNorm(this.engine.params.grads, request.maxGradNorm);
    this.optimizer.step();
    this.engine.params.zeroGrad();
    this.accumulating = false;
    this.handles.clear();
    this.lastHandle = null;
    this.trainerVersion++;
    return { gradNorm, weightVersion: this.trainerVersion };
  }

  async setReference(): Promise<void> {
    this.referenceWeights = Float32Array.from(this.engine.params.data);
  }

  async warmStart(request: WarmStartRequest): Promise<Record<string, number>> {
    if (request.task.name !== this.config.task.name)
      throw new UsageError(
        `warmStart.task.name: this backend was built for task '${this.config.task.name}', got '${request.task.name}'`,
      );
    const config: RunConfig = {
      ...this.config,
      seed: request.seed,
      sft: { ...this.config.sft, steps: request.steps, batchSize: request.batchSize, lr: request.lr },
    };
    const metrics = await this.factory.warmStart(this.engine, config, this.task, this.onWarmStartProgress);
    this.engine.params.zeroGrad();
    this.trainerVersion++;
    // a metric without a value (the losses of 0 steps) is left out: the protocol's metrics are finite
    return Object.fromEntries(Object.entries(metrics).filter(([, v]) => Number.isFinite(v)));
  }

  async save(dir: string): Promise<void> {
    mkdirSync(dir, { recursive: true });
    const state: ReferenceBackendState = {
      format: 'qrl-reference/1',
      policy: this.config.policy.kind,
      parameters: this.engine.params.data.length,
      config: this.config,
      weightVersion: this.trainerVersion,
      weights: Array.from(this.engine.params.data),
      referenceWeights: this.referenceWeights === null ? null : Array.from(this.referenceWeights),
      optimizer: this.optimizer.state(),
      engine: this.engine.state(),
    };
    writeFileSync(join(dir, REFERENCE_STATE_FILE), `${JSON.stringify(state)}\n`);
  }

  async load(dir: string): Promise<void> {
    const state = readReferenceState(dir);
    if (state.policy !== this.config.policy.kind)
      throw new UsageError(
        `checkpoint: '${dir}' holds a ${state.policy} policy, this backend runs ${this.config.policy.kind}`,
      );
    if (state.weights.length !== this.engine.params.data.length) {
      throw new UsageError(
        `checkpoint: '${dir}' has ${state.weights.length} weights, the configured model has ${this.engine.params.data.length}`,
      );
    }
    this.engine.params.data.set(state.weights);
    this.referenceWeights = state.referenceWeights === null ? null : Float32Array.from(state.referenceWeights);
    this.optimizer = new AdamW(this.engine.params, this.optimizer.config, state.optimizer);
    this.engine.restore(state.engine);
    this.engine.params.zeroGrad();
    this.accumulating = false;
    this.handles.clear();
    this.trainerVersion = state.weightVersion;
  }

  async close(): Promise<void> {
    this.handles.clear();
  }
}
