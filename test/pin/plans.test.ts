// The bit-identical pin of every precision plan's GEMM paths: one rollout, the trainer's log-probs and the
// gradients, hashed per plan at two shapes (test/pin/plans.ts), must reproduce test/pin/plans.json.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { precisionPlans } from '../../src/policies/index.js';
import { PLAN_FIXTURE, PLAN_PIN_SHAPES, planHashes } from './plans.js';

const fixture = JSON.parse(readFileSync(PLAN_FIXTURE, 'utf8')) as Record<
  string,
  Record<string, ReturnType<typeof planHashes>>
>;

describe('bit-identical pin of every precision plan (tokens, log-probs, gradients)', () => {
  it('covers every plan at every shape', () => {
    expect(Object.keys(fixture).sort()).toEqual(Object.keys(PLAN_PIN_SHAPES).sort());
    for (const plans of Object.values(fixture))
      expect(Object.keys(plans).sort()).toEqual(Object.keys(precisionPlans).sort());
  });
  for (const shape of Object.keys(PLAN_PIN_SHAPES) as (keyof typeof PLAN_PIN_SHAPES)[]) {
    for (const name of Object.keys(precisionPlans)) {
      it(`${shape} ${name}`, { timeout: 120_000 }, () => {
        expect(planHashes(shape, name)).toEqual(fixture[shape]?.[name]);
      });
    }
  }
});
