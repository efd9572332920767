import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readJsonl } from '../../../src/core/files.js';
import { resolveRunConfig } from '../../../src/rl/index.js';
import { applyOverrides, policyFactory, runGrpo } from '../../../src/runs/index.js';
import type { MetricRecord } from '../../../src/rl/types.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-grpo-'));
const cacheDir = join(root, 'sft-cache');
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A small, fast AR run on `reverse`. */
function smallConfig(overrides: string[] = []) {
  const raw = {
    seed: 3,
    steps: 4,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
    plan: 'bf16',
    sft: { steps: 20, batchSize: 16 },
    rollout: { prompts: 4, groupSize: 4 },
    eval: { every: 2, problems: 8 },
    checkpoint: { every: 2 },
  };
  return resolveRunConfig(applyOverrides(raw, overrides));
}

async function run(dir: string, overrides: string[] = [], resume = false) {
  const config = resume
    ? resolveRunConfig(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')))
    : smallConfig(overrides);
  const cfg = resume ? resolveRunConfig(applyOverrides(config, overrides)) : config;
  return runGrpo({ config: cfg, outDir: dir, factory: policyFactory('ar'), resume, cacheDir });
}

describe('GRPO run', () => {
  it('is deterministic: the same config and seed give byte-identical metrics.jsonl', async () => {
    await run(join(root, 'a'));
    await run(join(root, 'b'));
    const a = readFileSync(join(root, 'a', 'metrics.jsonl'), 'utf8');
    expect(a.trim().split('\n')).toHaveLength(4);
    expect(readFileSync(join(root, 'b', 'metrics.jsonl'), 'utf8')).toBe(a);
    expect(readFileSync(join(root, 'b', 'eval.jsonl'), 'utf8')).toBe(
      readFileSync(join(root, 'a', 'eval.jsonl'), 'utf8'),
    );
    const c = JSON.parse(readFileSync(join(root, 'a', 'config.json'), 'utf8'));
    expect(c.estimators.correction).toEqual([{ name: 'none' }]);
  });

  it('resumes: 6 steps straight = 3 steps, stop, resume to 6 (identical metrics from step 4 on)', async () => {
    await run(join(root, 'full'), ['steps=6']);
    await run(join(root, 'part'), ['steps=3']);
    expect(existsSync(join(root, 'part', 'checkpoints', 'step-000003', 'backend.json'))).toBe(true);
    await run(join(root, 'part'), ['steps=6'], true);
    const full = readFileSync(join(root, 'full', 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n');
    const part = readFileSync(join(root, 'part', 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n');
    expect(part).toHaveLength(6);
    expect(part.slice(3)).toEqual(full.slice(3));
    expect(part).toEqual(full);
  });

  it('drops lines written after the last checkpoint when resuming (a crash mid-run)', async () => {
    const dir = join(root, 'crash');
    await run(dir, ['steps=3', 'checkpoint.every=2']);
    // checkpoints at 2 and 3 (the end); remove the last one to simulate a crash after step 3's line
    rmSync(join(dir, 'checkpoints', 'step-000003'), { recursive: true });
    await run(dir, ['steps=4'], true);
    const lines = readJsonl<MetricRecord>(join(dir, 'metrics.jsonl'));
    expect(lines.map((l) => l['step'])).toEqual([1, 2, 3, 4]);
    await run(join(root, 'straight4'), ['steps=4', 'checkpoint.every=2']);
    expect(readFileSync(join(dir, 'metrics.jsonl'), 'utf8')).toBe(
      readFileSync(join(root, 'straight4', 'metrics.jsonl'), 'utf8'),
    );
  });

  it('resume after a torn last line of metrics.jsonl restarts from a checkpoint that agrees with the files', async () => {
    const dir = join(root, 'torn');
    await run(dir, ['steps=3', 'checkpoint.every=2']);
    const path = join(dir, 'metrics.jsonl');
    const text = readFileSync(path, 'utf8');
    writeFileSync(path, text.slice(0, text.length - 20)); // cut inside step 3's line
    const messages: string[] = [];
    const config = resolveRunConfig(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')));
    await runGrpo({
      config,
      outDir: dir,
      factory: policyFactory('ar'),
      resume: true,
      cacheDir,
      observer: { onMessage: (m) => messages.push(m) },
    });
    expect(
      messages.some((m) => m.includes('skipped') && m.includes('step-000003') && m.includes('metrics.jsonl')),
    ).toBe(true);
    await run(join(root, 'straight3'), ['steps=3', 'checkpoint.every=2']);
    expect(readFileSync(path, 'utf8')).toBe(readFileSync(join(root, 'straight3', 'metrics.jsonl'), 'utf8'));
    expect(readFileSync(join(dir, 'eval.jsonl'), 'utf8')).toBe(
      readFileSync(join(root, 'straight3', 'eval.jsonl'), 'utf8'),
    );
  });

  it('a corrupt newest checkpoint is skipped by name; resume continues from the one before', async () => {
    const dir = join(root, 'corrupt');
    await run(dir, ['steps=3', 'checkpoint.every=2']);
    const state = join(dir, 'checkpoints', 'step-000003', 'backend.json');
    writeFileSync(state, readFileSync(state, 'utf8').slice(0, 100));
    const messages: string[] = [];
    const config = resolveRunConfig(
      applyOverrides(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')), ['steps=4']),
    );
    await runGrpo({
      config,
      outDir: dir,
      factory: policyFactory('ar'),
      resume: true,
      cacheDir,
      observer: { onMessage: (m) => messages.push(m) },
    });
    expect(messages.find((m) => m.startsWith('resume: skipped'))).toMatch(/step-000003.*not valid JSON/);
    expect(messages).toContain(`resumed from ${join(dir, 'checkpoints', 'step-000002')} (step 2)`);
    await run(join(root, 'straight4b'), ['steps=4', 'checkpoint.every=2']);
    expect(readFileSync(join(dir, 'metrics.jsonl'), 'utf8')).toBe(
      readFileSync(join(root, 'straight4b', 'metrics.jsonl'), 'utf8'),
    );
  });

  it('resume without any checkpoint starts over from step 0 and gives the uninterrupted run byte for byte', async () => {
    const dir = join(root, 'nockpt');
    await run(dir, ['steps=1']);
    const straight = readFileSync(join(dir, 'metrics.jsonl'), 'utf8');
    rmSync(join(dir, 'checkpoints'), { recursive: true });
    await run(dir, [], true);
    expect(readFileSync(join(dir, 'metrics.jsonl'), 'utf8')).toBe(straight);
  });

  it('on-policy recovery: with identical plans every correction gives the metrics and weights of none', async () => {
    const base = join(root, 'onpolicy-none');
    await run(base, ['steps=2', 'estimators.correction.name=none']);
    const baseLines = readJsonl<MetricRecord>(join(base, 'metrics.jsonl'));
    const baseWeights = JSON.parse(
      readFileSync(join(base, 'checkpoints', 'step-000002', 'backend.json'), 'utf8'),
    ).weights;
    expect(baseLines[0]?.['rollout_corr/k3_kl']).toBe(0);
    for (const name of ['token-is', 'tis', 'seq-tis', 'icepop', 'mis-token', 'mis-seq', 'geo-rs', 'veto', 'ais']) {
      const dir = join(root, `onpolicy-${name}`);
      await run(dir, ['steps=2', `estimators.correction.name=${name}`]);
      const lines = readJsonl<MetricRecord>(join(dir, 'metrics.jsonl'));
      for (const [i, line] of lines.entries()) {
        for (const key of [
          'reward/mean',
          'actor/loss',
          'actor/pg_loss',
          'actor/grad_norm',
          'rollout_corr/kl',
          'rollout_corr/k3_kl',
        ]) {
          expect(line[key], `${name} step ${i + 1} ${key}`).toBe(baseLines[i]?.[key]);
        }
      }
      const weights = JSON.parse(readFileSync(join(dir, 'checkpoints', 'step-000002', 'backend.json'), 'utf8')).weights;
      expect(weights, name).toEqual(baseWeights);
    }
  });

  it('bypass mode (ℓold := ℓroll): deterministic, no ℓold recompute, and equal to decoupled when the plans are identical', async () => {
    // With identical plans ℓroll ≡ ℓold bit for bit (test/policies/ar/rollout.test.ts), so the
    // loss sees the same (ℓθ, ℓold, A) either way; TIS weights are exactly 1 in decoupled mode and
    // not applied by ppo-clip in bypass mode, the KL mask (response vs denominator) covers the same
    // tokens when nothing is rejected. Hence the loss/update metrics and the weights agree bit for bit
    // (actor/loss up to summation order, below); the
    // rollout_corr/* statistics differ by design (bypass measures ℓθ against ℓroll per mini-batch).
    const common = [
      'steps=2',
      'eval.every=0',
      'estimators.correction={"name":"tis","C":2}',
      'estimators.kl={"name":"k3","coef":0.01}',
    ];
    const dec = join(root, 'bypass-decoupled');
    const byp = join(root, 'bypass-a');
    await run(dec, common);
    await run(byp, [...common, 'estimators.mode=bypass']);
    await run(join(root, 'bypass-b'), [...common, 'estimators.mode=bypass']);
    expect(readFileSync(join(root, 'bypass-b', 'metrics.jsonl'), 'utf8')).toBe(
      readFileSync(join(byp, 'metrics.jsonl'), 'utf8'),
    );
    const d = readJsonl<MetricRecord>(join(dec, 'metrics.jsonl'));
    const b = readJsonl<MetricRecord>(join(byp, 'metrics.jsonl'));
    expect(b).toHaveLength(2);
    for (const [i, line] of b.entries()) {
      for (const key of [
        'reward/mean',
        'actor/pg_loss',
        'actor/kl_loss',
        'actor/grad_norm',
        'actor/pg_clipfrac',
        'actor/ppo_kl',
      ]) {
        expect(line[key], `step ${i + 1} ${key}`).toBeDefined();
        expect(line[key], `step ${i + 1} ${key}`).toBe(d[i]?.[key]);
      }
      // the KL over its own (response) mask is aggregated apart: loss = pg + coef·kl, equal to
      // decoupled's single aggregation of pg + coef·kl per token up to summation order
      expect(line['actor/loss']).toBe(line['actor/pg_loss']! + 0.01 * line['actor/kl_loss']!);
      expect(line['actor/loss']).toBeCloseTo(d[i]!['actor/loss']!, 12);
    }
    expect(readFileSync(join(byp, 'eval.jsonl'), 'utf8')).toBe(readFileSync(join(dec, 'eval.jsonl'), 'utf8'));
    const weights = (dir: string) =>
      JSON.parse(readFileSync(join(dir, 'checkpoints', 'step-000002', 'backend.json'), 'utf8')).weights;
    expect(weights(byp)).toEqual(weights(dec));
    // the trainer recompute of ℓold is skipped (its phase is exactly 0), the reference one is not
    const timings = readJsonl<{ old: number; ref: number }>(join(byp, 'timings.jsonl'));
    expect(timings.map((r) => r.old)).toEqual([0, 0]);
    expect(readJsonl<{ old: number }>(join(dec, 'timings.jsonl')).every((r) => r.old !== 0)).toBe(true);
  });

  it('stale rollouts (staleness 2): batch of step t from the weights of step max(1, t − 2); resume is byte-identical', async () => {
    const common = ['eval.every=0', 'rollout.staleness=2'];
    const straight = join(root, 'stale-straight');
    await run(straight, [...common, 'steps=6']);
    const lines = readJsonl<MetricRecord>(join(straight, 'metrics.jsonl'));
    expect(lines.map((l) => l['rollout/staleness'])).toEqual([0, 1, 2, 2, 2, 2]);
    // steps 1–3 train on batches generated at step 1, i.e. by the same weight version
    const v = lines.map((l) => l['rollout/weight_version'] as number);
    expect(v[1]).toBe(v[0]);
    expect(v[2]).toBe(v[0]);
    // the lag in weight versions is the number of updates since the batch was generated
    for (const l of lines) expect(l['rollout/version_lag']).toBeGreaterThanOrEqual(0);
    expect(lines[2]?.['rollout/version_lag']).toBeGreaterThan(0);
    // step 1 is the synchronous step 1 (same weights, same streams) up to the staleness keys
    const sync = join(root, 'stale-sync');
    await run(sync, ['eval.every=0', 'steps=2']);
    const s = readJsonl<MetricRecord>(join(sync, 'metrics.jsonl'));
    const {
      ['rollout/staleness']: _a,
      ['rollout/weight_version']: _b,
      ['rollout/version_lag']: _c,
      ...first
    } = lines[0]!;
    expect(first).toEqual(s[0]);
    expect(
      lines[1]?.['reward/mean'] === s[1]?.['reward/mean'] && lines[1]?.['actor/loss'] === s[1]?.['actor/loss'],
    ).toBe(false);
    // 3 steps, then resume to 6: the checkpoint carries the two batches generated ahead
    const resumed = join(root, 'stale-resumed');
    await run(resumed, [...common, 'steps=3']);
    expect(
      JSON.parse(readFileSync(join(resumed, 'checkpoints', 'step-000003', 'checkpoint.json'), 'utf8')).pending.map(
        (p: { step: number }) => p.step,
      ),
    ).toEqual([4, 5]);
    await run(resumed, ['steps=6'], true);
    expect(readFileSync(join(resumed, 'metrics.jsonl'), 'utf8')).toBe(
      readFileSync(join(straight, 'metrics.jsonl'), 'utf8'),
    );
  });

  it('support replay under top-p: identical plans give zero trainer–rollout mismatch; without replay they do not', async () => {
    const common = ['steps=1', 'eval.every=0', 'policy.sampler.topP=0.7'];
    await run(join(root, 'topp-replay'), [...common, 'policy.sampler.supportReplay=true']);
    await run(join(root, 'topp-plain'), common);
    const replay = readJsonl<MetricRecord>(join(root, 'topp-replay', 'metrics.jsonl'))[0]!;
    const plain = readJsonl<MetricRecord>(join(root, 'topp-plain', 'metrics.jsonl'))[0]!;
    expect(replay['rollout_corr/k3_kl']).toBe(0);
    expect(replay['rollout_corr/log_ppl_diff']).toBe(0);
    expect(plain['rollout_corr/k3_kl']).toBeGreaterThan(0);
    expect(replay['reward/mean']).toBe(plain['reward/mean']); // same samples: replay changes the scoring only
  });

  it('learns: on reverse with the bf16 plan mean reward rises over a short run', { timeout: 400_000 }, async () => {
    const dir = join(root, 'learn');
    const config = resolveRunConfig({
      seed: 0,
      steps: 24,
      task: { name: 'reverse' },
      plan: 'bf16',
      sft: { steps: 40 },
      eval: { every: 0, problems: 16 },
      checkpoint: { every: 0 },
    });
    await runGrpo({ config, outDir: dir, factory: policyFactory('ar'), cacheDir });
    const r = readJsonl<MetricRecord>(join(dir, 'metrics.jsonl')).map((l) => l['reward/mean'] as number);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    // Seeded: first 6 steps ≈ 0.2, last 6 ≈ 0.5; the bound fails if the loop does not learn.
    expect(mean(r.slice(-6))).toBeGreaterThan(mean(r.slice(0, 6)) + 0.1);
  });

  // A 200-step warm start plus 24 GRPO steps: about 100 s alone on two cores, so the default 120 s
  // limit is too tight when the other test fork runs beside it.
  it(
    'learns with the diffusion policy too (sims/diffusion-reverse.json, d1 estimator)',
    { timeout: 400_000 },
    async () => {
      const dir = join(root, 'learn-diffusion');
      const raw = JSON.parse(readFileSync('sims/diffusion-reverse.json', 'utf8'));
      const config = resolveRunConfig(
        applyOverrides(raw, ['steps=24', 'eval.every=0', 'eval.problems=8', 'checkpoint.every=0']),
      );
      await runGrpo({ config, outDir: dir, factory: policyFactory('diffusion'), cacheDir });
      const r = readJsonl<MetricRecord>(join(dir, 'metrics.jsonl')).map((l) => l['reward/mean'] as number);
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      // Seeded: ≈ 0.43 over the first 6 steps, ≈ 0.55 over the last 6.
      expect(mean(r.slice(-6))).toBeGreaterThan(mean(r.slice(0, 6)) + 0.05);
    },
  );
});
