// `replay`: one captured training step of a stack (a qrl-step/1 bundle) recomputed by the oracle stage
// by stage — advantages, correction, per-token loss, aggregation, loss, gradient, metrics — each stage
// from the stack's own inputs to that stage, so the first stage that differs is where the stack and
// the estimator part ways. The stacks' option tables (TRL 1.13) are in stack-options.ts; docs/replay.md explains them.

import { UsageError } from '../core/errors.js';
import { aggregate, aggregations, type AggregationFn, type AggregationParams } from '../rl/aggregation.js';
import { estimate, sequenceAdvantages } from '../rl/estimate.js';
import type { EstimateConfig } from '../rl/schema.js';
import { bundleConfig } from './stack-options.js';
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
