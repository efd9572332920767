// Rollout correction: the table of correction stages by config name and the chain that composes them into weights and masks.
// Not an estimator itself (the families: correction/weights.ts, rejection.ts, masks.ts) and not the policy loss (losses.ts).

import type { Estimate, MetricRecord, NoParams } from './types.js';
import { acceptRenamed } from './types.js';
import type { CorrectionFn, CorrectionInput, CorrectionStep, RejectingStage } from './correction/stage.js';
import { ones, seqRejectedFraction, tokenFraction } from './correction/stage.js';
import {
  ais,
  batchNorm,
  icepop,
  noCorrection,
  seqTis,
  tis,
  tokenIs,
  type AisParams,
  type BatchNormParams,
  type CapParams,
  type IcepopParams,
} from './correction/weights.js';
import {
  geoRs,
  misSeq,
  misToken,
  outlierVeto,
  rsK1,
  rsK2,
  rsK3,
  verlRolloutRs,
  veto,
  type OutlierVetoParams,
  type RejectionK1Params,
  type RejectionKParams,
  type VerlRsParams,
  type VetoParams,
} from './correction/rejection.js';
import {
  arealRejectionSampling,
  dpFilter,
  m2po,
  opsm,
  seqLogprobError,
  type ArealRsParams,
  type DpFilterParams,
  type M2poParams,
  type OpsmParams,
  type SeqLogprobErrorParams,
} from './correction/masks.js';

/**
 * Each correction stage's parameters by config name, defaults filled in: what the resolved spec of that
 * stage carries besides its name. The table {@link corrections} is checked against it entry by entry
 * ({@link CorrectionTable}), and {@link CorrectionSpec} is derived from it.
 */
export interface CorrectionParams {
  readonly none: NoParams;
  readonly 'token-is': NoParams;
  readonly tis: CapParams;
  readonly 'seq-tis': CapParams;
  readonly icepop: IcepopParams & RejectingStage;
  readonly 'mis-token': CapParams & RejectingStage;
  readonly 'mis-seq': CapParams & RejectingStage;
  readonly 'geo-rs': RejectionK1Params & RejectingStage;
  readonly 'rs-k1': RejectionK1Params & RejectingStage;
  readonly 'rs-k2': RejectionKParams & RejectingStage;
  readonly 'rs-k3': RejectionKParams & RejectingStage;
  readonly veto: VetoParams & RejectingStage;
  readonly 'batch-norm': BatchNormParams;
  readonly ais: AisParams;
  readonly opsm: OpsmParams & RejectingStage;
  readonly 'outlier-veto': OutlierVetoParams & RejectingStage;
  readonly 'dp-filter': DpFilterParams & RejectingStage;
  readonly m2po: M2poParams & RejectingStage;
  readonly rollout_rs: VerlRsParams & RejectingStage;
  readonly rejection_sampling: ArealRsParams & RejectingStage;
  readonly seq_logprob_error_threshold: SeqLogprobErrorParams & RejectingStage;
}

/** Config name of a correction estimator. */
export type CorrectionName = keyof CorrectionParams;

/**
 * The type of the table {@link corrections}: every name of {@link CorrectionParams}, each mapped to a
 * function that accepts that stage's own parameters. A missing entry, an extra one or a function whose
 * options type does not accept its stage's parameters fails to compile.
 */
export type CorrectionTable = { readonly [K in CorrectionName]: CorrectionFn<CorrectionParams[K]> };

/** One resolved correction stage of name `K`: its name and its parameters, defaults filled in. */
export type CorrectionSpecOf<K extends CorrectionName> = { readonly name: K } & CorrectionParams[K];

/** One resolved correction stage (name + all parameters, defaults filled in), any name. */
export type CorrectionSpec = { readonly [K in CorrectionName]: CorrectionSpecOf<K> }[CorrectionName];

/** Every correction estimator by its config name (composition: see {@link applyCorrection}). */
export const corrections = {
  none: noCorrection,
  'token-is': tokenIs,
  tis,
  'seq-tis': seqTis,
  icepop,
  'mis-token': misToken,
  'mis-seq': misSeq,
  'geo-rs': geoRs,
  'rs-k1': rsK1,
  'rs-k2': rsK2,
  'rs-k3': rsK3,
  veto,
  'batch-norm': batchNorm,
  ais,
  opsm,
  'outlier-veto': outlierVeto,
  'dp-filter': dpFilter,
  m2po,
  rollout_rs: verlRolloutRs,
  rejection_sampling: arealRejectionSampling,
  seq_logprob_error_threshold: seqLogprobError,
} as const satisfies CorrectionTable;

/** Result of a (possibly composed) correction. */
export interface CorrectionResult {
  /** Detached weights `(B, T)`: product of the stages' factors; 0 wherever `lossMask` is 0. */
  readonly weights: Float64Array;
  /**
   * Loss mask `(B, T)`, the numerator of the aggregated loss: the response mask AND every stage's keep
   * mask (the tokens whose policy loss counts).
   */
  readonly lossMask: Float64Array;
  /**
   * The loss mask under its former name (the same array).
   * @deprecated Read {@link CorrectionResult.lossMask}; `mask` stays until 1.0.
   */
  readonly mask: Float64Array;
  /** Denominator mask `(B, T)`: the response mask AND the keep masks of stages with `denominator: 'kept'`. */
  readonly denominatorMask: Float64Array;
  /** Per-token advantages after rectification (AIS), `(B, T)`; equal to the input where no stage rectifies. */
  readonly advantages: Float64Array;
}

/** Metric key of a stage: its name, plus the level for the rs family. */
function stageKey(spec: CorrectionSpec): string {
  if (spec.name === 'rs-k1' || spec.name === 'rs-k2' || spec.name === 'rs-k3') return `${spec.name}-${spec.level}`;
  return spec.name;
}

/** Runs one stage with its own parameters: the table's entry for `spec.name`, typed by {@link CorrectionTable}. */
function runStage<K extends CorrectionName>(
  input: CorrectionInput,
  spec: CorrectionSpecOf<K>,
  weightsSoFar: Float64Array,
): Estimate<CorrectionStep> {
  const table: CorrectionTable = corrections;
  return table[spec.name](input, spec, weightsSoFar);
}

/**
 * Applies correction stages in order: factors multiply, keep masks AND together; each stage's
 * statistics are computed over the response mask (as verl computes IS and RS independently).
 * An input with the former field name `mask` (instead of `responseMask`) is still accepted.
 * MetricRecord: `rollout_corr/<stage>/<name>` per stage plus `rollout_corr/masked_fraction`,
 * `rollout_corr/seq_masked_fraction`, `rollout_corr/denominator_masked_fraction`.
 * @example applyCorrection(input, [{ name: 'tis', C: 2 }, { name: 'geo-rs', lo: 0.999, hi: 1.001, level: 'seq-mean', verlBand: false, denominator: 'kept' }])
 */
export function applyCorrection(given: CorrectionInput, specs: readonly CorrectionSpec[]): Estimate<CorrectionResult> {
  const input = acceptRenamed(given, { mask: 'responseMask' });
  const { responseMask } = input;
  const n = responseMask.length;
  const weights = Float64Array.from(responseMask);
  const lossMask = Float64Array.from(responseMask);
  const denominatorMask = Float64Array.from(responseMask);
  const scale = ones(n);
  const metrics: MetricRecord = {};
  const used = new Map<string, number>();
  let rectified = false;
  let verlIsReported = false;
  for (const spec of specs) {
    const step = runStage(input, spec, weights);
    const removesFromDenominator = 'denominator' in spec && spec.denominator === 'kept';
    for (let k = 0; k < n; k++) {
      if (responseMask[k] !== 1) continue;
      weights[k] = weights[k]! * step.value.factor[k]!;
      if (step.value.rectifiesAdvantage) scale[k] = scale[k]! * step.value.factor[k]!;
      if (step.value.keep[k] === 0) {
        lossMask[k] = 0;
        if (removesFromDenominator) denominatorMask[k] = 0;
      }
    }
    rectified ||= step.value.rectifiesAdvantage;
    if (step.value.verlIsMetrics !== undefined && !verlIsReported) {
      verlIsReported = true;
      for (const [name, v] of Object.entries(step.value.verlIsMetrics)) metrics[`rollout_corr/${name}`] = v;
    }
    if (step.value.stackMetrics !== undefined)
      for (const [name, v] of Object.entries(step.value.stackMetrics)) metrics[`rollout_corr/${name}`] = v;
    let key = stageKey(spec);
    const seen = used.get(key) ?? 0;
    used.set(key, seen + 1);
    if (seen > 0) key = `${key}#${seen + 1}`;
    for (const [name, v] of Object.entries(step.metrics)) metrics[`rollout_corr/${key}/${name}`] = v;
  }
  for (let k = 0; k < n; k++) if (lossMask[k] !== 1) weights[k] = 0;
  const adv = rectified
    ? input.advantages.map((a, k) => (responseMask[k] === 1 ? a * scale[k]! : 0))
    : input.advantages.map((a, k) => (responseMask[k] === 1 ? a : 0));
  metrics['rollout_corr/masked_fraction'] = tokenFraction(responseMask, (k) => lossMask[k] === 0);
  metrics['rollout_corr/seq_masked_fraction'] = seqRejectedFraction(lossMask, responseMask, input.shape);
  metrics['rollout_corr/denominator_masked_fraction'] = tokenFraction(responseMask, (k) => denominatorMask[k] === 0);
  return { value: { weights, lossMask, mask: lossMask, denominatorMask, advantages: adv }, metrics };
}

/** True when a stage of the chain reads ℓθ ({@link CorrectionInput.logpTheta}): it must then run per mini-batch. */
export function correctionNeedsTheta(specs: readonly CorrectionSpec[]): boolean {
  return specs.some((s) => (s.name === 'opsm' && s.form === 'slime') || (s.name === 'tis' && s.anchor === 'current'));
}
