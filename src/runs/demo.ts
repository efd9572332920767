// What `qrl-sim demo` (npm start) computes: the demonstration's sweep (the lab's departure experiment
// over three arms), what it found in plain words, and the round-trip error table of `demo --numerics`.
// Not the command's parsing or printing (src/cli/demo.ts) and not a general sweep.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { castProfiles } from '../numerics/profiles.js';
import { floatFormats } from '../numerics/formats.js';
import { fakeQuant } from '../numerics/vector.js';
import { labSweepOptions, type LabExperiment } from './lab.js';
import type { SweepOptions } from './sweep.js';

/**
 * The demonstration is the lab's `departure` experiment (sims/lab/departure.json) as it stands —
 * its config, settings and baseline — over the arms of its finding: BF16 without correction, and
 * the MXFP4 rollout without correction and with TIS. BF16 with TIS is left out because it is
 * identical to BF16 without by construction (rollout and trainer agree, every ratio is 1).
 */
export const DEMO_EXPERIMENT = 'departure';
export const DEMO_GRID = 'plan=bf16,mxfp4-rollout;correction=none,tis';
export const DEMO_EXCLUDE = 'plan=bf16,correction=tis';
/** Seeds of the demonstration (the experiment has 3; 2 keep it about a third of the experiment's time: `lab list`). */
export const DEMO_SEEDS = 2;

/** The demonstration's sweep: `departure`'s options with the demonstration's grid and exclusion. */
export function demoSweepOptions(
  departure: LabExperiment,
  options: { readonly outDir: string; readonly seeds: number; readonly workers?: number | undefined },
): SweepOptions {
  return {
    ...labSweepOptions(departure, {
      outDir: options.outDir,
      seeds: options.seeds,
      ...(options.workers !== undefined ? { workers: options.workers } : {}),
    }),
    grid: DEMO_GRID,
    exclude: DEMO_EXCLUDE,
  };
}

/** Held-out greedy accuracy at the trainer's precision at the run's last evaluation, or null. */
function finalTrainerAccuracy(runDir: string): number | null {
  try {
    const lines = readFileSync(join(runDir, 'eval.jsonl'), 'utf8').trim().split('\n');
    const last = JSON.parse(lines[lines.length - 1] as string) as Record<string, number>;
    return last['eval/trainer/greedy_accuracy'] ?? null;
  } catch {
    return null;
  }
}

const pp = (d: number): string => `${d >= 0 ? '+' : '−'}${Math.abs(d * 100).toFixed(1)} pp`;

/**
 * What the demonstration found, in plain words, from its own runs (`runs`: as sweep.json lists
 * them): per seed, the held-out accuracy at the trainer's precision of each MXFP4 arm minus BF16's
 * (the experiment's measure). scripts/demo-docs.ts puts the same lines into docs/getting-started.md.
 */
export function demoFindings(
  outDir: string,
  runs: readonly { readonly label: string; readonly seed: number; readonly dir: string }[],
): string[] {
  const bySeed = new Map<number, Record<string, number | null>>();
  for (const run of runs) {
    const arm = run.label.includes('bf16') ? 'bf16' : run.label.includes('correction=tis') ? 'tis' : 'none';
    bySeed.set(run.seed, { ...(bySeed.get(run.seed) ?? {}), [arm]: finalTrainerAccuracy(join(outDir, run.dir)) });
  }
  const none: number[] = [];
  const tis: number[] = [];
  for (const arms of bySeed.values()) {
    if (arms['bf16'] == null || arms['none'] == null || arms['tis'] == null) continue;
    none.push(arms['none'] - arms['bf16']);
    tis.push(arms['tis'] - arms['bf16']);
  }
  if (none.length === 0) return ['(no complete seed to compare)'];
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  const list = (xs: number[]): string => xs.map(pp).join(', ');
  const departs = none.every((d) => d < 0);
  const recovers =
    departs && tis.every((d, i) => d > (none[i] as number)) && Math.abs(mean(tis)) < Math.abs(mean(none)) / 2;
  return [
    "What it found (held-out accuracy, greedy, at the BF16 trainer's precision, after the last step;",
    'each MXFP4 arm minus BF16 on the same seed):',
    `  MXFP4 rollout, no correction: ${pp(mean(none))} on average (per seed: ${list(none)})`,
    `  MXFP4 rollout, TIS:           ${pp(mean(tis))} on average (per seed: ${list(tis)})`,
    departs
      ? recovers
        ? "Training on uncorrected 4-bit rollouts made the policy worse on every seed; truncated importance\nsampling recovered most of the loss — the papers' main finding."
        : 'Training on uncorrected 4-bit rollouts made the policy worse on every seed; TIS did not recover\nmost of it on these seeds.'
      : 'On these seeds the uncorrected 4-bit rollout did not fall below BF16 on every seed: the gap is\nwithin the seed spread here (docs/lab/departure.md has more seeds).',
  ];
}

/** Per-tensor amax-scaled fake quantization error of `x` in a format (simple demonstration). */
export function roundTripError(x: Float32Array, format: keyof typeof floatFormats, profile: keyof typeof castProfiles) {
  const f = floatFormats[format];
  let amax = 0;
  for (const v of x) amax = Math.max(amax, Math.abs(v));
  const scale = Math.fround(amax / f.maxFinite);
  const scaled = x.map((v) => Math.fround(v / scale));
  const q = fakeQuant(f, scaled, { profile });
  let se = 0;
  let sx = 0;
  let maxErr = 0;
  for (let i = 0; i < x.length; i++) {
    const err = (x[i] as number) - Math.fround((q[i] as number) * scale);
    se += err * err;
    sx += (x[i] as number) ** 2;
    maxErr = Math.max(maxErr, Math.abs(err));
  }
  return { maxErr, rmse: Math.sqrt(se / x.length), sqnrDb: 10 * Math.log10(sx / se) };
}
