// Validation of `estimate` input: the zod config schema (names, hyper-parameters, defaults; the correction chain's in
// correction-schema.ts) and the batch arrays.
// Not the estimators: this file only turns untrusted JSON into typed, flat, checked data or a UsageError.

import { z } from 'zod';
import { UsageError, valueAt } from '../core/errors.js';
import { advantages } from './advantages.js';
import { aggregations } from './aggregation.js';
import type { AggregationName } from './aggregation.js';
import type { CorrectionSpec } from './correction.js';
import { corrections } from './correction.js';
import { kl } from './kl.js';
import { losses } from './losses.js';
import type { BatchShape } from './types.js';
import { stackMetricSets } from './stack-metrics.js';
import { parseTopkInput, type TopkBatch } from './topk.js';
import {
  dppoTopkKlLossSchema,
  dppoTopkTvLossSchema,
  scoreCenteringSpecSchema,
  topkKlSpecSchema,
  trplLossSchema,
  type ScoreCenteringSpec,
  type ScoreCenteringWeight,
  type TopkKlSpec,
} from './topk-schema.js';
import type { StackName } from './stack-metrics.js';
import { atLeastOne, correctionSpecSchema, nonNegative, positive } from './correction-schema.js';

export { correctionSpecSchema } from './correction-schema.js';

/** zod schema of the advantage estimator. */
const singleton = z.enum(['zero', 'verl']);

export const advantageSpecSchema = z.discriminatedUnion('name', [
  z.strictObject({ name: z.literal('grpo'), eps: nonNegative().default(1e-6), singleton: singleton.default('zero') }),
  z.strictObject({ name: z.literal('drgrpo'), singleton: singleton.default('zero') }),
  z.strictObject({ name: z.literal('batch-std'), eps: nonNegative().default(1e-6) }),
  z.strictObject({ name: z.literal('rloo'), singleton: singleton.default('zero') }),
  z.strictObject({ name: z.literal('reinforce++') }),
  z.strictObject({ name: z.literal('reinforce++-baseline'), singleton: singleton.default('zero') }),
  z.strictObject({ name: z.literal('passk'), normalize: z.boolean().default(true), eps: nonNegative().default(1e-6) }),
  z.strictObject({
    name: z.literal('optimal_token_baseline'),
    epsilon: nonNegative().default(1e-8),
    handleZeroTail: z.boolean().default(true),
  }),
]);

/** zod schema of the policy loss. */
export const lossSpecSchema = z.discriminatedUnion('name', [
  z.strictObject({
    name: z.literal('ppo-clip'),
    epsLow: nonNegative().default(0.2),
    epsHigh: nonNegative().default(0.2),
    dualClip: z
      .number()
      .gt(1, { error: (iss) => `must be > 1 or null, got ${String(iss.input)}` })
      .nullable()
      .default(null),
    maxImportanceRatio: positive().optional(),
  }),
  z.strictObject({
    name: z.literal('gspo'),
    epsLow: nonNegative().default(3e-4),
    epsHigh: nonNegative().default(4e-4),
  }),
  z.strictObject({ name: z.literal('sapo'), tauPos: positive().default(1), tauNeg: positive().default(1.05) }),
  z.strictObject({
    name: z.literal('cispo'),
    epsLow: nonNegative().default(0.2),
    epsHigh: nonNegative().default(0.2),
    anchor: z.enum(['old', 'rollout']).optional(),
  }),
  z.strictObject({ name: z.literal('reinforce') }),
  z.strictObject({
    name: z.literal('tbpo'),
    epsPosLow: nonNegative().default(3e-4),
    epsPosHigh: nonNegative().default(4e-4),
    epsNegLow: nonNegative().default(3e-4),
    epsNegHigh: nonNegative().default(7e-4),
    C: atLeastOne().default(2),
    mode: z.enum(['drop', 'clamp']).default('drop'),
  }),
  z.strictObject({
    name: z.literal('dppo-tv'),
    epsLow: nonNegative().default(0.2),
    epsHigh: nonNegative().default(0.2),
    c: positive().default(20),
  }),
  z.strictObject({
    name: z.literal('dppo-kl'),
    epsLow: nonNegative().default(0.2),
    epsHigh: nonNegative().default(0.2),
    c: positive().default(20),
  }),
  z.strictObject({ name: z.literal('ipo'), threshold: nonNegative().default(0.1), c: positive().default(20) }),
  z.strictObject({
    name: z.literal('luspo'),
    epsLow: nonNegative().default(3e-4),
    epsHigh: nonNegative().default(4e-4),
  }),
  z.strictObject({
    name: z.literal('vespo'),
    kPos: nonNegative().default(2),
    lambdaPos: nonNegative().default(3),
    kNeg: nonNegative().default(3),
    lambdaNeg: nonNegative().default(2),
  }),
  z.strictObject({
    name: z.literal('geo_mean'),
    epsLow: nonNegative().default(0.2),
    epsHigh: nonNegative().default(0.2),
  }),
  z.strictObject({
    name: z.literal('topr'),
    positiveWeight: nonNegative().default(1),
    negativeWeight: nonNegative().default(1),
  }),
  trplLossSchema,
  dppoTopkTvLossSchema,
  dppoTopkKlLossSchema,
]);

const aggregationNames = [
  'token-mean',
  'seq-mean-token-sum',
  'seq-mean-token-mean',
  'seq-mean-token-sum-norm',
  'slime-per-token',
] as const;

/** zod schema of the aggregation: a mode name, or `{ name, normalizer? }`. */
export const aggregationSpecSchema = z.union([
  z.enum(aggregationNames).transform((name) => ({ name })),
  z.strictObject({ name: z.enum(aggregationNames), normalizer: positive().optional() }),
]);

/** zod schema of the KL-to-reference term. */
export const klSpecSchema = z.strictObject({
  name: z.enum(['k1', 'k2', 'k3', 'k1+', 'k3+']),
  coef: nonNegative().default(0.001),
  mask: z.enum(['denominator', 'response', 'numerator']).default('denominator'),
  biasCorrection: z.enum(['none', 'old', 'rollout']).default('none'),
});

/** zod schema of prime-rl's squared trainer–inference log-ratio penalty. */
export const mismatchPenaltySpecSchema = z.strictObject({
  tau: nonNegative().default(1e-3),
});

/** zod schema of AReaL's proximal-policy approximation (`actor.prox_logp_method`). */
export const proxLogpSpecSchema = z.strictObject({
  method: z.literal('loglinear'),
  versionLag: z
    .number()
    .int({ error: (iss) => `must be an integer >= 0, got ${String(iss.input)}` })
    .gte(0, { error: (iss) => `must be an integer >= 0, got ${String(iss.input)}` })
    .default(1),
});

/** zod schema of the diagnostics options. */
export const diagnosticsSpecSchema = z.strictObject({
  emptyRows: z.enum(['skip', 'verl']).default('skip'),
  /** Stacks whose own mismatch metrics are also logged, under their names (src/rl/stack-metrics.ts). */
  stacks: z.array(z.enum(Object.keys(stackMetricSets) as [StackName, ...StackName[]])).optional(),
});

/** zod schema of the whole `config` object of `estimate`. */
export const estimateConfigSchema = z.strictObject({
  advantage: advantageSpecSchema.prefault({ name: 'grpo' }),
  correction: z
    .union([correctionSpecSchema.transform((s) => [s]), z.array(correctionSpecSchema).min(1)])
    .default([{ name: 'none' }]),
  loss: lossSpecSchema.prefault({ name: 'ppo-clip' }),
  aggregation: aggregationSpecSchema.optional(),
  kl: klSpecSchema.nullable().optional(),
  diagnostics: diagnosticsSpecSchema.prefault({}),
  mode: z.enum(['decoupled', 'bypass']).default('decoupled'),
  mismatchPenalty: mismatchPenaltySpecSchema.nullable().default(null),
  proxLogp: proxLogpSpecSchema.nullable().optional(),
  scoreCentering: scoreCenteringSpecSchema.nullable().default(null),
  topkKl: topkKlSpecSchema.nullable().default(null),
  exactOnPolicyRatio: z.boolean().default(false),
});

/** Resolved advantage spec. */
export type AdvantageSpec = z.output<typeof advantageSpecSchema>;
/** Resolved loss spec. */
export type LossSpec = z.output<typeof lossSpecSchema>;
/** Resolved aggregation spec. */
export type AggregationSpec = { readonly name: AggregationName; readonly normalizer?: number | undefined };
/** Resolved KL spec. */
export type KlSpec = z.output<typeof klSpecSchema>;

/** The resolved `estimate` config: every field present, defaults filled in. */
export interface EstimateConfig {
  /** Advantage estimator (ignored when the batch carries advantages). */
  readonly advantage: AdvantageSpec;
  /** Correction stages, applied in order. */
  readonly correction: readonly CorrectionSpec[];
  /** Policy loss. */
  readonly loss: LossSpec;
  /** Aggregation mode. */
  readonly aggregation: AggregationSpec;
  /** KL-to-reference term, or null for none. */
  readonly kl: KlSpec | null;
  /** Diagnostics options. */
  readonly diagnostics: DiagnosticsSpec;
  /**
   * `decoupled`: three policies (ℓroll, ℓold, ℓθ). `bypass`: two, ℓold := ℓroll (verl `bypass_mode`, slime
   * `--use-rollout-logprobs`); the correction stages then see (ℓθ detached, ℓroll), and their weights are
   * applied by `reinforce` only (verl core_algos.py l.2515–2540).
   */
  readonly mode: 'decoupled' | 'bypass';
  /** τ·(ℓθ − ℓroll)² per token (prime-rl `kl_tau`), or null. */
  readonly mismatchPenalty: MismatchPenaltySpec | null;
  /**
   * AReaL's log-linear proximal policy (`prox_logp_method: loglinear`): ℓold is not given but approximated
   * by ℓroll + α·(sg[ℓθ] − ℓroll), α = (lag − 1)/lag (0 for lag 0). Absent: ℓold as given.
   */
  readonly proxLogp?: ProxLogpSpec | undefined;
  /** Score centering over the batch's `topk` (src/rl/losses/score-centering.ts), or null. @defaultValue null */
  readonly scoreCentering?: ScoreCenteringSpec | null | undefined;
  /** EMA-PG top-k KL between πθ and the engine μ over the batch's `topk` (src/rl/losses/topk-kl.ts), or null. @defaultValue null */
  readonly topkKl?: TopkKlSpec | null | undefined;
  /** prime-rl `exact_on_policy_ratio`: rows with `onPolicy` 1 take ℓold = ℓroll = sg ℓθ. @defaultValue false */
  readonly exactOnPolicyRatio?: boolean | undefined;
}

/**
 * True when the estimator config has no ℓold pass at θ_old: bypass mode (ℓold := ℓroll) or AReaL's
 * log-linear proximal policy (ℓold approximated per mini-batch from ℓθ and ℓroll). The GRPO step then
 * skips the trainer recompute, runs the correction per mini-batch and measures the mismatch there.
 * @example skipsLogpOldPass(resolveConfig({ mode: 'bypass' })) // true
 */
export function skipsLogpOldPass(config: Pick<EstimateConfig, 'mode' | 'proxLogp'>): boolean {
  return config.mode === 'bypass' || config.proxLogp != null;
}

/** Resolved proximal-policy spec. */
export type ProxLogpSpec = z.output<typeof proxLogpSpecSchema>;

/** Resolved mismatch-penalty spec. */
export type MismatchPenaltySpec = z.output<typeof mismatchPenaltySpecSchema>;

/** Resolved diagnostics spec. */
export type DiagnosticsSpec = z.output<typeof diagnosticsSpecSchema>;

const familyTables: Record<string, readonly string[]> = {
  advantage: Object.keys(advantages),
  correction: Object.keys(corrections),
  loss: Object.keys(losses),
  aggregation: Object.keys(aggregations),
  kl: Object.keys(kl),
};

function formatPath(prefix: string, path: readonly PropertyKey[]): string {
  let s = prefix;
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : `.${String(p)}`;
  return s;
}

type Issue = z.core.$ZodIssue;

/** Formats one zod issue (descending into the most specific branch of a union) as `path: message`. */
function describeIssue(prefix: string, issue: Issue, base: readonly PropertyKey[], root: unknown): string {
  const path = [...base, ...issue.path];
  const where = formatPath(prefix, path);
  const value = valueAt(root, path);
  if (issue.code === 'invalid_union') {
    if ('discriminator' in issue && issue.discriminator !== undefined) {
      const family = String(path.find((p) => typeof p === 'string' && p in familyTables) ?? '');
      const known = (familyTables[family] ?? []).join(', ');
      if (value === undefined) return `${where}: missing (known: ${known})`;
      return `${where}: unknown estimator ${JSON.stringify(value)} (known: ${known})`;
    }
    const branches = issue.errors.filter((b) => b.length > 0);
    const depth = (b: Issue[]): number =>
      Math.max(...b.map((i) => i.path.length + (i.code === 'invalid_union' ? 1 : 0)));
    const best = [...branches].sort((a, b) => depth(b) - depth(a))[0];
    if (best !== undefined) return describeIssue(prefix, best[0]!, path, root);
  }
  if (issue.code === 'unrecognized_keys') {
    return `${formatPath(prefix, [...path, issue.keys[0]!])}: unknown field`;
  }
  if (issue.code === 'invalid_value') {
    return `${where}: unknown value ${JSON.stringify(value)} (known: ${issue.values.map(String).join(', ')})`;
  }
  return `${where}: ${issue.message}`;
}

/**
 * Validates and resolves an `estimate` config (unknown keys, unknown estimator names, bad
 * hyper-parameters ⇒ `UsageError` naming the field, e.g. `config.correction.C: must be > 0, got -1`).
 * @example resolveConfig({ correction: { name: 'tis' }, loss: { name: 'ppo-clip' } }).correction // [{ name: 'tis', C: 2 }]
 */
export function resolveConfig(raw: unknown, prefix = 'config'): EstimateConfig {
  const parsed = estimateConfigSchema.safeParse(raw ?? {});
  if (!parsed.success) throw new UsageError(describeIssue(prefix, parsed.error.issues[0]!, [], raw));
  const c = parsed.data;
  const lossName = c.loss.name;
  const defaultAgg =
    lossName === 'gspo' || lossName === 'sapo' || lossName === 'tbpo' || lossName === 'geo_mean'
      ? 'seq-mean-token-mean'
      : lossName === 'luspo'
        ? 'seq-mean-token-sum'
        : 'token-mean';
  const correction: readonly CorrectionSpec[] = c.correction;
  // bypass mode: the KL runs over the full response mask unless the config says otherwise (verl)
  const rawKl = (raw as { kl?: { mask?: unknown } } | null | undefined)?.kl;
  const klMaskGiven = rawKl !== null && typeof rawKl === 'object' && rawKl.mask !== undefined;
  const kl = c.kl == null ? null : c.mode === 'bypass' && !klMaskGiven ? { ...c.kl, mask: 'response' as const } : c.kl;
  const slimeOpsm = correction.findIndex((s) => s.name === 'opsm' && s.form === 'slime');
  if (c.mode === 'bypass' && c.proxLogp != null)
    throw new UsageError(
      `${prefix}.proxLogp: AReaL's log-linear proximal policy replaces ℓold in decoupled mode; bypass mode has no ℓold (use mode "decoupled")`,
    );
  if (c.mode === 'bypass' && slimeOpsm >= 0) {
    const where = Array.isArray((raw as { correction?: unknown }).correction)
      ? `${prefix}.correction[${slimeOpsm}].form`
      : `${prefix}.correction.form`;
    throw new UsageError(
      `${where}: "slime" compares ℓold with ℓθ and bypass mode has no ℓold; the default form "deepseek" is slime's --use-rollout-logprobs form there`,
    );
  }
  const scoreCentering =
    c.scoreCentering?.form === 'vime' && c.scoreCentering.weight === undefined
      ? { ...c.scoreCentering, weight: vimeWeightOf(correction, prefix) }
      : c.scoreCentering;
  return {
    advantage: c.advantage,
    correction,
    loss: c.loss,
    aggregation: c.aggregation ?? { name: defaultAgg },
    kl,
    diagnostics: c.diagnostics,
    mode: c.mode,
    mismatchPenalty: c.mismatchPenalty,
    ...(c.proxLogp != null ? { proxLogp: c.proxLogp } : {}),
    ...(scoreCentering !== null ? { scoreCentering } : {}),
    ...(c.topkKl !== null ? { topkKl: c.topkKl } : {}),
    ...(c.exactOnPolicyRatio ? { exactOnPolicyRatio: true } : {}),
  };
}

/**
 * The IS rule of score centering's `vime` form from the correction chain, as vime's
 * `get_score_centering_is_config` takes it from `--use-tis` (vllm-project/vime 2b83ea2
 * vime/utils/score_centering.py l.17–38): no correction → `one`; token `tis` → `clamp` [lo, C];
 * token `icepop` → `band` [lo, hi]. Any other chain cannot weight the head and the tail, a `UsageError`.
 */
function vimeWeightOf(chain: readonly CorrectionSpec[], prefix: string): ScoreCenteringWeight {
  const only = chain.length === 1 ? chain[0]! : undefined;
  if (only?.name === 'none') return { rule: 'one' };
  if (only?.name === 'tis') return { rule: 'clamp', lo: only.lo ?? 0, hi: only.C };
  if (only?.name === 'icepop' && only.level === 'token') return { rule: 'band', lo: only.lo, hi: only.hi };
  throw new UsageError(
    `${prefix}.scoreCentering.form: 'vime' weights the sampler's head by the correction's token rule, which only a single none, tis or token-level icepop stage has; got correction [${chain.map((s) => s.name).join(', ')}] (give ${prefix}.scoreCentering.weight explicitly)`,
  );
}

// ---------------------------------------------------------------------------------------------
// batch arrays

/** A validated batch in flat form (see {@link BatchShape} for the layout). */
export interface EstimateBatch {
  /** Batch shape (B sequences × T positions). */
  readonly shape: BatchShape;
  /** ℓθ `(B, T)`. */
  readonly logpTheta: Float64Array;
  /** ℓold `(B, T)`. */
  readonly logpOld: Float64Array;
  /** ℓroll `(B, T)`. */
  readonly logpRollout: Float64Array;
  /** ℓref `(B, T)`, required when a KL term is configured. */
  readonly logpRef?: Float64Array | undefined;
  /** Response mask `(B, T)`, entries 0 or 1. */
  readonly mask: Float64Array;
  /** Rewards `(B)`; exactly one of rewards / advantages. */
  readonly rewards?: Float64Array | undefined;
  /** Given advantages per token `(B, T)` (a per-sequence input is broadcast). */
  readonly advantages?: Float64Array | undefined;
  /**
   * Σ_v π(v)² `(B, T)`: per token, the sum over the vocabulary of the squared probabilities of the
   * policy that scored ℓold (veRL `sum_pi_squared`); required by the advantage `optimal_token_baseline`.
   */
  readonly probSqSum?: Float64Array | undefined;
  /** Group id per sequence `(B)`; absent ⇒ one group. */
  readonly groups?: readonly (string | number)[] | undefined;
  /**
   * Point at which stop-gradient terms are evaluated (cispo's detached clip, straight-through KL);
   * for finite-difference checks only. @defaultValue logpTheta
   */
  readonly logpThetaDetached?: Float64Array | undefined;
  /** The sampler's top-k ids and ℓμ and the trainer's ℓθ at them (score centering, TRPL; src/rl/topk.ts). */
  readonly topk?: TopkBatch | undefined;
  /** Per row `(B)`, 1 when the row was sampled by the current weights (`exactOnPolicyRatio`). */
  readonly onPolicy?: Float64Array | undefined;
}

function matrix(
  raw: unknown,
  field: string,
  B: number | undefined,
  T: number | undefined,
  check?: (v: number, where: string) => void,
): { data: Float64Array; B: number; T: number } {
  if (!Array.isArray(raw))
    throw new UsageError(`${field}: expected an array of rows, got ${raw === undefined ? 'nothing' : typeof raw}`);
  const rows = raw.length;
  if (B !== undefined && rows !== B) throw new UsageError(`${field}: expected ${B} rows, got ${rows}`);
  if (rows === 0) throw new UsageError(`${field}: expected at least one row`);
  const first = raw[0] as unknown;
  const cols = T ?? (Array.isArray(first) ? first.length : 0);
  const data = new Float64Array(rows * cols);
  for (let i = 0; i < rows; i++) {
    const row = raw[i] as unknown;
    if (!Array.isArray(row)) throw new UsageError(`${field}[${i}]: expected an array, got ${JSON.stringify(row)}`);
    if (row.length !== cols) throw new UsageError(`${field}[${i}]: expected ${cols} entries, got ${row.length}`);
    for (let t = 0; t < cols; t++) {
      const v = row[t] as unknown;
      if (typeof v !== 'number' || !Number.isFinite(v))
        throw new UsageError(`${field}[${i}][${t}]: expected a finite number, got ${JSON.stringify(v)}`);
      check?.(v, `${field}[${i}][${t}]`);
      data[i * cols + t] = v;
    }
  }
  return { data, B: rows, T: cols };
}

function vector(raw: unknown, field: string, B: number): Float64Array {
  if (!Array.isArray(raw)) throw new UsageError(`${field}: expected an array, got ${typeof raw}`);
  if (raw.length !== B) throw new UsageError(`${field}: expected ${B} entries (one per sequence), got ${raw.length}`);
  return Float64Array.from(raw, (v: unknown, i) => {
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw new UsageError(`${field}[${i}]: expected a finite number, got ${JSON.stringify(v)}`);
    return v;
  });
}

const inputKeys = new Set([
  'logpTheta',
  'logpOld',
  'logpRollout',
  'logpRef',
  'mask',
  'rewards',
  'advantages',
  'groups',
  'probSqSum',
  'topk',
  'onPolicy',
  'config',
]);

/**
 * Validates the JSON input of `estimate` (see docs/estimators.md) into a flat {@link EstimateBatch} and a
 * resolved {@link EstimateConfig}. Ragged rows, non-finite numbers, a mask entry other than 0/1,
 * both or neither of rewards/advantages, unknown keys ⇒ `UsageError` naming the field.
 * @example parseEstimateInput({ logpTheta: [[-1]], logpOld: [[-1]], logpRollout: [[-1.1]], mask: [[1]], rewards: [1], config: {} })
 */
export function parseEstimateInput(json: unknown): { batch: EstimateBatch; config: EstimateConfig } {
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    throw new UsageError('input: expected a JSON object');
  const o = json as Record<string, unknown>;
  for (const key of Object.keys(o))
    if (!inputKeys.has(key)) throw new UsageError(`${key}: unknown field (known: ${[...inputKeys].join(', ')})`);
  const mask = matrix(o['mask'], 'mask', undefined, undefined, (v, where) => {
    if (v !== 0 && v !== 1) throw new UsageError(`${where}: mask entries must be 0 or 1, got ${v}`);
  });
  const { B, T } = mask;
  const logpTheta = matrix(o['logpTheta'], 'logpTheta', B, T).data;
  const logpOld = matrix(o['logpOld'], 'logpOld', B, T).data;
  const logpRollout = matrix(o['logpRollout'], 'logpRollout', B, T).data;
  const logpRef = o['logpRef'] === undefined ? undefined : matrix(o['logpRef'], 'logpRef', B, T).data;
  const probSqSum =
    o['probSqSum'] === undefined
      ? undefined
      : matrix(o['probSqSum'], 'probSqSum', B, T, (v, where) => {
          if (v < 0 || v > 1) throw new UsageError(`${where}: a sum of squared probabilities lies in [0, 1], got ${v}`);
        }).data;
  const hasRewards = o['rewards'] !== undefined;
  const hasAdv = o['advantages'] !== undefined;
  if (hasRewards === hasAdv)
    throw new UsageError(
      hasRewards
        ? 'advantages: give either rewards or advantages, not both'
        : 'rewards: expected rewards (one per sequence) or advantages',
    );
  const rewards = hasRewards ? vector(o['rewards'], 'rewards', B) : undefined;
  let adv: Float64Array | undefined;
  if (hasAdv) {
    const a = o['advantages'];
    if (Array.isArray(a) && a.length > 0 && Array.isArray(a[0])) adv = matrix(a, 'advantages', B, T).data;
    else {
      const perSeq = vector(a, 'advantages', B);
      adv = new Float64Array(B * T);
      for (let i = 0; i < B; i++) adv.fill(perSeq[i]!, i * T, i * T + T);
    }
  }
  let groups: (string | number)[] | undefined;
  if (o['groups'] !== undefined) {
    const g = o['groups'];
    if (!Array.isArray(g)) throw new UsageError(`groups: expected an array, got ${typeof g}`);
    if (g.length !== B) throw new UsageError(`groups: expected ${B} entries (one per sequence), got ${g.length}`);
    groups = g.map((v: unknown, i) => {
      if (typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v))) return v;
      throw new UsageError(`groups[${i}]: expected a number or string id, got ${JSON.stringify(v)}`);
    });
  }
  const config = resolveConfig(o['config']);
  if (config.kl !== null && logpRef === undefined) throw new UsageError('logpRef: required when config.kl is set');
  if (config.advantage.name === 'optimal_token_baseline' && rewards !== undefined && probSqSum === undefined) {
    throw new UsageError(
      "probSqSum: required when config.advantage.name is 'optimal_token_baseline' (Σ_v π(v)² per token, shaped like mask)",
    );
  }
  return {
    batch: {
      shape: { B, T },
      logpTheta,
      logpOld,
      logpRollout,
      logpRef,
      mask: mask.data,
      rewards,
      advantages: adv,
      groups,
      ...(probSqSum !== undefined ? { probSqSum } : {}),
      ...(o['topk'] !== undefined ? { topk: parseTopkInput(o['topk'], { B, T }) } : {}),
      ...(o['onPolicy'] !== undefined ? { onPolicy: vector(o['onPolicy'], 'onPolicy', B) } : {}),
    },
    config,
  };
}
