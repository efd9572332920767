// Root entry of qrl-sim (`import … from 'qrl-sim'`): the ground floor plus a curated set of the
// names most programs start from. Not the whole library: each layer has its own subpath
// (`qrl-sim/numerics`, `/nn`, `/tasks`, `/rl`, `/policies`, `/backend`, `/runs`, `/report`,
// `/protocol`), listed in docs/library.md.

// Ground floor: seeded streams, the usage error, durable files.
export { createRng, restoreRng, Rng, type RngState } from './core/rng.js';
export { UsageError, zodIssueLine } from './core/errors.js';
export { JsonlWriter, readJsonl, writeJsonAtomic } from './core/files.js';

// numerics: casts and quantizers.
export { round, encode, type RoundOptions } from './numerics/round.js';
export { fakeQuant, encodeArray, decodeArray, type VectorCastOptions } from './numerics/vector.js';
export { quantize, dequantize, type QuantSpec, type QuantizedTensor } from './numerics/quantize.js';
export { quantPreset, quantPresets } from './numerics/presets.js';

// rl: estimators on a batch and the run config.
export { estimate, estimateJson, type EstimateBatchInput, type EstimateResult } from './rl/estimate.js';
export { parseEstimateInput, resolveConfig, type EstimateBatch, type EstimateConfig } from './rl/schema.js';
export { resolveRunConfig, type RunConfig } from './rl/grpo/config.js';

// policies, backend, runs: plans, the backend contract, the run driver and sweeps.
export { precisionPlan, precisionPlans, type PrecisionPlan, type PrecisionPlanName } from './policies/plans.js';
export type { PolicyBackend } from './core/backend-contract.js';
export { ReferenceBackend } from './backend/reference.js';
export { runGrpo, type RunOptions, type RunSummary, type RunObserver } from './runs/run.js';
export { runSweep, type SweepOptions, type SweepResult } from './runs/sweep.js';
export { policyFactory } from './runs/policies.js';
