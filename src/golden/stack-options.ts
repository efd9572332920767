// The stacks' option tables of `replay`: a stack's own training options (TRL 1.13's GRPOConfig) mapped to the
// estimate config that reproduces its step, refusing the options that change the step in a way the oracle does
// not model. docs/replay.md explains each row; golden/replay.ts runs the stages.

import { UsageError } from '../core/errors.js';
import { resolveConfig, type EstimateConfig } from '../rl/schema.js';
import type { StepBundle } from './step-bundle.js';
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
