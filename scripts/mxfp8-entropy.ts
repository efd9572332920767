// The table of docs/lab/mxfp8-entropy.md: GRPO on sims/ar-reverse.json (150 warm-start steps, 12 steps) under a BF16
// baseline, matched MXFP8 training and rollout, and MXFP8 training with an FP8 tensorwise rollout (verl #7519: DAPO
// entropy −74 % with the fp8-tensorwise rollout vs +4 % matched). Per plan over seeds 0–2: the change of
// `actor/entropy` from step 1 to step 12 and the mean `rollout_corr/k3_kl`. Needs the built CLI (npm run build).
// Usage: npx tsx scripts/mxfp8-entropy.ts   (about a minute on two cores)

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fillMarkers } from './doc-tables.js';

const SEEDS = [0, 1, 2];
const STEPS = 12;
const PLANS: readonly { readonly label: string; readonly plan: string }[] = [
  { label: 'BF16 both sides (baseline)', plan: 'bf16' },
  { label: 'matched MXFP8 training and rollout', plan: 'sims/plans/mxfp8-matched.json' },
  { label: 'MXFP8 training, FP8 tensorwise rollout', plan: 'sims/plans/mxfp8-trainer-fp8-tensorwise-rollout.json' },
];

function run(plan: string, seed: number, out: string): Record<string, number>[] {
  const value = plan.endsWith('.json') ? readFileSync(plan, 'utf8').replace(/\n\s*/g, ' ') : plan;
  const args = ['bin/qrl-sim.js', 'run', '--config', 'sims/ar-reverse.json', '--set', `plan=${value}`];
  for (const s of [`steps=${STEPS}`, 'sft.steps=150', 'eval.every=0', 'checkpoint.every=0']) args.push('--set', s);
  args.push('--seed', String(seed), '--out', out, '--no-report');
  const r = spawnSync('node', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`qrl-sim run ${plan} seed ${seed}: exit ${r.status}\n${r.stderr}`);
  return readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, number>);
}

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const dir = mkdtempSync(join(tmpdir(), 'qrl-mxfp8-entropy-'));
const lines = [
  '| plan | entropy step 1 | entropy step 12 | change | per-seed change | mean k3 (rollout_corr/k3_kl) |',
  '| --- | --- | --- | --- | --- | --- |',
];
try {
  for (const p of PLANS) {
    const first: number[] = [];
    const last: number[] = [];
    const k3: number[] = [];
    for (const seed of SEEDS) {
      const m = run(p.plan, seed, join(dir, `${p.label.length}-${seed}`));
      first.push(m[0]!['actor/entropy']!);
      last.push(m[m.length - 1]!['actor/entropy']!);
      k3.push(mean(m.map((x) => x['rollout_corr/k3_kl']!)));
      process.stderr.write('.');
    }
    const change = (a: number, b: number): string => `${(100 * (b / a - 1)).toFixed(1)} %`;
    lines.push(
      `| ${p.label} (\`${p.plan}\`) | ${mean(first).toFixed(4)} | ${mean(last).toFixed(4)} | ${change(mean(first), mean(last))} | ${first.map((f, i) => change(f, last[i]!)).join(', ')} | ${mean(k3).toExponential(2)} |`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.stderr.write('\n');
const file = 'docs/lab/mxfp8-entropy.md';
writeFileSync(file, fillMarkers(readFileSync(file, 'utf8'), { 'mxfp8-entropy': lines.join('\n') }));
console.log(`wrote ${file}`);
