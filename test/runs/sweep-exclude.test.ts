// `exclude`: grid points left out of a sweep (arms identical by construction), recorded for resume.
import { describe, expect, it } from 'vitest';
import { planSweep } from '../../src/runs/sweep.js';
import { UsageError } from '../../src/core/errors.js';

const baseConfig = { steps: 1, task: { name: 'reverse' }, policy: { kind: 'ar' } };

describe('sweep exclude', () => {
  it('leaves out the points a selector matches, in grid order', async () => {
    const plan = await planSweep({
      baseConfig,
      grid: 'plan=bf16,mxfp4-rollout;correction=none,tis',
      exclude: 'plan=bf16,correction=tis',
      seeds: 2,
      outDir: 'unused',
    });
    expect(plan.runs.map((r) => r.dir)).toEqual([
      'plan-bf16_correction-none/seed-0',
      'plan-bf16_correction-none/seed-1',
      'plan-mxfp4-rollout_correction-none/seed-0',
      'plan-mxfp4-rollout_correction-none/seed-1',
      'plan-mxfp4-rollout_correction-tis/seed-0',
      'plan-mxfp4-rollout_correction-tis/seed-1',
    ]);
  });

  it.each([
    ['plan=fp9', /'plan=fp9' is not a grid value/],
    ['plan=bf16,correction=tis;plan=bf16,correction=tis', /matches no grid point left/],
    ['correction=none;correction=tis', /leaves no grid point/],
  ])('refuses %s', async (exclude, message) => {
    const p = planSweep({ baseConfig, grid: 'plan=bf16,mxfp4-rollout;correction=none,tis', exclude, outDir: 'unused' });
    await expect(p).rejects.toThrow(UsageError);
    await expect(p).rejects.toThrow(message);
  });
});
