// Sweeps: grid parsing, up-front validation (bad grids exit 2 and write nothing), identical run
// files with 1 and 2 workers, failed runs recorded. Uses the deterministic fake policy factory.

import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { readRuns } from '../../src/report/index.js';
import { gridPoints, parseGrid, planSweep, runSweep } from '../../src/runs/index.js';
import { runCli } from '../cli/io.js';
import { tempDir } from './fixtures.js';

const FACTORY = `${fileURLToPath(new URL('./fake-factory.ts', import.meta.url))}#fakePolicyFactory`;
const BASE = {
  steps: 3,
  task: { name: 'reverse' },
  sft: { steps: 0, cache: false },
  rollout: { prompts: 2, groupSize: 4 },
  eval: { every: 2, problems: 4 },
  checkpoint: { every: 0 },
};

function baseFile(): string {
  const dir = tempDir('sweep-config');
  const file = join(dir, 'base.json');
  writeFileSync(file, JSON.stringify(BASE));
  return file;
}

describe('parseGrid', () => {
  test('aliases, config paths, JSON values with commas, cartesian order', () => {
    const axes = parseGrid('correction=none,{"name":"tis","C":3};optim.lr=0.001,0.002');
    expect(axes.map((a) => a.path)).toEqual(['estimators.correction', 'optim.lr']);
    expect(axes[0]!.values).toEqual([{ name: 'none' }, { name: 'tis', C: 3 }]);
    expect(axes[1]!.values).toEqual([0.001, 0.002]);
    const points = gridPoints(axes);
    expect(points.map((p) => p.label)).toEqual([
      'correction=none, optim.lr=0.001',
      'correction=none, optim.lr=0.002',
      'correction={"name":"tis","C":3}, optim.lr=0.001',
      'correction={"name":"tis","C":3}, optim.lr=0.002',
    ]);
    expect(points[0]!.dirName).toBe('correction-none_optim.lr-0.001');
    expect(new Set(points.map((p) => p.dirName)).size).toBe(4);
    expect(gridPoints([])).toEqual([{ label: 'base', dirName: 'base', overrides: [] }]);
  });

  test('a plan value ending in .json is a plan file: its contents become the value, relative to root; the label keeps the path', () => {
    const file = 'sims/plans/jet-fault-ignore-rule.json';
    const [axis] = parseGrid(`plan=jet,${file}`, { root: process.cwd() });
    expect(axis!.values[0]).toBe('jet');
    expect(axis!.values[1]).toEqual(JSON.parse(readFileSync(file, 'utf8')));
    expect(parseGrid(`plan=${file}`)[0]!.values[0]).toEqual(axis!.values[1]); // the working directory by default
    expect(gridPoints([axis!]).map((p) => [p.label, p.dirName])).toEqual([
      ['plan=jet', 'plan-jet'],
      [`plan=${file}`, 'plan-sims-plans-jet-fault-ignore-rule.json'],
    ]);
    // only the plan key reads files; a missing file is a usage error naming the value
    expect(parseGrid('task=x.json')[0]!.values).toEqual(['x.json']);
    expect(() => parseGrid('plan=sims/plans/nope.json')).toThrow(
      '--grid: plan=sims/plans/nope.json: no such plan file',
    );
  });

  test.each([
    ['correction=', /empty value list/],
    ['correction=none,,tis', /empty value/],
    ['correction', /not key=v1,v2/],
    ['plan=bf16;plan=fp16', /appears twice/],
    ['seed=1,2', /--seeds/],
    ['=a', /empty key/],
  ])('%s is a usage error', (grid, message) => {
    expect(() => parseGrid(grid)).toThrow(message);
  });
});

describe('qrl-sim sweep: bad grids exit 2 and write nothing', () => {
  const file = baseFile();
  test.each([
    ['unknown key', 'colour=red,blue', /config: unknown field 'colour'|config\.colour|colour/],
    ['unknown nested key', 'optim.momentum=0.9', /optim: unknown field 'momentum'/],
    ['empty value list', 'correction=', /correction' has an empty value list/],
    ['invalid estimator', 'correction=none,bogus', /grid point correction=bogus, seed 0: .*unknown estimator "bogus"/],
    ['invalid number', 'optim.lr=0.001,-1', /grid point optim.lr=-1, seed 0: config\.optim\.lr/],
    ['unknown plan', 'plan=bf16,fp9', /grid point plan=fp9, seed 0: config\.plan: must be one of .*"fp9"/],
    [
      'value the policy rejects',
      'policy.model.width=4,-2',
      /grid point policy.model.width=-2, seed 0: config\.policy\.model\.width/,
    ],
  ])('%s', async (_name, grid, message) => {
    const out = join(tempDir('bad-grid'), 'out');
    const r = await runCli([
      'sweep',
      '--config',
      file,
      '--grid',
      grid,
      '--seeds',
      '2',
      '--out',
      out,
      '--factory',
      FACTORY,
    ]);
    expect(r.code).toBe(2);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toMatch(message);
    expect(existsSync(out)).toBe(false);
  });

  test('bad --set, --seeds and a missing config file are usage errors too', async () => {
    const out = join(tempDir('bad-args'), 'out');
    for (const args of [
      ['--set', 'optim.lr=abc'],
      ['--seeds', '0'],
      ['--workers', 'two'],
      ['--set', 'seed=-1'],
      ['--steps', '0'],
    ]) {
      const r = await runCli(['sweep', '--config', file, '--out', out, '--factory', FACTORY, ...args]);
      expect(r.code, args.join(' ')).toBe(2);
    }
    expect((await runCli(['sweep', '--config', '/nonexistent.json', '--out', out])).code).toBe(2);
    expect(existsSync(out)).toBe(false);
  });
});

function runFiles(root: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const run of readRuns(root)) {
    for (const f of ['config.json', 'metrics.jsonl', 'eval.jsonl']) {
      const p = join(run.dir, f);
      if (existsSync(p)) out.set(`${run.name}/${f}`, readFileSync(p, 'utf8'));
    }
  }
  return out;
}

describe('runSweep', () => {
  test('1 worker and 2 workers write identical per-run files', async () => {
    const grid = 'correction=none,tis;plan=bf16,fp16';
    const one = join(tempDir('sweep1'), 'out');
    const two = join(tempDir('sweep2'), 'out');
    const r1 = await runSweep({
      baseConfig: BASE,
      grid,
      seeds: 2,
      outDir: one,
      workers: 1,
      factory: { module: FACTORY.split('#')[0]!, export: 'fakePolicyFactory' },
    });
    const r2 = await runSweep({
      baseConfig: BASE,
      grid,
      seeds: 2,
      outDir: two,
      workers: 2,
      factory: { module: FACTORY.split('#')[0]!, export: 'fakePolicyFactory' },
    });
    expect(r1.workers).toBe(1);
    expect(r2.workers).toBe(2);
    expect(r1.runs.every((r) => r.ok)).toBe(true);
    const f1 = runFiles(one);
    const f2 = runFiles(two);
    expect(f1.size).toBe(8 * 3);
    expect([...f2.keys()]).toEqual([...f1.keys()]);
    for (const [k, v] of f1) expect(f2.get(k), k).toBe(v);
    // each run wrote its own directory, and the metrics differ between configurations and seeds
    expect(readdirSync(one).sort()).toEqual([
      'correction-none_plan-bf16',
      'correction-none_plan-fp16',
      'correction-tis_plan-bf16',
      'correction-tis_plan-fp16',
      'report.html',
      'summary.html',
      'summary.json',
      'summary.md',
      'sweep.json',
    ]);
    expect(f1.get('correction-none_plan-bf16/seed-0/metrics.jsonl')).not.toBe(
      f1.get('correction-none_plan-bf16/seed-1/metrics.jsonl'),
    );
    expect(f1.get('correction-none_plan-bf16/seed-0/metrics.jsonl')?.trim().split('\n')).toHaveLength(3);
    // the summary follows grid order and has one group per point
    expect(r1.report.summary.groups.map((g) => g.label)).toEqual([
      'plan=bf16, correction=none',
      'plan=fp16, correction=none',
      'plan=bf16, correction=tis',
      'plan=fp16, correction=tis',
    ]);
    expect(r1.report.summary.groups.every((g) => g.stats.tailReward.n === 2)).toBe(true);
    // the quantized side shows a mismatch, the identical plan none
    expect(r1.report.summary.groups[0]!.stats.meanK3.mean).toBe(0);
    expect(r1.report.summary.groups[1]!.stats.meanK3.mean).toBeGreaterThan(0);
    // the default baseline is bf16/none; bf16 with TIS is bit-identical to it: every paired Δ is exactly 0
    expect(r1.report.summary.baseline.label).toBe('plan=bf16, correction=none');
    expect(r1.report.summary.groups[2]!.delta?.tailReward).toMatchObject({
      mean: 0,
      std: 0,
      n: 2,
      below: 0,
      insideSpread: true,
    });
  });

  test('a failed run is recorded with its error and the others complete (CLI, exit 1)', async () => {
    const out = join(tempDir('sweep-fail'), 'out');
    const r = await runCli([
      'sweep',
      '--config',
      baseFile(),
      '--grid',
      'policy.model.explode=false,true',
      '--out',
      out,
      '--workers',
      '2',
      '--factory',
      FACTORY,
      '--steps',
      '2',
    ]);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/FAILED: fake engine exploded on purpose/);
    expect(r.out).toContain('report: ');
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    expect(summary.failures).toHaveLength(1);
    expect(summary.failures[0].error).toContain('fake engine exploded on purpose');
    expect(
      readFileSync(join(out, 'policy.model.explode-false', 'seed-0', 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n'),
    ).toHaveLength(2);
    expect(readFileSync(join(out, 'summary.md'), 'utf8')).toContain('0/1 (1 failed)');
  });
});

test('a reused output directory reports only the runs of the latest sweep', async () => {
  const out = join(tempDir('sweep-reuse'), 'out');
  const factory = { module: FACTORY.split('#')[0]!, export: 'fakePolicyFactory' };
  const base = { ...BASE, steps: 1 };
  await runSweep({ baseConfig: base, grid: 'plan=bf16,fp16', outDir: out, workers: 2, factory });
  const second = await runSweep({ baseConfig: base, grid: 'correction=none,tis', outDir: out, workers: 2, factory });
  expect(second.report.summary.groups.map((g) => g.label)).toEqual(['correction=none', 'correction=tis']);
  expect(existsSync(join(out, 'plan-bf16', 'seed-0', 'metrics.jsonl'))).toBe(true);
});

test('planSweep: seeds start at the config seed; --set, --steps and the grid apply in that order', async () => {
  const factory = { module: FACTORY.split('#')[0]!, export: 'fakePolicyFactory' };
  const plan = await planSweep({
    baseConfig: BASE,
    grid: 'lr=0.002,0.004',
    seeds: 2,
    overrides: ['seed=5', 'optim.lr=0.1', 'steps=9'],
    steps: 4,
    outDir: 'unused',
    factory,
  });
  expect(plan.runs.map((r) => r.dir)).toEqual([
    'lr-0.002/seed-5',
    'lr-0.002/seed-6',
    'lr-0.004/seed-5',
    'lr-0.004/seed-6',
  ]);
  expect(plan.runs.map((r) => [r.config.seed, r.config.optim.lr, r.config.steps])).toEqual([
    [5, 0.002, 4],
    [6, 0.002, 4],
    [5, 0.004, 4],
    [6, 0.004, 4],
  ]);
  expect(existsSync('unused')).toBe(false);
});

test("a sweep over plans trains the shared warm start once (one key for the driver's cache and the sweep's leader)", async () => {
  const out = tempDir('sweep-warm');
  const log = join(out, 'warm.log');
  process.env['QRL_FAKE_WARMSTART_LOG'] = log;
  try {
    const factory = { module: FACTORY.split('#')[0]!, export: 'fakePolicyFactory' };
    const base = { ...BASE, steps: 1, sft: { steps: 1, cache: true } };
    const r = await runSweep({
      baseConfig: base,
      grid: 'plan=bf16,fp16,fp32',
      outDir: join(out, 'sweep'),
      cacheDir: join(out, 'cache'),
      workers: 3,
      factory,
    });
    expect(r.runs.every((x) => x.ok)).toBe(true);
    expect(readFileSync(log, 'utf8').trim().split('\n')).toHaveLength(1);
    expect(readdirSync(join(out, 'cache'))).toHaveLength(1);
  } finally {
    delete process.env['QRL_FAKE_WARMSTART_LOG'];
  }
});
