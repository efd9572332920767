// The phases of one GRPO step as functions (reward, advantages, trainer recompute, correction,
// update), each returning its value and its metrics. Not the step's order or timings (loop.ts).

import type { LogprobsResult, PolicyBackend, RolloutBatch } from '../../core/backend-contract.js';
import type { Task, TaskProblem } from '../../tasks/task.js';
import type { Rng } from '../../core/rng.js';
import { applyCorrection, correctionNeedsTheta, type CorrectionResult } from '../correction.js';
import { mismatchDiagnostics } from '../diagnostics.js';
import { stackMetrics } from '../stack-metrics.js';
import { lengthMetrics } from '../length-diagnostics.js';
import { tokenLevelAdvantageNames } from '../advantages.js';
import { loglinearProximal, policyObjective, sequenceAdvantages, tokenAdvantages } from '../estimate.js';
import { type EstimateConfig, skipsLogpOldPass } from '../schema.js';
import type { TopkBatch } from '../topk.js';
import { readsTopkLoss } from '../losses.js';
import { type BatchShape, type Estimate, type MetricRecord, maskedMean, mean, sampleStd } from '../types.js';
import type { RunConfig } from './config.js';
import { rngStreams } from '../../core/rng-streams.js';

/** Rows `rows` of a (B, T) array. */
export function sliceRows(x: Float64Array, T: number, rows: readonly number[]): Float64Array {
  const out = new Float64Array(rows.length * T);
  rows.forEach((r, i) => out.set(x.subarray(r * T, r * T + T), i * T));
  return out;
}

/**
 * DAPO soft overlong penalty for a response of `length` tokens with maximum `maxLength`:
 * 0 up to maxLength − buffer, then −penalty·(length − (maxLength − buffer))/buffer, −penalty beyond.
 */
export function overlongPenalty(length: number, maxLength: number, buffer: number, penalty: number): number {
  const start = maxLength - buffer;
  if (length <= start) return 0;
  if (length > maxLength) return -penalty;
  return (-penalty * (length - start)) / buffer;
}

/** Step 3's value: per-sequence rewards and lengths `(B)`, and the rows that train. */
export interface StepRewards {
  /** Task reward of each sequence, plus the DAPO overlong penalty when it is on. */
  readonly rewards: Float64Array;
  /** Valid response tokens of each sequence. */
  readonly lengths: Float64Array;
  /** Rows that train: all of them, or (dynamic sampling) those of groups whose rewards differ. */
  readonly rows: readonly number[];
}

/**
 * Step 3, reward: the task's reward per response (+ DAPO overlong shaping), and with dynamic sampling
 * only the groups whose rewards are not all equal. Metrics: `reward/*`, `response_length/mean`,
 * `batch/sequences`, `batch/kept_sequences`.
 */
export function rewardPhase(
  config: RunConfig,
  task: Task,
  batch: RolloutBatch,
  problems: readonly TaskProblem[],
): Estimate<StepRewards> {
  const { B, T } = batch;
  const G = config.rollout.groupSize;
  const overlong = config.reward.overlong;
  const rewards = new Float64Array(B);
  const correct = new Float64Array(B);
  const lengths = new Float64Array(B);
  for (let i = 0; i < B; i++) {
    const response = Array.from(batch.responses.subarray(i * T, i * T + T));
    const length = batch.mask.subarray(i * T, i * T + T).reduce((a, b) => a + b, 0);
    const r = task.reward(problems[Math.floor(i / G)] as TaskProblem, response.slice(0, length));
    lengths[i] = length;
    correct[i] = r.correct ? 1 : 0;
    rewards[i] = r.reward;
    if (overlong !== null)
      rewards[i] = r.reward + overlongPenalty(length, task.responseLength, overlong.buffer, overlong.penalty);
  }
  let rows = Array.from({ length: B }, (_, i) => i);
  if (config.reward.dynamicSampling) {
    rows = rows.filter((i) => {
      const group = rewards.subarray(Math.floor(i / G) * G, Math.floor(i / G) * G + G);
      return group.some((r) => r !== group[0]);
    });
  }
  return {
    value: { rewards, lengths, rows },
    metrics: {
      'reward/mean': mean(rewards),
      'reward/std': sampleStd(rewards),
      'reward/accuracy': mean(correct),
      'response_length/mean': mean(lengths),
      'batch/sequences': B,
      'batch/kept_sequences': rows.length,
    },
  };
}

/** The rows of a batch that train, with their per-token fields `(rows, T)`. */
export interface KeptBatch {
  readonly batch: RolloutBatch;
  /** Row indices into `batch`. */
  readonly rows: readonly number[];
  /** `{ B: rows.length, T }`. */
  readonly shape: BatchShape;
  /** Response mask of the kept rows `(rows, T)`. */
  readonly mask: Float64Array;
  /** ℓroll of the kept rows `(rows, T)`. */
  readonly logpRollout: Float64Array;
}

/** The kept rows of `batch`. */
export function keepRows(batch: RolloutBatch, rows: readonly number[]): KeptBatch {
  const { T } = batch;
  return {
    batch,
    rows,
    shape: { B: rows.length, T },
    mask: sliceRows(batch.mask, T, rows),
    logpRollout: sliceRows(batch.logpRollout, T, rows),
  };
}

/**
 * Step 5's per-sequence advantages `(rows.length)` over the kept `rows` of a batch of `rewards` and
 * valid-token `lengths` `(B)`, grouped by prompt (`G` responses each). The lengths reach the
 * estimator so that REINFORCE++ whitens over every valid token as veRL does (a row of n tokens
 * counts n times); the group estimators ignore them.
 */
export function stepAdvantages(
  rewards: Float64Array,
  lengths: Float64Array,
  rows: readonly number[],
  G: number,
  spec: EstimateConfig['advantage'],
): { value: Float64Array; metrics: MetricRecord } {
  const groups = rows.map((i) => Math.floor(i / G));
  return sequenceAdvantages(
    Float64Array.from(rows, (i) => rewards[i] as number),
    groups,
    spec,
    Float64Array.from(rows, (i) => lengths[i] as number),
  );
}

/**
 * Step 5, advantages over the kept rows (groups = prompt index), after the ℓold recompute as in veRL
 * (`compute_advantage` follows `old_log_prob`): a per-sequence estimator's value broadcast to the
 * valid tokens, or a token-level one's (veRL OTB: from ℓold and the ℓold pass's Σπ²). `(rows, T)`,
 * 0 where the mask is 0. Metrics: the estimator's `advantages/*`.
 */
export function advantagePhase(
  kept: KeptBatch,
  reward: StepRewards,
  G: number,
  spec: EstimateConfig['advantage'],
  old: OldLogprobs,
): Estimate<Float64Array> {
  const { B, T } = kept.shape;
  if (tokenLevelAdvantageNames.includes(spec.name)) {
    if (old.old?.probSqSum === undefined)
      throw new Error(
        `grpo: advantage '${spec.name}' needs Σπ² from the ℓold pass, but backend.logprobs({ probSqSum: true }) returned none`,
      );
    const rewards = Float64Array.from(kept.rows, (i) => reward.rewards[i] as number);
    const groups = kept.rows.map((i) => Math.floor(i / G));
    return tokenAdvantages(rewards, groups, spec, {
      T,
      mask: kept.mask,
      logpOld: old.logpOld,
      probSqSum: old.old.probSqSum,
    });
  }
  const seq = stepAdvantages(reward.rewards, reward.lengths, kept.rows, G, spec);
  const advantages = new Float64Array(B * T); // (rows, T)
  for (let i = 0; i < B; i++) {
    for (let k = 0; k < T; k++) if (kept.mask[i * T + k] === 1) advantages[i * T + k] = seq.value[i] as number;
  }
  return { value: advantages, metrics: seq.metrics };
}

/** Step 4's ℓold. */
export interface OldLogprobs {
  /** The trainer's ℓold pass at θ_old; absent where the mode skips it (bypass, AReaL loglinear). */
  readonly old: LogprobsResult | undefined;
  /** ℓold `(rows, T)`: the pass's, or ℓroll without one (bypass: ℓold := ℓroll; loglinear replaces it per mini-batch). */
  readonly logpOld: Float64Array;
}

/**
 * MoE routing diagnostics of step 4 (none for a dense policy, whose passes report no flip rate):
 * `moe/flip_rate/l{l}` = share of router decisions at the scored positions that differ between the
 * rollout record and the trainer's own routing at θ_old; with replay on, the mismatch k3 (as
 * `rollout_corr/k3_kl`) with the trainer's own routing (`moe/k3_kl_own_routing`) and with the
 * rollout's routing replayed (`moe/k3_kl_rollout_routing`). One of them is the ℓold pass itself
 * (own for none/R2, rollout for R3); the other costs one more forward, only with replay on.
 */
async function routingDiagnostics(
  backend: PolicyBackend,
  kept: KeptBatch,
  replay: RunConfig['policy']['routingReplay'],
  old: LogprobsResult,
): Promise<MetricRecord> {
  if (old.routingFlipRate === undefined && replay === 'none') return {};
  const { batch, rows, shape, mask, logpRollout } = kept;
  const other =
    replay === 'none'
      ? undefined
      : await backend.logprobs({
          batch,
          rows,
          policy: 'current',
          ...(replay === 'R3' ? {} : { routing: 'rollout' as const }),
        });
  const own = replay === 'R3' ? (other as LogprobsResult) : old;
  const out: MetricRecord = {};
  own.routingFlipRate?.forEach((rate, l) => {
    out[`moe/flip_rate/l${l}`] = rate;
  });
  if (other !== undefined) {
    const k3 = (logpOld: Float64Array): number =>
      mismatchDiagnostics({ shape, logpOld, logpRollout, responseMask: mask, weights: mask, lossMask: mask }).metrics[
        'rollout_corr/k3_kl'
      ] as number;
    const rolloutRouted = replay === 'R3' ? old : other;
    out['moe/k3_kl_own_routing'] = k3(own.logp);
    out['moe/k3_kl_rollout_routing'] = k3(rolloutRouted.logp);
  }
  return out;
}

/**
 * Step 4, trainer recompute of ℓold at θ_old under the trainer's plan; skipped in bypass mode
 * (ℓold := ℓroll, veRL bypass_mode) and with AReaL's loglinear proximal policy (approximated per
 * mini-batch in the update). MoE routing replay: R3 replays the rollout's routing here; R2 records
 * this pass's routing for the update (docs/moe.md). A token-level advantage also asks for Σπ².
 * Metrics: the routing diagnostics.
 */
export async function recomputeOld(
  backend: PolicyBackend,
  kept: KeptBatch,
  est: EstimateConfig,
  replay: RunConfig['policy']['routingReplay'],
): Promise<Estimate<OldLogprobs>> {
  if (skipsLogpOldPass(est)) return { value: { old: undefined, logpOld: kept.logpRollout }, metrics: {} };
  const { batch, rows } = kept;
  const routing = {
    ...(replay === 'R3' ? { routing: 'rollout' as const } : {}),
    ...(replay === 'R2' ? { returnRouting: true } : {}),
  };
  // a token-level advantage (veRL OTB) reads Σπ² of this pass (veRL's actor computes sum_pi_squared with old_log_prob)
  const probSqSum = tokenLevelAdvantageNames.includes(est.advantage.name) ? { probSqSum: true } : {};
  const old = await backend.logprobs({ batch, rows, policy: 'current', ...routing, ...probSqSum });
  if (replay === 'R2' && old.routing === undefined)
    throw new Error(
      "grpo: policy.routingReplay 'R2' needs the ℓold routing, but backend.logprobs({ returnRouting: true }) returned none",
    );
  return { value: { old, logpOld: old.logp }, metrics: await routingDiagnostics(backend, kept, replay, old) };
}

/** Step 4, ℓref `(rows, T)` at θ_ref when the KL term is on (undefined otherwise). */
export async function recomputeRef(
  backend: PolicyBackend,
  kept: KeptBatch,
  est: EstimateConfig,
): Promise<Float64Array | undefined> {
  return est.kl === null
    ? undefined
    : (await backend.logprobs({ batch: kept.batch, rows: kept.rows, policy: 'reference' })).logp;
}

/** Step 6's value: the whole-batch correction and where the update takes its weights from. */
export interface BatchCorrection {
  /** Weights and masks from (ℓold, ℓroll) over the kept rows; absent where no stage can run before ℓθ (bypass, loglinear, stages reading ℓθ). */
  readonly full: Estimate<CorrectionResult> | undefined;
  /**
   * The update runs the stages per mini-batch instead: bypass and loglinear (the stages compare ℓθ
   * or ℓθ-derived ℓold with ℓroll), AIS (its α is a mini-batch statistic) and stages reading ℓθ.
   */
  readonly perMiniBatch: boolean;
}

/**
 * Step 6, correction weights and masks from (ℓold, ℓroll) over the kept rows. Metrics: the stages'
 * (only when the update uses these weights; per-mini-batch stages report from the update).
 */
export function correctionPhase(
  kept: KeptBatch,
  advantages: Float64Array,
  logpOld: Float64Array,
  est: EstimateConfig,
): Estimate<BatchCorrection> {
  const noOld = skipsLogpOldPass(est);
  const needsTheta = correctionNeedsTheta(est.correction);
  // the exact on-policy ratio moves ℓroll of the on-policy mini-batch to sg ℓθ: its stages then run there
  const perMiniBatch =
    noOld || needsTheta || est.correction.some((c) => c.name === 'ais') || est.exactOnPolicyRatio === true;
  const full =
    noOld || needsTheta
      ? undefined
      : applyCorrection(
          { shape: kept.shape, logpOld, logpRollout: kept.logpRollout, responseMask: kept.mask, advantages },
          est.correction,
        );
  return { value: { full, perMiniBatch }, metrics: full !== undefined && !perMiniBatch ? full.metrics : {} };
}

/**
 * Step 6, the trainer–rollout mismatch at θ_old (only with an ℓold pass): `rollout_corr/*`
 * diagnostics under the whole-batch weights, the stacks' own metrics when asked, and the split by
 * position and length.
 */
export function mismatchAtOld(
  kept: KeptBatch,
  advantages: Float64Array,
  old: LogprobsResult,
  correction: BatchCorrection,
  est: EstimateConfig,
): Estimate<null> {
  const { shape, mask: responseMask, logpRollout } = kept;
  const logpOld = old.logp;
  const weights = correction.full?.value.weights ?? Float64Array.from(responseMask);
  const lossMask = correction.full?.value.lossMask ?? responseMask;
  const metrics: MetricRecord = {
    ...mismatchDiagnostics({ shape, logpOld, logpRollout, responseMask, weights, lossMask, entropy: old.entropy })
      .metrics,
  };
  if (est.diagnostics.stacks !== undefined) {
    Object.assign(
      metrics,
      stackMetrics(
        {
          shape,
          logpTrain: logpOld,
          logpRollout,
          responseMask,
          lossMask,
          weights,
          advantages,
          aggregation: est.aggregation.name,
        },
        est.diagnostics.stacks,
      ),
    );
  }
  const responses = sliceRows(Float64Array.from(kept.batch.responses), shape.T, kept.rows);
  Object.assign(metrics, lengthMetrics({ shape, logpOld, logpRollout, mask: responseMask, responses }));
  return { value: null, metrics };
}

/** Accumulates metrics over mini-batches and reports their means. */
class MetricMeans {
  private readonly sums = new Map<string, number>();
  private readonly counts = new Map<string, number>();
  add(metrics: MetricRecord): void {
    for (const [k, v] of Object.entries(metrics)) {
      if (typeof v !== 'number' || !Number.isFinite(v)) continue;
      this.sums.set(k, (this.sums.get(k) ?? 0) + v);
      this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
    }
  }
  means(): MetricRecord {
    const out: MetricRecord = {};
    for (const [k, s] of this.sums) out[k] = s / (this.counts.get(k) as number);
    return out;
  }
}

/** Rows `picks` of every layer's routing of `nRows` rows (each array (nRows, S, k)). */
function routingRows(routing: readonly Int32Array[], nRows: number, picks: readonly number[]): Int32Array[] {
  return routing.map((layer) => {
    const size = layer.length / nRows;
    const out = new Int32Array(picks.length * size); // (picks, S, k)
    picks.forEach((p, i) => out.set(layer.subarray(p * size, (p + 1) * size), i * size));
    return out;
  });
}

/** What the update reads besides the config: the outputs of steps 3–6. */
export interface UpdateInputs {
  readonly kept: KeptBatch;
  /** Per-sequence rewards `(B)` (read by losses that use them). */
  readonly rewards: Float64Array;
  /** Token advantages `(rows, T)`. */
  readonly advantages: Float64Array;
  readonly old: OldLogprobs;
  /** ℓref `(rows, T)` when the KL term is on. */
  readonly logpRef: Float64Array | undefined;
  readonly correction: BatchCorrection;
  /** Weight versions between the batch and the synced weights (AReaL loglinear's α). */
  readonly versionLag: number;
  /** Vocabulary size (the tail of the top-k estimators' distributions). */
  readonly vocabSize?: number | undefined;
}

/** One mini-batch's weights, loss mask and denominator mask `(mb, T)`. */
interface MiniBatchWeights {
  readonly weights: Float64Array;
  readonly lossMask: Float64Array;
  readonly denominatorMask: Float64Array;
}

/**
 * The correction of one mini-batch: the whole-batch weights' rows, or the stages run on this
 * mini-batch (with its ℓθ). In bypass mode the stages see (ℓθ detached, ℓroll) and only
 * `reinforce` applies their weights (veRL compute_policy_loss_bypass_mode, as `estimate`); there and
 * with loglinear the mismatch diagnostics are measured per mini-batch too. Metrics: one record per
 * source, in order (they are averaged apart).
 */
function miniBatchCorrection(
  input: UpdateInputs,
  mb: {
    readonly shape: BatchShape;
    readonly local: readonly number[];
    readonly responseMask: Float64Array;
    readonly advantages: Float64Array;
    readonly logpOld: Float64Array;
    readonly logpRollout: Float64Array;
  },
  theta: LogprobsResult,
  est: EstimateConfig,
): { value: MiniBatchWeights; metrics: MetricRecord[] } {
  const { full, perMiniBatch } = input.correction;
  const T = input.kept.shape.T;
  if (!perMiniBatch && full !== undefined) {
    const pick = (x: Float64Array): Float64Array => sliceRows(x, T, mb.local);
    return {
      value: {
        weights: pick(full.value.weights),
        lossMask: pick(full.value.lossMask),
        denominatorMask: pick(full.value.denominatorMask),
      },
      metrics: [],
    };
  }
  const bypass = est.mode === 'bypass';
  const stageOld = bypass ? theta.logp : mb.logpOld;
  const corr = applyCorrection(
    {
      shape: mb.shape,
      logpOld: stageOld,
      logpRollout: mb.logpRollout,
      responseMask: mb.responseMask,
      advantages: mb.advantages,
      logpTheta: theta.logp,
    },
    est.correction,
  );
  const weights = bypass && est.loss.name !== 'reinforce' ? Float64Array.from(corr.value.lossMask) : corr.value.weights;
  const value = { weights, lossMask: corr.value.lossMask, denominatorMask: corr.value.denominatorMask };
  const metrics = [corr.metrics];
  if (skipsLogpOldPass(est)) {
    const diag = {
      shape: mb.shape,
      logpRollout: mb.logpRollout,
      responseMask: mb.responseMask,
      weights,
      lossMask: value.lossMask,
    };
    metrics.push(mismatchDiagnostics({ ...diag, logpOld: stageOld, entropy: theta.entropy }).metrics);
    if (est.diagnostics.stacks !== undefined)
      metrics.push(
        stackMetrics(
          { ...diag, logpTrain: stageOld, advantages: mb.advantages, aggregation: est.aggregation.name },
          est.diagnostics.stacks,
        ),
      );
  }
  return { value, metrics };
}

/**
 * Step 7, update: E epochs × M mini-batches (shuffled from the step's `minibatches` stream), θ_old
 * fixed during the step; per mini-batch ℓθ and its backward under the trainer plan (R3: the
 * rollout's routing; R2: the ℓold pass's), the mini-batch's correction, the policy loss and its
 * gradient ∂L/∂ℓθ, backward, clip and AdamW step. Metrics: their means over the mini-batches.
 */
export async function updatePhase(
  backend: PolicyBackend,
  input: UpdateInputs,
  config: RunConfig,
  rng: Rng,
): Promise<Estimate<null>> {
  const est = config.estimators;
  const { kept, old } = input;
  const { batch, rows, shape } = kept;
  const T = shape.T;
  const replay = config.policy.routingReplay;
  const means = new MetricMeans();
  const M = Math.min(config.optim.miniBatches, rows.length);
  const order = rows.map((_, i) => i);
  const shuffleRng = rng.fork(rngStreams.run.minibatches);
  const needsTopk = readsTopkLoss(est.loss.name) || est.scoreCentering != null || est.topkKl != null;
  let stepsDone = 0; // optimizer steps of this update: the trainer is versionLag + stepsDone versions past the batch
  for (let epoch = 0; epoch < config.optim.epochs; epoch++) {
    shuffleRng.shuffle(order);
    for (let m = 0; m < M; m++) {
      const local = order.filter((_, j) => j % M === m).sort((a, b) => a - b);
      const pick = (x: Float64Array): Float64Array => sliceRows(x, T, local);
      const mbRollGiven = pick(kept.logpRollout);
      const thetaRouting =
        replay === 'R3'
          ? ('rollout' as const)
          : replay === 'R2' && old.old?.routing !== undefined
            ? routingRows(old.old.routing, rows.length, local)
            : undefined;
      const theta = await backend.logprobs({
        batch,
        rows: local.map((j) => rows[j] as number),
        policy: 'current',
        grad: true,
        ...(thetaRouting === undefined ? {} : { routing: thetaRouting }),
        ...(needsTopk ? { topk: true } : {}),
      });
      // AReaL loglinear: ℓold approximated from this mini-batch's ℓθ and ℓroll
      const givenOld =
        est.proxLogp != null ? loglinearProximal(theta.logp, mbRollGiven, input.versionLag) : pick(old.logpOld);
      // prime-rl exact_on_policy_ratio: sampled by the weights being trained ⇒ ℓold = ℓroll = sg ℓθ
      const onPolicy = est.exactOnPolicyRatio === true && input.versionLag + stepsDone === 0;
      const mbOld = onPolicy ? theta.logp : givenOld;
      const mbRoll = onPolicy ? theta.logp : mbRollGiven;
      const topk = needsTopk ? miniBatchTopk(batch, theta, rows, local, T, input.vocabSize) : undefined;
      const mb = {
        shape: { B: local.length, T },
        local,
        responseMask: pick(kept.mask),
        advantages: pick(input.advantages),
        logpOld: mbOld,
        logpRollout: mbRoll,
      };
      const corr = miniBatchCorrection(input, mb, theta, est);
      corr.metrics.forEach((record) => means.add(record));
      const objective = policyObjective(
        {
          shape: mb.shape,
          logpTheta: theta.logp,
          logpOld: mbOld,
          logpRollout: mbRoll,
          logpRef: input.logpRef === undefined ? undefined : pick(input.logpRef),
          advantages: mb.advantages,
          weights: corr.value.weights,
          lossMask: corr.value.lossMask,
          denominatorMask: corr.value.denominatorMask,
          responseMask: mb.responseMask,
          rewards: Float64Array.from(local, (j) => input.rewards[rows[j] as number] as number),
          ...(topk !== undefined ? { topk } : {}),
        },
        est,
      );
      if (theta.handle === undefined) throw new Error('grpo: backend.logprobs({ grad: true }) returned no handle');
      if (topk !== undefined)
        await backend.backward(theta.handle, objective.value.gradLogpTheta, objective.value.gradTopkLogpTheta);
      else await backend.backward(theta.handle, objective.value.gradLogpTheta);
      const { gradNorm } = await backend.step({ maxGradNorm: config.optim.maxGradNorm });
      stepsDone++;
      means.add({
        ...objective.metrics,
        'actor/grad_norm': gradNorm,
        'actor/entropy_theta': maskedMean(theta.entropy, mb.responseMask),
      });
    }
  }
  return { value: null, metrics: means.means() };
}

/**
 * The top-k of one mini-batch for the estimators that read it: the batch's ids and ℓμ and the
 * sampled tokens at the mini-batch's rows, and the ℓθ pass's `topkLogp`.
 */
function miniBatchTopk(
  batch: RolloutBatch,
  theta: LogprobsResult,
  rows: readonly number[],
  local: readonly number[],
  T: number,
  vocabSize: number | undefined,
): TopkBatch {
  const src = batch.topk;
  if (src === undefined || theta.topkLogp === undefined || vocabSize === undefined)
    throw new Error('grpo: the estimators read the top-k, but the batch or the ℓθ pass carries none');
  const K = src.K;
  const ids = new Int32Array(local.length * T * K);
  const logpRollout = new Float64Array(local.length * T * K);
  const tokens = new Int32Array(local.length * T);
  local.forEach((j, i) => {
    const r = rows[j] as number;
    ids.set(src.ids.subarray(r * T * K, (r + 1) * T * K), i * T * K);
    logpRollout.set(src.logp.subarray(r * T * K, (r + 1) * T * K), i * T * K);
    tokens.set(batch.responses.subarray(r * T, (r + 1) * T), i * T);
  });
  return { K, vocabSize, ids, logpRollout, logpTheta: theta.topkLogp, tokens };
}
