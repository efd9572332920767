// The NVFP4 recipe plans of sims/plans/: matching 4over6 settings with per-token activations under the
// batch-invariant switch give k3 exactly 0; each mismatched setting (bound, error mode, library, 4over6 dropped,
// converter, per-token flag dropped) gives k3 > 0 on the same samples.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { arConfig } from '../../src/policies/ar/config.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { arMismatchProbe } from '../../src/policies/ar/probe.js';
import { resolvePlan, type PlanData } from '../../src/policies/plans.js';
import { makeTask } from '../../src/tasks/registry.js';

describe('NVFP4 recipe plans', () => {
  const task = makeTask('reverse');
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + 6 }), 6);
  const probe = (name: string, B: number) =>
    arMismatchProbe(policy, {
      plan: resolvePlan(JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData),
      length: 6,
      prompts: task.trainProblems(B, 6).map((q) => [...q.prompt]),
      seed: 6,
    }).diagnostics;

  it('matched settings on every side: k3 exactly 0 at several batch sizes', () => {
    for (const B of [1, 5]) {
      const d = probe('nvfp4-4over6-matched', B);
      expect([d.k1, d.k3, d.maxAbsDelta], `B = ${B}`).toEqual([0, 0, 0]);
    }
  });

  it.each([
    'nvfp4-4over6-bound-mismatch',
    'nvfp4-4over6-error-mismatch',
    'nvfp4-4over6-te-vs-flashinfer',
    'nvfp4-4over6-vs-plain',
    'nvfp4-4over6-mismatched-trio',
    'nvfp4-per-token-dropped',
  ])('%s: k3 > 0', (name) => {
    expect(probe(name, 5).k3).toBeGreaterThan(0);
  });
});
