// Public surface of run orchestration: the run driver, `--set` overrides, sweeps and their grid,
// the policy registry and factory loading. Not the GRPO step (rl/) and not the reports (report/).

export * from './run.js';
export * from './overrides.js';
export * from './policies.js';
export * from './grid.js';
export * from './factory.js';
export * from './sweep.js';
export * from './lab.js';
export type { SweepTask, SweepTaskResult } from './sweep-worker.js';
