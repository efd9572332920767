// The tables of docs/lab/trainer-chunking.md: the trainer alone, its recompute in micro-batches of 1 and of 8
// sequences (TRL #6789: chunk 1 vs 8 moves 8.0 % of tokens outside [0.9, 1.1] in ratio), under trainer numerics
// whose result follows the GEMM's rows: split-K for small GEMMs (BF16), and per-tensor activation scales over the
// micro-batch (FP8 current scaling, NVFP4). Fresh `tiny` policy, reverse task, B = 16, 16 tokens, seeds 0–2: first
// responses of one length (no EOS), then responses ending at EOS with each padding of trainer.padding.
// Usage: npx tsx scripts/trainer-chunking.ts   (under a minute)

import { readFileSync, writeFileSync } from 'node:fs';
import { createRng } from '../src/core/rng.js';
import { rngStreams } from '../src/core/rng-streams.js';
import { arConfig } from '../src/policies/ar/config.js';
import { createArPolicy } from '../src/policies/ar/model.js';
import { chunkedLogprobs, microBatchedLogprobs, ratioOutside } from '../src/policies/ar/micro-batches.js';
import { trainerPaddings, type TrainerPadding } from '../src/policies/plan-schema.js';
import { rollout } from '../src/policies/ar/rollout.js';
import { resolvePlan, sideNumerics, type GemmPlan } from '../src/policies/plans.js';
import { makeTask } from '../src/tasks/registry.js';
import { fillMarkers } from './doc-tables.js';

const SEEDS = [0, 1, 2];
const B = 16;
const L16 = 16;
/** Longer responses: a fresh policy's EOS (about 1/13 per token) rarely lets one run to 64. */
const L64 = 64;

/** Trainer GEMMs whose result depends on the rows of the call, as plan data. */
const TRAINERS: readonly { readonly label: string; readonly gemm: GemmPlan }[] = [
  { label: 'BF16, sequential (no row dependence; control)', gemm: { kind: 'rounding', operands: 'bf16' } },
  {
    label: 'BF16, split-K (16) for GEMMs of ≤ 32 rows (one sequence: P + L = 8 + L rows)',
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

/** One recompute of the batch: `microBatch` sequences per forward, each padded by `padding`. */
interface Pass {
  readonly microBatch: number;
  readonly padding: TrainerPadding;
}

/**
 * Share of tokens with exp(ℓa − ℓb) outside [0.9, 1.1], mean ratio − 1, mean and max |ℓa − ℓb| over seeds, the
 * responses sampled with BF16 (`eos` null: every response has 16 tokens; else they end at the task's EOS).
 */
function row(gemm: GemmPlan, a: Pass, b: Pass, eos: null | undefined, L = L16): string {
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
      ...(eos === null ? { eos: null } : {}),
    });
    const numerics = sideNumerics(plan.trainer, policy.weights);
    const batch = { tokens: r.tokens, B, P: r.promptLength, responseMask: r.responseMask };
    const pass = (p: Pass): Float64Array =>
      p.padding === 'max-length'
        ? microBatchedLogprobs(policy, batch, numerics, p.microBatch)
        : chunkedLogprobs(policy, r.tokens, B, r.promptLength, r.responseMask, { numerics, ...p }).logp;
    const one = pass(a);
    const eight = pass(b);
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
  const mean = (xs: number[]): number => xs.reduce((x, y) => x + y, 0) / xs.length;
  return `${(100 * mean(shares)).toFixed(2)} % | ${(mean(means) - 1).toExponential(2)} | ${e(absSum / n)} | ${e(maxAbs)}`;
}

/** Responses ending at EOS: their lengths over the seeds (what trimming can remove). */
function lengthsLine(L: number): string {
  const task = makeTask('reverse');
  const lengths: number[] = [];
  let chunksShort = 0;
  let chunks = 0;
  for (const seed of SEEDS) {
    const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + L }), seed);
    const prompts = task.trainProblems(B, seed).map((p) => [...p.prompt]);
    const r = rollout(policy, prompts, {
      maxNewTokens: L,
      numerics: sideNumerics({ gemm: { kind: 'rounding', operands: 'bf16' } }, policy.weights),
      rng: createRng(seed).fork(rngStreams.ar.probeRollout),
    });
    lengths.push(...r.lengths);
    for (let b0 = 0; b0 < B; b0 += 8) {
      chunks++;
      if (Math.max(...r.lengths.subarray(b0, b0 + 8)) < L) chunksShort++;
    }
  }
  const mean = lengths.reduce((x, y) => x + y, 0) / lengths.length;
  const full = lengths.filter((l) => l === L).length;
  return (
    `L = ${L}, responses ending at EOS: ${lengths.length} over the seeds, mean length ${mean.toFixed(2)} of ${L} slots, ` +
    `${full} reaching all ${L}; ${chunksShort} of ${chunks} chunks of 8 end before slot ${L} ` +
    `(the rows \`longest-in-micro-batch\` removes beyond those of chunk 1).`
  );
}

const header = [
  '| share of tokens with ratio outside [0.9, 1.1] | mean ratio − 1 | mean \\|δ\\| | max \\|δ\\| |',
  '| --- | --- | --- | --- |',
];
const unpadded = [
  '| trainer GEMMs ' + header[0],
  '| --- ' + header[1],
  ...TRAINERS.map(
    (t) =>
      `| ${t.label} | ${row(t.gemm, { microBatch: 1, padding: 'max-length' }, { microBatch: 8, padding: 'max-length' }, null)} |`,
  ),
];
const padded = [
  '| trainer GEMMs | L | trainer.padding ' + header[0],
  '| --- | --- | --- ' + header[1],
  ...[L16, L64].flatMap((L) =>
    TRAINERS.flatMap((t) =>
      trainerPaddings.map(
        (padding) =>
          `| ${t.label} | ${L} | \`${padding}\` | ${row(t.gemm, { microBatch: 1, padding }, { microBatch: 8, padding }, undefined, L)} |`,
      ),
    ),
  ),
];
const trimOnly = [
  '| trainer GEMMs | L ' + header[0],
  '| --- | --- ' + header[1],
  ...[L16, L64].flatMap((L) =>
    TRAINERS.map(
      (t) =>
        `| ${t.label} | ${L} | ${row(t.gemm, { microBatch: 8, padding: 'max-length' }, { microBatch: 8, padding: 'longest-in-micro-batch' }, undefined, L)} |`,
    ),
  ),
];
const file = 'docs/lab/trainer-chunking.md';
writeFileSync(
  file,
  fillMarkers(readFileSync(file, 'utf8'), {
    'trainer-chunking': unpadded.join('\n'),
    'trainer-chunking-padded': [lengthsLine(L16), '', lengthsLine(L64), '', ...padded].join('\n'),
    'trainer-chunking-trim': trimOnly.join('\n'),
  }),
);
console.log(`wrote ${file}`);
