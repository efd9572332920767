// `qrl-sim/rl`: the estimator families as tables, `estimate`, diagnostics, the run config and one GRPO step against the backend contract.
// Chosen names, not `export *` (the rule: docs/decisions.md; pinned by test/api-surface.test.ts).

// Shared shapes: flat (B, T) batches and the `{ value, metrics }` result.
export type { BatchShape, Estimate, MetricRecord } from './types.js';

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

// Rollout corrections: the family table, the pipeline and their types.
export {
  corrections,
  applyCorrection,
  correctionNeedsTheta,
  type CorrectionFn,
  type CorrectionInput,
  type CorrectionName,
  type CorrectionResult,
  type CorrectionSpec,
  type CorrectionStep,
  type CorrectionLevel,
  type CapParams,
  type IcepopParams,
  type RejectionK1Params,
  type RejectionKParams,
  type VetoParams,
  type BatchNormParams,
  type AisParams,
  type OpsmParams,
  type OpsmForm,
  parseVerlRs,
  type VerlRsOption,
  type VerlRsParams,
  type ArealRsParams,
  type SeqLogprobErrorParams,
  type OutlierVetoParams,
  type DpFilterParams,
  type DpFilterLevel,
  type M2poParams,
  type Denominator,
  type RejectionLevel,
} from './correction.js';

// Policy losses: the family table and its types.
export {
  losses,
  type LossFn,
  type LossName,
  type PolicyLossInput,
  type PolicyLossValue,
  type ClipParams,
  type CispoParams,
  type VespoParams,
  type ToprParams,
  type DppoParams,
  type IpoParams,
  type PpoClipParams,
  type SapoParams,
  type TbpoParams,
} from './losses.js';

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
