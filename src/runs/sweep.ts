// `runSweep`: validates every grid point × seed up front, then runs them in piscina worker threads
// (one directory per run, as `qrl-sim run` writes) and writes the summary and report. Not the
// grid syntax (grid.ts) and not a run (run.ts, called by sweep-worker.ts).

import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { Piscina } from 'piscina';
import { UsageError } from '../core/errors.js';
import { planOfConfig } from '../policies/plans.js';
import { type RunConfig, resolveRunConfig } from '../rl/grpo/config.js';
import { removeStaleTemps, writeJsonAtomic } from '../core/files.js';
import { applyOverrides } from './overrides.js';
import { checkModelLimits } from './limits.js';
import { latestCheckpoint, warmStartKey } from './run.js';
import { DEFAULT_FACTORY, type FactorySource, type ValidatingPolicyFactory, loadPolicyFactory } from './factory.js';
import { type GridAxis, type GridPoint, applyGridPoint, gridPoints, parseGrid } from './grid.js';
import { RUN_ERROR_FILE, type RunErrorFile } from '../report/runs.js';
import { BaselineError, summarizeRuns } from '../report/summary.js';
import type { SweepTask, SweepTaskResult } from './sweep-worker.js';
import { type SweepExecutor, startRayPool } from './sweep-ray.js';
import { type SweepBackend, sweepBackendRun } from './sweep-backend.js';
import { type ReportResult, SWEEP_MANIFEST, writeReport } from '../report/write.js';

/** Options of {@link planSweep} and {@link runSweep}. */
export interface SweepOptions {
  /** The base config as read from the config file (raw JSON; defaults are filled in per run). */
  readonly baseConfig: unknown;
  /** The grid, `key=v1,v2;key2=v3` (see {@link parseGrid}), or parsed axes. @defaultValue `''` (one point) */
  readonly grid?: string | readonly GridAxis[];
  /** Seeds per grid point: config seed, seed + 1, …. @defaultValue `1` */
  readonly seeds?: number;
  /** `--set path=value` overrides applied to the base config before the grid. */
  readonly overrides?: readonly string[];
  /** Overrides `steps` of every run. */
  readonly steps?: number;
  /** Output directory: runs go to `<outDir>/<point>/seed-<s>/`. */
  readonly outDir: string;
  /**
   * Worker threads; on Ray, the CPUs of the local cluster, or the most runs at once on a given one.
   * @defaultValue `os.availableParallelism()` (at most the number of runs; on a given Ray cluster, its CPUs)
   */
  readonly workers?: number;
  /**
   * Where the runs run: worker threads of this process, or Ray tasks that each run `qrl-sim run`
   * (same directories and files; a run whose worker dies is retried and resumes).
   * @defaultValue `{ kind: 'threads' }`
   */
  readonly executor?: SweepExecutor;
  /** Where the policy factory comes from. @defaultValue {@link DEFAULT_FACTORY} */
  readonly factory?: FactorySource;
  /** Warm-start cache directory. @defaultValue `.cache/sft` under the working directory */
  readonly cacheDir?: string;
  /** Baseline of the report's paired comparison (see `summarizeRuns`); checked against the grid before anything runs. */
  readonly baseline?: string;
  /**
   * Grid points left out, e.g. `plan=bf16,correction=tis` (arms identical by construction);
   * several selectors separated by `;`. Each must match at least one point.
   */
  readonly exclude?: string;
  /**
   * Run every run on a spawned backend, its plan mapped to the backend's (sweep-backend.ts; worker
   * threads only). A run whose plan has no mapping is a UsageError before anything runs.
   */
  readonly backend?: SweepBackend;
  /** Called once the executor is up, before any run starts, with the number of runs at once. */
  readonly onStart?: (workers: number) => void;
  /** Called as each run finishes (in completion order). */
  readonly onRunDone?: (run: SweepRunResult, done: number, total: number) => void;
  /**
   * Continue the sweep in `outDir` (its runs as they stand): a finished run is kept, a run that was
   * cut resumes from its checkpoint (or starts over when it has none), a missing or failed run runs.
   */
  readonly resume?: boolean;
  /**
   * Polled while the sweep runs: once true, no further run starts and every running run stops
   * after its current step with a checkpoint; {@link runSweep} then rejects with {@link SweepStopped}.
   */
  readonly shouldStop?: () => boolean;
}

/** What `sweep.json` records of the options, so that `sweep --resume DIR` plans the same runs. */
export interface SweepManifestOptions {
  readonly baseConfig: unknown;
  readonly grid: string;
  readonly seeds: number;
  readonly overrides: readonly string[];
  readonly steps?: number;
  readonly baseline?: string;
  readonly exclude?: string;
  readonly factory?: FactorySource;
}

/** Thrown by {@link runSweep} when `shouldStop` stopped it: every run is whole, and `resume` continues it. */
export class SweepStopped extends Error {
  constructor(
    /** Runs that finished (before or during this call). */
    readonly finished: number,
    /** Runs stopped part-way (each with a checkpoint, or none when stopped in its warm start). */
    readonly cut: number,
    /** Runs of the plan in all. */
    readonly total: number,
  ) {
    super(
      `sweep stopped: ${finished} of ${total} runs finished, ${cut} stopped part-way, ${total - finished - cut} not started`,
    );
    this.name = 'SweepStopped';
  }
}

/** One validated run of a sweep. */
export interface PlannedRun {
  /** The grid point's label, e.g. `correction=tis, plan=bf16`. */
  readonly label: string;
  /** Run directory relative to the sweep directory, e.g. `correction-tis_plan-bf16/seed-0`. */
  readonly dir: string;
  readonly seed: number;
  /** The resolved config (what the run's config.json will hold). */
  readonly config: RunConfig;
}

/** Every run of a sweep, validated, in grid order × seeds. */
export interface SweepPlan {
  readonly axes: readonly GridAxis[];
  readonly points: readonly GridPoint[];
  readonly seeds: readonly number[];
  readonly runs: readonly PlannedRun[];
}

/** How one run of a sweep ended. */
export interface SweepRunResult extends PlannedRun {
  readonly ok: boolean;
  /** Stopped part-way by `shouldStop` (resumable), or not started because of it. */
  readonly stopped?: boolean;
  readonly error: string | null;
  /** Wall-clock seconds (warm start and evaluation included). */
  readonly seconds: number;
}

/** What {@link runSweep} did. */
export interface SweepResult {
  readonly plan: SweepPlan;
  readonly runs: readonly SweepRunResult[];
  readonly report: ReportResult;
  /** Worker threads used. */
  readonly workers: number;
  /** Wall-clock seconds of the whole sweep (report included). */
  readonly seconds: number;
}

function usage(prefix: string, error: unknown): never {
  const message = error instanceof Error ? error.message : String(error);
  throw new UsageError(`${prefix}${message}`);
}

/**
 * Builds and validates every run of the sweep without writing anything: grid syntax, each grid
 * point × seed through `resolveRunConfig`, the precision plan's name, and the policy factory's
 * `validate` when it has one. Any problem throws a `UsageError` naming the grid point and
 * the field; a factory that cannot be loaded throws a plain error.
 */
export async function planSweep(options: SweepOptions): Promise<SweepPlan> {
  const axes =
    typeof options.grid === 'string' || options.grid === undefined ? parseGrid(options.grid ?? '') : options.grid;
  const count = options.seeds ?? 1;
  if (!Number.isSafeInteger(count) || count < 1) throw new UsageError(`--seeds: expected an integer ≥ 1, got ${count}`);
  if (options.steps !== undefined && (!Number.isSafeInteger(options.steps) || options.steps < 1))
    throw new UsageError(`--steps: expected an integer ≥ 1, got ${options.steps}`);
  let base: unknown;
  try {
    base = applyOverrides(options.baseConfig, [
      ...(options.overrides ?? []),
      ...(options.steps === undefined ? [] : [`steps=${options.steps}`]),
    ]);
  } catch (error) {
    usage('', error);
  }
  // The seeds start at the config's seed (validated here: the runs replace it with their own).
  const rawSeed = typeof base === 'object' && base !== null ? (base as Record<string, unknown>)['seed'] : undefined;
  if (rawSeed !== undefined && !(Number.isSafeInteger(rawSeed) && (rawSeed as number) >= 0)) {
    throw new UsageError(`config.seed: expected an integer ≥ 0 (got ${JSON.stringify(rawSeed)})`);
  }
  const baseSeed = (rawSeed as number | undefined) ?? 0;
  const seeds = Array.from({ length: count }, (_, i) => baseSeed + i);
  const points = excludePoints(gridPoints(axes), axes, options.exclude);
  const runs: PlannedRun[] = [];
  for (const point of points) {
    const raw = applyGridPoint(base, point);
    for (const seed of seeds) {
      const where = point.label === 'base' ? `seed ${seed}: ` : `grid point ${point.label}, seed ${seed}: `;
      let config: RunConfig;
      try {
        config = resolveRunConfig({ ...(raw as Record<string, unknown>), seed });
        planOfConfig(config.plan);
        checkModelLimits(config);
      } catch (error) {
        usage(where, error);
      }
      runs.push({ label: point.label, dir: `${point.dirName}/seed-${seed}`, seed, config });
    }
  }
  const factories = new Map<string, ValidatingPolicyFactory>();
  for (const run of runs) {
    const kind = run.config.policy.kind;
    if (!factories.has(kind)) factories.set(kind, await loadPolicyFactory(options.factory ?? DEFAULT_FACTORY, kind));
    const factory = factories.get(kind) as ValidatingPolicyFactory;
    if (factory.validate !== undefined) {
      try {
        factory.validate(run.config);
      } catch (error) {
        usage(run.label === 'base' ? `seed ${run.seed}: ` : `grid point ${run.label}, seed ${run.seed}: `, error);
      }
    }
  }
  return { axes, points, seeds, runs };
}

/**
 * The grid points that no selector of `exclude` (`key=v,key=v;…`, keys as in the grid) matches.
 * A selector with a key outside the grid, or that matches no point, is a UsageError.
 */
function excludePoints(points: GridPoint[], axes: readonly GridAxis[], exclude: string | undefined): GridPoint[] {
  if (exclude === undefined || exclude.trim() === '') return points;
  const pairsOf = (label: string): Set<string> => new Set(label === 'base' ? [] : label.split(', '));
  let kept = points;
  for (const selector of exclude.split(';').map((t) => t.trim())) {
    const wanted = selector.split(',').map((t) => t.trim());
    for (const pair of wanted) {
      const [key, value] = pair.split('=');
      const axis = axes.find((a) => a.key === key);
      if (axis === undefined || value === undefined || !axis.texts.includes(value)) {
        throw new UsageError(
          `--exclude: '${pair}' is not a grid value (grid: ${axes.map((a) => `${a.key}=${a.texts.join(',')}`).join(';') || 'none'})`,
        );
      }
    }
    const before = kept.length;
    kept = kept.filter((p) => !wanted.every((w) => pairsOf(p.label).has(w)));
    if (kept.length === before) throw new UsageError(`--exclude: '${selector}' matches no grid point left`);
  }
  if (kept.length === 0) throw new UsageError(`--exclude: leaves no grid point`);
  return kept;
}

/**
 * The worker module and the Node flags it needs. From the compiled package (dist/*.js) the worker
 * is plain JS; from the TypeScript sources (vitest, tsx) the worker threads load tsx's ESM hooks
 * (`--import tsx`), which are a dev dependency.
 */
export function sweepWorkerEntry(): { filename: string; execArgv: string[] } {
  const here = import.meta.url;
  if (here.endsWith('.ts')) {
    const tsx = pathToFileURL(createRequire(here).resolve('tsx')).href;
    return { filename: new URL('./sweep-worker.ts', here).href, execArgv: ['--import', tsx] };
  }
  return { filename: new URL('./sweep-worker.js', here).href, execArgv: [] };
}

/** The grid as `--grid` text (axes keep the texts they were parsed from). */
export function gridText(axes: readonly GridAxis[]): string {
  return axes.map((a) => `${a.key}=${a.texts.join(',')}`).join(';');
}

/** The contents of `sweep.json`: the grid, seeds and runs, and the options that plan them again. */
function sweepManifest(plan: SweepPlan, options: SweepOptions): unknown {
  const recorded: SweepManifestOptions = {
    baseConfig: options.baseConfig,
    grid: gridText(plan.axes),
    seeds: plan.seeds.length,
    overrides: [...(options.overrides ?? [])],
    ...(options.steps === undefined ? {} : { steps: options.steps }),
    ...(options.baseline === undefined ? {} : { baseline: options.baseline }),
    ...(options.exclude === undefined ? {} : { exclude: options.exclude }),
    ...(options.factory === undefined ? {} : { factory: options.factory }),
  };
  return {
    version: 1,
    grid: plan.axes.map((a) => ({ key: a.key, path: a.path, values: a.texts })),
    seeds: plan.seeds,
    runs: plan.runs.map((r) => ({ dir: r.dir, label: r.label, seed: r.seed })),
    options: recorded,
  };
}

/** The options recorded in a sweep directory's `sweep.json`; a UsageError naming the problem otherwise. */
export function readSweepManifestOptions(dir: string): SweepManifestOptions {
  const path = join(dir, SWEEP_MANIFEST);
  if (!existsSync(path)) throw new UsageError(`--resume: '${dir}' holds no sweep (no ${SWEEP_MANIFEST})`);
  let manifest: { options?: SweepManifestOptions };
  try {
    manifest = JSON.parse(readFileSync(path, 'utf8')) as { options?: SweepManifestOptions };
  } catch (error) {
    throw new UsageError(`--resume: ${path} is not valid JSON (${(error as Error).message})`);
  }
  if (manifest.options === undefined || typeof manifest.options !== 'object') {
    throw new UsageError(
      `--resume: ${path} does not record the sweep's options (written by an older qrl-sim): run the sweep again into a new directory`,
    );
  }
  return manifest.options;
}

/** True when the run in `dir` reached its last step (its newest checkpoint is at `config.steps`). */
function runFinished(dir: string, config: RunConfig): boolean {
  if (existsSync(join(dir, RUN_ERROR_FILE))) return false;
  const latest = latestCheckpoint(dir);
  const m = latest === null ? null : /step-(\d+)$/.exec(latest);
  return m !== null && Number(m[1]) >= config.steps;
}

/** One run of a sweep as a job of its own (see {@link emitSweepJobs}). */
export interface SweepJob {
  readonly run: PlannedRun;
  /** Absolute path of the run's resolved config (`<outDir>/jobs/NNNN.json`). */
  readonly configPath: string;
  /** Absolute run directory (`<outDir>/<point>/seed-<s>`). */
  readonly outDir: string;
}

/**
 * Plans the sweep ({@link planSweep}) and, instead of running it, writes what its runs need to run
 * anywhere: `sweep.json` (as {@link runSweep} writes it, so `report DIR` merges the runs in grid
 * order) and each run's resolved config as `jobs/NNNN.json`. Returns the jobs in grid order; each is
 * `qrl-sim run --config <configPath> --out <outDir>`, whose files equal the in-process run's.
 */
export async function emitSweepJobs(options: SweepOptions): Promise<SweepJob[]> {
  const plan = await planSweep(options);
  const outDir = resolve(options.outDir);
  mkdirSync(join(outDir, 'jobs'), { recursive: true });
  writeJsonAtomic(join(outDir, SWEEP_MANIFEST), sweepManifest(plan, options));
  return plan.runs.map((run, i) => {
    const configPath = join(outDir, 'jobs', `${String(i).padStart(4, '0')}.json`);
    writeJsonAtomic(configPath, run.config);
    return { run, configPath, outDir: join(outDir, run.dir) };
  });
}

/**
 * Validates the whole sweep ({@link planSweep}; nothing is written if that fails), runs every
 * grid point × seed in worker threads or as Ray tasks (`options.executor`), records failed runs
 * (their `error.json`) without stopping the others, and writes summary.json/md/html and
 * report.html into `outDir`.
 */
export async function runSweep(options: SweepOptions): Promise<SweepResult> {
  const t0 = performance.now();
  const plan = await planSweep(options);
  const backend = options.backend;
  if (backend !== undefined && (options.executor ?? { kind: 'threads' }).kind !== 'threads')
    throw new UsageError('--backend: runs on a backend use worker threads, not --executor ray');
  const onBackend = new Map(
    backend === undefined ? [] : plan.runs.map((r) => [r, sweepBackendRun(r.config, backend, `grid point ${r.label}`)]),
  );
  if (options.baseline !== undefined) {
    // The baseline must pick exactly one grid point: checked on the planned configs, before anything runs
    // (on a backend, as config.json will hold them: the plan the backend serves).
    const planned = plan.runs.map((r) => ({
      dir: r.dir,
      name: r.dir,
      config: plannedConfig(r, onBackend.get(r)),
      metrics: [],
      eval: [],
      timings: [],
      error: null,
    }));
    try {
      summarizeRuns(planned, { baseline: options.baseline });
    } catch (error) {
      if (error instanceof BaselineError) throw new UsageError(`--${error.message}`);
      throw error;
    }
  }
  const outDir = resolve(options.outDir);
  const cacheDir = resolve(options.cacheDir ?? join(process.cwd(), '.cache', 'sft'));
  const workers = Math.max(1, Math.min(options.workers ?? availableParallelism(), plan.runs.length));
  // The executor first: a Ray cluster that cannot be had is bad input, and nothing is written then.
  const pool = await startPool(options, { workers, runs: plan.runs.length, cacheDir });
  try {
    mkdirSync(outDir, { recursive: true });
    removeStaleTemps(outDir);
    writeJsonAtomic(join(outDir, SWEEP_MANIFEST), sweepManifest(plan, options));
  } catch (error) {
    await pool.close();
    throw error;
  }
  let stopped = false;
  const stopping = (): boolean => {
    if (!stopped && options.shouldStop?.() === true) {
      stopped = true;
      pool.stop();
    }
    return stopped;
  };
  const poll = options.shouldStop === undefined ? undefined : setInterval(stopping, 100);
  poll?.unref();
  options.onStart?.(pool.workers);
  let done = 0;
  const runOne = async (run: PlannedRun): Promise<SweepRunResult> => {
    const dir = join(outDir, run.dir);
    if (options.resume === true && runFinished(dir, run.config)) {
      const out: SweepRunResult = { ...run, ok: true, error: null, seconds: 0 };
      options.onRunDone?.(out, ++done, plan.runs.length);
      return out;
    }
    if (stopping()) return { ...run, ok: true, error: null, seconds: 0, stopped: true };
    const resume =
      options.resume === true && existsSync(join(dir, 'config.json')) && !existsSync(join(dir, RUN_ERROR_FILE));
    rmSync(join(dir, RUN_ERROR_FILE), { force: true });
    let result: SweepTaskResult;
    try {
      const remote = onBackend.get(run);
      result = await pool.run({
        config: remote?.config ?? run.config,
        outDir: dir,
        factory: options.factory ?? DEFAULT_FACTORY,
        cacheDir,
        resume,
        ...(remote === undefined ? {} : { backend: remote.backend }),
      });
    } catch (error) {
      result = { ok: false, error: `worker: ${error instanceof Error ? error.message : String(error)}`, seconds: 0 };
    }
    if (result.ok && result.stopped === true)
      return { ...run, ok: true, error: null, seconds: result.seconds, stopped: true };
    if (!result.ok) {
      const record: RunErrorFile = { error: result.error ?? 'unknown error', config: run.config };
      if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
      writeJsonAtomic(join(dir, RUN_ERROR_FILE), record);
    }
    const out: SweepRunResult = { ...run, ok: result.ok, error: result.error, seconds: result.seconds };
    done++;
    options.onRunDone?.(out, done, plan.runs.length);
    return out;
  };
  // The first run of each warm-start key trains and caches the warm start; the others wait for it
  // (no two threads write the same cache file, and no warm start is trained twice).
  const leaders = new Map<string, Promise<SweepRunResult>>();
  const pending = plan.runs.map((run) => {
    const key = warmStartKey(run.config);
    const leader = leaders.get(key);
    if (leader === undefined || !run.config.sft.cache) {
      const p = runOne(run);
      if (run.config.sft.cache) leaders.set(key, p);
      return p;
    }
    return leader.then(() => runOne(run));
  });
  let results: SweepRunResult[];
  try {
    results = await Promise.all(pending);
  } finally {
    if (poll !== undefined) clearInterval(poll);
    await pool.close();
  }
  if (results.some((r) => r.stopped === true)) {
    const cut = results.filter((r) => r.stopped === true && existsSync(join(outDir, r.dir, 'config.json'))).length;
    throw new SweepStopped(results.filter((r) => r.stopped !== true).length, cut, results.length);
  }
  const report = await writeReport(outDir, options.baseline === undefined ? {} : { baseline: options.baseline });
  return { plan, runs: results, report, workers: pool.workers, seconds: (performance.now() - t0) / 1000 };
}

/** A planned run's config as its config.json will read (on a backend: plan "backend" and the served plan). */
function plannedConfig(
  run: PlannedRun,
  remote: ReturnType<typeof sweepBackendRun> | undefined,
): Record<string, unknown> {
  if (remote === undefined) return run.config as unknown as Record<string, unknown>;
  return { ...remote.config, backend: { address: remote.backend.address, plan: remote.backend.plan } };
}

/** The runs' executor as {@link runSweep} drives it: a run in, its result out; a stop; a close. */
interface RunPool {
  /** Runs at once. */
  readonly workers: number;
  run(task: SweepTask): Promise<SweepTaskResult>;
  /** No further run starts; running ones stop after their current step, with a checkpoint. */
  stop(): void;
  close(): Promise<void>;
}

/** Worker threads (piscina, a shared stop flag they poll after each step) or a Ray driver. */
async function startPool(
  options: SweepOptions,
  sizes: { workers: number; runs: number; cacheDir: string },
): Promise<RunPool> {
  const executor = options.executor ?? { kind: 'threads' };
  if (executor.kind === 'threads') {
    const entry = sweepWorkerEntry();
    const pool = new Piscina<SweepTask, SweepTaskResult>({
      filename: entry.filename,
      execArgv: entry.execArgv,
      minThreads: 0,
      maxThreads: sizes.workers,
      idleTimeout: 1000,
    });
    // Shared memory: the threads read the flag after each step, never waiting on a message.
    const flag = new Int32Array(new SharedArrayBuffer(4));
    return {
      workers: sizes.workers,
      run: (task) => pool.run({ ...task, stop: flag.buffer as SharedArrayBuffer }),
      stop: () => Atomics.store(flag, 0, 1),
      close: () => pool.destroy(),
    };
  }
  // Each Ray task runs the CLI, which knows the built-in policies only and caches warm starts in
  // <cwd>/.cache/sft: both are checked here, before the cluster starts.
  if (options.factory !== undefined)
    throw new UsageError(
      `--factory: not used with --executor ray (each Ray task runs 'qrl-sim run', which has the built-in policies), got '${options.factory.module}'`,
    );
  const cacheRoot = resolve(sizes.cacheDir, '..', '..');
  if (join(cacheRoot, '.cache', 'sft') !== sizes.cacheDir)
    throw new UsageError(
      `cacheDir: the runs of --executor ray cache warm starts in <directory>/.cache/sft, got '${sizes.cacheDir}'`,
    );
  const ray = await startRayPool({
    executor,
    numCpus: sizes.workers,
    ...(executor.address !== undefined && options.workers !== undefined ? { maxInFlight: options.workers } : {}),
    cwd: cacheRoot,
  });
  const workers =
    executor.address === undefined ? sizes.workers : Math.max(1, Math.min(options.workers ?? ray.cpus, sizes.runs));
  return {
    workers,
    run: (task) => {
      // A run that starts over (a failed one, under --resume) starts from an empty directory: a task
      // resumes whatever holds a config.json.
      if (task.resume !== true) rmSync(task.outDir, { recursive: true, force: true });
      return ray.run({ dir: task.outDir, config: task.config });
    },
    stop: () => ray.stop(),
    close: () => ray.close(),
  };
}
