// Engine execution paths: a rollout whose GEMM reduction order depends on the rows it batches
// (split-K for small GEMMs only), the batch-invariant switch (true-on-policy: k3 exactly 0), and the
// path mismatch vanishing exactly when every GEMM the engine runs is larger than the split-K limit.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { roundingNumerics } from '../../src/policies/numerics.js';
import { arConfig } from '../../src/policies/ar/config.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { arMismatchProbe } from '../../src/policies/ar/probe.js';
import { resolvePlan, type PlanData } from '../../src/policies/plans.js';
import { makeTask } from '../../src/tasks/registry.js';
import { createRng } from '../../src/rng.js';

describe('splitKMaxRows', () => {
  it('uses split-K in GEMMs of at most that many rows and the sequential order above', () => {
    const rng = createRng(3);
    const k = 64;
    const m = 3;
    const n = 5;
    const a = Float32Array.from({ length: m * k }, () => rng.normal());
    const b = Float32Array.from({ length: n * k }, () => rng.normal());
    const run = (opts: Parameters<typeof roundingNumerics>[0], rows: number) => {
      const out = new Float32Array(rows * n);
      roundingNumerics(opts).block(0).attention.qk(out, a, b, rows, n, k);
      return out;
    };
    const seq = (rows: number) => run({ operands: 'bf16' }, rows);
    const split = (rows: number) => run({ operands: 'bf16', accumulator: 'split-k', splitK: 16 }, rows);
    const limited = (rows: number) => run({ operands: 'bf16', accumulator: 'split-k', splitK: 16, splitKMaxRows: 2 }, rows);
    expect([...limited(2)]).toEqual([...split(2)]);
    expect([...limited(3)]).toEqual([...seq(3)]);
    expect([...split(3)]).not.toEqual([...seq(3)]); // the orders do differ on these inputs
    expect(() => roundingNumerics({ operands: 'bf16', splitKMaxRows: 4 })).toThrow(/splitKMaxRows must be a positive integer with accumulator split-k, got 4/);
    expect(() => roundingNumerics({ operands: 'bf16', accumulator: 'split-k', splitKMaxRows: 0 })).toThrow(/splitKMaxRows/);
  });
});

describe('batch-dependent engine and the batch-invariant switch', () => {
  const task = makeTask('reverse');
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + 6 }), 6);
  const plan = (name: string) => resolvePlan(JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData);
  const probe = (name: string, B: number) => arMismatchProbe(policy, { plan: plan(name), length: 6, prompts: task.trainProblems(B, 6).map((q) => [...q.prompt]), seed: 6 }).diagnostics;

  it('mismatch at small batches (decode GEMMs of B ≤ 16 rows take split-K), none once every GEMM has more rows', () => {
    expect(probe('bf16-batch-variant', 2).meanAbsDelta).toBeGreaterThan(0);
    const large = probe('bf16-batch-variant', 17); // decode 17 rows, prefill 17·P rows: all sequential
    expect([large.k1, large.k3, large.maxAbsDelta]).toEqual([0, 0, 0]);
  });

  it('true-on-policy: the rollout runs the trainer kernel at every batch size, k3 exactly 0', () => {
    for (const B of [1, 2, 17]) {
      const d = probe('true-on-policy', B);
      expect([d.k1, d.k3, d.maxAbsDelta]).toEqual([0, 0, 0]);
    }
  });
});
