// `replay`: one captured training step of a stack (a qrl-step/1 bundle) recomputed by the oracle stage
// by stage — advantages, correction, per-token loss, aggregation, loss, gradient, metrics — each stage
// from the stack's own inputs to that stage, so the first stage that differs is where the stack and
// the estimator part ways. The stacks' option tables (TRL 1.13) live here; docs/replay.md explains them.

import { UsageError } from '../core/errors.js';
import { aggregate, aggregations, type AggregationFn, type AggregationParams } from '../rl/aggregation.js';
import { estimate, sequenceAdvantages } from '../rl/estimate.js';
import { resolveConfig, type EstimateConfig } from '../rl/schema.js';
import type { MetricRecord } from '../rl/types.js';
import type { StepBundle, StepTensor } from './step-bundle.js';

/** The stages of a replay, in order. */
export const replayStages = [
  'advantages',
  'correction',
  'token-loss',
  'aggregation',
  'loss',
  'gradient',
  'metrics',
] as const;

/** A stage name. */
export type ReplayStageName = (typeof replayStages)[number];

/**
 * How a stage came out: `agree` (every compared value within the bound), `differ` (one is not),
 * `not-captured` (the bundle lacks a field the stage needs), `not-applicable` (the options configure
 * nothing for this stage, e.g. no rollout correction).
 */
export type ReplayStatus = 'agree' | 'differ' | 'not-captured' | 'not-applicable';

/** One row of the stage table. */
export interface ReplayStage {
  readonly name: ReplayStageName;
  readonly status: ReplayStatus;
  /** Values compared (0 when none). */
  readonly compared: number;
  /** Largest |oracle − stack| over the compared values, or null when nothing was compared. */
  readonly maxDiff: number | null;
  /** The bound the stage is held to (see {@link replayBound}), or null when nothing was compared. */
  readonly bound: number | null;
  /** Where the largest difference is: [row, column] of a per-token stage, [row] of a per-row one, [] for a scalar; the metric's name in `detail`. */
  readonly position: readonly number[] | null;
  /** The stack's and the oracle's values at `position`. */
  readonly stack: number | null;
  readonly oracle: number | null;
  /** What was compared, or why nothing was. */
  readonly detail: string;
}

/** The result of {@link replayStep}: `{ stages, firstDifference }` plus what was replayed with what. */
export interface ReplayResult {
  readonly bundle: string;
  readonly stack: { readonly name: string; readonly version: string };
  readonly step: number | null;
  /** The qrl-sim estimate config the stack's options map to (resolved). */
  readonly config: EstimateConfig;
  readonly stages: readonly ReplayStage[];
  /** The first stage whose status is `differ`, or null. */
  readonly firstDifference: ReplayStageName | null;
}

/** The relative tolerance of every stage: 2⁻¹⁶ = 128 float32 ulps of the stage's scale. */
export const REPLAY_TOLERANCE = 2 ** -16;

/**
 * The bound a stage is held to: {@link REPLAY_TOLERANCE}·scale. The scale of an element-wise stage
 * (advantages, weights, per-token loss, gradient) is the largest |stack value| it compares; of the
 * aggregation and the loss, Σ|c·ℓ| over the summed terms (a loss near 0 is a sum that cancels, and
 * its rounding follows the terms); of the metrics (fractions and means), 1. A stack that computes in
 * float32 (TRL, veRL, most GPU code) rounds the exp, the group std and the sums at about 2⁻²⁴ of these
 * scales, so its replay sits two orders below the bound, and a bug of one part in 10⁴ or more stands
 * out. A token within the bound of a clipping edge can land on the other side; the table names it.
 */
export function replayBound(scale: number): number {
  return REPLAY_TOLERANCE * scale;
}

// ---------------------------------------------------------------------------------------------
// TRL 1.13 GRPOConfig → estimate config

/** GRPOConfig fields of TRL 1.13 that shape the loss of a step, with TRL's defaults (trl/trainer/grpo_config.py l.676–1034 at 1.13.0). */
export const trlDefaults = Object.freeze({
  loss_type: 'dapo',
  importance_sampling_level: 'token',
  epsilon: 0.2,
  epsilon_high: null,
  delta: null,
  beta: 0,
  use_bias_correction_kl: true,
  scale_rewards: 'group',
  num_iterations: 1,
  max_completion_length: 256,
  sapo_temperature_pos: 1,
  sapo_temperature_neg: 1.05,
  vespo_k_pos: 2,
  vespo_lambda_pos: 3,
  vespo_k_neg: 3,
  vespo_lambda_neg: 2,
  multi_objective_aggregation: 'sum_then_normalize',
  top_entropy_quantile: 1,
  entropy_coef: 0,
  use_adaptive_entropy: false,
  off_policy_mask_threshold: null,
  use_vllm: false,
  vllm_importance_sampling_correction: true,
  vllm_importance_sampling_mode: 'sequence_mask',
  vllm_importance_sampling_clip_max: 3,
  vllm_importance_sampling_clip_min: null,
  vllm_importance_sampling_cap: null,
  use_liger_kernel: false,
  gradient_accumulation_steps: 1,
  steps_per_generation: null,
  generation_batch_size: null,
  mask_truncated_completions: false,
} as const);

/**
 * GRPOConfig fields that change which tensors a step sees (generation, optimiser, data, logging,
 * devices) but not how its loss is computed from them: the replay reads them and maps nothing.
 */
export const trlInertOptions: readonly string[] = Object.freeze([
  'output_dir',
  'seed',
  'data_seed',
  'learning_rate',
  'weight_decay',
  'adam_beta1',
  'adam_beta2',
  'adam_epsilon',
  'max_grad_norm',
  'lr_scheduler_type',
  'warmup_steps',
  'warmup_ratio',
  'optim',
  'max_steps',
  'num_train_epochs',
  'per_device_train_batch_size',
  'per_device_eval_batch_size',
  'num_generations',
  'num_generations_eval',
  'max_prompt_length',
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'repetition_penalty',
  'generation_kwargs',
  'logging_steps',
  'logging_first_step',
  'save_strategy',
  'save_steps',
  'report_to',
  'use_cpu',
  'disable_tqdm',
  'dataloader_num_workers',
  'log_completions',
  'num_completions_to_print',
  'shuffle_dataset',
  'bf16',
  'fp16',
  'gradient_checkpointing',
  'remove_unused_columns',
  'reward_weights',
  'cast_lm_head_to_fp32',
  'disable_dropout',
  'pad_to_multiple_of',
  'ds3_gather_for_generation',
  'run_name',
  'logging_dir',
  'sync_ref_model',
  'ref_model_mixup_alpha',
  'ref_model_sync_steps',
  'vllm_mode',
  'vllm_server_base_url',
  'vllm_server_host',
  'vllm_server_port',
  'vllm_server_timeout',
  'vllm_group_port',
  'vllm_gpu_memory_utilization',
  'vllm_tensor_parallel_size',
  'vllm_max_model_length',
  'vllm_enable_sleep_mode',
  'vllm_model_impl',
]);

/** A stack's options as the user gave them (JSON values by field name). */
export type StackOptions = Readonly<Record<string, unknown>>;

function opt<K extends keyof typeof trlDefaults>(options: StackOptions, key: K): unknown {
  return Object.hasOwn(options, key) ? options[key] : trlDefaults[key];
}

function num(options: StackOptions, key: keyof typeof trlDefaults): number {
  const v = opt(options, key);
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new UsageError(`options.${key}: expected a number, got ${JSON.stringify(v)}`);
  return v;
}

function refuse(key: string, value: unknown, why: string): never {
  throw new UsageError(`options.${key}: ${JSON.stringify(value)} cannot be mapped (${why})`);
}

/**
 * Maps TRL 1.13 GRPOConfig options (as the user gave them; TRL's defaults fill the rest) to a
 * qrl-sim estimate config — the table of docs/replay.md, each row cited to `trl/trainer/grpo_trainer.py`
 * of trl 1.13.0. An option that changes the loss and has no qrl-sim equivalent, or that the table
 * does not know, is a `UsageError` naming it.
 */
export function trlEstimateConfig(options: StackOptions): EstimateConfig {
  for (const key of Object.keys(options)) {
    if (!Object.hasOwn(trlDefaults, key) && !trlInertOptions.includes(key))
      refuse(key, options[key], "not in qrl-sim's table of TRL 1.13 options (docs/replay.md)");
  }
  for (const [key, inert] of [
    ['top_entropy_quantile', 1],
    ['entropy_coef', 0],
    ['use_adaptive_entropy', false],
    ['off_policy_mask_threshold', null],
    ['use_liger_kernel', false],
  ] as const) {
    const v = opt(options, key);
    if (v !== inert) refuse(key, v, 'no qrl-sim equivalent in the replay');
  }
  if (opt(options, 'multi_objective_aggregation') !== 'sum_then_normalize')
    refuse(
      'multi_objective_aggregation',
      opt(options, 'multi_objective_aggregation'),
      "only 'sum_then_normalize' is the advantage qrl-sim computes",
    );
  if (num(options, 'gradient_accumulation_steps') !== 1)
    refuse(
      'gradient_accumulation_steps',
      options.gradient_accumulation_steps,
      'a bundle is one loss evaluation; TRL divides it by the accumulation steps',
    );
  const stepsPerGeneration = opt(options, 'steps_per_generation');
  if (stepsPerGeneration !== null && stepsPerGeneration !== 1)
    refuse(
      'steps_per_generation',
      stepsPerGeneration,
      "the loss normaliser of 'dapo', 'cispo' and 'vespo' counts the whole generation batch",
    );
  const lossType = opt(options, 'loss_type');
  const level = opt(options, 'importance_sampling_level');
  if (level !== 'token' && level !== 'sequence')
    refuse('importance_sampling_level', level, "TRL knows 'token' and 'sequence'");
  const epsLow = num(options, 'epsilon');
  const epsHighOpt = opt(options, 'epsilon_high');
  // grpo_trainer.py: self.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
  const epsHigh = epsHighOpt === null || epsHighOpt === undefined ? epsLow : (epsHighOpt as number);
  const delta = opt(options, 'delta');
  const sequence = level === 'sequence';

  let loss: Record<string, unknown>;
  let aggregation: unknown;
  // the ratio losses: grpo_trainer.py l.3205–3213 (coef_2 = clamp(coef_1, 1 − ε_low, 1 + ε_high); coef_1 = min(coef_1, δ))
  const ratioLoss = (): Record<string, unknown> => {
    if (sequence) {
      if (delta !== null) refuse('delta', delta, "qrl-sim's sequence-level gspo has no upper cap");
      return { name: 'gspo', epsLow, epsHigh };
    }
    return { name: 'ppo-clip', epsLow, epsHigh, ...(delta !== null ? { dualClip: delta } : {}) };
  };
  switch (lossType) {
    case 'grpo': // l.3246–3250: per-row token means, averaged over the rows
      loss = ratioLoss();
      aggregation = 'seq-mean-token-mean';
      break;
    case 'bnpo': // l.3251–3255: one token mean over the batch
      loss = ratioLoss();
      aggregation = 'token-mean';
      break;
    case 'dr_grpo': // l.3256–3260: Σ masked loss / (B · max_completion_length)
      loss = ratioLoss();
      aggregation = { name: 'seq-mean-token-sum-norm', normalizer: num(options, 'max_completion_length') };
      break;
    case 'dapo': // l.3261–3267: Σ masked loss / num_items_in_batch (the batch's tokens when steps_per_generation = 1)
      loss = ratioLoss();
      aggregation = 'token-mean';
      break;
    case 'cispo': // l.3202–3204: −sg[min(coef_1, ε_high)]·A·ℓθ, reduced as dapo
      if (sequence) refuse('importance_sampling_level', level, "qrl-sim's cispo is token-level");
      if (epsHigh < 1)
        refuse(
          'epsilon_high',
          epsHighOpt,
          "TRL's cispo caps the ratio at epsilon_high itself; qrl-sim's cispo at 1 + epsHigh needs epsilon_high ≥ 1",
        );
      loss = { name: 'cispo', epsLow: 1, epsHigh: epsHigh - 1 };
      aggregation = 'token-mean';
      break;
    case 'sapo': // l.3214–3217, reduced as grpo
      if (sequence) refuse('importance_sampling_level', level, "qrl-sim's sapo is token-level");
      loss = {
        name: 'sapo',
        tauPos: num(options, 'sapo_temperature_pos'),
        tauNeg: num(options, 'sapo_temperature_neg'),
      };
      aggregation = 'seq-mean-token-mean';
      break;
    case 'luspo': // l.3268–3275: Σ_t masked loss per row, mean over rows; sequence level (l.908)
      if (!sequence)
        refuse(
          'importance_sampling_level',
          level,
          "TRL's luspo is meant at 'sequence' level, and qrl-sim's luspo is sequence-level",
        );
      if (delta !== null) refuse('delta', delta, "qrl-sim's luspo has no upper cap");
      loss = { name: 'luspo', epsLow, epsHigh };
      aggregation = 'seq-mean-token-sum';
      break;
    case 'vespo': // l.3218–3230 with get_gamma_weights l.3065–3111, reduced as dapo
      if (sequence) refuse('importance_sampling_level', level, 'TRL requires token level for vespo (l.914)');
      loss = {
        name: 'vespo',
        kPos: num(options, 'vespo_k_pos'),
        lambdaPos: num(options, 'vespo_lambda_pos'),
        kNeg: num(options, 'vespo_k_neg'),
        lambdaNeg: num(options, 'vespo_lambda_neg'),
      };
      aggregation = 'token-mean';
      break;
    default:
      refuse('loss_type', lossType, 'TRL 1.13 knows grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo, vespo');
  }
  // advantages: l.2787–2813 (A = R − mean_group, divided by std + 1e-4 unless scale_rewards = 'none')
  const scale = opt(options, 'scale_rewards');
  const advantage =
    scale === 'group' || scale === true
      ? { name: 'grpo', eps: 1e-4 }
      : scale === 'none' || scale === false
        ? { name: 'drgrpo' }
        : scale === 'batch'
          ? { name: 'batch-std', eps: 1e-4 }
          : refuse('scale_rewards', scale, "TRL knows 'group', 'batch' and 'none'");
  // KL: l.3191–3198, k3 = e^(ℓref − ℓθ) − (ℓref − ℓθ) − 1, times the live ratio coef_1 with use_bias_correction_kl
  const beta = num(options, 'beta');
  const biasCorrection = opt(options, 'use_bias_correction_kl') === true;
  if (beta !== 0 && biasCorrection && sequence)
    refuse(
      'use_bias_correction_kl',
      true,
      "at sequence level TRL multiplies the KL by the sequence ratio; qrl-sim's bias correction is per token",
    );
  const kl = beta === 0 ? null : { name: 'k3', coef: beta, biasCorrection: biasCorrection ? 'old' : 'none' };
  const correction = trlCorrection(options, lossType as string);
  return resolveConfig(
    {
      advantage,
      loss,
      aggregation,
      kl,
      correction,
      ...(correction.name !== 'none' ? { diagnostics: { stacks: ['trl'] } } : {}),
    },
    'trl',
  );
}

/**
 * TRL's vLLM importance-sampling correction (grpo_trainer.py l.2682–2726): ρ = exp(ℓold − ℓroll) per
 * token, or exp(Σ_t) per row for the `sequence_*` modes; `*_truncate` clamps it to [clip_min, clip_max],
 * `*_mask` sets it to 0 outside; the per-token loss is multiplied by it (l.3239–3240), the KL term is
 * not. `vllm_importance_sampling_cap` is the deprecated name of clip_max (grpo_config.py l.1130–1137).
 */
function trlCorrection(options: StackOptions, lossType: string): Record<string, unknown> {
  if (opt(options, 'use_vllm') !== true || opt(options, 'vllm_importance_sampling_correction') !== true)
    return { name: 'none' };
  if (lossType === 'vespo')
    refuse(
      'vllm_importance_sampling_correction',
      true,
      "TRL's vespo folds the ratio into its gamma weights; qrl-sim's vespo does not",
    );
  const mode = opt(options, 'vllm_importance_sampling_mode');
  const cap = opt(options, 'vllm_importance_sampling_cap');
  const max = cap ?? opt(options, 'vllm_importance_sampling_clip_max');
  const min = opt(options, 'vllm_importance_sampling_clip_min');
  if (max === null) refuse('vllm_importance_sampling_clip_max', null, 'qrl-sim bounds the ratio from above');
  switch (mode) {
    case 'token_truncate':
      return { name: 'tis', C: max, ...(min !== null ? { lo: min } : {}) };
    case 'sequence_truncate':
      return { name: 'seq-tis', C: max, ...(min !== null ? { lo: min } : {}) };
    case 'token_mask':
    case 'sequence_mask':
      // no lower bound in TRL (−inf): the smallest positive double, which every ρ = exp(·) > 0 passes
      return {
        name: 'icepop',
        lo: min ?? Number.MIN_VALUE,
        hi: max,
        level: mode === 'token_mask' ? 'token' : 'sequence',
        denominator: 'original',
      };
    default:
      return refuse(
        'vllm_importance_sampling_mode',
        mode,
        "TRL knows 'token_truncate', 'token_mask', 'sequence_truncate', 'sequence_mask'",
      );
  }
}

/** Option tables by stack name (the manifest's `stack.name`); a bundle may instead carry a qrl-sim config as `estimator`. */
export const stackOptionTables: Readonly<Record<string, (options: StackOptions) => EstimateConfig>> = Object.freeze({
  trl: trlEstimateConfig,
});

/** The estimate config a bundle replays with: its `estimator` when present, else its stack's option table. */
export function bundleConfig(bundle: StepBundle): EstimateConfig {
  const { manifest } = bundle;
  if (manifest.estimator !== undefined) return resolveConfig(manifest.estimator, 'estimator');
  const table = stackOptionTables[manifest.stack.name];
  if (table === undefined)
    throw new UsageError(
      `stack.name: no option table for '${manifest.stack.name}' (tables: ${Object.keys(stackOptionTables).join(', ')}); write the qrl-sim config as the manifest's "estimator" (docs/replay.md)`,
    );
  return table(manifest.options);
}

// ---------------------------------------------------------------------------------------------
// the stages

interface Comparison {
  readonly compared: number;
  readonly maxDiff: number;
  readonly bound: number;
  readonly at: number;
}

/** Compares `oracle` with `stack` where `select` holds; `scale` defaults to the largest |stack value| compared. */
function compare(
  oracle: ArrayLike<number>,
  stack: ArrayLike<number>,
  select: (k: number) => boolean = () => true,
  scale?: number,
): Comparison {
  let largest = 0;
  for (let k = 0; k < stack.length; k++) if (select(k)) largest = Math.max(largest, Math.abs(stack[k]!));
  const bound = replayBound(scale ?? largest);
  let maxDiff = -1;
  let at = -1;
  let compared = 0;
  for (let k = 0; k < stack.length; k++) {
    if (!select(k)) continue;
    compared++;
    const a = oracle[k]!;
    const b = stack[k]!;
    const d =
      Number.isNaN(a) || Number.isNaN(b)
        ? Number.isNaN(a) && Number.isNaN(b)
          ? 0
          : Infinity
        : a === b
          ? 0
          : Math.abs(a - b);
    if (d > maxDiff) {
      maxDiff = d;
      at = k;
    }
  }
  return { compared, maxDiff: Math.max(maxDiff, 0), bound, at };
}

function stage(
  name: ReplayStageName,
  c: Comparison,
  oracle: ArrayLike<number>,
  stack: ArrayLike<number>,
  position: (k: number) => number[],
  detail: string,
): ReplayStage {
  if (c.compared === 0)
    return {
      name,
      status: 'not-applicable',
      compared: 0,
      maxDiff: null,
      bound: null,
      position: null,
      stack: null,
      oracle: null,
      detail: `${detail}: nothing to compare`,
    };
  return {
    name,
    status: c.maxDiff <= c.bound ? 'agree' : 'differ',
    compared: c.compared,
    maxDiff: c.maxDiff,
    bound: c.bound,
    position: position(c.at),
    stack: stack[c.at]!,
    oracle: oracle[c.at]!,
    detail,
  };
}

function skipped(name: ReplayStageName, status: 'not-captured' | 'not-applicable', detail: string): ReplayStage {
  return { name, status, compared: 0, maxDiff: null, bound: null, position: null, stack: null, oracle: null, detail };
}

/** A (B, T) tensor, or a (B) / (B, 1) one broadcast along T. */
function perToken(t: StepTensor, B: number, T: number): Float64Array {
  if (t.values.length === B * T) return t.values;
  const out = new Float64Array(B * T);
  for (let i = 0; i < B; i++) out.fill(t.values[i]!, i * T, (i + 1) * T);
  return out;
}

/** TRL 1.13's logged metrics that the oracle also computes, as functions of its metrics (token-level ratio losses). */
function trlMetricMap(config: EstimateConfig): Record<string, (m: MetricRecord) => number | undefined> {
  const map: Record<string, (m: MetricRecord) => number | undefined> = {};
  if (config.loss.name === 'ppo-clip') {
    // grpo_trainer.py l.3365–3376: masked means of (coef_1 < 1 − ε_low) & (A < 0) and (coef_1 > 1 + ε_high) & (A > 0)
    map['clip_ratio/low_mean'] = (m) => m['actor/clip_ratio_low'];
    map['clip_ratio/high_mean'] = (m) => m['actor/clip_ratio_high'];
    map['clip_ratio/region_mean'] = (m) => (m['actor/clip_ratio_low'] ?? NaN) + (m['actor/clip_ratio_high'] ?? NaN);
  }
  if (config.correction.some((c) => c.name !== 'none')) {
    // l.2885–2930: |ℓold − ℓroll| over the mask, and the applied ratio (per row at sequence level: its mean differs)
    const sequenceLevel = config.correction.some(
      (c) => c.name === 'seq-tis' || (c.name === 'icepop' && c.level === 'sequence'),
    );
    const names = [
      'sampling/sampling_logp_difference/mean',
      'sampling/sampling_logp_difference/max',
      'sampling/importance_sampling_ratio/min',
      'sampling/importance_sampling_ratio/max',
      ...(sequenceLevel ? [] : ['sampling/importance_sampling_ratio/mean']),
    ];
    for (const name of names) map[name] = (m) => m[name];
  }
  // l.3360–3361: the token mean of per_token_kl (bias-corrected when use_bias_correction_kl)
  if (config.kl !== null && (config.kl.biasCorrection === 'none' || config.aggregation.name === 'token-mean')) {
    map.kl = (m) => (config.kl!.biasCorrection === 'none' ? m['actor/kl_mean'] : m['actor/kl_loss']);
  }
  return map;
}

/**
 * Replays one bundle: maps its options ({@link bundleConfig}), then recomputes each stage from the
 * bundle's own inputs to it and compares with what the stack recorded:
 * advantages (from rewards and groups) · correction (the rollout-correction weights, when the stack
 * recorded them) · token-loss (oracle's per-token loss vs the stack's, on the loss mask) ·
 * aggregation (the oracle's coefficients applied to the stack's per-token loss vs the stack's loss) ·
 * loss · gradient (d loss/d ℓθ) · metrics (the stack's logged metrics the oracle also computes).
 */
export function replayStep(bundle: StepBundle): ReplayResult {
  const config = bundleConfig(bundle);
  const { tensors: t, B, T } = bundle;
  const shape = { B, T };
  const n = B * T;
  const mask = (t.loss_mask ?? t.completion_mask)!.values;
  const onMask = (k: number) => mask[k] === 1;
  const tokenPos = (k: number) => [Math.floor(k / T), k % T];
  for (let k = 0; k < n; k++)
    if (mask[k] !== 0 && mask[k] !== 1)
      throw new UsageError(
        `bundle ${bundle.dir}: ${t.loss_mask ? 'loss_mask' : 'completion_mask'}: expected 0 or 1, got ${mask[k]} at [${tokenPos(k).join(', ')}]`,
      );
  const stages: ReplayStage[] = [];

  // advantages
  const adv = t.advantages!;
  if (t.rewards === undefined || t.group === undefined) {
    stages.push(
      skipped(
        'advantages',
        'not-captured',
        `needs rewards and group (the bundle has ${['rewards', 'group'].filter((f) => f in t).join(', ') || 'neither'})`,
      ),
    );
  } else if (adv.values.length !== B) {
    stages.push(
      skipped(
        'advantages',
        'not-applicable',
        'per-token advantages: a token-level estimator is not recomputed from rewards',
      ),
    );
  } else {
    const seq = sequenceAdvantages(t.rewards.values, Array.from(t.group.values), config.advantage);
    stages.push(
      stage(
        'advantages',
        compare(seq.value, adv.values),
        seq.value,
        adv.values,
        (k) => [k],
        `${config.advantage.name} from rewards and group, per row`,
      ),
    );
  }

  const logpOld = (t.logp_old ?? t.logp)!.values;
  const batch = {
    shape,
    logpTheta: t.logp!.values,
    logpOld,
    logpRollout: (t.logp_rollout ?? t.logp_old ?? t.logp)!.values,
    ...(t.logp_ref !== undefined ? { logpRef: t.logp_ref.values } : {}),
    mask,
    advantages: perToken(adv, B, T),
  };
  if (config.kl !== null && t.logp_ref === undefined)
    throw new UsageError(`bundle ${bundle.dir}: logp_ref: required field missing (the options configure a KL term)`);
  const r = estimate(batch, config);

  // correction
  const noCorrection = config.correction.every((s) => s.name === 'none');
  if (t.is_weight !== undefined) {
    const w = perToken(t.is_weight, B, T);
    stages.push(
      stage(
        'correction',
        compare(r.weights, w, onMask),
        r.weights,
        w,
        tokenPos,
        `correction weights (${config.correction.map((s) => s.name).join(' → ')}) on the loss mask`,
      ),
    );
  } else if (noCorrection) {
    stages.push(skipped('correction', 'not-applicable', 'no rollout correction configured'));
  } else {
    stages.push(skipped('correction', 'not-captured', 'needs is_weight'));
  }

  // token-loss: the stack's per-token loss on the mask
  const stackTokenLoss = perToken(t.token_loss!, B, T).map((v, k) => (mask[k] === 1 ? v : 0));
  stages.push(
    stage(
      'token-loss',
      compare(r.tokenLoss, stackTokenLoss, onMask),
      r.tokenLoss,
      stackTokenLoss,
      tokenPos,
      `${config.loss.name}${config.kl !== null ? ` + ${config.kl.coef}·${config.kl.name}` : ''} per token`,
    ),
  );

  // aggregation: the oracle's coefficients on the stack's own per-token loss
  const coefficients = (aggregations[config.aggregation.name] as AggregationFn<AggregationParams>)(
    r.denominatorMask,
    shape,
    config.aggregation,
  ).value;
  const stackLoss = t.loss!.values;
  const aggregated = [aggregate(coefficients, stackTokenLoss)];
  const termScale = aggregate(coefficients.map(Math.abs), stackTokenLoss.map(Math.abs));
  stages.push(
    stage(
      'aggregation',
      compare(aggregated, stackLoss, undefined, termScale),
      aggregated,
      stackLoss,
      () => [],
      `${config.aggregation.name} of the stack's per-token loss`,
    ),
  );

  // loss
  stages.push(
    stage('loss', compare([r.loss], stackLoss, undefined, termScale), [r.loss], stackLoss, () => [], 'the scalar loss'),
  );

  // gradient
  const grad = t.grad_logp!.values;
  stages.push(
    stage('gradient', compare(r.gradLogpTheta, grad), r.gradLogpTheta, grad, tokenPos, 'd loss / d ℓθ, every position'),
  );

  // metrics
  const map =
    bundle.manifest.stack.name === 'trl' && bundle.manifest.estimator === undefined ? trlMetricMap(config) : {};
  const names = Object.keys(map)
    .filter((name) => typeof bundle.manifest.metrics?.[name] === 'number')
    .sort();
  if (names.length === 0) {
    stages.push(
      skipped(
        'metrics',
        Object.keys(map).length === 0 ? 'not-applicable' : 'not-captured',
        Object.keys(map).length === 0
          ? 'no logged metric of this stack and loss is mapped'
          : `needs ${Object.keys(map).join(', ')} in manifest.metrics`,
      ),
    );
  } else {
    const oracle = names.map((name) => map[name]!(r.metrics) ?? NaN);
    const stack = names.map((name) => bundle.manifest.metrics[name]!);
    const c = compare(oracle, stack, undefined, 1);
    const s = stage('metrics', c, oracle, stack, () => [], names.join(', '));
    stages.push({
      ...s,
      detail: c.maxDiff > c.bound ? `${names[c.at]} differs (compared: ${names.join(', ')})` : s.detail,
    });
  }

  const first = stages.find((s) => s.status === 'differ');
  return {
    bundle: bundle.dir,
    stack: bundle.manifest.stack,
    step: bundle.manifest.step,
    config,
    stages,
    firstDifference: first?.name ?? null,
  };
}

/** The stage table as text: one row per stage, then the verdict line. */
export function formatReplay(result: ReplayResult): string {
  const g = (x: number | null) =>
    x === null ? '—' : x === 0 ? '0' : Math.abs(x) < 1e-3 || Math.abs(x) >= 1e4 ? x.toExponential(2) : x.toPrecision(3);
  const rows = result.stages.map((s) => [
    s.name,
    s.status,
    String(s.compared),
    g(s.maxDiff),
    g(s.bound),
    s.position === null ? '—' : `[${s.position.join(', ')}]`,
    s.detail,
  ]);
  const head = ['stage', 'status', 'compared', 'max |Δ|', 'bound', 'at', 'what'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  const first = result.stages.find((s) => s.status === 'differ');
  const verdict =
    first === undefined
      ? `every compared stage agrees (${result.stack.name} ${result.stack.version}, step ${result.step ?? '?'})`
      : `first difference: ${first.name} at [${first.position!.join(', ')}]: stack ${first.stack}, oracle ${first.oracle} (|Δ| ${g(first.maxDiff)} > ${g(first.bound)})`;
  return [line(head), ...rows.map(line), verdict].join('\n');
}
