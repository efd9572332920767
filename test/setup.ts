// Test setup: fixes the fast-check seed so that property tests are reproducible in CI.
// It does not change any test's assertions; set QRL_FC_SEED to explore other seeds locally.
import fc from 'fast-check';

const seed = Number(process.env['QRL_FC_SEED'] ?? 20261122);
fc.configureGlobal({ seed, numRuns: Number(process.env['QRL_FC_RUNS'] ?? 100) });
