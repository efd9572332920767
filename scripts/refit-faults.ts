// Regenerates docs/refit.md's refit-faults table: one short GRPO run (sims/ar-reverse.json, 150
// warm-start steps, 12 steps, no evaluation) per plan — the healthy fp8-rollout-bf16-export and each
// sims/plans/fp8-rollout-fault-*.json — and the run's mismatch, mean over the steps.
// Usage: npx tsx scripts/refit-faults.ts (about a minute on two cores; needs the built CLI).

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fillMarkers } from './doc-tables.js';

const plans = ['fp8-rollout-bf16-export', 'fp8-rollout-fault-halves-swapped', 'fp8-rollout-fault-rows-permuted', 'fp8-rollout-fault-stale-sync'];
const dir = mkdtempSync(join(tmpdir(), 'qrl-refit-faults-'));
const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const rows = ['| plan | k3 (mean) | mean \\|δ\\| | max \\|δ\\| (mean) | accuracy at step 12 |', '| --- | ---: | ---: | ---: | ---: |'];
try {
  const base = JSON.parse(readFileSync('sims/ar-reverse.json', 'utf8')) as Record<string, unknown>;
  for (const name of plans) {
    const config = { ...base, steps: 12, sft: { steps: 150 }, eval: { every: 0 }, checkpoint: { every: 0 }, plan: JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as unknown };
    const file = join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify(config));
    const out = join(dir, name);
    const r = spawnSync(process.execPath, ['bin/qrl-sim.js', 'run', '--config', file, '--out', out], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${name}: ${r.stderr}`);
    const steps = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, number>);
    const k3 = mean(steps.map((s) => s['rollout_corr/k3_kl']!));
    const abs = mean(steps.map((s) => s['rollout_corr/logp_abs_diff_mean']!));
    const max = mean(steps.map((s) => s['rollout_corr/logp_abs_diff_max']!));
    rows.push(`| \`${name}\` | ${k3.toExponential(2)} | ${abs.toExponential(2)} | ${max.toExponential(2)} | ${steps.at(-1)!['reward/accuracy']!.toFixed(3)} |`);
  }
  const path = 'docs/refit.md';
  writeFileSync(path, fillMarkers(readFileSync(path, 'utf8'), { 'refit-faults': rows.join('\n') }));
  console.log(rows.join('\n'));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
