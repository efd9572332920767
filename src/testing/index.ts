// `qrl-sim/testing`: fast-check arbitraries and invariant suites for property tests of your own
// estimator, cast and quantizer code, and the qrl-backend/1 conformance battery for your own backend.
// Not used by the simulator itself (only by `qrl-sim check` and `qrl-sim backend-check`).

// fast-check arbitraries of formats, profiles, casts, batches, estimator configs, quantizer inputs, plans.
export {
  batchArb,
  castTargetArb,
  castValueArb,
  estimatorConfigArb,
  formatArb,
  precisionPlanArb,
  profileArb,
  quantizeParamsArb,
  type BatchArbOptions,
  type BatchJson,
} from './arbitraries.js';

// Invariant suites for an estimator implementation.
export { estimatorInvariants, RHO_ONE_IDENTITY, type EstimateFn, type EstimateOutput } from './invariants.js';

// Golden references: comparison rules, the file format and its tensors, reading and writing, the suites.
export { compareArrays, elementMatches, mismatchText, ulpDistance, type Mismatch } from '../golden/compare.js';
export type {
  CompareRule,
  GoldenCase,
  GoldenManifest,
  GoldenSuite,
  GoldenTensor,
  ManifestCase,
  ManifestTensor,
} from '../golden/types.js';
export { GOLDEN_SCHEMA } from '../golden/types.js';
export { WIRE_DTYPES, type WireArray, type WireDtype } from '../protocol/tensor.js';
export type { SafetensorsDtype } from '../protocol/safetensors.js';
export { readGolden, type GoldenReader } from '../golden/read.js';
export { writeGolden, tensor, contiguous, type WriteGoldenOptions } from '../golden/write.js';
export { goldenSuites } from '../golden/suites/index.js';

// Step replay (`qrl-sim replay`): a stack's captured training step (qrl-step/1), stage by stage.
export {
  readStepBundle,
  stepFields,
  STEP_FORMAT,
  type StepBundle,
  type StepFieldName,
  type StepManifest,
  type StepTensor,
} from '../golden/step-bundle.js';
export {
  formatReplay,
  REPLAY_TOLERANCE,
  replayBound,
  replayStages,
  replayStep,
  type ReplayResult,
  type ReplayStage,
  type ReplayStageName,
  type ReplayStatus,
} from '../golden/replay.js';
export {
  bundleConfig,
  stackOptionTables,
  trlDefaults,
  trlEstimateConfig,
  trlInertOptions,
  type StackOptions,
} from '../golden/stack-options.js';

// The qrl-backend/1 conformance battery of `qrl-sim backend-check`, for a backend's own test suite.
export { formatConformance, runConformance, type ConformanceOptions, type ConformanceRow } from './conformance.js';
export { killResumeCheck } from './kill-resume.js';

// Differential property testing of another implementation of estimate, cast or quantize (`qrl-sim check`).
export {
  CHECK_SUITES,
  checkFixedConfig,
  differentialCheck,
  paramsArb,
  type CheckMethod,
  type CheckSuite,
  type DifferentialOptions,
  type DifferentialResult,
} from './differential.js';
