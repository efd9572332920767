// `estimate(batch, config)`: one GRPO loss evaluation from a batch — advantages, correction, loss, KL, gradient, metrics.
// Not the training loop (no optimiser, no mini-batching) and not I/O: the CLI wraps it with JSON in and out.

import { UsageError } from '../core/errors.js';
import { advantages as advantageTable, tokenLevelAdvantageNames } from './advantages.js';
import type { AdvantageFn, TokenAdvantageInput } from './advantages.js';
import { aggregate, aggregations } from './aggregation.js';
import type { AggregationFn, AggregationParams } from './aggregation.js';
import { applyCorrection } from './correction.js';
import type { CorrectionResult } from './correction.js';
import { mismatchDiagnostics } from './diagnostics.js';
import { stackMetrics } from './stack-metrics.js';
import { kl as klTable } from './kl.js';
import type { KlFn } from './kl.js';
import { losses, readsTopkLoss, type LossName, type LossParams, type LossTable } from './losses.js';
import type { PolicyLossInput, PolicyLossValue } from './losses/loss.js';
import type { AdvantageSpec, EstimateBatch, EstimateConfig } from './schema.js';
import { parseEstimateInput } from './schema.js';
import type { BatchShape, Estimate, MetricRecord } from './types.js';
import { checkTopkBatch, type TopkBatch } from './topk.js';
import { scoreCenteringTerm } from './losses/score-centering.js';
import { topkKlTerm } from './losses/topk-kl.js';
import { LOG_RATIO_BOUND, acceptRenamed, rowCounts } from './types.js';

/** Everything `estimate` computes, in flat `(B, T)` form. */
export interface EstimateResult {
  /** EstimateBatch shape. */
  readonly shape: BatchShape;
  /** Per-token advantages after any rectification (AIS Ã = w̃·A), `(B, T)`, 0 on padding. */
  readonly advantages: Float64Array;
  /** Detached correction weights `(B, T)`, 0 wherever `lossMask` is 0. */
  readonly weights: Float64Array;
  /** Loss mask `(B, T)`: the numerator of the aggregated loss (the batch's response mask AND every stage's keep mask). */
  readonly lossMask: Float64Array;
  /**
   * The loss mask under its former name (the same array; `mask` of the JSON output).
   * @deprecated Read {@link EstimateResult.lossMask}; `mask` stays until 1.0.
   */
  readonly mask: Float64Array;
  /** Denominator mask `(B, T)` (also the KL mask unless `kl.mask` says otherwise). */
  readonly denominatorMask: Float64Array;
  /** Per-token total loss `(B, T)`: lossMask·w·L_pg + klMask·coef·KL. */
  readonly tokenLoss: Float64Array;
  /** Aggregated scalar loss = Σ c·tokenLoss with the aggregation coefficients c. */
  readonly loss: number;
  /** d loss / d ℓθ, `(B, T)`, 0 on masked tokens. */
  readonly gradLogpTheta: Float64Array;
  /** d loss / d ℓθ at the batch's top-k ids `(B, T, K)`, when the batch has `topk` (score centering, `trpl`). */
  readonly gradTopkLogpTheta?: Float64Array | undefined;
  /** All metrics (advantages/*, rollout_corr/*, actor/*). */
  readonly metrics: MetricRecord;
}

/**
 * Per-sequence advantages `(B)` from rewards and groups with the configured estimator; `lengths`
 * (valid tokens per row) feed the token-level whitening of `reinforce++` (default 1 per row).
 */
export function sequenceAdvantages(
  rewards: Float64Array,
  groups: readonly (string | number)[] | undefined,
  spec: AdvantageSpec,
  lengths?: Float64Array,
): { value: Float64Array; metrics: MetricRecord } {
  const fn = advantageTable[spec.name] as AdvantageFn<AdvantageSpec>;
  return fn({ rewards, groups: groups ?? Array.from(rewards, () => 0), lengths }, spec);
}

/**
 * Token-level advantages `(B, T)` from rewards, groups and the per-token inputs `tokens` (ℓold,
 * mask, Σπ²) with a token-level estimator (`tokenLevelAdvantageNames`: veRL's optimal token
 * baseline), for `estimate` and the GRPO loop alike.
 */
export function tokenAdvantages(
  rewards: Float64Array,
  groups: readonly (string | number)[] | undefined,
  spec: AdvantageSpec,
  tokens: TokenAdvantageInput,
): { value: Float64Array; metrics: MetricRecord } {
  const fn = advantageTable[spec.name] as AdvantageFn<AdvantageSpec>;
  return fn({ rewards, groups: groups ?? Array.from(rewards, () => 0), tokens }, spec);
}

/**
 * A batch as {@link estimate} accepts it: {@link EstimateBatch} whose per-token and per-sequence
 * fields may also be plain `number[]` or any other numeric array (copied into `Float64Array`).
 */
export type EstimateBatchInput = {
  readonly [K in keyof EstimateBatch]: EstimateBatch[K] extends Float64Array | undefined
    ? Float64Array | Float32Array | readonly number[] | Extract<EstimateBatch[K], undefined>
    : EstimateBatch[K];
};

const FLAT_FIELDS = [
  ['logpTheta', 'BT', true],
  ['logpOld', 'BT', true],
  ['logpRollout', 'BT', true],
  ['mask', 'BT', true],
  ['logpRef', 'BT', false],
  ['advantages', 'BT', false],
  ['logpThetaDetached', 'BT', false],
  ['probSqSum', 'BT', false],
  ['rewards', 'B', false],
  ['onPolicy', 'B', false],
] as const;

/** Checks lengths and copies plain arrays into Float64Array; typed float64 inputs pass through unchanged. */
function toEstimateBatch(input: EstimateBatchInput): EstimateBatch {
  const shape = input.shape as BatchShape | undefined;
  if (shape === undefined || !Number.isInteger(shape.B) || !Number.isInteger(shape.T) || shape.B < 0 || shape.T < 0) {
    throw new UsageError(`batch.shape: expected { B, T } with non-negative integers, got ${JSON.stringify(shape)}`);
  }
  const out: Record<string, unknown> = { ...input };
  for (const [field, dims, required] of FLAT_FIELDS) {
    const v = (input as Record<string, unknown>)[field];
    if (v === undefined) {
      if (required) throw new UsageError(`batch.${field}: required (a flat (B·T) array of numbers)`);
      continue;
    }
    const n = dims === 'BT' ? shape.B * shape.T : shape.B;
    const ok =
      v instanceof Float64Array ||
      v instanceof Float32Array ||
      (Array.isArray(v) && v.every((x) => typeof x === 'number'));
    if (!ok)
      throw new UsageError(
        `batch.${field}: expected a flat array of numbers of length ${dims === 'BT' ? 'B·T' : 'B'} = ${n} (number[], Float64Array or Float32Array), got ${Array.isArray(v) ? 'an array with a non-number entry (nested rows? flatten them, or use parseEstimateInput)' : typeof v}`,
      );
    const len = (v as ArrayLike<number>).length;
    if (len !== n)
      throw new UsageError(`batch.${field}: expected length ${dims === 'BT' ? 'B·T' : 'B'} = ${n}, got ${len}`);
    if (!(v instanceof Float64Array)) out[field] = Float64Array.from(v as ArrayLike<number>);
  }
  if (input.topk !== undefined) checkTopkBatch(input.topk, shape);
  return out as unknown as EstimateBatch;
}

/**
 * Evaluates one loss over a batch, step for step as docs/grpo.md steps 5, 6 and 7:
 * advantages (from rewards, unless given) → correction weights and masks → policy loss × weight →
 * aggregation → + coef·KL → loss and d loss/d ℓθ. Pure: same inputs ⇒ identical outputs.
 * Fields are flat `(B·T)` arrays: `Float64Array` or plain `number[]` (copied); a wrong length or a
 * nested array is a `UsageError` naming `batch.<field>`.
 * @example
 * const { batch, config } = parseEstimateInput(json);
 * const r = estimate(batch, config); // r.loss, r.gradLogpTheta, r.metrics['rollout_corr/ais/alpha']
 */
export function estimate(input: EstimateBatchInput, config: EstimateConfig): EstimateResult {
  const batch = exactOnPolicy(toEstimateBatch(input), config);
  requireTopk(batch.topk, config);
  const { shape } = batch;
  const { B, T } = shape;
  const n = B * T;
  const metrics: MetricRecord = {};

  // step 5: advantages, broadcast to tokens (B, T)
  let tokenAdv: Float64Array;
  if (batch.advantages !== undefined) {
    tokenAdv = batch.advantages.map((a, k) => (batch.mask[k] === 1 ? a : 0));
  } else if (batch.rewards !== undefined && tokenLevelAdvantageNames.includes(config.advantage.name)) {
    // a token-level baseline (veRL OTB): ℓold is veRL's old_log_probs, ℓroll in bypass mode (ℓold := ℓroll)
    const logpOld = config.mode === 'bypass' ? batch.logpRollout : batch.logpOld;
    const tok = tokenAdvantages(batch.rewards, batch.groups, config.advantage, {
      T,
      mask: batch.mask,
      logpOld,
      probSqSum: batch.probSqSum,
    });
    Object.assign(metrics, tok.metrics);
    tokenAdv = tok.value;
  } else if (batch.rewards !== undefined) {
    const seq = sequenceAdvantages(batch.rewards, batch.groups, config.advantage, rowCounts(batch.mask, shape));
    Object.assign(metrics, seq.metrics);
    tokenAdv = new Float64Array(n);
    for (let k = 0; k < n; k++) if (batch.mask[k] === 1) tokenAdv[k] = seq.value[Math.floor(k / T)]!;
  } else {
    throw new UsageError('rewards: expected rewards (one per sequence) or advantages');
  }

  // step 6: correction weights and masks (detached); `batch.mask` is the response mask. Bypass mode: ℓold := ℓroll in the loss, and the
  // stages compare the detached ℓθ with ℓroll (verl compute_policy_loss_bypass_mode, core_algos.py l.2495–2507)
  const bypass = config.mode === 'bypass';
  // AReaL prox_logp_method "loglinear": ℓold := ℓroll + α(sg[ℓθ] − ℓroll) for the stages and the loss
  const prox =
    config.proxLogp != null
      ? loglinearProximal(batch.logpThetaDetached ?? batch.logpTheta, batch.logpRollout, config.proxLogp.versionLag)
      : undefined;
  const stageOld = bypass ? (batch.logpThetaDetached ?? batch.logpTheta) : (prox ?? batch.logpOld);
  const lossOld = bypass ? batch.logpRollout : (prox ?? batch.logpOld);
  const corr = applyCorrection(
    {
      shape,
      logpOld: stageOld,
      logpRollout: batch.logpRollout,
      responseMask: batch.mask,
      advantages: tokenAdv,
      logpTheta: batch.logpThetaDetached ?? batch.logpTheta,
    },
    config.correction,
  );
  Object.assign(metrics, corr.metrics);
  const { lossMask, denominatorMask } = corr.value;
  // bypass: only reinforce applies the IS weights; the PPO-style losses already see r = πθ/πroll (l.2515–2540)
  const weights = bypass && config.loss.name !== 'reinforce' ? Float64Array.from(lossMask) : corr.value.weights;
  Object.assign(
    metrics,
    mismatchDiagnostics({
      shape,
      logpOld: stageOld,
      logpRollout: batch.logpRollout,
      responseMask: batch.mask,
      weights,
      lossMask,
      emptyRows: config.diagnostics.emptyRows,
    }).metrics,
  );
  if (config.diagnostics.stacks !== undefined) {
    Object.assign(
      metrics,
      stackMetrics(
        {
          shape,
          logpTrain: stageOld,
          logpRollout: batch.logpRollout,
          responseMask: batch.mask,
          lossMask,
          weights,
          advantages: tokenAdv,
          aggregation: config.aggregation.name,
        },
        config.diagnostics.stacks,
      ),
    );
  }

  // step 7: policy loss × weight, aggregation, KL, gradient
  const objective = policyObjective(
    {
      shape,
      logpTheta: batch.logpTheta,
      logpOld: lossOld,
      logpRollout: batch.logpRollout,
      logpRef: batch.logpRef,
      advantages: tokenAdv,
      weights,
      lossMask,
      denominatorMask,
      responseMask: batch.mask,
      logpThetaDetached: batch.logpThetaDetached,
      rewards: batch.rewards,
      topk: batch.topk,
    },
    config,
  );
  Object.assign(metrics, objective.metrics);
  const { tokenLoss, loss, gradLogpTheta, gradTopkLogpTheta } = objective.value;
  return {
    shape,
    advantages: corr.value.advantages,
    weights,
    lossMask,
    mask: lossMask,
    denominatorMask,
    tokenLoss,
    loss,
    gradLogpTheta,
    ...(gradTopkLogpTheta !== undefined ? { gradTopkLogpTheta } : {}),
    metrics,
  };
}

/**
 * prime-rl `exact_on_policy_ratio` (PR 3555): a row sampled by the current weights (`onPolicy` 1)
 * has the true ratio 1, so ℓold and ℓroll of that row become sg ℓθ and every ratio on it is
 * exp(ℓθ − sg ℓθ) ≡ 1 with the gradient of ℓθ. Off: the batch unchanged.
 */
export function exactOnPolicy(batch: EstimateBatch, config: Pick<EstimateConfig, 'exactOnPolicyRatio'>): EstimateBatch {
  if (config.exactOnPolicyRatio !== true) return batch;
  const on = batch.onPolicy;
  if (on === undefined)
    throw new UsageError(
      'onPolicy: required when config.exactOnPolicyRatio is true (1 per row sampled by the current weights)',
    );
  const { T } = batch.shape;
  const det = batch.logpThetaDetached ?? batch.logpTheta;
  const pick = (x: Float64Array) => x.map((v, k) => (on[Math.floor(k / T)] === 1 ? det[k]! : v));
  return { ...batch, logpOld: pick(batch.logpOld), logpRollout: pick(batch.logpRollout) };
}

/** Refuses a config that reads the sampler's distribution (score centering, top-k KL, `trpl`, `dppo-topk-*`) without `topk`. */
export function requireTopk(
  topk: TopkBatch | undefined,
  config: Pick<EstimateConfig, 'loss'> & Partial<Pick<EstimateConfig, 'scoreCentering' | 'topkKl'>>,
): void {
  if (topk !== undefined) return;
  if (readsTopkLoss(config.loss.name))
    throw new UsageError(
      `topk: required by config.loss.name '${config.loss.name}' (the rollout engine's top-k ids and ℓ per position)`,
    );
  if (config.scoreCentering != null)
    throw new UsageError("topk: required by config.scoreCentering (the rollout engine's top-k ids and ℓ per position)");
  if (config.topkKl != null)
    throw new UsageError("topk: required by config.topkKl (the rollout engine's top-k ids and ℓ per position)");
}

/**
 * AReaL's log-linear proximal policy (areal/trainer/ppo/actor.py `compute_prox_logp_approximations`
 * l.768–830 at AReaL cbff54d): with the version lag k = v_θ − v_behave and v_prox = v_θ − 1,
 * α = clamp((k − 1)/k, 0, 1) (0 when k = 0) and ℓprox = ℓroll + α·(ℓθ − ℓroll), ℓθ detached.
 */
export function loglinearProximal(
  logpThetaDetached: Float64Array,
  logpRollout: Float64Array,
  versionLag: number,
): Float64Array {
  const alpha = versionLag > 0 ? Math.min(1, Math.max(0, (versionLag - 1) / versionLag)) : 0;
  return logpRollout.map((r, k) => r + alpha * (logpThetaDetached[k]! - r));
}

/** Inputs of {@link policyObjective}: a (mini-)batch with its correction already applied (all `(B, T)`). */
export interface ObjectiveInput {
  /** Batch shape. */
  readonly shape: BatchShape;
  /** ℓθ (the variable of the gradient). */
  readonly logpTheta: Float64Array;
  /** ℓold. */
  readonly logpOld: Float64Array;
  /** ℓroll (used by `tbpo`). */
  readonly logpRollout: Float64Array;
  /** ℓref, required when `config.kl` is set. */
  readonly logpRef?: Float64Array | undefined;
  /** Per-token advantages before AIS rectification (the loss sees A; AIS's w̃ arrives in `weights`). */
  readonly advantages: Float64Array;
  /** Detached correction weights, 0 where `lossMask` is 0 ({@link CorrectionResult.weights}). */
  readonly weights: Float64Array;
  /** Loss mask, the numerator ({@link CorrectionResult.lossMask}); also the KL mask when `kl.mask` is `numerator`. */
  readonly lossMask: Float64Array;
  /** Denominator mask (aggregation normalisers, loss metrics, and KL unless `kl.mask` is `response` or `numerator`). */
  readonly denominatorMask: Float64Array;
  /** Response mask of the batch: the KL mask when `kl.mask` is `response`. */
  readonly responseMask: Float64Array;
  /** Point at which stop-gradient terms are evaluated. @defaultValue logpTheta */
  readonly logpThetaDetached?: Float64Array | undefined;
  /** Per-row rewards `(B)`, read by `topr` (rows with reward > 0 are its positives). */
  readonly rewards?: Float64Array | undefined;
  /** The sampler's top-k (score centering, `trpl`). */
  readonly topk?: TopkBatch | undefined;
}

/** Loss, per-token loss and gradient of one objective evaluation. */
export interface ObjectiveValue {
  /** Per-token total loss `(B, T)`: lossMask·w·L_pg + klMask·coef·KL. */
  readonly tokenLoss: Float64Array;
  /** Aggregated scalar loss. */
  readonly loss: number;
  /** d loss / d ℓθ `(B, T)`. */
  readonly gradLogpTheta: Float64Array;
  /** d loss / d ℓθ at the top-k ids `(B, T, K)`, when the input has `topk`. */
  readonly gradTopkLogpTheta?: Float64Array | undefined;
}

/** Evaluates the loss `spec.name` with its own parameters: the table's entry, typed by {@link LossTable}. */
function runLoss<K extends LossName>(
  input: PolicyLossInput,
  spec: { readonly name: K } & LossParams[K],
): Estimate<PolicyLossValue> {
  const table: LossTable = losses;
  return table[spec.name](input, spec);
}

/**
 * Step 7 of docs/grpo.md "Pseudocode" for one (mini-)batch: per-token policy loss × correction weight,
 * aggregation over the denominator mask, + coef·KL (no correction weight; over the denominator mask
 * with the same coefficients, with `kl.mask: 'numerator'` over the loss mask with the same coefficients
 * (slime), or with `kl.mask: 'response'` over the response mask with that mask's own
 * aggregation coefficients, as verl's bypass mode), and the
 * exact gradient with respect to ℓθ. Call it once per mini-batch and epoch with the weights and masks
 * from {@link applyCorrection}; backpropagate `gradLogpTheta` through the policy network.
 * Metrics: `actor/pg_loss`, `actor/kl_loss`, `actor/kl_coef`, `actor/loss` plus the loss's, the
 * aggregation's and the KL estimator's own. An input with the former field name `mask` (instead of
 * `lossMask`) is still accepted.
 */
export function policyObjective(
  given: ObjectiveInput,
  config: Pick<EstimateConfig, 'loss' | 'aggregation' | 'kl'> &
    Partial<Pick<EstimateConfig, 'mismatchPenalty' | 'scoreCentering' | 'topkKl'>>,
): Estimate<ObjectiveValue> {
  const input = acceptRenamed(given, { mask: 'lossMask' });
  requireTopk(input.topk, config);
  const { shape, weights, lossMask, denominatorMask, responseMask } = input;
  const n = shape.B * shape.T;
  const metrics: MetricRecord = {};
  const agg = (aggregations[config.aggregation.name] as AggregationFn<AggregationParams>)(
    denominatorMask,
    shape,
    config.aggregation,
  );
  Object.assign(metrics, agg.metrics);
  const c = agg.value;
  const pg = runLoss(
    {
      shape,
      logpTheta: input.logpTheta,
      logpOld: input.logpOld,
      logpRollout: input.logpRollout,
      advantages: input.advantages,
      lossMask,
      upstream: c.map((ck, k) => (lossMask[k] === 1 ? ck * weights[k]! : 0)),
      logpThetaDetached: input.logpThetaDetached,
      rewards: input.rewards,
      metricMask: denominatorMask,
      topk: input.topk,
    },
    config.loss,
  );
  Object.assign(metrics, pg.metrics);
  const tokenLoss = new Float64Array(n);
  const grad = Float64Array.from(pg.value.gradLogpTheta);
  for (let k = 0; k < n; k++) if (lossMask[k] === 1) tokenLoss[k] = weights[k]! * pg.value.tokenLoss[k]!;
  metrics['actor/pg_loss'] = aggregate(c, tokenLoss);
  let gradTopk: Float64Array | undefined =
    input.topk === undefined
      ? undefined
      : Float64Array.from(pg.value.gradTopkLogpTheta ?? new Float64Array(n * input.topk.K));
  let centering = 0;
  if (config.scoreCentering != null && input.topk !== undefined && gradTopk !== undefined) {
    // score centering: + A·Σ_j sg[coef_j]·ℓθ_j per loss token, with the aggregation coefficient c (the IS rule, for
    // the vime form, is inside coef)
    const sc = scoreCenteringTerm(input.topk, input.advantages, lossMask, c, config.scoreCentering);
    Object.assign(metrics, sc.metrics);
    for (let k = 0; k < n; k++) if (lossMask[k] === 1) tokenLoss[k] = tokenLoss[k]! + sc.value.tokenTerm[k]!;
    gradTopk = gradTopk.map((g, j) => g + sc.value.gradTopk[j]!);
    centering = aggregate(c, sc.value.tokenTerm);
    metrics['actor/score_centering_loss'] = centering;
  }
  let topkKlLoss = 0;
  if (config.topkKl != null && input.topk !== undefined && gradTopk !== undefined) {
    // EMA-PG top-k KL(πθ, μ): + coef·(L1 + iw·L2) per denominator token, with the policy loss's coefficients c
    const tk = config.topkKl;
    const kl = topkKlTerm(
      input.topk,
      input,
      denominatorMask,
      c.map((ck) => ck * tk.coef),
      tk,
    );
    Object.assign(metrics, kl.metrics);
    for (let k = 0; k < n; k++) {
      if (denominatorMask[k] !== 1) continue;
      tokenLoss[k] = tokenLoss[k]! + tk.coef * kl.value.tokenKl[k]!;
      grad[k] = grad[k]! + kl.value.gradLogpTheta[k]!;
    }
    gradTopk = gradTopk.map((g, j) => g + kl.value.gradTopk[j]!);
    metrics['actor/topk_kl_loss'] = aggregate(c, kl.value.tokenKl);
    topkKlLoss = tk.coef * metrics['actor/topk_kl_loss'];
  }

  if (config.kl !== null) {
    if (input.logpRef === undefined) throw new UsageError('logpRef: required when config.kl is set');
    const coef = config.kl.coef;
    // `numerator`: the KL over the loss mask with the policy loss's coefficients (slime rebuilds its
    // reducer with the rejection-modified masks and the original denominators, loss.py l.1086–1092, l.1128)
    if (config.kl.mask === 'response' && responseMask === undefined)
      throw new UsageError(
        "responseMask: required when config.kl.mask is 'response' (the KL runs over the response mask)",
      );
    const klMask =
      config.kl.mask === 'response' ? responseMask : config.kl.mask === 'numerator' ? lossMask : denominatorMask;
    // the KL term's own coefficients: those of the policy loss unless it runs over another mask
    const ckl =
      klMask === denominatorMask || config.kl.mask === 'numerator'
        ? c
        : (aggregations[config.aggregation.name] as AggregationFn<AggregationParams>)(klMask, shape, config.aggregation)
            .value;
    const klFn = klTable[config.kl.name] as KlFn<Record<string, never>>;
    // bias-corrected KL: KL_t·ρ_t with ρ = exp(ℓθ − ℓold) carrying gradient (TRL use_bias_correction_kl,
    // grpo_trainer.py l.3068–3076) or ρ = sg[exp(ℓθ − ℓroll)] (NeMo-RL use_on_policy_kl_approximation)
    const bc = config.kl.biasCorrection ?? 'none';
    const rho = new Float64Array(n).fill(1);
    const rhoLive = new Float64Array(n);
    if (bc !== 'none') {
      const det = input.logpThetaDetached ?? input.logpTheta;
      for (let k = 0; k < n; k++) {
        if (klMask[k] !== 1) continue;
        const raw = bc === 'old' ? input.logpTheta[k]! - input.logpOld[k]! : det[k]! - input.logpRollout[k]!;
        const clamped = Math.min(LOG_RATIO_BOUND, Math.max(-LOG_RATIO_BOUND, raw));
        rho[k] = Math.exp(clamped);
        if (bc === 'old' && clamped === raw) rhoLive[k] = 1;
      }
    }
    const klOut = klFn(
      {
        shape,
        logpTheta: input.logpTheta,
        logpRef: input.logpRef,
        klMask,
        upstream: ckl.map((ck, k) => ck * coef * rho[k]!),
        logpThetaDetached: input.logpThetaDetached,
      },
      {},
    );
    Object.assign(metrics, klOut.metrics);
    const tokenKl = bc === 'none' ? klOut.value.tokenKl : klOut.value.tokenKl.map((v, k) => v * rho[k]!);
    for (let k = 0; k < n; k++) {
      if (klMask[k] !== 1) continue;
      tokenLoss[k] = tokenLoss[k]! + coef * tokenKl[k]!;
      // product rule for the live ratio: d(KL·ρ)/dℓθ = KL'·ρ + KL·ρ
      grad[k] = grad[k]! + klOut.value.gradLogpTheta[k]! + (rhoLive[k] === 1 ? ckl[k]! * coef * tokenKl[k]! : 0);
    }
    metrics['actor/kl_loss'] = aggregate(ckl, tokenKl);
    metrics['actor/kl_coef'] = coef;
  }
  if (config.mismatchPenalty != null) {
    // prime-rl kl_tau·(ℓθ − ℓroll)² (trainer/rl/loss.py l.144–146), over the denominator mask with c
    const tau = config.mismatchPenalty.tau;
    const pen = new Float64Array(n);
    for (let k = 0; k < n; k++) {
      if (denominatorMask[k] !== 1) continue;
      const d = input.logpTheta[k]! - input.logpRollout[k]!;
      pen[k] = d * d;
      tokenLoss[k] = tokenLoss[k]! + tau * pen[k]!;
      grad[k] = grad[k]! + c[k]! * tau * 2 * d;
    }
    metrics['actor/mismatch_penalty'] = aggregate(c, pen);
  }
  // Σ c·tokenLoss when the KL shares c (the default); otherwise Σ c·(w·L_pg + τ·pen) + coef·Σ c_kl·KL
  const klApart = config.kl !== null && config.kl.mask === 'response';
  const penaltyLoss =
    config.mismatchPenalty != null ? config.mismatchPenalty.tau * metrics['actor/mismatch_penalty']! : 0;
  const loss = klApart
    ? metrics['actor/pg_loss'] + centering + topkKlLoss + penaltyLoss + config.kl!.coef * metrics['actor/kl_loss']!
    : aggregate(c, tokenLoss);
  metrics['actor/loss'] = loss;
  return {
    value: { tokenLoss, loss, gradLogpTheta: grad, ...(gradTopk !== undefined ? { gradTopkLogpTheta: gradTopk } : {}) },
    metrics,
  };
}

/** The JSON output of `qrl-sim estimate` (2-D arrays are one row per sequence). */
export interface EstimateOutputJson {
  /** Per-token advantages after rectification. */
  readonly advantages: number[][];
  /** Detached correction weights. */
  readonly weights: number[][];
  /** Loss mask (the numerator of the loss; `lossMask` of {@link EstimateResult}). */
  readonly mask: number[][];
  /** Per-token total loss (aggregates to `loss`). */
  readonly tokenLoss: number[][];
  /** Aggregated loss. */
  readonly loss: number;
  /** d loss / d logpTheta. */
  readonly gradLogpTheta: number[][];
  /** d loss / d topk.logpTheta `[B][T][K]`, when the input has `topk`. */
  readonly gradTopkLogpTheta?: number[][][];
  /** Flat metric record. */
  readonly metrics: MetricRecord;
}

/** Unflattens a `(B, T)` array into rows. */
export function unflattenRows(x: Float64Array, shape: BatchShape): number[][] {
  const rows: number[][] = [];
  for (let i = 0; i < shape.B; i++) rows.push(Array.from(x.subarray(i * shape.T, (i + 1) * shape.T)));
  return rows;
}

/** Unflattens a `(B, T, K)` array into rows of cells. */
export function unflattenCells(x: Float64Array, shape: BatchShape, K: number): number[][][] {
  const rows: number[][][] = [];
  for (let i = 0; i < shape.B; i++) {
    const row: number[][] = [];
    for (let t = 0; t < shape.T; t++)
      row.push(Array.from(x.subarray((i * shape.T + t) * K, (i * shape.T + t + 1) * K)));
    rows.push(row);
  }
  return rows;
}

/**
 * The `estimate` JSON contract: validates `json` ({@link parseEstimateInput}), runs {@link estimate},
 * returns the output object (metric keys sorted for stable output).
 */
export function estimateJson(json: unknown): EstimateOutputJson {
  const { batch, config } = parseEstimateInput(json);
  const r = estimate(batch, config);
  const metrics: MetricRecord = {};
  for (const key of Object.keys(r.metrics).sort()) metrics[key] = r.metrics[key]!;
  return {
    advantages: unflattenRows(r.advantages, r.shape),
    weights: unflattenRows(r.weights, r.shape),
    mask: unflattenRows(r.lossMask, r.shape),
    tokenLoss: unflattenRows(r.tokenLoss, r.shape),
    loss: r.loss,
    gradLogpTheta: unflattenRows(r.gradLogpTheta, r.shape),
    ...(r.gradTopkLogpTheta !== undefined && batch.topk !== undefined
      ? { gradTopkLogpTheta: unflattenCells(r.gradTopkLogpTheta, r.shape, batch.topk.K) }
      : {}),
    metrics,
  };
}
