// The table of docs/lab/trainer-chunking.md: the trainer alone, its recompute in micro-batches of 1 and of 8
// sequences (TRL #6789: chunk 1 vs 8 moves 8.0 % of tokens outside [0.9, 1.1] in ratio), under trainer numerics
// whose result follows the GEMM's rows: split-K for small GEMMs (BF16), and per-tensor activation scales over the
// micro-batch (FP8 current scaling, NVFP4). Fresh `tiny` policy, reverse task, B = 16, 16 tokens, seeds 0–2.
// Usage: npx tsx scripts/trainer-chunking.ts   (a few seconds)

import { readFileSync, writeFileSync } from 'node:fs';
import { createRng } from '../src/core/rng.js';
import { rngStreams } from '../src/core/rng-streams.js';
import { arConfig } from '../src/policies/ar/config.js';
import { createArPolicy } from '../src/policies/ar/model.js';
import { microBatchedLogprobs, ratioOutside } from '../src/policies/ar/micro-batches.js';
import { rollout } from '../src/policies/ar/rollout.js';
import { resolvePlan, sideNumerics, type GemmPlan } from '../src/policies/plans.js';
import { makeTask } from '../src/tasks/registry.js';
import { fillMarkers } from './doc-tables.js';

const SEEDS = [0, 1, 2];
const B = 16;
const L = 16;

/** Trainer GEMMs whose result depends on the rows of the call, as plan data. */
const TRAINERS: readonly { readonly label: string; readonly gemm: GemmPlan }[] = [
  { label: 'BF16, sequential (no row dependence; control)', gemm: { kind: 'rounding', operands: 'bf16' } },
  {
    label: 'BF16, split-K (16) for GEMMs of ≤ 32 rows (one sequence: 24 rows)',
    gemm: { kind: 'rounding', operands: 'bf16', accumulator: 'split-k', splitK: 16, splitKMaxRows: 32 },
  },
  {
    label: 'FP8 W8A8, per-tensor current scaling (te-current) over the micro-batch',
    gemm: { kind: 'quantized', weights: { preset: 'te-current' }, activations: { preset: 'te-current' } },
  },
  {
    label: 'NVFP4 W4A4, per-tensor S_enc over the micro-batch (nvfp4)',
    gemm: { kind: 'quantized', weights: { preset: 'nvfp4' }, activations: { preset: 'nvfp4' } },
  },
  {
    label: 'NVFP4 W4A4, per-token activations (nvfp4-row-te)',
    gemm: { kind: 'quantized', weights: { preset: 'nvfp4' }, activations: { preset: 'nvfp4-row-te' } },
  },
];

const e = (x: number): string => (x === 0 ? '0' : x.toExponential(2));

function row(gemm: GemmPlan): string {
  const task = makeTask('reverse');
  const plan = resolvePlan({
    name: 'chunking',
    rollout: { gemm: { kind: 'rounding', operands: 'bf16' } },
    trainer: { gemm },
  });
  const shares: number[] = [];
  const means: number[] = [];
  let maxAbs = 0;
  let absSum = 0;
  let n = 0;
  for (const seed of SEEDS) {
    const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + L }), seed);
    const prompts = task.trainProblems(B, seed).map((p) => [...p.prompt]);
    const r = rollout(policy, prompts, {
      maxNewTokens: L,
      numerics: sideNumerics(plan.rollout, policy.weights),
      rng: createRng(seed).fork(rngStreams.ar.probeRollout),
      eos: null,
    });
    const numerics = sideNumerics(plan.trainer, policy.weights);
    const batch = { tokens: r.tokens, B, P: r.promptLength, responseMask: r.responseMask };
    const one = microBatchedLogprobs(policy, batch, numerics, 1);
    const eight = microBatchedLogprobs(policy, batch, numerics, 8);
    const s = ratioOutside(one, eight, r.responseMask);
    shares.push(s.share);
    means.push(s.meanRatio);
    for (let i = 0; i < one.length; i++) {
      if (!r.responseMask[i]) continue;
      const d = Math.abs((one[i] as number) - (eight[i] as number));
      maxAbs = Math.max(maxAbs, d);
      absSum += d;
      n++;
    }
  }
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  return `${(100 * mean(shares)).toFixed(2)} % | ${(mean(means) - 1).toExponential(2)} | ${e(absSum / n)} | ${e(maxAbs)}`;
}

const lines = [
  '| trainer GEMMs | share of tokens with ratio outside [0.9, 1.1] | mean ratio − 1 | mean \\|δ\\| | max \\|δ\\| |',
  '| --- | --- | --- | --- | --- |',
  ...TRAINERS.map((t) => `| ${t.label} | ${row(t.gemm)} |`),
];
const file = 'docs/lab/trainer-chunking.md';
writeFileSync(file, fillMarkers(readFileSync(file, 'utf8'), { 'trainer-chunking': lines.join('\n') }));
console.log(`wrote ${file}`);
