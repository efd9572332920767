// One GRPO step, top to bottom as spec/grpo.md lists it (sync, rollout, reward, advantages, trainer
// recompute, correction, update, log) against the asynchronous PolicyBackend. Not the run driver
// (files, eval, checkpoints: src/runs/run.ts).

import type { PolicyBackend, RolloutBatch } from '../../backend/contract.js';
import type { Task, TaskProblem } from '../../tasks/index.js';
import type { Rng } from '../../rng.js';
import { applyCorrection } from '../correction.js';
import { mismatchDiagnostics } from '../diagnostics.js';
import { policyObjective, sequenceAdvantages } from '../estimate.js';
import type { EstimateConfig } from '../schema.js';
import type { BatchShape, MetricRecord } from '../types.js';
import type { RunConfig } from './config.js';

/** Everything one step needs besides the config. */
export interface StepContext {
  readonly config: RunConfig;
  readonly task: Task;
  /** The policy: generation, log-probs, gradients and optimizer steps (its reference is the warm start). */
  readonly backend: PolicyBackend;
}

/** Wall-clock seconds per phase of one step (kept out of the deterministic metrics); `old` is 0 in bypass mode (no recompute). */
export type PhaseTimings = Record<'sync' | 'rollout' | 'reward' | 'old' | 'ref' | 'correction' | 'update' | 'total', number>;

/** What one step produced. */
export interface GrpoStepResult {
  /** Deterministic metrics (one line of metrics.jsonl). */
  readonly metrics: MetricRecord;
  readonly timings: PhaseTimings;
}

const now = (): number => Number(process.hrtime.bigint()) / 1e9;

function mean(xs: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += xs[i] as number;
  return xs.length === 0 ? 0 : s / xs.length;
}

function std(xs: ArrayLike<number>): number {
  if (xs.length < 2) return 0;
  const m = mean(xs);
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += ((xs[i] as number) - m) ** 2;
  return Math.sqrt(s / (xs.length - 1));
}

/** Rows `rows` of a (B, T) array. */
export function sliceRows(x: Float64Array, T: number, rows: readonly number[]): Float64Array {
  const out = new Float64Array(rows.length * T);
  rows.forEach((r, i) => out.set(x.subarray(r * T, r * T + T), i * T));
  return out;
}

/** Masked mean of a per-token quantity. */
function maskedMean(x: Float64Array, mask: Float64Array): number {
  let s = 0;
  let n = 0;
  for (let k = 0; k < x.length; k++) {
    if (mask[k] === 1) {
      s += x[k] as number;
      n++;
    }
  }
  return n === 0 ? 0 : s / n;
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

/**
 * Step 4's per-sequence advantages `(rows.length)` over the kept `rows` of a batch of `rewards` and
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

/**
 * Runs GRPO step `step` (1-based) and returns its metrics. `rng` is the step's own stream
 * (`root.fork('step').fork(step)`), so a resumed run draws exactly what an uninterrupted one does;
 * the backend generates from the path of its `rollout` fork.
 */
export async function grpoStep(ctx: StepContext, step: number, rng: Rng): Promise<GrpoStepResult> {
  const { config, task, backend } = ctx;
  const est = config.estimators;
  const t: Partial<PhaseTimings> = {};
  const t0 = now();

  // 1. Weight sync: re-quantize the master weights into the rollout engine (and KV scales).
  await backend.sync();
  t.sync = now() - t0;

  // 2. Rollout: P prompts from the task's training split, G responses each.
  let mark = now();
  const problems: TaskProblem[] = [];
  const promptRng = rng.fork('prompts');
  for (let p = 0; p < config.rollout.prompts; p++) problems.push(task.sampleProblem(promptRng, 'train'));
  const prompts = problems.flatMap((pr) => Array.from({ length: config.rollout.groupSize }, () => pr.prompt));
  const batch = await backend.generate({ prompts, seed: rng.fork('rollout').path });
  t.rollout = now() - mark;

  // 3. Reward (+ optional DAPO overlong shaping and dynamic sampling).
  mark = now();
  const { B, T } = batch;
  const G = config.rollout.groupSize;
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
    if (config.reward.overlong !== null) {
      rewards[i] = (rewards[i] as number) + overlongPenalty(length, task.responseLength, config.reward.overlong.buffer, config.reward.overlong.penalty);
    }
  }
  let rows = Array.from({ length: B }, (_, i) => i);
  if (config.reward.dynamicSampling) {
    rows = rows.filter((i) => {
      const g = Math.floor(i / G);
      const group = rewards.subarray(g * G, g * G + G);
      return group.some((r) => r !== group[0]);
    });
  }
  t.reward = now() - mark;
  const metrics: MetricRecord = {
    step,
    'reward/mean': mean(rewards),
    'reward/std': std(rewards),
    'reward/accuracy': mean(correct),
    'response_length/mean': mean(lengths),
    'batch/sequences': B,
    'batch/kept_sequences': rows.length,
  };
  if (rows.length === 0) {
    // Every group was uniform: nothing to learn from this step (DAPO would resample).
    t.old = t.ref = t.correction = t.update = 0;
    t.total = now() - t0;
    return { metrics, timings: t as PhaseTimings };
  }

  // 4. Advantages over the kept sequences (groups = prompt index).
  const keptShape: BatchShape = { B: rows.length, T };
  const seqAdv = stepAdvantages(rewards, lengths, rows, G, est.advantage);
  Object.assign(metrics, seqAdv.metrics);
  const mask = sliceRows(batch.mask, T, rows);
  const advantages = new Float64Array(rows.length * T);
  for (let i = 0; i < rows.length; i++) {
    for (let k = 0; k < T; k++) if (mask[i * T + k] === 1) advantages[i * T + k] = seqAdv.value[i] as number;
  }
  const logpRollout = sliceRows(batch.logpRollout, T, rows);

  // 5. Trainer recompute: ℓold at θ_old under the trainer's plan (skipped in bypass mode, where
  //    ℓold := ℓroll, verl bypass_mode); ℓref when the KL term is on.
  const bypass = est.mode === 'bypass';
  mark = now();
  const old = bypass ? undefined : await backend.logprobs({ batch, rows, policy: 'current' });
  const logpOld = old === undefined ? logpRollout : old.logp;
  t.old = bypass ? 0 : now() - mark;
  mark = now();
  const logpRef = est.kl !== null ? (await backend.logprobs({ batch, rows, policy: 'reference' })).logp : undefined;
  t.ref = now() - mark;

  // 6. Correction weights and masks from (ℓold, ℓroll) over the whole batch. AIS, and every stage in
  //    bypass mode (which compares the detached ℓθ with ℓroll), run per mini-batch below.
  mark = now();
  const perMiniBatchCorrection = bypass || est.correction.some((c) => c.name === 'ais');
  const full = bypass ? undefined : applyCorrection({ shape: keptShape, logpOld, logpRollout, mask, advantages }, est.correction);
  if (old !== undefined) {
    const diag = mismatchDiagnostics({
      shape: keptShape,
      logpOld,
      logpRollout,
      mask,
      weights: full?.value.weights ?? Float64Array.from(mask),
      effectiveMask: full?.value.mask ?? mask,
      entropy: old.entropy,
    });
    Object.assign(metrics, diag.metrics);
  }
  if (full !== undefined && !perMiniBatchCorrection) Object.assign(metrics, full.metrics);
  t.correction = now() - mark;

  // 7. Update: E epochs × M mini-batches; θ_old stays fixed during the step.
  mark = now();
  const means = new MetricMeans();
  const M = Math.min(config.optim.miniBatches, rows.length);
  const order = rows.map((_, i) => i);
  const shuffleRng = rng.fork('minibatches');
  for (let epoch = 0; epoch < config.optim.epochs; epoch++) {
    shuffleRng.shuffle(order);
    for (let mb = 0; mb < M; mb++) {
      const local = order.filter((_, j) => j % M === mb).sort((a, b) => a - b);
      const mbShape: BatchShape = { B: local.length, T };
      const pick = (x: Float64Array): Float64Array => sliceRows(x, T, local);
      const mbMask = pick(mask);
      const mbAdv = pick(advantages);
      const mbOld = pick(logpOld);
      const mbRoll = pick(logpRollout);
      const theta = await backend.logprobs({ batch, rows: local.map((j) => rows[j] as number), policy: 'current', grad: true });
      let weights: Float64Array;
      let effMask: Float64Array;
      let denMask: Float64Array;
      if (perMiniBatchCorrection || full === undefined) {
        // bypass: the stages see (ℓθ detached, ℓroll) and only `reinforce` applies their weights
        // (verl compute_policy_loss_bypass_mode, as `estimate`); the mismatch diagnostics likewise
        const stageOld = bypass ? theta.logp : mbOld;
        const corr = applyCorrection({ shape: mbShape, logpOld: stageOld, logpRollout: mbRoll, mask: mbMask, advantages: mbAdv }, est.correction);
        means.add(corr.metrics);
        weights = bypass && est.loss.name !== 'reinforce' ? Float64Array.from(corr.value.mask) : corr.value.weights;
        effMask = corr.value.mask;
        denMask = corr.value.denominatorMask;
        if (bypass) {
          const diag = mismatchDiagnostics({ shape: mbShape, logpOld: stageOld, logpRollout: mbRoll, mask: mbMask, weights, effectiveMask: effMask, entropy: theta.entropy });
          means.add(diag.metrics);
        }
      } else {
        weights = pick(full.value.weights);
        effMask = pick(full.value.mask);
        denMask = pick(full.value.denominatorMask);
      }
      const objective = policyObjective(
        {
          shape: mbShape,
          logpTheta: theta.logp,
          logpOld: mbOld,
          logpRollout: mbRoll,
          logpRef: logpRef === undefined ? undefined : pick(logpRef),
          advantages: mbAdv,
          weights,
          mask: effMask,
          denominatorMask: denMask,
          responseMask: mbMask,
        },
        est,
      );
      if (theta.handle === undefined) throw new Error('grpo: backend.logprobs({ grad: true }) returned no handle');
      await backend.backward(theta.handle, objective.value.gradLogpTheta);
      const { gradNorm } = await backend.step({ maxGradNorm: config.optim.maxGradNorm });
      means.add({ ...objective.metrics, 'actor/grad_norm': gradNorm, 'actor/entropy_theta': maskedMean(theta.entropy, mbMask) });
    }
  }
  Object.assign(metrics, means.means());
  t.update = now() - mark;
  t.total = now() - t0;
  return { metrics, timings: t as PhaseTimings };
}

/** Held-out evaluation under one plan side: greedy and sampled pass@1 and mean reward. */
export async function evaluate(backend: PolicyBackend, task: Task, problems: readonly TaskProblem[], side: 'rollout' | 'trainer', rng: Rng): Promise<MetricRecord> {
  const prompts = problems.map((p) => p.prompt);
  const out: MetricRecord = {};
  for (const greedy of [true, false]) {
    const batch: RolloutBatch = await backend.generate({ prompts, seed: rng.fork(greedy ? 'greedy' : 'sampled').path, greedy, side });
    let acc = 0;
    let reward = 0;
    for (let i = 0; i < batch.B; i++) {
      const length = batch.mask.subarray(i * batch.T, (i + 1) * batch.T).reduce((a, b) => a + b, 0);
      const r = task.reward(problems[i] as TaskProblem, Array.from(batch.responses.subarray(i * batch.T, i * batch.T + length)));
      acc += r.correct ? 1 : 0;
      reward += r.reward;
    }
    const tag = greedy ? 'greedy' : 'sampled';
    out[`eval/${side}/${tag}_accuracy`] = acc / batch.B;
    out[`eval/${side}/${tag}_reward`] = reward / batch.B;
  }
  return out;
}
