// `qrl-sim/backend`: the asynchronous policy-backend contract the GRPO loop drives and the in-process reference backend.
// Chosen names, not `export *` (the rule: docs/decisions.md; pinned by test/api-surface.test.ts).

// The asynchronous policy-backend contract.
export {
  BACKEND_PROTOCOL,
  type BackendCapabilities,
  type SampledTopk,
  type BackendInfo,
  type BackendVocabulary,
  type EngineDump,
  type GenerateRequest,
  type JsonValue,
  type LogprobsRequest,
  type LogprobsResult,
  type PlanSideName,
  type PolicyBackend,
  type PolicyName,
  type ReplayRecord,
  type ReplayRecordValue,
  type RolloutBatch,
  type SampledBatch,
  type SamplingParams,
  type StepRequest,
  type StepResult,
  type SupervisedPair,
  type WarmStartRequest,
} from '../core/backend-contract.js';

// The in-process reference backend and the in-process factory it wraps (defined in policies/).
export { ReferenceBackend } from './reference.js';
export type { PolicyFactory } from '../policies/engine.js';
