import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readJsonl } from '../../../src/files.js';
import { overlongPenalty, resolveRunConfig } from '../../../src/rl/index.js';
import { applyOverrides, policyFactory, runGrpo } from '../../../src/runs/index.js';
import type { MetricRecord } from '../../../src/rl/types.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-loop-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('DAPO overlong shaping', () => {
  it('is 0 up to maxLength − buffer, ramps linearly to −penalty at maxLength, −penalty beyond', () => {
    expect(overlongPenalty(6, 10, 4, 1)).toBe(0);
    expect(overlongPenalty(7, 10, 4, 1)).toBe(-0.25);
    expect(overlongPenalty(10, 10, 4, 1)).toBe(-1);
    expect(overlongPenalty(11, 10, 4, 0.5)).toBe(-0.5);
  });
});

async function steps(name: string, overrides: string[], n = 2): Promise<MetricRecord[]> {
  const raw = {
    seed: 1,
    steps: n,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
    sft: { steps: 10, batchSize: 8 },
    rollout: { prompts: 3, groupSize: 4 },
    eval: { every: 0, problems: 4 },
    checkpoint: { every: 0 },
  };
  const dir = join(root, name);
  await runGrpo({ config: resolveRunConfig(applyOverrides(raw, overrides)), outDir: dir, factory: policyFactory('ar'), cacheDir: join(root, 'cache') });
  return readJsonl<MetricRecord>(join(dir, 'metrics.jsonl'));
}

describe('GRPO step options', () => {
  it('the KL term uses the reference (warm-started) policy: 0 at step 1, positive after an update', async () => {
    const lines = await steps('kl', ['estimators.kl={"name":"k3","coef":0.01}', 'optim.miniBatches=1'], 3);
    expect(lines[0]?.['actor/kl_loss']).toBe(0); // θ = θ_ref during the first update's forward
    // Step 1's batch has equal rewards (no update), step 2 updates θ, so step 3 sees θ ≠ θ_ref.
    expect(lines[1]?.['actor/grad_norm']).toBeGreaterThan(0);
    expect(lines[2]?.['actor/kl_loss']).toBeGreaterThan(0);
    expect(lines[2]?.['actor/kl_coef']).toBe(0.01);
  });

  it('dynamic sampling keeps only groups with different rewards', async () => {
    const lines = await steps('dyn', ['reward.dynamicSampling=true']);
    for (const l of lines) {
      expect(l['batch/kept_sequences']! % 4).toBe(0);
      expect(l['batch/kept_sequences']).toBeLessThanOrEqual(l['batch/sequences']!);
    }
    const plain = await steps('nodyn', []);
    expect(plain.every((l) => l['batch/kept_sequences'] === l['batch/sequences'])).toBe(true);
  });

  it('overlong shaping lowers rewards of long responses only', async () => {
    const shaped = await steps('overlong', ['reward.overlong={"buffer":4,"penalty":1}']);
    const plain = await steps('plain', []);
    expect(shaped[0]!['reward/mean']).toBeLessThanOrEqual(plain[0]!['reward/mean']!);
    expect(shaped[0]!['response_length/mean']).toBe(plain[0]!['response_length/mean']);
  });
});
