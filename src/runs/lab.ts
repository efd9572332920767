// The lab: one experiment per finding of the papers, each a small sweep spec under sims/lab/ with
// the page that reports it (docs/lab/). Loading, validating and estimating specs; running one is a
// sweep (sweep.ts). Not the findings themselves: those are measured and written on the pages.

import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { z } from 'zod';
import { UsageError, zodIssueLine } from '../core/errors.js';
import { parseJsonInput } from '../core/json.js';
import { type ScheduledRun, sweepWallSeconds } from './lab-estimate.js';
import { warmStartKey } from './run.js';
import { type PlannedRun, runSweep, type SweepOptions, type SweepResult } from './sweep.js';
import { parseGrid } from './grid.js';
import { planNameOf } from './sweep-backend.js';

/** Where the experiment specs live, relative to the package root. */
export const LAB_DIR = 'sims/lab';

/** A lab experiment as written in `sims/lab/<name>.json`. */
export const labExperimentSchema = z.strictObject({
  title: z.string().min(1).describe('the finding in a few words'),
  claim: z.string().min(1).describe('the claim as the paper states it, in one sentence'),
  source: z.string().min(1).describe('paper, section and figure'),
  page: z.string().min(1).describe('the page that reports the measured result (docs/lab/<name>.md)'),
  config: z
    .union([z.string().min(1), z.record(z.string(), z.unknown())])
    .describe('the base run config: a path relative to the package root, or the config itself'),
  set: z.array(z.string()).default([]).describe('`--set` overrides applied to the base config'),
  grid: z.string().describe('the sweep grid (docs/reports.md)'),
  seeds: z.number().int().min(1).max(20).describe('seeds of the full experiment'),
  baseline: z.string().optional().describe('the paired comparison’s baseline selector'),
  secondsPerRun: z
    .number()
    .positive()
    .describe(
      'CPU seconds of one run, warm start excluded (mean over the grid points; measured by scripts/lab-timings.ts)',
    ),
  warmStartSeconds: z
    .number()
    .nonnegative()
    .default(0)
    .describe('CPU seconds of one uncached warm start (measured by scripts/lab-timings.ts)'),
  timedOn: z
    .string()
    .min(1)
    .optional()
    .describe('date, machine and script of the measurement of secondsPerRun and warmStartSeconds'),
  backendPlans: z
    .record(z.string().min(1), z.string().min(1))
    .optional()
    .describe(
      "`lab run --backend`: each of the experiment's plans → the backend's served plan (docs/lab/README.md); a plan without one is refused",
    ),
  smoke: z
    .array(z.string())
    .min(1)
    .describe(
      '`--set` overrides that make a seconds-long version (the test runs every experiment with them, one seed)',
    ),
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
  if (!parsed.success)
    throw new UsageError(`${LAB_DIR}/${name}.json: ${zodIssueLine(parsed.error, raw, 'experiment')}`);
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
  /**
   * Run on a spawned backend: `command` as spawned, `address` as given (`{plan}` marks where the
   * backend plan goes, else ` --plan P` is appended); the plans mapped by the experiment's `backendPlans`.
   */
  readonly backend?: { readonly command: string; readonly address: string };
}

/** The sweep options an experiment runs with. */
export function labSweepOptions(exp: LabExperiment, options: LabRunOptions, root = packageRoot()): SweepOptions {
  return {
    baseConfig: labBaseConfig(exp, root),
    grid: parseGrid(exp.grid, { root }), // plan files in the grid are relative to the package root, like config

    seeds: options.seeds ?? exp.seeds,
    overrides: [...exp.set, ...(options.smoke === true ? exp.smoke : [])],
    outDir: options.outDir,
    ...(options.workers === undefined ? {} : { workers: options.workers }),
    ...(options.cacheDir === undefined ? {} : { cacheDir: options.cacheDir }),
    ...(exp.baseline === undefined
      ? {}
      : { baseline: options.backend === undefined ? exp.baseline : backendBaseline(exp.baseline, exp) }),
    ...(options.onRunDone === undefined ? {} : { onRunDone: options.onRunDone }),
    ...(options.backend === undefined ? {} : { backend: { ...options.backend, plans: exp.backendPlans ?? {} } }),
  };
}

/**
 * An experiment's baseline selector on a backend: its `plan=P` names the backend plan P maps to (the
 * runs' config.json say the plan they were served), so the paired comparison keeps its baseline.
 */
export function backendBaseline(selector: string, exp: LabExperiment): string {
  const plans = exp.backendPlans ?? {};
  return selector
    .split(',')
    .map((part) => {
      const m = /^\s*plan=(.+?)\s*$/.exec(part);
      return m !== null && Object.hasOwn(plans, m[1]!) ? ` plan=${plans[m[1]!]}` : part;
    })
    .join(',')
    .trim();
}

/**
 * Checks that every run's plan has a backend plan in the experiment's `backendPlans`: a UsageError
 * naming the experiment and the first plan without one (`lab run --backend` exits 2 before anything runs).
 */
export function checkLabBackendPlans(exp: LabExperiment, runs: readonly PlannedRun[]): void {
  const mapped = exp.backendPlans ?? {};
  for (const run of runs) {
    const name = planNameOf(run.config.plan);
    if (!Object.hasOwn(mapped, name))
      throw new UsageError(
        `--backend: experiment '${exp.name}' maps no backend plan for plan '${name}' (${LAB_DIR}/${exp.name}.json backendPlans: ${Object.keys(mapped).join(', ') || 'none'})`,
      );
  }
}

/**
 * The runs of a planned sweep as {@link runSweep} schedules them, with the experiment's measured CPU
 * seconds: every run takes `secondsPerRun`; the first run of each warm-start key also trains the
 * warm start (`warmStartSeconds`, unless `isCached` says it is in the cache already) and the other
 * runs of that key wait for it; a run with `sft.cache` off trains its own.
 */
export function labSchedule(
  exp: LabExperiment,
  runs: readonly PlannedRun[],
  isCached: (run: PlannedRun) => boolean = () => false,
): LabScheduledRun[] {
  const leaders = new Map<string, number>();
  return runs.map((run, i) => {
    const trainsWarmStart = !run.config.sft.cache || !isCached(run);
    const trains = { seconds: exp.secondsPerRun + (trainsWarmStart ? exp.warmStartSeconds : 0), trainsWarmStart };
    if (!run.config.sft.cache) return trains;
    const key = warmStartKey(run.config);
    const leader = leaders.get(key);
    if (leader !== undefined) return { seconds: exp.secondsPerRun, after: leader, trainsWarmStart: false };
    leaders.set(key, i);
    return trains;
  });
}

/** A run of {@link labSchedule}. */
export interface LabScheduledRun extends ScheduledRun {
  /** The run trains a warm start (it is the first of its key and the cache lacks it, or it caches none). */
  readonly trainsWarmStart: boolean;
}

/** What {@link estimateLabSeconds} estimates. */
export interface LabEstimate {
  /** Wall seconds with `slots` runs at a time ({@link sweepWallSeconds}). */
  readonly wallSeconds: number;
  /** CPU seconds of all runs and warm starts together. */
  readonly cpuSeconds: number;
  /** Warm starts the sweep trains. */
  readonly warmStarts: number;
}

/**
 * The estimated duration of an experiment's sweep: each run takes the CPU seconds measured for it
 * (`secondsPerRun`, plus `warmStartSeconds` for a run that trains a warm start) and `slots` runs
 * proceed at once — `min(workers, cores)` — scheduled as {@link runSweep} does
 * ({@link labSchedule}, {@link sweepWallSeconds}). It holds on an idle machine as fast as the one
 * the figures were measured on (`timedOn`); a busy machine stretches the wall time.
 */
export function estimateLabSeconds(
  exp: LabExperiment,
  runs: readonly PlannedRun[],
  slots: number,
  isCached?: (run: PlannedRun) => boolean,
): LabEstimate {
  const schedule = labSchedule(exp, runs, isCached);
  return {
    wallSeconds: sweepWallSeconds(schedule, Math.min(slots, runs.length)),
    cpuSeconds: schedule.reduce((sum, r) => sum + r.seconds, 0),
    warmStarts: schedule.filter((r) => r.trainsWarmStart).length,
  };
}

/** Runs an experiment: its sweep, with the summary, paired table and report the sweep writes. */
export function runLabExperiment(
  exp: LabExperiment,
  options: LabRunOptions,
  root = packageRoot(),
): Promise<SweepResult> {
  return runSweep(labSweepOptions(exp, options, root));
}
