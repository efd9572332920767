// `qrl-sim lab run NAME --backend COMMAND`: the experiment's grid on a spawned backend, each plan
// mapped to the backend's own (sims/lab/NAME.json backendPlans): the length experiment's smoke version
// on the transformers backend (one seed; the CI check of issue 45), an experiment without a mapping
// and a URL refused with exit 2 before anything runs, and the pieces: the command's plan, the mapped
// baseline, and the summary labelling runs on a backend by the plan they were served.

import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from './io.js';
import { commandForPlan, sweepBackendRun } from '../../src/runs/sweep-backend.js';
import { backendBaseline, loadLabExperiment } from '../../src/runs/lab.js';
import { summarizeRuns } from '../../src/report/summary.js';
import { resolveRunConfig } from '../../src/rl/index.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-lab-backend-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const hf = 'PYTHONPATH=python python3 -m qrl_backend.hf';

describe('lab run --backend', () => {
  it('runs the length experiment (smoke) on the transformers backend with its plans mapped', async () => {
    const out = join(root, 'length');
    const r = await runCli(['lab', 'run', 'length', '--smoke', '--seeds', '1', '--out', out, '--backend', hf]);
    expect(r.code, r.out + r.err).toBe(0);
    expect(r.out).toMatch(/plans mapped bf16 → hf-bf16, fp8-rollout → hf-fp8-rollout/);
    expect(r.out).toMatch(/4 runs \(0 failed\)/);
    expect(r.out).toMatch(/\| task\.options\.minLength=64, task\.options\.maxLength=64, plan=hf-fp8-rollout \| 1 \|/);
    const dir = join(out, 'task.options-minLength-8-maxLength-8-evalFraction-0.3_plan-fp8-rollout', 'seed-0');
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, any>;
    expect(config['plan']).toBe('backend');
    expect(config['backend']).toMatchObject({
      name: 'qrl_backend.hf',
      plan: 'hf-fp8-rollout',
      address: `${hf} --plan hf-fp8-rollout`,
    });
    const k3 = readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l)['rollout_corr/k3_kl'] as number);
    expect(k3[0]).toBeGreaterThan(0); // FP8 rollout against a bf16 trainer: a mismatch
  }, 600_000);

  it('runs length-long-hf (smoke) with outlier channels, its INT8 plan mapped to hf-int8-rollout', async () => {
    const out = join(root, 'length-long-hf');
    const be = `${hf} --outliers 2`;
    const r = await runCli(['lab', 'run', 'length-long-hf', '--smoke', '--out', out, '--backend', be]);
    expect(r.code, r.out + r.err).toBe(0);
    expect(r.out).toMatch(/bf16 → hf-bf16, fp8-rollout → hf-fp8-rollout, int8-rollout → hf-int8-rollout/);
    expect(r.out).toMatch(/3 runs \(0 failed\)/);
    const dir = join(out, 'plan-int8-rollout', 'seed-0');
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, any>;
    expect(config['backend']).toMatchObject({ plan: 'hf-int8-rollout', address: `${be} --plan hf-int8-rollout` });
    const k3 = JSON.parse(readFileSync(join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n')[0]!)[
      'rollout_corr/k3_kl'
    ];
    expect(k3).toBeGreaterThan(0);
  }, 600_000);

  it('refuses an experiment that maps no backend plan, naming the plan (exit 2, nothing written)', async () => {
    const out = join(root, 'alignment');
    const r = await runCli(['lab', 'run', 'alignment', '--smoke', '--out', out, '--backend', hf]);
    expect(r.code).toBe(2);
    expect(r.err.trim()).toMatch(
      /^qrl-sim lab: --backend: experiment 'alignment' maps no backend plan for plan '[^']+' \(sims\/lab\/alignment\.json backendPlans: none\)$/,
    );
    expect(existsSync(out)).toBe(false);
  });

  it('refuses a URL: the backend must be started with each run’s plan', async () => {
    const r = await runCli([
      'lab',
      'run',
      'length',
      '--smoke',
      '--out',
      join(root, 'url'),
      '--backend',
      'http://127.0.0.1:1',
    ]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--backend: lab run needs a command .* got the URL 'http:\/\/127\.0\.0\.1:1'/);
  });

  it('maps a plan into the command, the run config and the baseline', () => {
    expect(commandForPlan('be --x', 'hf-bf16')).toBe('be --x --plan hf-bf16');
    expect(commandForPlan('be --plan={plan} --tag {plan}', 'p')).toBe('be --plan=p --tag p');
    const config = resolveRunConfig({ plan: 'fp8-rollout' });
    const mapped = sweepBackendRun(
      config,
      { command: 'c', address: 'a', plans: { 'fp8-rollout': 'hf-fp8-rollout' } },
      'here',
    );
    expect(mapped.config.plan).toBe('backend');
    expect(mapped.backend).toEqual({
      command: 'c --plan hf-fp8-rollout',
      address: 'a --plan hf-fp8-rollout',
      plan: 'hf-fp8-rollout',
    });
    expect(() =>
      sweepBackendRun(resolveRunConfig({ plan: 'bf16' }), { command: 'c', address: 'a', plans: {} }, 'here'),
    ).toThrow(/here has no backend plan for plan 'bf16'/);
    const exp = loadLabExperiment('length');
    expect(backendBaseline('plan=bf16, correction=none', exp)).toBe('plan=hf-bf16, correction=none');
  });

  it('labels runs on a backend by the served plan, leaving out the address that only repeats it', () => {
    const run = (plan: string, lr: number) => ({
      dir: `${plan}-${lr}`,
      name: `${plan}-${lr}`,
      config: { plan: 'backend', optim: { lr }, backend: { address: `be --plan ${plan}`, plan } },
      metrics: [],
      eval: [],
      timings: [],
      error: null,
    });
    const s = summarizeRuns([run('hf-bf16', 1), run('hf-fp8-rollout', 1), run('hf-bf16', 2)], {
      baseline: 'plan=hf-bf16, lr=1',
    });
    expect(s.groups.map((g) => g.label)).toEqual([
      'plan=hf-bf16, optim.lr=1',
      'plan=hf-fp8-rollout, optim.lr=1',
      'plan=hf-bf16, optim.lr=2',
    ]);
    // two backends serving the same plan stay apart by their address
    const other = {
      ...run('hf-bf16', 1),
      name: 'o',
      config: { ...run('hf-bf16', 1).config, backend: { address: 'other --plan hf-bf16', plan: 'hf-bf16' } },
    };
    expect(summarizeRuns([run('hf-bf16', 1), other]).groups.map((g) => g.label)).toEqual([
      'backend.address=be --plan hf-bf16',
      'backend.address=other --plan hf-bf16',
    ]);
  });
});
