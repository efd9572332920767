// `qrl-sim/runs`: the run driver, sweeps and their grid, `--set` overrides, the policy registry, factory sources, the lab.
// Chosen names, not `export *` (the rule: docs/decisions.md; pinned by test/api-surface.test.ts).

// The run driver.
export { runGrpo, type RunOptions, type RunSummary, type RunObserver } from './run.js';

// Sweeps.
export {
  runSweep,
  type SweepOptions,
  type SweepResult,
  type SweepRunResult,
  planSweep,
  type SweepPlan,
  type PlannedRun,
  SweepStopped,
} from './sweep.js';
export { type SweepExecutor, type RaySweepExecutor, RAY_MAX_RETRIES } from './sweep-ray.js';
export { type SweepBackend } from './sweep-backend.js';

// The sweep grid.
export {
  parseGrid,
  gridPoints,
  type GridAxis,
  type GridPoint,
  GRID_ALIASES,
  type GridAlias,
  type GridParseOptions,
} from './grid.js';

// `--set` overrides.
export { applyOverrides, parseOverride } from './overrides.js';

// The policy registry by `policy.kind`.
export { policyFactory } from './policies.js';

// Factory sources for sweep workers.
export { loadPolicyFactory, type FactorySource, DEFAULT_FACTORY } from './factory.js';

// The lab experiments.
export {
  runLabExperiment,
  loadLabExperiment,
  labExperimentNames,
  type LabExperiment,
  type LabRunOptions,
  labExperimentSchema,
} from './lab.js';
