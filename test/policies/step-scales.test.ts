// Per-tensor dynamic activation scales shared by the requests of one scheduler step: the scheduled rollout with
// maxBatch ≥ B and one prefill equals the lockstep rollout (whose GEMMs see all B rows) draw for draw, which it
// cannot when each request's call uses its own amax; per-token scales are unaffected (k3 stays 0).

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { arConfig } from '../../src/policies/ar/config.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { arMismatchProbe } from '../../src/policies/ar/probe.js';
import type { EngineExecution } from '../../src/policies/execution.js';
import { resolvePlan, type PlanData, type PrecisionPlan } from '../../src/policies/plans.js';
import { createStepScales, settleNextSite, stepTensorAmax, withStepScales } from '../../src/policies/step-scales.js';
import { makeTask } from '../../src/tasks/registry.js';

describe('step-shared per-tensor activation scales', () => {
  const task = makeTask('reverse');
  const L = 5;
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + L }), 3);
  const plan = (name: string, engine: EngineExecution): PrecisionPlan => {
    const p = resolvePlan(JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData);
    return { ...p, rollout: { ...p.rollout, engine } };
  };
  const prompts = (B: number) => task.trainProblems(B, 9).map((q) => [...q.prompt]);
  const probe = (name: string, engine: EngineExecution, B: number, requestLengths?: number[]) =>
    arMismatchProbe(policy, {
      plan: plan(name, engine),
      length: L,
      prompts: prompts(B),
      seed: 4,
      ...(requestLengths ? { requestLengths } : {}),
    });

  it('maxBatch ≥ B, one prefill: the scheduler gives the lockstep rollout bit for bit (per-tensor te-current)', () => {
    for (const B of [3, 6]) {
      const lockstep = probe('fp8-tensor-scale-invariant', { batchInvariant: true }, B);
      const scheduled = probe('fp8-tensor-scale-invariant', { batchInvariant: true, maxBatch: B + 2 }, B);
      expect(Buffer.from(scheduled.rollout.tokens.buffer)).toEqual(Buffer.from(lockstep.rollout.tokens.buffer));
      expect([...scheduled.rollout.logpRollout]).toEqual([...lockstep.rollout.logpRollout]);
    }
  });

  it('the step composition moves a per-tensor plan (max batch 2, chunks of 3) and leaves a per-token plan at 0', () => {
    const engine = { batchInvariant: true, maxBatch: 2, prefillChunk: 3 };
    const lockstep = probe('fp8-tensor-scale-invariant', { batchInvariant: true }, 4, [5, 2, 4, 5]);
    const scheduled = probe('fp8-tensor-scale-invariant', engine, 4, [5, 2, 4, 5]);
    expect([...scheduled.rollout.logpRollout]).not.toEqual([...lockstep.rollout.logpRollout]);
    expect(scheduled.diagnostics.k3).toBeGreaterThan(0);
    const d = probe('fp8-token-scale-invariant', engine, 4, [5, 2, 4, 5]).diagnostics;
    expect([d.k1, d.k3, d.maxAbsDelta]).toEqual([0, 0, 0]);
  });

  it('settles sites in first-call order with the max over every call of the pass; NaN propagates', () => {
    const a = {};
    const b = {};
    const s = createStepScales();
    withStepScales(s, () => {
      expect(stepTensorAmax(a, 2)).toBeUndefined();
      stepTensorAmax(b, 7);
      stepTensorAmax(a, 5);
    });
    expect(settleNextSite(s)).toBe(true);
    expect(s.fixed.get(a)).toBe(5);
    withStepScales(s, () => {
      expect(stepTensorAmax(a, 1)).toBe(5);
      stepTensorAmax(b, Number.NaN);
      stepTensorAmax(b, 3);
    });
    expect(settleNextSite(s)).toBe(true);
    expect(s.fixed.get(b)).toBeNaN();
    withStepScales(s, () => stepTensorAmax(a, 1));
    expect(settleNextSite(s)).toBe(false);
    expect(stepTensorAmax(a, 1)).toBeUndefined(); // no step active
  });
});
