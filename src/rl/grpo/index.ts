// Public surface of the GRPO loop: config, engine contract, one step, the run driver, run files.
// Not a place for logic.

export * from './config.js';
export * from './engine.js';
export * from './loop.js';
export * from './run.js';
export * from './files.js';
export * from './overrides.js';
export * from './policies.js';
export * from './describe.js';
