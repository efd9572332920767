import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readJsonl } from '../../../src/core/files.js';
import { resolveConfig, resolveRunConfig, stepAdvantages } from '../../../src/rl/index.js';
import { overlongPenalty } from '../../../src/rl/grpo/phases.js';
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

describe('support replay switch', () => {
  it('is accepted for both policies (the diffusion sampler has top-k / top-p and replays its kept sets too)', () => {
    expect(
      resolveRunConfig({ policy: { kind: 'diffusion', sampler: { topP: 0.9, supportReplay: true } } }).policy.sampler
        .supportReplay,
    ).toBe(true);
    expect(resolveRunConfig({ policy: { sampler: { supportReplay: true } } }).policy.sampler.supportReplay).toBe(true);
    expect(() => resolveRunConfig({ policy: { sampler: { supportReplay: 1 } } })).toThrow(
      /^config\.policy\.sampler\.supportReplay: /,
    );
  });
});

describe('step advantages', () => {
  // verl core_algos.py compute_reinforce_plus_plus_outcome_advantage (l.693–731) broadcasts R_i to
  // the n_i valid tokens of row i and masked_whiten (torch_functional.py l.311–346) whitens over all
  // of them: μ = Σ n_i R_i / Σ n_i, var unbiased over tokens, A_i = (R_i − μ)/√(var + 1e-8).
  const rewards = Float64Array.from([1, 0, 0, 1, 1, 1]);
  const lengths = Float64Array.from([2, 1, 3, 2, 4, 4]);
  const spec = resolveConfig({ advantage: { name: 'reinforce++' } }).advantage;

  it('REINFORCE++ whitens over the valid tokens of the kept rows (hand computation)', () => {
    // rows 0..3: tokens 2+1+3+2 = 8, μ = (2·1 + 2·1)/8 = 0.5, Σ n(R−μ)² = 8·0.25 = 2, var = 2/7
    const a = stepAdvantages(rewards, lengths, [0, 1, 2, 3], 2, spec).value;
    const s = 0.5 / Math.sqrt(2 / 7 + 1e-8);
    expect(Array.from(a)).toEqual([s, -s, -s, s]);
    // a row-count whitening (every row once) would give var = 1/3 instead: the lengths matter here
    expect(s).not.toBeCloseTo(0.5 / Math.sqrt(1 / 3 + 1e-8), 6);
  });

  it('uses the lengths of the kept rows only (dynamic sampling drops rows 4, 5)', () => {
    // rows 1, 2, 4: tokens 1+3+4 = 8, μ = 4/8 = 0.5, Σ n(R−μ)² = 8·0.25 = 2, var = 2/7
    const a = stepAdvantages(rewards, lengths, [1, 2, 4], 2, spec).value;
    const s = 0.5 / Math.sqrt(2 / 7 + 1e-8);
    expect(Array.from(a)).toEqual([-s, -s, s]);
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
  await runGrpo({
    config: resolveRunConfig(applyOverrides(raw, overrides)),
    outDir: dir,
    factory: policyFactory('ar'),
    cacheDir: join(root, 'cache'),
  });
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
