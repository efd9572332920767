// Supervised warm start of the diffusion policy: LLaDA SFT masked-token training on (prompt, gold response) pairs with AdamW.
// Not RL: no rewards or log-prob ratios here; the GRPO loop starts from the weights this leaves behind.

import { runSteps, runStepsYielding } from '../yield.js';
import { AdamW, clipGradNorm } from '../../nn/adamw.js';
import { allocLike, type FloatArray } from '../../nn/array.js';
import { createParamStore, type ParamStore } from '../../nn/params.js';
import { createRng, type Rng } from '../../core/rng.js';
import { EOS, MASK } from '../../tasks/tokenizer.js';
import type { Task } from '../../tasks/task.js';
import { fp32Numerics, type PolicyNumerics } from '../numerics.js';
import { rowLogProb, rowLogProbBackward } from '../../nn/row-logprob.js';
import { diffusionBackward, diffusionForward, type DiffusionModel } from './model.js';
import { rngStreams } from '../../core/rng-streams.js';

/**
 * A gold response padded to `genLength` with EOS (LLaDA SFT pads answers with EOS and trains on the
 * padding, so the model learns to fill the tail with EOS; the reward ignores tokens after the first EOS).
 */
export function padDiffusionResponse(response: readonly number[], genLength: number): number[] {
  if (response.length > genLength)
    throw new Error(`padDiffusionResponse: response of ${response.length} tokens does not fit genLength ${genLength}`);
  return [...response, ...new Array<number>(genLength - response.length).fill(EOS)];
}

/**
 * LLaDA SFT loss (GUIDELINES.md "SFT"; d1 `SFT/sft_trainer.py`) of one batch: per row a mask ratio
 * t = ε + (1−ε)·U with U = `rng.uniform()`, then each response slot masked iff `rng.uniform() < t`
 * (N draws in slot order; the prompt is never masked);
 * `loss = Σ_rows Σ_{masked j} −log p(o_j | view)/t / (B·N)`. When `grads` is given, its gradient is
 * accumulated there. Returns the loss.
 *
 * @param responses - B responses of N tokens each (pad with {@link padDiffusionResponse})
 */
export function maskedDiffusionLoss(
  model: DiffusionModel,
  params: FloatArray,
  prompts: readonly (readonly number[])[],
  responses: readonly (readonly number[])[],
  rng: Rng,
  options: { readonly eps?: number; readonly numerics?: PolicyNumerics; readonly grads?: FloatArray } = {},
): number {
  const eps = options.eps ?? 1e-3;
  if (!(eps > 0 && eps < 1)) throw new Error(`maskedDiffusionLoss: eps must be in (0, 1), got ${eps}`);
  const numerics = options.numerics ?? fp32Numerics();
  const B = prompts.length;
  if (B < 1 || responses.length !== B)
    throw new Error(
      `maskedDiffusionLoss: prompts and responses must be non-empty and of equal count, got ${B} and ${responses.length}`,
    );
  const P = prompts[0]!.length;
  const N = responses[0]!.length;
  const T = P + N;
  const V = model.config.vocabSize;
  const tokens = new Int32Array(B * T); // (B, T)
  const pos: number[] = [];
  const target: number[] = [];
  const weight: number[] = [];
  for (let i = 0; i < B; i++) {
    const p = prompts[i]!;
    const o = responses[i]!;
    if (p.length !== P || o.length !== N)
      throw new Error(
        `maskedDiffusionLoss: row ${i} has prompt/response lengths ${p.length}/${o.length}, expected ${P}/${N}`,
      );
    const t = eps + (1 - eps) * rng.uniform();
    for (let j = 0; j < P; j++) tokens[i * T + j] = p[j]!;
    for (let j = 0; j < N; j++) {
      const masked = rng.uniform() < t;
      tokens[i * T + P + j] = masked ? MASK : o[j]!;
      if (masked) {
        pos.push(i * T + P + j);
        target.push(o[j]!);
        weight.push(1 / t / (B * N));
      }
    }
  }
  const fwd = diffusionForward(model, params, tokens, B, T, numerics);
  let loss = 0;
  for (let e = 0; e < pos.length; e++)
    loss -= weight[e]! * rowLogProb(fwd.logits, pos[e]! * V, V, target[e]!, 1, null, MASK);
  if (options.grads) {
    const dlogits = allocLike(params, B * T * V); // (B, T, V)
    for (let e = 0; e < pos.length; e++)
      rowLogProbBackward(dlogits, fwd.logits, pos[e]! * V, V, target[e]!, 1, -weight[e]!, MASK);
    diffusionBackward(model, params, options.grads, fwd, dlogits, numerics);
  }
  return loss;
}

/** Settings of {@link diffusionWarmStart}. */
export interface DiffusionWarmStartConfig {
  /** Number of AdamW updates. @defaultValue 200 */
  readonly steps?: number;
  /** (prompt, gold) pairs per update. @defaultValue 16 */
  readonly batchSize?: number;
  /** Learning rate. @defaultValue 3e-3 */
  readonly lr?: number;
  /** AdamW weight decay on 2-D weights. @defaultValue 0 */
  readonly weightDecay?: number;
  /** Global-norm gradient clip. @defaultValue 1 */
  readonly maxGradNorm?: number;
  /** Response slots N (gold responses are padded to it with EOS). @defaultValue 24 */
  readonly genLength?: number;
  /** Smallest mask ratio ε. @defaultValue 1e-3 */
  readonly eps?: number;
  /** Seed of the training problems (`<seed>/warm-start-problems`) and masks (`<seed>/warm-start-masks`). @defaultValue 0 */
  readonly seed?: number | string;
  /** Called after every update with (updates done, total); for progress display only, results are unchanged. */
  readonly onProgress?: (done: number, total: number) => void;
}

/** What {@link diffusionWarmStart} returns. */
export interface DiffusionWarmStartResult {
  /** The trained weights (the store passed in, or a new one). */
  readonly store: ParamStore;
  /** The optimizer, to continue training. */
  readonly optimizer: AdamW;
  /** Loss of every update (before the update). */
  readonly losses: number[];
}

/**
 * Supervised warm start: `steps` AdamW updates of {@link maskedDiffusionLoss} on fresh training
 * problems of `task` with their gold responses. Trains `store` in place (or a new store initialized
 * from `seed` when it is omitted).
 *
 * @example
 * ```ts
 * const model = createDiffusionModel({ vocabSize: task.vocabSize });
 * const { store, losses } = diffusionWarmStart(model, task, { steps: 300, seed: 1 });
 * ```
 */
export function diffusionWarmStart(
  model: DiffusionModel,
  task: Task,
  config: DiffusionWarmStartConfig = {},
  store: ParamStore = createParamStore(model.specs, config.seed ?? 0),
): DiffusionWarmStartResult {
  return runSteps(warmStartSteps(model, task, config, store));
}

/**
 * {@link diffusionWarmStart} that yields to the event loop after every update (same arithmetic,
 * same result), so a long warm start does not keep timers and I/O waiting for minutes.
 */
export async function diffusionWarmStartAsync(
  model: DiffusionModel,
  task: Task,
  config: DiffusionWarmStartConfig = {},
  store: ParamStore = createParamStore(model.specs, config.seed ?? 0),
): Promise<DiffusionWarmStartResult> {
  return runStepsYielding(warmStartSteps(model, task, config, store));
}

/** The loop of {@link diffusionWarmStart}, suspended after every update. */
function* warmStartSteps(
  model: DiffusionModel,
  task: Task,
  config: DiffusionWarmStartConfig,
  store: ParamStore,
): Generator<void, DiffusionWarmStartResult, void> {
  const steps = config.steps ?? 200;
  const batchSize = config.batchSize ?? 16;
  const N = config.genLength ?? 24;
  for (const [k, v] of [
    ['steps', steps],
    ['batchSize', batchSize],
    ['genLength', N],
  ] as const) {
    if (!Number.isInteger(v) || v < (k === 'steps' ? 0 : 1))
      throw new Error(
        `diffusionWarmStart: ${k} must be a ${k === 'steps' ? 'non-negative' : 'positive'} integer, got ${v}`,
      );
  }
  if (task.vocabSize > model.config.vocabSize)
    throw new Error(
      `diffusionWarmStart: task ${task.name} has vocabSize ${task.vocabSize}, more than the model's ${model.config.vocabSize}`,
    );
  const optimizer = new AdamW(store, { lr: config.lr ?? 3e-3, weightDecay: config.weightDecay ?? 0 });
  const root = createRng(config.seed ?? 0);
  const problems = root.fork(rngStreams.diffusion.warmStartProblems);
  const masks = root.fork(rngStreams.diffusion.warmStartMasks);
  const losses: number[] = [];
  for (let s = 0; s < steps; s++) {
    const batch = Array.from({ length: batchSize }, () => task.sampleProblem(problems));
    store.zeroGrad();
    const loss = maskedDiffusionLoss(
      model,
      store.data,
      batch.map((p) => p.prompt),
      batch.map((p) => padDiffusionResponse(task.goldResponse(p), N)),
      masks,
      { eps: config.eps, grads: store.grads },
    );
    clipGradNorm(store.grads, config.maxGradNorm ?? 1);
    optimizer.step();
    losses.push(loss);
    config.onProgress?.(s + 1, steps);
    yield;
  }
  return { store, optimizer, losses };
}
