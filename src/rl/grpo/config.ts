// The run configuration of `qrl-sim run`: one zod schema where every field has a default and a
// reason. Not the estimator schema (src/rl/schema.ts validates `estimators`) nor the model's.

import { z } from 'zod';
import { UsageError } from '../../core/errors.js';
import { makeTaskFromConfig } from '../../tasks/registry.js';
import type { Task } from '../../tasks/task.js';
import { tokenLevelAdvantageNames } from '../advantages.js';
import { type EstimateConfig, resolveConfig, skipsLogpOldPass } from '../schema.js';
import { readsTopkLoss } from '../losses.js';
import { zodIssueLine } from '../../core/errors.js';

const positiveInt = z.number().int().positive();
const nonNegInt = z.number().int().nonnegative();
const finite = z.number().finite();

/**
 * Upper bounds of the size fields: far above what the toy policies need, below what exhausts
 * memory or time on a workstation (docs/decisions.md, "Size limits"; docs/grpo.md lists them).
 */
export const RUN_LIMITS = Object.freeze({
  seed: 0xffffffff,
  steps: 100_000,
  sftSteps: 100_000,
  sftBatchSize: 4096,
  prompts: 1024,
  groupSize: 1024,
  sequencesPerStep: 16_384,
  evalProblems: 4096,
  epochs: 100,
  generationLength: 512,
  diffusionSteps: 4096,
  staleness: 64,
});

/** Sampler settings of the rollout engine. */
const samplerSchema = z.strictObject({
  temperature: finite
    .positive()
    .default(1)
    .describe('softmax temperature; 1 keeps ℓroll and ℓθ on the same distribution'),
  topK: nonNegInt
    .default(0)
    .describe(
      'keep the k most likely tokens (0 = off); off by default because truncation is a mismatch source of its own',
    ),
  topP: finite.gt(0).max(1).default(1).describe('nucleus mass (1 = off); off by default for the same reason'),
  logprob: z
    .enum(['processed', 'raw'])
    .default('processed')
    .describe('ℓroll of the processed distribution (vLLM) or of the raw logits'),
  supportReplay: z
    .boolean()
    .default(false)
    .describe(
      'record the top-k/top-p kept set per sampled position and score ℓold, ℓθ, ℓref renormalised over it (TRL issue 6789, prime-rl PR 2601; diffusion: the kept set of the draw that committed each slot); off to model the unfixed bias. With --backend under a truncating sampler: an AR backend must declare capabilities.supportReplay, a diffusion batch must carry record.support (docs/adapter.md §3)',
    ),
  topkLogprobs: nonNegInt
    .optional()
    .describe(
      "K: the rollout engine also reports its K most likely ids and their ℓ per position (the support's under top-k/top-p), and the trainer scores ℓθ at them, for score centering, the top-k KL and losses trpl, dppo-topk-tv, dppo-topk-kl (AR only; absent or 0 = off, and absent from the resolved config)",
    ),
});

/** Masked-diffusion sampler and estimator settings (used when `policy.kind` is `diffusion`). */
const diffusionSchema = z.strictObject({
  generationLength: positiveInt
    .max(RUN_LIMITS.generationLength)
    .default(24)
    .describe('response positions generated (fits sudoku4’s 17-token answer; a multiple of the block length)'),
  blockLength: positiveInt
    .max(RUN_LIMITS.generationLength)
    .default(8)
    .describe('semi-autoregressive block length (the AIS/d1 recipe, scaled down)'),
  steps: positiveInt
    .max(RUN_LIMITS.diffusionSteps)
    .default(12)
    .describe('denoising steps in total: two tokens per step with the defaults'),
  remasking: z.enum(['low-confidence', 'random']).default('low-confidence').describe('LLaDA’s default remasking'),
  estimator: z
    .enum(['trajectory', 'd1', 'elbo'])
    .default('d1')
    .describe('per-token log-prob estimator used on both sides (d1: one forward pass, the diffu-GRPO choice)'),
});

/** The whole run configuration as accepted from JSON (defaults filled in by parsing). */
export const runConfigSchema = z.strictObject({
  seed: nonNegInt
    .max(RUN_LIMITS.seed)
    .default(0)
    .describe('root of every random stream (named forks per purpose and step)'),
  steps: positiveInt
    .max(RUN_LIMITS.steps)
    .default(30)
    .describe('GRPO steps; reward on `reverse` rises from ≈ 0.2 to ≈ 0.5 within 30 with the defaults'),
  task: z
    .strictObject({
      name: z.enum(['reverse', 'sudoku4', 'countdown', 'fibonacci']).default('reverse').describe('the verifiable task'),
      options: z
        .record(z.string(), z.unknown())
        .default({})
        .describe('task options (docs/tasks.md), validated by the task'),
    })
    .prefault({}),
  policy: z
    .strictObject({
      kind: z.enum(['ar', 'diffusion']).default('ar').describe('autoregressive or masked-diffusion toy policy'),
      model: z
        .record(z.string(), z.unknown())
        .default({})
        .describe('model size options (docs/policies.md), validated by the policy'),
      sampler: samplerSchema.prefault({}),
      diffusion: diffusionSchema.prefault({}),
      routingReplay: z
        .enum(['none', 'R2', 'R3'])
        .default('none')
        .describe(
          "MoE routing replay in the trainer (docs/moe.md): R2 = the update passes replay the routing of the trainer's own ℓold pass (veRL router_replay.mode R2, slime --use-routing-replay); R3 = ℓold and the update passes replay the rollout engine's routing (veRL R3, slime --use-rollout-routing-replay); needs policy.model.moe",
        ),
    })
    .prefault({}),
  plan: z
    .union([z.string().min(1), z.record(z.string(), z.unknown())])
    .default('bf16')
    .describe(
      'precision plan: a preset name, or a plan as data { rollout, trainer, name?, description? } (docs/precision-plans.md), validated by the policy',
    ),
  sft: z
    .strictObject({
      steps: nonNegInt
        .max(RUN_LIMITS.sftSteps)
        .default(40)
        .describe(
          'supervised warm-start steps: 40 leaves reward ≈ 0.2 on `reverse` — non-trivial, with room for RL to improve (300 solves it outright)',
        ),
      batchSize: positiveInt.max(RUN_LIMITS.sftBatchSize).default(32).describe('warm-start batch size'),
      lr: finite.positive().default(3e-3).describe('warm-start learning rate (AdamW)'),
      cache: z
        .boolean()
        .default(true)
        .describe('reuse a warm-start checkpoint keyed by its config instead of retraining'),
    })
    .prefault({}),
  rollout: z
    .strictObject({
      prompts: positiveInt.max(RUN_LIMITS.prompts).default(8).describe('P prompts per step'),
      groupSize: positiveInt.max(RUN_LIMITS.groupSize).default(8).describe('G responses per prompt (GRPO group)'),
      staleness: nonNegInt
        .max(RUN_LIMITS.staleness)
        .default(0)
        .describe(
          'k: step t trains on the batch generated k steps ahead, by the weights of step max(1, t − k) (AReaL, prime-rl max_off_policy_steps); 0 = synchronous',
        ),
    })
    .prefault({}),
  reward: z
    .strictObject({
      overlong: z
        .strictObject({
          buffer: positiveInt.describe(
            'DAPO soft-overlong buffer L_cache (tokens before the maximum where the penalty ramps)',
          ),
          penalty: finite.positive().default(1).describe('penalty at the maximum length'),
        })
        .nullable()
        .default(null)
        .describe('DAPO overlong reward shaping; off by default (toy answers are short)'),
      dynamicSampling: z
        .boolean()
        .default(false)
        .describe('drop groups whose rewards are all equal (DAPO); off by default'),
    })
    .prefault({}),
  estimators: z.unknown().default({}).describe('advantage, correction, loss, aggregation and KL (docs/estimators.md)'),
  optim: z
    .strictObject({
      lr: finite
        .positive()
        .default(3e-3)
        .describe('AdamW learning rate of the RL phase (1e-2 diverges on the toy policy, 1e-3 learns slowly)'),
      beta1: finite.min(0).lt(1).default(0.9).describe('AdamW β1'),
      beta2: finite.min(0).lt(1).default(0.999).describe('AdamW β2'),
      eps: finite.positive().default(1e-8).describe('AdamW ε'),
      weightDecay: finite.min(0).default(0).describe('decoupled weight decay on 2-D weights; 0 for short runs'),
      maxGradNorm: finite.positive().default(1).describe('global gradient-norm clip (verl/TRL default 1.0)'),
      epochs: positiveInt
        .max(RUN_LIMITS.epochs)
        .default(1)
        .describe('E passes over the step’s batch (θ_old fixed during the step)'),
      miniBatches: positiveInt
        .default(2)
        .describe('M mini-batches per epoch (one optimizer step each); 2 makes ℓθ ≠ ℓold on the second'),
    })
    .prefault({}),
  eval: z
    .strictObject({
      every: nonNegInt.default(5).describe('evaluate every N steps (0 = only at the end)'),
      problems: positiveInt.max(RUN_LIMITS.evalProblems).default(32).describe('held-out problems per evaluation'),
    })
    .prefault({}),
  checkpoint: z
    .strictObject({ every: nonNegInt.default(5).describe('checkpoint every N steps (0 = only at the end)') })
    .prefault({}),
});

/** A run configuration with every default filled in (what `config.json` holds). */
export type RunConfig = Omit<z.output<typeof runConfigSchema>, 'estimators'> & { readonly estimators: EstimateConfig };

/**
 * Validates a raw configuration (from JSON and `--set` overrides). Unknown keys, wrong types and
 * out-of-range values throw a {@link UsageError} naming the field and the value.
 */
export function resolveRunConfig(raw: unknown): RunConfig {
  const parsed = runConfigSchema.safeParse(raw ?? {});
  if (!parsed.success) throw new UsageError(zodIssueLine(parsed.error, raw));
  const estimators = resolveConfig(parsed.data.estimators, 'config.estimators');
  const advantage = estimators.advantage.name;
  if (tokenLevelAdvantageNames.includes(advantage)) {
    // veRL OTB reads Σ_v π(v)² of the ℓold pass (veRL asserts sum_pi_squared in compute_advantage, ray_trainer.py l.203–210)
    if (parsed.data.policy.kind !== 'ar') {
      throw new UsageError(
        `config.estimators.advantage.name: '${advantage}' needs Σ_v π(v)² of one softmax row per token, which the ${parsed.data.policy.kind} policy (config.policy.kind) does not have; use an AR policy`,
      );
    }
    if (skipsLogpOldPass(estimators)) {
      const skip = estimators.mode === 'bypass' ? "estimators.mode 'bypass'" : "estimators.proxLogp 'loglinear'";
      throw new UsageError(
        `config.estimators.advantage.name: '${advantage}' needs Σ_v π(v)² from the ℓold recompute, which ${skip} skips (use mode 'decoupled' without proxLogp)`,
      );
    }
  }
  let task: Task;
  try {
    task = makeTaskFromConfig(parsed.data.task);
  } catch (error) {
    throw new UsageError(`config.task.options: ${(error as Error).message}`);
  }
  // The held-out set is drawn up front, so that a split too small for eval.problems fails before
  // any warm start or step runs (the run draws the same list from the same seed).
  try {
    task.evalProblems(parsed.data.eval.problems, parsed.data.seed);
  } catch (error) {
    throw new UsageError(
      `config.eval.problems: ${parsed.data.eval.problems} held-out problems of task '${parsed.data.task.name}' with these options are not available (${(error as Error).message})`,
    );
  }
  const config: RunConfig = { ...parsed.data, estimators };
  checkTopkConfig(config, task);
  const replay = config.policy.routingReplay;
  if (replay !== 'none') {
    const moe = (config.policy.model as { moe?: unknown }).moe;
    if (moe === undefined || moe === null) {
      throw new UsageError(
        `config.policy.routingReplay: '${replay}' replays an MoE router's choices and needs an MoE model (policy.model.moe), got a dense model`,
      );
    }
    if (replay === 'R2' && config.estimators.proxLogp != null) {
      throw new UsageError(
        "config.policy.routingReplay: 'R2' replays the routing of the ℓold recompute, which estimators.proxLogp 'loglinear' skips (use 'R3')",
      );
    }
    if (replay === 'R2' && config.estimators.mode === 'bypass') {
      throw new UsageError(
        "config.policy.routingReplay: 'R2' replays the routing of the ℓold recompute, which estimators.mode 'bypass' skips (use 'R3' or mode 'decoupled')",
      );
    }
  }
  const sequences = config.rollout.prompts * config.rollout.groupSize;
  if (sequences > RUN_LIMITS.sequencesPerStep) {
    throw new UsageError(
      `config.rollout: prompts × groupSize = ${sequences} sequences per step, at most ${RUN_LIMITS.sequencesPerStep}`,
    );
  }
  if (config.rollout.prompts * config.rollout.groupSize < config.optim.miniBatches) {
    throw new UsageError(
      `config.optim.miniBatches: ${config.optim.miniBatches} exceeds the ${config.rollout.prompts * config.rollout.groupSize} sequences per step`,
    );
  }
  return config;
}

/**
 * The sampler's top-k against the estimators that read it, the policy kind and the task's vocabulary
 * (`UsageError` naming the field).
 */
function checkTopkConfig(config: RunConfig, task: Task): void {
  const K = config.policy.sampler.topkLogprobs ?? 0;
  const est = config.estimators;
  const reader = readsTopkLoss(est.loss.name)
    ? `estimators.loss '${est.loss.name}'`
    : est.scoreCentering != null
      ? 'estimators.scoreCentering'
      : est.topkKl != null
        ? 'estimators.topkKl'
        : null;
  if (K === 0 && reader !== null)
    throw new UsageError(
      `config.policy.sampler.topkLogprobs: ${reader} reads the rollout engine's top-k log-probs; set it to K ≥ 1, got 0`,
    );
  if (K > 0 && config.policy.kind !== 'ar')
    throw new UsageError(
      `config.policy.sampler.topkLogprobs: the ${config.policy.kind} policy reports no top-k log-probs (AR only), got ${K}`,
    );
  if (K > task.vocabSize)
    throw new UsageError(
      `config.policy.sampler.topkLogprobs: must be at most task ${task.name}'s vocabulary of ${task.vocabSize} ids, got ${K}`,
    );
}

/**
 * What every `generate` of a run asks for: the sampler of `policy.sampler` (as the contract's
 * SamplingParams) and the most response tokens (AR: the task's response length; diffusion:
 * `policy.diffusion.generationLength`, the positions the sampler fills).
 */
export function generationOf(
  config: RunConfig,
  task: { readonly responseLength: number },
): {
  readonly sampling: {
    readonly temperature: number;
    readonly topK: number;
    readonly topP: number;
    readonly logprob: 'processed' | 'raw';
  };
  readonly maxNewTokens: number;
  readonly topkLogprobs?: number;
} {
  const s = config.policy.sampler;
  return {
    sampling: { temperature: s.temperature, topK: s.topK, topP: s.topP, logprob: s.logprob },
    maxNewTokens: config.policy.kind === 'diffusion' ? config.policy.diffusion.generationLength : task.responseLength,
    ...(s.topkLogprobs !== undefined && s.topkLogprobs > 0 ? { topkLogprobs: s.topkLogprobs } : {}),
  };
}

/**
 * Whether a run replays a cut sampling support: `policy.sampler.supportReplay` under top-k > 0 or
 * top-p < 1 (with nothing cut the kept set is the vocabulary and there is nothing to replay).
 */
export function replaysSupport(config: Pick<RunConfig, 'policy'>): boolean {
  const s = config.policy.sampler;
  return s.supportReplay && (s.topK > 0 || s.topP < 1);
}
