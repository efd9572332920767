// Public API of qrl-sim: re-exports each module's public surface.
// Not a place for logic; see the modules under src/.

export * from './rng.js';
export * from './numerics/index.js';
export * from './nn/index.js';
export * from './tasks/index.js';
export * from './rl/index.js';
export * from './policies/index.js';
export { UsageError, zodIssueLine } from './errors.js';
export * from './files.js';
export * from './backend/index.js';
export * from './report/index.js';
export * from './runs/index.js';
