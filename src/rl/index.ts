// `qrl-sim/rl`: the estimator families as tables, `estimate`, diagnostics, the run config and one GRPO step against the backend contract.
// Chosen names, not `export *` (the rule: docs/decisions.md; pinned by test/api-surface.test.ts).

// Shared shapes: flat (B, T) batches and the `{ value, metrics }` result.
export type { BatchShape, Estimate, MetricRecord, NoParams } from './types.js';

// Advantages: the family table and its types.
export {
  advantages,
  type AdvantageFn,
  type AdvantageInput,
  type AdvantageName,
  type StdAdvantageParams,
  type DrGrpoParams,
  type PassKParams,
  type OptimalTokenBaselineParams,
  type TokenAdvantageInput,
  type SingletonRule,
} from './advantages.js';

// Rollout corrections: the table, its types, the chain; the stage contract and each family's parameters.
export {
  corrections,
  applyCorrection,
  correctionNeedsTheta,
  type CorrectionName,
  type CorrectionParams,
  type CorrectionResult,
  type CorrectionSpec,
  type CorrectionSpecOf,
  type CorrectionTable,
} from './correction.js';
export {
  type CorrectionFn,
  type CorrectionInput,
  type CorrectionStep,
  type CorrectionLevel,
  type Denominator,
  type RejectingStage,
  type RejectionLevel,
} from './correction/stage.js';
export { type CapParams, type IcepopParams, type BatchNormParams, type AisParams } from './correction/weights.js';
export {
  type RejectionK1Params,
  type RejectionKParams,
  type VetoParams,
  type OutlierVetoParams,
  parseVerlRs,
  type VerlRsOption,
  type VerlRsParams,
} from './correction/rejection.js';
export {
  type OpsmParams,
  type OpsmForm,
  type ArealRsParams,
  type SeqLogprobErrorParams,
  type DpFilterParams,
  type DpFilterLevel,
  type M2poParams,
} from './correction/masks.js';

// Policy losses: the table and its types; the loss contract and each family's parameters.
export { losses, topkLossNames, readsTopkLoss, type LossName, type LossParams, type LossTable } from './losses.js';
export { trpl, type TrplParams } from './losses/trpl.js';
export { dppoTopkTv, dppoTopkKl, topkDivergence, type DppoTopkParams } from './losses/dppo-topk.js';
export { topkKlTerm, type TopkKlParams, type TopkKlSides, type TopkKlValue } from './losses/topk-kl.js';
export { scoreCenteringTerm, type ScoreCenteringParams, type ScoreCenteringValue } from './losses/score-centering.js';

// The sampler's distribution as the estimators read it (top-k ids, ℓμ, ℓθ at them).
export { type TopkBatch, parseTopkInput, checkTopkBatch, slotCount } from './topk.js';
export {
  trplLossSchema,
  dppoTopkTvLossSchema,
  dppoTopkKlLossSchema,
  scoreCenteringSpecSchema,
  scoreCenteringWeightSchema,
  topkKlSpecSchema,
  type ScoreCenteringSpec,
  type ScoreCenteringWeight,
  type TopkKlSpec,
} from './topk-schema.js';
export { type LossFn, type PolicyLossInput, type PolicyLossValue } from './losses/loss.js';
export { type ClipParams, type PpoClipParams, type SapoParams, type TbpoParams } from './losses/ratio.js';
export {
  type CispoParams,
  type VespoParams,
  type ToprParams,
  type DppoParams,
  type IpoParams,
} from './losses/score-function.js';

// Loss aggregation modes: the table and `aggregate`.
export {
  aggregations,
  aggregate,
  type AggregationFn,
  type AggregationName,
  type AggregationParams,
} from './aggregation.js';

// KL-to-reference estimators: the table and its types.
export { kl, type KlFn, type KlInput, type KlName, type KlValue } from './kl.js';

// Mismatch diagnostics.
export { mismatchDiagnostics, type DiagnosticsInput, type EmptyRows } from './diagnostics.js';

// Every stack's mismatch metrics under its own names, and their docs table.
export {
  stackMetricSets,
  stackMetrics,
  stackMetricsTableMarkdown,
  type StackMetricDoc,
  type StackMetricInput,
  type StackMetricSet,
  type StackName,
} from './stack-metrics.js';
export { parameterChangeCounts, type ParameterChangeCounts } from './parameter-changes.js';

// Mismatch by response position and length.
export {
  lengthDiagnostics,
  type LengthDiagnostics,
  type LengthDiagnosticsInput,
  type MismatchBucket,
  type MismatchCell,
  LENGTH_BUCKET_EDGES,
  ERROR_TOKEN_RATIO,
  REPETITION_NGRAM,
} from './length-diagnostics.js';

// The estimator config schema and batch validation.
export {
  resolveConfig,
  parseEstimateInput,
  type EstimateConfig,
  type EstimateBatch,
  estimateConfigSchema,
  type AdvantageSpec,
  type LossSpec,
  type AggregationSpec,
  type KlSpec,
  type DiagnosticsSpec,
  type MismatchPenaltySpec,
  advantageSpecSchema,
  correctionSpecSchema,
  lossSpecSchema,
  aggregationSpecSchema,
  klSpecSchema,
  diagnosticsSpecSchema,
  mismatchPenaltySpecSchema,
} from './schema.js';

// `estimate`: one GRPO loss evaluation on a batch.
export {
  estimate,
  estimateJson,
  type EstimateBatchInput,
  type EstimateResult,
  type EstimateOutputJson,
  policyObjective,
  type ObjectiveInput,
  type ObjectiveValue,
  sequenceAdvantages,
  tokenAdvantages,
  exactOnPolicy,
  requireTopk,
  unflattenCells,
} from './estimate.js';

// The run configuration.
export { resolveRunConfig, type RunConfig, runConfigSchema, RUN_LIMITS } from './grpo/config.js';

// One GRPO step against the backend contract, and evaluation.
export {
  grpoStep,
  type GrpoStepResult,
  type StepContext,
  evaluate,
  type PhaseTimings,
  StaleRollouts,
  type PendingRollout,
} from './grpo/loop.js';
export { stepAdvantages } from './grpo/phases.js';
