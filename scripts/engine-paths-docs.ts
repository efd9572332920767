// The "Measured effect" tables of docs/engine-paths.md and of the temperature placement in
// docs/logprob-semantics.md: `qrl-sim mismatch --policy ar … --json` run in-process for each row's
// arguments over seeds 0–2 (fresh `tiny` policy), the mean of k3, mean |δ| and max |δ| written
// between the pages' `measured` markers. Not a test (about a minute on one core).
// Usage: npx tsx scripts/engine-paths-docs.ts

import { readFileSync, writeFileSync } from 'node:fs';
import { main } from '../src/cli/main.js';

const SEEDS = [0, 1, 2];

/** One table row: what it shows and the arguments after `qrl-sim mismatch --policy ar`. */
interface Row {
  readonly path: string;
  readonly args: string;
}

const ENGINE_ROWS: readonly Row[] = [
  { path: 'matched kernels (reference)', args: '--plan bf16' },
  {
    path: 'lockstep decode, B = 16 (decode GEMMs of 16 rows: split-K)',
    args: '--plan sims/plans/bf16-batch-variant.json',
  },
  {
    path: 'lockstep decode, B = 32 (every GEMM > 16 rows)',
    args: '--plan sims/plans/bf16-batch-variant.json --batch 32',
  },
  {
    path: '(a) continuous batching, B = 32, lengths 4..16: requests leave',
    args: '--plan sims/plans/bf16-batch-variant.json --batch 32 --max-batch 32 --min-length 4',
  },
  {
    path: '(a) continuous batching, B = 32, max batch 8',
    args: '--plan sims/plans/bf16-batch-variant.json --batch 32 --max-batch 8 --min-length 4',
  },
  { path: 'one prefill, B = 4', args: '--plan sims/plans/bf16-batch-variant.json --batch 4' },
  {
    path: '(b) chunked prefill, chunks of 2, B = 4',
    args: '--plan sims/plans/bf16-batch-variant.json --batch 4 --prefill-chunk 2',
  },
  {
    path: '(b) prompt token by token, B = 4',
    args: '--plan sims/plans/bf16-batch-variant.json --batch 4 --prefill-chunk 1',
  },
  { path: '(c) TP 4, ring, BF16 adds', args: '--plan sims/plans/bf16-tp4-ring.json' },
  { path: '(c) TP 4, rank order, fp32', args: '--plan sims/plans/bf16-tp4-fp32.json' },
  {
    path: '(c) TP 4, vLLM custom all-reduce (BF16 partials, fp32 sum)',
    args: '--plan sims/plans/bf16-tp4-custom-ar.json',
  },
  {
    path: '(d) batch-invariant switch, B = 32, max batch 8, chunks of 2',
    args: '--plan sims/plans/true-on-policy.json --batch 32 --max-batch 8 --prefill-chunk 2 --min-length 4',
  },
  {
    path: '(d) true on-policy with TP 4 on both sides, max batch 8',
    args: '--plan sims/plans/true-on-policy-tp4.json --batch 32 --max-batch 8 --min-length 4',
  },
  {
    path: '(d) switch with per-tensor FP8 activation scales on both sides, B = 16',
    args: '--plan sims/plans/fp8-tensor-scale-invariant.json',
  },
  {
    path: '(d) the same, B = 32, max batch 8, chunks of 2',
    args: '--plan sims/plans/fp8-tensor-scale-invariant.json --batch 32 --max-batch 8 --prefill-chunk 2 --min-length 4',
  },
  {
    path: '(d) switch with per-token FP8 activation scales on both sides, B = 32, max batch 8, chunks of 2',
    args: '--plan sims/plans/fp8-token-scale-invariant.json --batch 32 --max-batch 8 --prefill-chunk 2 --min-length 4',
  },
  { path: 'FP8 quantization, B = 16', args: '--plan fp8-rollout' },
  { path: 'FP8 quantization, B = 32, max batch 8', args: '--plan fp8-rollout --batch 32 --max-batch 8 --min-length 4' },
];

const SEMANTICS_ROWS: readonly Row[] = [
  { path: 'T = 0.7 before the log-softmax on both sides', args: '--plan bf16 --temperature 0.7' },
  {
    path: 'trainer: log softmax(z) / T, T = 0.7',
    args: '--plan sims/plans/bf16-temperature-after.json --temperature 0.7',
  },
  { path: 'trainer: log softmax(z) / T, T = 1 (moot)', args: '--plan sims/plans/bf16-temperature-after.json' },
  { path: 'FP8 quantization, T = 0.7', args: '--plan fp8-rollout --temperature 0.7' },
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

async function table(rows: readonly Row[], extra: 'engine' | 'semantics'): Promise<string> {
  const lines = [
    `| path | \`qrl-sim mismatch --policy ar …\` | ${extra} | k3 | mean \\|δ\\| | max \\|δ\\| |`,
    '| --- | --- | --- | --- | --- | --- |',
  ];
  for (const row of rows) {
    const runs: Record<string, unknown>[] = [];
    for (const seed of SEEDS) runs.push(await mismatch(row.args, seed));
    const mean = (k: string): number => runs.reduce((a, r) => a + (r[k] as number), 0) / runs.length;
    lines.push(
      `| ${row.path} | \`${row.args}\` | ${(runs[0]![extra] as string | undefined) ?? '—'} | ${e(mean('k3'))} | ${e(mean('meanAbsDelta'))} | ${e(Math.max(...runs.map((r) => r['maxAbsDelta'] as number)))} |`,
    );
    process.stderr.write('.');
  }
  process.stderr.write('\n');
  return lines.join('\n');
}

function fill(file: string, marker: string, body: string): void {
  const text = readFileSync(file, 'utf8');
  const begin = `<!-- ${marker}:begin (npx tsx scripts/engine-paths-docs.ts) -->`;
  const end = `<!-- ${marker}:end -->`;
  const i = text.indexOf(begin);
  const j = text.indexOf(end);
  if (i < 0 || j < i) throw new Error(`${file}: no ${marker} markers`);
  writeFileSync(file, `${text.slice(0, i + begin.length)}\n${body}\n${text.slice(j)}`);
  console.log(`wrote ${file} (${marker})`);
}

fill('docs/engine-paths.md', 'engine-paths-measured', await table(ENGINE_ROWS, 'engine'));
fill('docs/logprob-semantics.md', 'temperature-at-measured', await table(SEMANTICS_ROWS, 'semantics'));
