// Smoke: a GRPO run of the AR policy with an MoE feed-forward under every precision plan is finite
// and deterministic; the MoE parameters exist and the router trains.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { arParamSpecs } from '../../src/policies/ar/config.js';
import { arConfigFor } from '../../src/policies/ar/engine.js';
import { precisionPlans } from '../../src/policies/plans.js';
import { makeTaskFromConfig } from '../../src/tasks/index.js';
import { resolveRunConfig } from '../../src/rl/index.js';
import { applyOverrides, policyFactory, runGrpo } from '../../src/runs/index.js';

const work = mkdtempSync(join(tmpdir(), 'qrl-moe-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const base = {
  seed: 0,
  steps: 1,
  task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
  policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 16, moe: { experts: 4, topK: 2, auxCoeff: 0.01 } } },
  plan: 'bf16',
  sft: { steps: 2, batchSize: 4, cache: false },
  rollout: { prompts: 2, groupSize: 2 },
  estimators: { advantage: { name: 'grpo' }, correction: { name: 'none' }, loss: { name: 'ppo-clip' } },
  eval: { every: 0, problems: 2 },
};

async function run(plan: string, tag: string): Promise<string> {
  const config = resolveRunConfig(applyOverrides(base, [`plan=${plan}`]));
  const outDir = join(work, `${plan}-${tag}`);
  await runGrpo({ config, outDir, factory: policyFactory(config.policy.kind), cacheDir: join(work, 'cache') });
  return readFileSync(join(outDir, 'metrics.jsonl'), 'utf8');
}

describe('MoE AR policy under every plan', () => {
  for (const plan of Object.keys(precisionPlans)) {
    it(`${plan}: finite metrics`, { timeout: 120_000 }, async () => {
      const m = await run(plan, 'a');
      const rows = m
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows)
        for (const [k, v] of Object.entries(row)) if (typeof v === 'number') expect(Number.isNaN(v), k).toBe(false);
    });
  }
  it('policy.model.moe reaches the parameters; bad values name the field', () => {
    const config = resolveRunConfig(base);
    const names = arParamSpecs(arConfigFor(config, makeTaskFromConfig(config.task))).map((p) => p.name);
    expect(names).toContain('h0.moe.router');
    expect(names).toContain('h0.moe.e3.gate');
    expect(names).not.toContain('h0.mlp.up');
    const bad = resolveRunConfig(applyOverrides(base, ['policy.model.moe.topK=5']));
    expect(() => arConfigFor(bad, makeTaskFromConfig(bad.task))).toThrow(/moe\.topK.*5/);
  });
  it('diffusion policy with MoE: finite metrics under bf16 and fp8-rollout', { timeout: 120_000 }, async () => {
    for (const plan of ['bf16', 'fp8-rollout']) {
      const config = resolveRunConfig(
        applyOverrides(base, [`plan=${plan}`, 'policy.kind=diffusion', 'policy.model.hidden=32']),
      );
      const outDir = join(work, `diffusion-${plan}`);
      await runGrpo({ config, outDir, factory: policyFactory(config.policy.kind), cacheDir: join(work, 'cache') });
      const rows = readFileSync(join(outDir, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows)
        for (const [k, v] of Object.entries(row)) if (typeof v === 'number') expect(Number.isNaN(v), k).toBe(false);
    }
  });
  it('same seed and config: byte-identical metrics', { timeout: 120_000 }, async () => {
    expect(await run('fp8-rollout', 'b')).toBe(await run('fp8-rollout', 'c'));
  });
});
