// The "Mismatch by position and length" measurement of docs/precision-plans.md: a warm-started RoPE
// AR policy on fibonacci (64 terms), probed under quantized plans over seeds. Not a test, not a run.
// Usage: `npx tsx scripts/length-probe.ts [sftSteps] [plans,…] [seeds]` (defaults 200, fp8-rollout,nvfp4-rollout, 3).
// Prints markdown tables of mean ± sample std over seeds. The warm start is cached in .cache/.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import {
  arConfig,
  arMismatchProbe,
  createArPolicy,
  loadCheckpoint,
  saveCheckpoint,
  trainSupervised,
  type ArPolicy,
} from '../src/policies/index.js';
import { precisionPlan, type PrecisionPlanName } from '../src/policies/plans.js';
import { LENGTH_BUCKET_EDGES } from '../src/rl/index.js';
import { seedStat } from '../src/report/summary.js';
import { EOS, makeTask } from '../src/tasks/index.js';

const sftSteps = Number(process.argv[2] ?? 200);
const plans = (process.argv[3] ?? 'fp8-rollout,nvfp4-rollout').split(',') as PrecisionPlanName[];
const seeds = Number(process.argv[4] ?? 3);
const L = 64; // response tokens probed: the 64 terms (EOS ignored)
const B = 8; // sequences per seed
const PREFIXES = [8, 16, 32, 64];

const task = makeTask('fibonacci', { minLength: 64, maxLength: 64 });
const cache = `.cache/length-probe-warm-${sftSteps}.json`;

function warmStart(): ArPolicy {
  if (existsSync(cache)) return loadCheckpoint(JSON.parse(readFileSync(cache, 'utf8'))).policy;
  // The toy width with rotary positions (the `small` preset costs ≈ 10× per step on this machine).
  const policy = createArPolicy(
    arConfig({ positions: 'rope', vocabSize: task.vocabSize, maxLen: task.promptLength + task.responseLength }),
    0,
  );
  const { losses } = trainSupervised(policy, task, { steps: sftSteps, batchSize: 8 });
  console.error(`warm start: ${sftSteps} steps, loss ${losses[0]!.toFixed(3)} → ${losses.at(-1)!.toFixed(4)}`);
  mkdirSync('.cache', { recursive: true });
  writeFileSync(cache, JSON.stringify(saveCheckpoint(policy, { name: task.name, options: task.options })));
  return policy;
}

/** `mean ± sample std` of the values (std 0 for one value). */
const ms = (xs: number[]): string => {
  const { mean, std } = seedStat(xs);
  return `${mean.toExponential(2)} ± ${(xs.length > 1 ? std : 0).toExponential(1)}`;
};

const policy = warmStart();
const buckets = LENGTH_BUCKET_EDGES.filter((lo) => lo < L);
console.log(
  `| plan | ${buckets.map((lo, b) => `k3 [${lo},${Math.min(L, LENGTH_BUCKET_EDGES[b + 1] ?? L)})`).join(' | ')} | ${buckets.map((lo, b) => `mean \\|δ\\| [${lo},${Math.min(L, LENGTH_BUCKET_EDGES[b + 1] ?? L)})`).join(' | ')} |`,
);
console.log(`| --- |${' --- |'.repeat(2 * buckets.length)}`);
const second: string[] = [];
for (const name of plans) {
  const plan = precisionPlan(name);
  const k3: number[][] = buckets.map(() => []);
  const abs: number[][] = buckets.map(() => []);
  const prefix: number[][] = PREFIXES.map(() => []);
  const err: number[] = [];
  const rep: number[] = [];
  const ok: number[] = [];
  for (let seed = 0; seed < seeds; seed++) {
    const prompts = task.trainProblems(B, seed).map((p) => [...p.prompt]);
    const problems = task.trainProblems(B, seed);
    const r = arMismatchProbe(policy, { plan, length: L, prompts, seed });
    buckets.forEach((_, b) => {
      k3[b]!.push(r.lengths.byPosition[b]!.k3);
      abs[b]!.push(r.lengths.byPosition[b]!.meanAbsDelta);
    });
    // |S_ℓ| = |Σ_{t<ℓ} δ_t|, mean over sequences, for each prefix length ℓ.
    PREFIXES.forEach((l, j) => {
      let s = 0;
      for (let i = 0; i < B; i++) {
        let si = 0;
        for (let t = 0; t < l; t++) si += r.logpOld[i * L + t]! - r.rollout.logpRollout[i * L + t]!;
        s += Math.abs(si);
      }
      prefix[j]!.push(s / B);
    });
    err.push(r.lengths.errorTokenFrac);
    rep.push(r.lengths.repetitionRate);
    // Exact answers among the rollout's responses (first 64 tokens against the gold terms).
    const S = r.rollout.promptLength + L;
    let right = 0;
    problems.forEach((p, i) => {
      const resp = Array.from(r.rollout.tokens.subarray(i * S + r.rollout.promptLength, (i + 1) * S));
      if (task.reward(p, [...resp.slice(0, L), EOS]).correct) right++;
    });
    ok.push(right / B);
  }
  console.log(`| \`${name}\` | ${k3.map(ms).join(' | ')} | ${abs.map(ms).join(' | ')} |`);
  second.push(`| \`${name}\` | ${prefix.map(ms).join(' | ')} | ${ms(err)} | ${ms(rep)} | ${ms(ok)} |`);
}
console.log('');
console.log(
  `| plan | ${PREFIXES.map((l) => `mean \\|S\\|, ℓ = ${l}`).join(' | ')} | error-token share | repetition rate | exact (rollout) |`,
);
console.log(`| --- |${' --- |'.repeat(PREFIXES.length + 3)}`);
for (const line of second) console.log(line);
