// The tables of docs/lab/nvfp4-recipes.md (NVFP4 4over6 and per-token settings matched and mismatched across
// converter, trainer and rollout) and docs/lab/batch-shared-scales.md (per-tensor dynamic activation scales shared
// by a scheduler step vs per-token scales under the batch-invariant switch): `qrl-sim mismatch --policy ar … --json`
// run in-process over seeds 0–2 (fresh `tiny` policy), means of k3, mean |δ| and the share of |δ| > 1e-3, max |δ|.
// Usage: npx tsx scripts/recipes-lab.ts [nvfp4|batch]   (a few minutes on two cores; both tables by default)

import { readFileSync, writeFileSync } from 'node:fs';
import { main } from '../src/cli/main.js';
import { fillMarkers } from './doc-tables.js';

const SEEDS = [0, 1, 2];

/** One table row: what it shows and the arguments after `qrl-sim mismatch --policy ar`. */
interface Row {
  readonly setting: string;
  readonly args: string;
}

const NVFP4_ROWS: readonly Row[] = [
  {
    setting: 'matched: TE 4over6 (256, MAE) weights, per-token 4over6 activations, both sides',
    args: '--plan sims/plans/nvfp4-4over6-matched.json',
  },
  {
    setting: 'tensor bound 256 (trainer) vs 448 (rollout)',
    args: '--plan sims/plans/nvfp4-4over6-bound-mismatch.json',
  },
  {
    setting: 'block choice by MAE (trainer) vs MSE (rollout)',
    args: '--plan sims/plans/nvfp4-4over6-error-mismatch.json',
  },
  {
    setting: 'TE 4over6 (trainer) vs FlashInfer 4over6 defaults (rollout weights)',
    args: '--plan sims/plans/nvfp4-4over6-te-vs-flashinfer.json',
  },
  {
    setting: '4over6 not passed to the engine (plain NVFP4 rollout)',
    args: '--plan sims/plans/nvfp4-4over6-vs-plain.json',
  },
  {
    setting: 'converter plain NVFP4, rollout FlashInfer-448, trainer TE-256',
    args: '--plan sims/plans/nvfp4-4over6-mismatched-trio.json',
  },
  {
    setting: 'per-token activations dropped on the rollout (per-tensor NVFP4)',
    args: '--plan sims/plans/nvfp4-per-token-dropped.json',
  },
  { setting: 'reference: plain NVFP4 rollout against a BF16 trainer', args: '--plan nvfp4-rollout' },
];

const BATCH_ROWS: readonly Row[] = [
  { setting: 'per-tensor (te-current), lockstep, B = 16', args: '--plan sims/plans/fp8-tensor-scale-invariant.json' },
  {
    setting: 'per-tensor, scheduler, max batch 16 (= lockstep)',
    args: '--plan sims/plans/fp8-tensor-scale-invariant.json --max-batch 16',
  },
  {
    setting: 'per-tensor, scheduler, max batch 4, lengths 4..16',
    args: '--plan sims/plans/fp8-tensor-scale-invariant.json --max-batch 4 --min-length 4',
  },
  {
    setting: 'per-tensor, scheduler, max batch 4, chunks of 2, lengths 4..16',
    args: '--plan sims/plans/fp8-tensor-scale-invariant.json --max-batch 4 --prefill-chunk 2 --min-length 4',
  },
  { setting: 'per-token (vllm-fp8-token), lockstep, B = 16', args: '--plan sims/plans/fp8-token-scale-invariant.json' },
  {
    setting: 'per-token, scheduler, max batch 4, chunks of 2, lengths 4..16',
    args: '--plan sims/plans/fp8-token-scale-invariant.json --max-batch 4 --prefill-chunk 2 --min-length 4',
  },
  { setting: 'reference: FP8 rollout against a BF16 trainer, B = 16', args: '--plan fp8-rollout' },
];

async function mismatch(args: string, seed: number): Promise<Record<string, unknown>> {
  let out = '';
  const io = { out: (l: string) => (out += `${l}\n`), err: (l: string) => process.stderr.write(`${l}\n`) };
  const code = await main(
    ['mismatch', '--policy', 'ar', ...args.split(' '), '--seed', String(seed), '--json'],
    io as never,
  );
  if (code !== 0) throw new Error(`qrl-sim mismatch ${args}: exit ${code}`);
  return JSON.parse(out) as Record<string, unknown>;
}

const e = (x: number): string => (x === 0 ? '0' : x.toExponential(2));

async function table(rows: readonly Row[]): Promise<string> {
  const lines = [
    '| setting | `qrl-sim mismatch --policy ar …` | k3 | mean \\|δ\\| | max \\|δ\\| | share \\|δ\\| > 1e-3 |',
    '| --- | --- | --- | --- | --- | --- |',
  ];
  for (const row of rows) {
    const runs: Record<string, unknown>[] = [];
    for (const seed of SEEDS) runs.push(await mismatch(row.args, seed));
    const mean = (k: string): number => runs.reduce((a, r) => a + (r[k] as number), 0) / runs.length;
    const max = Math.max(...runs.map((r) => r['maxAbsDelta'] as number));
    lines.push(
      `| ${row.setting} | \`${row.args}\` | ${e(mean('k3'))} | ${e(mean('meanAbsDelta'))} | ${e(max)} | ${mean('fracAbsDeltaGt1e-3').toFixed(3)} |`,
    );
    process.stderr.write('.');
  }
  process.stderr.write('\n');
  return lines.join('\n');
}

function fill(file: string, marker: string, body: string): void {
  writeFileSync(file, fillMarkers(readFileSync(file, 'utf8'), { [marker]: body }));
  console.log(`wrote ${file} (${marker})`);
}

const which = process.argv[2];
if (which === undefined || which === 'nvfp4')
  fill('docs/lab/nvfp4-recipes.md', 'nvfp4-recipes', await table(NVFP4_ROWS));
if (which === undefined || which === 'batch')
  fill('docs/lab/batch-shared-scales.md', 'batch-shared-scales', await table(BATCH_ROWS));
