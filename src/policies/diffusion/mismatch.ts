// The diffusion mismatch probe behind `qrl-sim mismatch --policy diffusion`: sample under the rollout numerics, score under both, report the diagnostics.
// Not the CLI command (src/cli) and not a precision plan: both numerics are passed in.

import type { FloatArray } from '../../nn/array.js';
import { createParamStore } from '../../nn/params.js';
import { type MismatchDiagnostics, probeDiagnostics } from '../diagnostics.js';
import { flipRatesAt } from '../moe-replay.js';
import { createRng } from '../../core/rng.js';
import { lengthDiagnostics, type LengthDiagnostics } from '../../rl/length-diagnostics.js';
import { makeTaskFromConfig } from '../../tasks/registry.js';
import type { TaskName } from '../../tasks/task.js';
import type { PolicyNumerics } from '../numerics.js';
import {
  diffusionCompletionMask,
  diffusionLogprobs,
  type DiffusionEstimatorName,
  type DiffusionEstimatorOptions,
} from './estimators.js';
import { createDiffusionModel, type DiffusionModel } from './model.js';
import { sampleDiffusion, type DiffusionSamplerConfig } from './sampler.js';
import { rngStreams } from '../../core/rng-streams.js';

/** Inputs of {@link diffusionMismatch}. */
export interface DiffusionMismatchOptions {
  /** Numerics of the rollout engine (its plan side). */
  readonly rollout: PolicyNumerics;
  /** Numerics of the trainer (its plan side). */
  readonly trainer: PolicyNumerics;
  /** Generation length N. */
  readonly length: number;
  /** Seed of the prompts, the sampler, the estimator views and (without `params`) the initial weights. */
  readonly seed: number;
  /** Which per-token log-prob both sides compute. */
  readonly estimator: DiffusionEstimatorName;
  /** Task the prompts come from. @defaultValue 'sudoku4' */
  readonly task?: TaskName;
  /** Options of `task` (docs/tasks.md). @defaultValue the task's defaults */
  readonly taskOptions?: Readonly<Record<string, unknown>>;
  /** Number of sampled sequences. @defaultValue 16 */
  readonly sequences?: number;
  /** Sampler overrides; @defaultValue blockLength 8 when it divides N (else N), two tokens per step (steps = blocks·max(1, ⌊blockLength/2⌋)), temperature 1 */
  readonly sampler?: Partial<DiffusionSamplerConfig>;
  /** Estimator options (seed defaults to `seed`). */
  readonly estimatorOptions?: DiffusionEstimatorOptions;
  /** The model; @defaultValue toy defaults for the task's vocabulary, maxLen ≥ prompt + N */
  readonly model?: DiffusionModel;
  /** Weights with `model.layout`; @defaultValue GPT-2 initialization from `seed` */
  readonly params?: FloatArray;
}

/**
 * Samples `sequences` responses to training prompts of `task` under the rollout numerics, computes
 * ℓroll (rollout numerics) and ℓold (trainer numerics) with `estimator`, and returns the mismatch
 * metrics. For `trajectory`, ℓroll is the sampler's own inline log-prob (what a rollout engine
 * reports); for `d1` and `elbo` both sides run the estimator with the same seed, i.e. the same views.
 *
 * @example
 * ```ts
 * const m = diffusionMismatch({ rollout: fp32Numerics(), trainer: fp32Numerics(), length: 24, seed: 1, estimator: 'd1' });
 * m.k1; // 0: identical numerics on both sides
 * ```
 */
export function diffusionMismatch(options: DiffusionMismatchOptions): MismatchDiagnostics {
  return diffusionMismatchProbe(options).diagnostics;
}

/** What {@link diffusionMismatchProbe} measured. */
export interface DiffusionMismatchProbeResult {
  /** The mismatch diagnostics ({@link diffusionMismatch}). */
  readonly diagnostics: MismatchDiagnostics;
  /** Mismatch by response slot and completion length, sequence log-ratio, error tokens, repetition. */
  readonly lengths: LengthDiagnostics;
  /**
   * MoE models only: per layer, the share of router decisions that differ between the rollout's
   * ℓroll forward and the trainer's own routing at the positions that score a completion slot, and
   * the diagnostics with the rollout's routing replayed in the trainer (R3).
   */
  readonly moe?: { readonly flipRate: readonly number[]; readonly diagnosticsR3: MismatchDiagnostics };
}

/**
 * {@link diffusionMismatch} with the long-response diagnostics as well: position t is response slot t,
 * a sequence's length is its completion up to and including the first EOS.
 *
 * @example
 * ```ts
 * const { lengths } = diffusionMismatchProbe({ rollout: fp32Numerics(), trainer: fp32Numerics(), length: 24, seed: 1, estimator: 'd1' });
 * lengths.byPosition[0].k3; // 0
 * ```
 */
export function diffusionMismatchProbe(options: DiffusionMismatchOptions): DiffusionMismatchProbeResult {
  const N = options.length;
  if (!Number.isInteger(N) || N < 1) throw new Error(`diffusionMismatch: length must be a positive integer, got ${N}`);
  const task = makeTaskFromConfig({ name: options.task ?? 'sudoku4', options: options.taskOptions });
  const B = options.sequences ?? 16;
  if (!Number.isInteger(B) || B < 1)
    throw new Error(`diffusionMismatch: sequences must be a positive integer, got ${B}`);
  const model =
    options.model ?? createDiffusionModel({ vocabSize: task.vocabSize, maxLen: Math.max(64, task.promptLength + N) });
  const params = options.params ?? createParamStore(model.specs, options.seed).data;
  const blockLength = N % 8 === 0 ? 8 : N;
  const sampler: Partial<DiffusionSamplerConfig> = {
    genLength: N,
    blockLength,
    steps: (N / blockLength) * Math.max(1, Math.floor(blockLength / 2)),
    ...options.sampler,
  };
  const root = createRng(options.seed);
  const prompts = task.trainProblems(B, options.seed).map((p) => p.prompt);
  const topK = model.block.moe?.topK ?? 0;
  const rollout = sampleDiffusion(
    { model, params, numerics: options.rollout },
    prompts,
    sampler,
    root.fork(rngStreams.diffusion.mismatchRollout),
    { recordRouting: topK > 0 && options.estimator === 'trajectory' },
  );
  const estOptions: DiffusionEstimatorOptions = {
    seed: options.seed,
    temperature: rollout.logpTemperature,
    ...options.estimatorOptions,
  };
  const rolloutScored =
    options.estimator === 'trajectory'
      ? null
      : diffusionLogprobs(options.estimator, model, params, rollout.sequences, options.rollout, {
          support: rollout.support,
          ...estOptions,
        }); // processed: over the draws' kept sets under top-k/top-p
  const logpRollout = rolloutScored === null ? rollout.logpRollout : rolloutScored.logp;
  const old = diffusionLogprobs(options.estimator, model, params, rollout.sequences, options.trainer, estOptions);
  const logpOld = old.logp;
  const mask = diffusionCompletionMask(rollout.sequences);
  const responses = rollout.sequences.flatMap((q) => q.response);
  const recorded = rolloutScored === null ? rollout.routing : rolloutScored.routing;
  let moe: DiffusionMismatchProbeResult['moe'];
  if (recorded !== null && old.routing !== null) {
    const scoredAt = Array.from(old.scoredAt).filter((_, e) => mask[old.scoredSlot[e]!] === 1);
    const r3 = diffusionLogprobs(options.estimator, model, params, rollout.sequences, options.trainer, {
      ...estOptions,
      routing: recorded,
    });
    moe = {
      flipRate: flipRatesAt(recorded, old.routing, topK, scoredAt),
      diagnosticsR3: probeDiagnostics(logpRollout, r3.logp, mask),
    };
  }
  return {
    diagnostics: probeDiagnostics(logpRollout, logpOld, mask),
    lengths: lengthDiagnostics({ shape: { B, T: N }, logpOld, logpRollout, mask, responses }),
    ...(moe === undefined ? {} : { moe }),
  };
}
