// The lab: one experiment per finding of the papers, each a small sweep spec under sims/lab/ with
// the page that reports it (docs/lab/). Loading, validating and estimating specs; running one is a
// sweep (sweep.ts). Not the findings themselves: those are measured and written on the pages.

import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { z } from 'zod';
import { UsageError, zodIssueLine } from '../errors.js';
import { parseJsonInput } from '../json.js';
import { runSweep, type SweepOptions, type SweepResult } from './sweep.js';

/** Where the experiment specs live, relative to the package root. */
export const LAB_DIR = 'sims/lab';

/** A lab experiment as written in `sims/lab/<name>.json`. */
export const labExperimentSchema = z.strictObject({
  title: z.string().min(1).describe('the finding in a few words'),
  claim: z.string().min(1).describe('the claim as the paper states it, in one sentence'),
  source: z.string().min(1).describe('paper, section and figure'),
  page: z.string().min(1).describe('the page that reports the measured result (docs/lab/<name>.md)'),
  config: z.union([z.string().min(1), z.record(z.string(), z.unknown())]).describe('the base run config: a path relative to the package root, or the config itself'),
  set: z.array(z.string()).default([]).describe('`--set` overrides applied to the base config'),
  grid: z.string().describe('the sweep grid (docs/reports.md)'),
  seeds: z.number().int().min(1).max(20).describe('seeds of the full experiment'),
  baseline: z.string().optional().describe('the paired comparison’s baseline selector'),
  secondsPerRun: z.number().positive().describe('measured wall time of one run on two idle cores (warm start cached), for the estimate printed before a run'),
  warmStartSeconds: z.number().nonnegative().default(0).describe('measured wall time of one uncached warm start'),
  smoke: z.array(z.string()).min(1).describe('`--set` overrides that make a seconds-long version (the test runs every experiment with them, one seed)'),
});

/** A validated lab experiment with its name. */
export type LabExperiment = z.output<typeof labExperimentSchema> & { readonly name: string };

function readJson(file: string): unknown {
  if (!existsSync(file)) throw new UsageError(`lab: no such file '${file}'`);
  return parseJsonInput(readFileSync(file, 'utf8'), file);
}

/** The package root (where sims/ and docs/ live), from this module's location in src/ or dist/. */
export function packageRoot(): string {
  return resolve(dirname(new URL(import.meta.url).pathname), '..', '..');
}

/** Every experiment's name, sorted. */
export function labExperimentNames(root = packageRoot()): string[] {
  const dir = join(root, LAB_DIR);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => basename(f, '.json'))
    .sort();
}

/** Loads and validates one experiment; an unknown name lists the known ones. */
export function loadLabExperiment(name: string, root = packageRoot()): LabExperiment {
  const names = labExperimentNames(root);
  if (!names.includes(name)) throw new UsageError(`lab: unknown experiment '${name}' (known: ${names.join(', ')})`);
  const file = join(root, LAB_DIR, `${name}.json`);
  const raw = readJson(file);
  const parsed = labExperimentSchema.safeParse(raw);
  if (!parsed.success) throw new UsageError(`${LAB_DIR}/${name}.json: ${zodIssueLine(parsed.error, raw, 'experiment')}`);
  return { ...parsed.data, name };
}

/** The base config of an experiment as raw JSON. */
export function labBaseConfig(exp: LabExperiment, root = packageRoot()): unknown {
  return typeof exp.config === 'string' ? readJson(join(root, exp.config)) : exp.config;
}

/** Options of {@link runLabExperiment}. */
export interface LabRunOptions {
  readonly outDir: string;
  /** Seeds (default: the experiment's). */
  readonly seeds?: number;
  readonly workers?: number;
  /** Apply the experiment's smoke overrides (seconds-long). */
  readonly smoke?: boolean;
  readonly cacheDir?: string;
  readonly onRunDone?: SweepOptions['onRunDone'];
}

/** The sweep options an experiment runs with. */
export function labSweepOptions(exp: LabExperiment, options: LabRunOptions, root = packageRoot()): SweepOptions {
  return {
    baseConfig: labBaseConfig(exp, root),
    grid: exp.grid,
    seeds: options.seeds ?? exp.seeds,
    overrides: [...exp.set, ...(options.smoke === true ? exp.smoke : [])],
    outDir: options.outDir,
    ...(options.workers === undefined ? {} : { workers: options.workers }),
    ...(options.cacheDir === undefined ? {} : { cacheDir: options.cacheDir }),
    ...(exp.baseline === undefined ? {} : { baseline: exp.baseline }),
    ...(options.onRunDone === undefined ? {} : { onRunDone: options.onRunDone }),
  };
}

/**
 * Estimated wall seconds of a full run: `⌈runs / workers⌉ · secondsPerRun` plus one uncached warm
 * start per seed (the warm start is shared by every plan of a seed and cached across runs).
 */
export function estimateLabSeconds(exp: LabExperiment, runs: number, seeds: number, workers: number): number {
  return Math.ceil(runs / Math.max(1, workers)) * exp.secondsPerRun + seeds * exp.warmStartSeconds;
}

/** Runs an experiment: its sweep, with the summary, paired table and report the sweep writes. */
export function runLabExperiment(exp: LabExperiment, options: LabRunOptions, root = packageRoot()): Promise<SweepResult> {
  return runSweep(labSweepOptions(exp, options, root));
}
