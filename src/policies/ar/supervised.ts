// Supervised warm start of the AR policy: cross-entropy on the response tokens of (prompt, gold response)
// pairs, AdamW with global-norm clipping. Not RL: the GRPO loop calls this before its first step.

import { runSteps, runStepsYielding } from '../yield.js';
import { AdamW, clipGradNorm, type AdamWConfig } from '../../nn/adamw.js';
import { allocLike } from '../../nn/array.js';
import { crossEntropyBackward, crossEntropyForward } from '../../nn/softmax.js';
import { ParamStore } from '../../nn/params.js';
import { createRng, type Rng } from '../../core/rng.js';
import { PAD } from '../../tasks/tokenizer.js';
import type { Task } from '../../tasks/task.js';
import { fp32Numerics, type PolicyNumerics } from '../numerics.js';
import { arBackward, arForward, type ArPolicy } from './model.js';
import { rngStreams } from '../../core/rng-streams.js';

/** One supervised pair: a prompt (all prompts of a batch have one length) and its gold response. */
export interface SupervisedExample {
  /** Prompt tokens (left-padded by the task). */
  readonly prompt: readonly number[];
  /** Response tokens, EOS included. */
  readonly response: readonly number[];
}

/** Options of {@link sftStep}. */
export interface SftStepOptions {
  /**
   * Builds the trainer numerics for this step (called once per step, after which the weights
   * change). @defaultValue exact fp32
   */
  readonly numerics?: () => PolicyNumerics;
  /** Global-norm clip. @defaultValue 1 */
  readonly maxGradNorm?: number;
  /** Learning rate of this step. @defaultValue the optimizer's */
  readonly lr?: number;
}

/** What one {@link sftStep} did. */
export interface SftStepResult {
  /** Mean cross-entropy per response token (nats), before the update. */
  readonly loss: number;
  /** Gradient norm before clipping. */
  readonly gradNorm: number;
}

/** The policy's parameter store (supervised training needs FP32 master weights in a `ParamStore`). */
export function policyStore(policy: ArPolicy): ParamStore {
  if (!(policy.params instanceof ParamStore))
    throw new Error('ar policy: params must be a ParamStore for training (use createArPolicy)');
  return policy.params;
}

/**
 * One supervised step: a batch (B, P + Lmax) with responses right-padded by PAD, cross-entropy on
 * the response tokens only (each weighted 1/#response tokens: the token mean), backward, global-norm
 * clip, AdamW update.
 *
 * @example
 * ```ts
 * const opt = new AdamW(policyStore(policy), { lr: 3e-3 });
 * const { loss } = sftStep(policy, opt, [{ prompt, response }]);
 * ```
 */
export function sftStep(
  policy: ArPolicy,
  optimizer: AdamW,
  batch: readonly SupervisedExample[],
  opts: SftStepOptions = {},
): SftStepResult {
  const store = policyStore(policy);
  const B = batch.length;
  if (B < 1) throw new Error('sftStep: batch must hold at least one example, got 0');
  const P = batch[0]!.prompt.length;
  const Lmax = Math.max(...batch.map((e) => e.response.length));
  const T = P + Lmax;
  const V = policy.config.vocabSize;
  const tokens = new Int32Array(B * T).fill(PAD); // (B, T)
  const targets = new Int32Array(B * T); // (B, T) next token of each position (0 where unweighted)
  const weights = new Float32Array(B * T); // (B, T) 1/#response tokens on rows predicting a response token
  let count = 0;
  batch.forEach((e, b) => {
    if (e.prompt.length !== P)
      throw new Error(`sftStep: every prompt must have length ${P}, batch[${b}].prompt has ${e.prompt.length}`);
    tokens.set(e.prompt, b * T);
    tokens.set(e.response, b * T + P);
    count += e.response.length;
  });
  if (count === 0) throw new Error('sftStep: batch has no response tokens');
  for (let b = 0; b < B; b++) {
    for (let k = 0; k < batch[b]!.response.length; k++) {
      const row = b * T + P + k - 1;
      targets[row] = tokens[row + 1]!;
      weights[row] = 1 / count;
    }
  }
  const numerics = (opts.numerics ?? fp32Numerics)();
  const cache = arForward(policy, tokens, B, T, numerics);
  const N = B * T;
  const losses = allocLike(cache.logits, N); // (N)
  const probs = allocLike(cache.logits, N * V); // (N, V)
  const loss = crossEntropyForward(losses, probs, cache.logits, targets, N, V, { weights });
  store.zeroGrad();
  const dlogits = allocLike(cache.logits, N * V); // (N, V)
  crossEntropyBackward(dlogits, probs, targets, N, V, { weights });
  arBackward(policy, cache, dlogits, numerics);
  const gradNorm = clipGradNorm(store.grads, opts.maxGradNorm ?? 1);
  optimizer.step(opts.lr);
  return { loss, gradNorm };
}

/** Options of {@link trainSupervised}. */
export interface TrainSupervisedOptions {
  /** Number of steps. */
  readonly steps: number;
  /** Examples per step. @defaultValue 32 */
  readonly batchSize?: number;
  /** AdamW settings. @defaultValue `{ lr: 1e-2, weightDecay: 0.01 }` */
  readonly optimizer?: AdamWConfig;
  /** Seed of the problem stream (`<seed>/sft`). @defaultValue 0 */
  readonly seed?: number | string;
  /** Global-norm clip. @defaultValue 1 */
  readonly maxGradNorm?: number;
  /** Trainer numerics per step. @defaultValue exact fp32 */
  readonly numerics?: () => PolicyNumerics;
  /** Called after every step with (steps done, total); for progress display only, results are unchanged. */
  readonly onProgress?: (done: number, total: number) => void;
}

/** Result of {@link trainSupervised}. */
export interface TrainSupervisedResult {
  /** Loss of every step (before its update). */
  readonly losses: number[];
  /** The optimizer (its state can be checkpointed). */
  readonly optimizer: AdamW;
}

/**
 * Warm start: `steps` supervised steps on training problems of `task` (drawn with
 * `task.sampleProblem` from the stream `<seed>/sft`) paired with `task.goldResponse`.
 *
 * @example
 * ```ts
 * const task = makeTask('reverse');
 * const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + task.responseLength }), 1);
 * const { losses } = trainSupervised(policy, task, { steps: 200 });
 * ```
 */
export function trainSupervised(policy: ArPolicy, task: Task, opts: TrainSupervisedOptions): TrainSupervisedResult {
  return runSteps(supervisedSteps(policy, task, opts));
}

/**
 * {@link trainSupervised} that yields to the event loop after every step (same arithmetic, same
 * result), so a long warm start does not keep timers and I/O waiting for minutes.
 */
export async function trainSupervisedAsync(
  policy: ArPolicy,
  task: Task,
  opts: TrainSupervisedOptions,
): Promise<TrainSupervisedResult> {
  return runStepsYielding(supervisedSteps(policy, task, opts));
}

/** `batchSize` training problems of `task` drawn from `rng`, each paired with its gold response. */
function drawSupervisedBatch(task: Task, rng: Rng, batchSize: number): SupervisedExample[] {
  return Array.from({ length: batchSize }, () => {
    const problem = task.sampleProblem(rng);
    return { prompt: problem.prompt, response: task.goldResponse(problem) };
  });
}

/**
 * The supervised pairs {@link trainSupervised} trains on, `steps · batchSize` of them in training order
 * (step s: `[s·batchSize, (s+1)·batchSize)`), drawn the same way from the stream `<seed>/sft`: what the
 * run driver sends a backend that warm-starts on the task's examples (`capabilities.sftExamples`).
 *
 * @example
 * ```ts
 * const pairs = supervisedExamples(makeTask('reverse'), 0, 40, 32); // 1280 pairs
 * ```
 */
export function supervisedExamples(
  task: Task,
  seed: number | string,
  steps: number,
  batchSize: number,
): SupervisedExample[] {
  if (!Number.isInteger(steps) || steps < 0)
    throw new Error(`supervisedExamples: steps must be a non-negative integer, got ${steps}`);
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new Error(`supervisedExamples: batchSize must be a positive integer, got ${batchSize}`);
  const rng = createRng(seed).fork(rngStreams.ar.sft);
  const out: SupervisedExample[] = [];
  for (let step = 0; step < steps; step++) out.push(...drawSupervisedBatch(task, rng, batchSize));
  return out;
}

/** The warm-start loop of {@link trainSupervised}, suspended after every step. */
function* supervisedSteps(
  policy: ArPolicy,
  task: Task,
  opts: TrainSupervisedOptions,
): Generator<void, TrainSupervisedResult, void> {
  const batchSize = opts.batchSize ?? 32;
  if (!Number.isInteger(opts.steps) || opts.steps < 0)
    throw new Error(`trainSupervised: steps must be a non-negative integer, got ${opts.steps}`);
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new Error(`trainSupervised: batchSize must be a positive integer, got ${batchSize}`);
  const optimizer = new AdamW(policyStore(policy), opts.optimizer ?? { lr: 1e-2, weightDecay: 0.01 });
  const rng = createRng(opts.seed ?? 0).fork(rngStreams.ar.sft);
  const losses: number[] = [];
  for (let step = 0; step < opts.steps; step++) {
    const batch = drawSupervisedBatch(task, rng, batchSize);
    const stepOpts: SftStepOptions = {
      maxGradNorm: opts.maxGradNorm ?? 1,
      ...(opts.numerics ? { numerics: opts.numerics } : {}),
    };
    losses.push(sftStep(policy, optimizer, batch, stepOpts).loss);
    opts.onProgress?.(step + 1, opts.steps);
    yield;
  }
  return { losses, optimizer };
}
