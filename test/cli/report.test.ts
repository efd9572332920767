// `qrl-sim report DIR` in-process: prints the table and the report path for a run and a sweep
// directory; a missing directory, a directory without runs or a wrong argument count exit 2.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { fixtureConfig, fixtureMetrics, tempDir, writeFixtureRun } from '../report/fixtures.js';
import { runCli } from './io.js';

test('report on a single run directory writes report.html into it', async () => {
  const dir = tempDir('cli-run');
  writeFixtureRun(dir, {
    config: fixtureConfig(0, 'bf16', [{ name: 'none' }]),
    metrics: fixtureMetrics(0),
    eval: [{ step: 3, 'eval/rollout/greedy_accuracy': 0.5 }],
  });
  const r = await runCli(['report', dir]);
  expect(r.code).toBe(0);
  // one seed: no std (n/a); no trainer-precision evaluation logged: a dash
  expect(r.out).toContain('| plan=bf16, correction=none (baseline) | 1 | — | 50.0 ± n/a |');
  expect(r.out).toContain(`report: ${join(dir, 'report.html')}`);
  expect(existsSync(join(dir, 'report.html'))).toBe(true);
});

test('report on a sweep directory groups its runs', async () => {
  const dir = tempDir('cli-sweep');
  for (const seed of [0, 1])
    writeFixtureRun(join(dir, 'a', `seed-${seed}`), {
      config: fixtureConfig(seed, 'bf16', [{ name: 'none' }]),
      metrics: fixtureMetrics(seed),
    });
  for (const seed of [0, 1])
    writeFixtureRun(join(dir, 'b', `seed-${seed}`), {
      config: fixtureConfig(seed, 'fp16', [{ name: 'none' }]),
      metrics: fixtureMetrics(seed),
    });
  const r = await runCli(['report', dir, '--title', 'my sweep']);
  expect(r.code).toBe(0);
  expect(r.out).toMatch(/\| plan=bf16 \| 2 \|/);
  expect(r.out).toMatch(/\| plan=fp16 \| 2 \|/);
});

test('--baseline chooses the paired comparison; one that selects no configuration exits 2 and writes nothing', async () => {
  const dir = tempDir('cli-baseline');
  for (const [plan, d] of [
    ['bf16', 'a'],
    ['fp16', 'b'],
  ] as const) {
    for (const seed of [0, 1])
      writeFixtureRun(join(dir, d, `seed-${seed}`), {
        config: fixtureConfig(seed, plan, [{ name: 'none' }]),
        metrics: fixtureMetrics(seed + (plan === 'fp16' ? 0.1 : 0)),
      });
  }
  const ok = await runCli(['report', dir, '--baseline', 'plan=fp16']);
  expect(ok.code).toBe(0);
  expect(ok.out).toContain('Difference to the baseline `plan=fp16`, paired by seed');
  // bf16 − fp16 on the same seed: the last-step reward is 0.1 lower on both seeds
  expect(ok.out).toContain('| plan=bf16 | 2 | — | — | **−0.100 ± 0.000** (2/2 < 0) |');
  const bad = tempDir('cli-baseline-bad');
  writeFixtureRun(join(bad, 'a'), { config: fixtureConfig(0, 'bf16', [{ name: 'none' }]), metrics: fixtureMetrics(0) });
  const r = await runCli(['report', bad, '--baseline', 'plan=fp8-rollout']);
  expect(r.code).toBe(2);
  expect(r.err).toMatch(/--baseline: 'plan=fp8-rollout' matches no configuration/);
  expect(existsSync(join(bad, 'report.html'))).toBe(false);
});

test.each([
  [['report'], /expected one directory, got none/],
  [['report', '/nonexistent-dir'], /DIR: no such directory/],
  [['report', 'a', 'b'], /expected one directory/],
])('%j exits 2', async (argv, message) => {
  const r = await runCli(argv);
  expect(r.code).toBe(2);
  expect(r.err).toMatch(message);
});

test('a directory without runs exits 2', async () => {
  const r = await runCli(['report', tempDir('cli-empty')]);
  expect(r.code).toBe(2);
  expect(r.err).toMatch(/no run directory/);
});
