// Public surface of the GRPO loop: config and one step against the backend contract.
// Not a place for logic, and not the run driver (src/runs/).

export * from './config.js';
export * from './loop.js';
export * from './describe.js';
