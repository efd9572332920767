// `qrl-sim sweep`: a grid of configs × seeds run in parallel worker threads, then the summary
// table and the report. Not the sweep logic (src/report/sweep.ts) nor the grid syntax (grid.ts).

import { existsSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { packageRoot } from '../runs/lab.js';
import { availableParallelism } from 'node:os';
import { GRID_ALIASES } from '../runs/grid.js';
import {
  emitSweepJobs,
  planSweep,
  readSweepManifestOptions,
  runSweep,
  SweepStopped,
  type SweepOptions,
  type SweepResult,
} from '../runs/sweep.js';
import type { FactorySource } from '../runs/factory.js';
import type { CliIo, Command } from './command.js';
import { handleStopSignals, STOP_EXIT, stopReason, stopRequested } from './stop.js';
import { UsageError } from '../core/errors.js';
import { checkSetValues, readJsonFile } from './input.js';
import { claimOutDir } from './outdir.js';
import {
  integerOption,
  MAX_STEPS,
  PARALLEL_OPTIONS,
  parseCommandArgs,
  refuseIgnored,
  REPEATED,
  required,
  strings,
} from './parse.js';
import { docRef } from './bundled.js';
import { type SweepProgress, sweepProgress } from './sweep-progress.js';
import { RAY_MAX_RETRIES, type SweepExecutor } from '../runs/sweep-ray.js';

/** Most seeds per grid point and most worker threads (docs/decisions.md, "Size limits"). */
export const MAX_SEEDS = 1000;
export const MAX_WORKERS = 256;
/** Most runs (grid points × seeds) in one sweep. */
export const MAX_RUNS = 10_000;

const aliases = Object.entries(GRID_ALIASES)
  .map(([k, a]) => `  ${k.padEnd(12)}${a.path}${a.spec === true ? '  (a bare name becomes {"name": …})' : ''}`)
  .join('\n');

const help = `usage: qrl-sim sweep --config FILE [--grid "KEY=V1,V2;KEY2=V3"] [--seeds N] [--workers N]
                     [--out DIR] [--steps N] [--set PATH=VALUE …] [--factory MODULE[#EXPORT]]
                     [--baseline KEY=V[,KEY=V…]] [--exclude KEY=V[,KEY=V…][;…]]
                     [--executor threads|ray [--ray-address ADDR]]
       qrl-sim sweep --resume DIR [--workers N] [--executor threads|ray [--ray-address ADDR]]
       qrl-sim sweep --config FILE … --out DIR --emit-jobs FILE

Runs every grid point × seed of a run config in parallel worker threads (or Ray tasks: --executor
ray, docs/reports.md "Sweeps on Ray"). Each run writes its own
directory <out>/<point>/seed-<s>/ exactly as 'qrl-sim run' does; then the sweep writes
summary.json, summary.md, summary.html and report.html into <out> and prints the table.

  --config FILE    base run config (JSON, see docs/grpo.md)
  --grid SPEC      axes separated by ';', values by ','; keys are config paths or aliases;
                   values are parsed like --set values (JSON if it parses, else a string)
  --seeds N        seeds per grid point: the config's seed, seed+1, … (default 1, at most ${MAX_SEEDS})
  --workers N      worker threads (default: available cores = ${availableParallelism()}, at most ${MAX_WORKERS})
  --out DIR        output directory (default runs/sweep); must be new or empty: an existing run or
                   sweep is never overwritten
  --steps N        GRPO steps of every run
  --set P=V        override a config field of every run (repeatable), applied before the grid
  --factory M#E    module exporting the policy factory (default: the built-in policies)
  --baseline SEL   the report's baseline for the paired comparison, e.g. plan=bf16,correction=none
                   (the default; must select exactly one grid point)
  --exclude SEL    leave out the grid points SEL matches (';' between selectors), e.g.
                   plan=bf16,correction=tis — an arm identical to the baseline by construction
  --executor E     threads (default): worker threads of this process; ray: each run a Ray task
                   running 'qrl-sim run' into the same directory (a task whose worker dies is
                   retried ${RAY_MAX_RETRIES}× and resumes from its checkpoint); same files, summary and report
  --ray-address A  a running Ray cluster (HOST:PORT of 'ray start --head', ray://HOST:PORT or auto);
                   without it Ray starts a local cluster of --workers CPUs. Ray runs under $QRL_PYTHON
                   (default python3); docs/reports.md says what the worker nodes need
  --resume DIR     continue a stopped sweep (see below), on either executor
  --emit-jobs FILE run nothing: write DIR/sweep.json, each run's config (DIR/jobs/NNNN.json) and
                   FILE, one self-contained 'qrl-sim run --config … --out DIR/<point>/seed-<s>'
                   command per line, for a scheduler (Slurm array, ray job submit, GNU parallel,
                   xargs -P); then 'qrl-sim report DIR' writes the sweep's summary (docs/reports.md)

Grid key aliases:
${aliases}

Every run's config is validated before anything runs or is written: an unknown key, an empty
value list or an invalid value exits with code 2. A run that fails is recorded in the summary
(with its error) and does not stop the others; the sweep then exits with code 1.

A live line on standard error shows runs done, running, failed and the ETA.

Ctrl-C, SIGTERM or a closed standard output stop the sweep: no further run starts and every
running run stops after its current step with a checkpoint (a second signal stops at once, files
whole). --resume DIR continues it with the options sweep.json records: finished runs are kept, cut
runs resume from their checkpoint, missing or failed runs run; the results are byte-identical to
an uninterrupted sweep. It continues a 'lab run' or 'demo' directory the same way.

examples:
  qrl-sim sweep --config sims/smoke-reverse.json --grid "correction=none,tis" --workers 2 --out runs/smoke-sweep

A full-size one (minutes): qrl-sim sweep --config sims/ar-reverse.json --grid "correction=none,tis,ais;plan=bf16,fp8-rollout" --seeds 3`;

function parseFactory(text: string | undefined): FactorySource | undefined {
  if (text === undefined) return undefined;
  const hash = text.lastIndexOf('#');
  const path = hash > 0 ? text.slice(0, hash) : text;
  const name = hash > 0 ? text.slice(hash + 1) : undefined;
  const module = /^file:/.test(path) ? path : resolve(path);
  if (!module.startsWith('file:') && !existsSync(module)) throw new UsageError(`--factory: no such module '${path}'`);
  return name === undefined ? { module } : { module, export: name };
}

/** The `sweep` subcommand. */
export const sweepCommand: Command = {
  summary: 'run a grid of configs × seeds in parallel; summary table and HTML report',
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, {
      ...strings(
        'config',
        'grid',
        'steps',
        'factory',
        'baseline',
        'resume',
        'emit-jobs',
        'exclude',
        'executor',
        'ray-address',
      ),
      ...PARALLEL_OPTIONS,
      set: REPEATED,
    });
    const executor = executorOption(values.executor, values['ray-address']);
    if (values.resume !== undefined) {
      refuseIgnored(
        values,
        ['config', 'grid', 'seeds', 'out', 'steps', 'set', 'factory', 'baseline', 'exclude', 'emit-jobs'],
        'with --resume (the sweep keeps the options its sweep.json records)',
      );
      const recorded = readSweepManifestOptions(values.resume);
      const workers =
        values.workers === undefined ? undefined : integerOption(values.workers, 'workers', 1, 1, MAX_WORKERS);
      return executeSweep(
        io,
        {
          ...recorded,
          outDir: resolve(values.resume),
          resume: true,
          ...(workers === undefined ? {} : { workers }),
          ...(executor === undefined ? {} : { executor }),
        },
        values.resume,
        'sweep',
      );
    }
    const file = required(values.config, 'config');
    if (!existsSync(file)) throw new UsageError(`--config: no such file '${file}'`);
    const baseConfig = readJsonFile(file, '--config');
    checkSetValues(values.set ?? []);
    const seeds = integerOption(values.seeds, 'seeds', 1, 1, MAX_SEEDS);
    const workers =
      values.workers === undefined ? undefined : integerOption(values.workers, 'workers', 1, 1, MAX_WORKERS);
    const steps = values.steps === undefined ? undefined : integerOption(values.steps, 'steps', 1, 1, MAX_STEPS);
    const outDir = values.out ?? 'runs/sweep';
    const factory = parseFactory(values.factory);
    const sweepOptions = {
      baseConfig,
      grid: values.grid ?? '',
      seeds,
      overrides: values.set ?? [],
      outDir: isAbsolute(outDir) ? outDir : resolve(outDir),
      ...(workers === undefined ? {} : { workers }),
      ...(steps === undefined ? {} : { steps }),
      ...(factory === undefined ? {} : { factory }),
      ...(values.baseline === undefined ? {} : { baseline: values.baseline }),
      ...(values.exclude === undefined ? {} : { exclude: values.exclude }),
      ...(executor === undefined ? {} : { executor }),
    };
    // Validate every run first (nothing written), then claim the directory, then run.
    const plan = await planSweep(sweepOptions);
    if (plan.runs.length > MAX_RUNS)
      throw new UsageError(`--grid/--seeds: ${plan.runs.length} runs, at most ${MAX_RUNS} per sweep`);
    if (values['emit-jobs'] !== undefined) {
      refuseIgnored(values, ['workers', 'executor'], 'with --emit-jobs (the scheduler runs the jobs)');
      const jobsFile = values['emit-jobs'];
      if (existsSync(jobsFile)) throw new UsageError(`--emit-jobs: '${jobsFile}' exists (give a new file)`);
      claimOutDir(outDir, 'sweep');
      const jobs = await emitSweepJobs(sweepOptions);
      const bin = join(packageRoot(), 'bin', 'qrl-sim.js');
      const lines = jobs.map((j) =>
        [process.execPath, bin, 'run', '--config', j.configPath, '--out', j.outDir].map(shellQuote).join(' '),
      );
      try {
        writeFileSync(jobsFile, `${lines.join('\n')}\n`);
      } catch (error) {
        throw new UsageError(
          `--emit-jobs: cannot write '${jobsFile}' (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
        );
      }
      io.out(
        `wrote ${jobs.length} jobs to ${jobsFile} (one 'qrl-sim run' command per line; run them with any scheduler, e.g. xargs -d '\\n' -P 4 -n 1 sh -c < ${jobsFile})`,
      );
      io.out(`then: qrl-sim report ${outDir}   (the summary of the in-process sweep; ${docRef('docs/reports.md')})`);
      return 0;
    }
    claimOutDir(outDir, 'sweep');
    return executeSweep(io, sweepOptions, outDir, 'sweep');
  },
};

/** `--executor` and `--ray-address` as an executor (undefined: the default, threads); a UsageError names a bad value. */
function executorOption(name: string | undefined, address: string | undefined): SweepExecutor | undefined {
  if (name !== undefined && name !== 'threads' && name !== 'ray')
    throw new UsageError(`--executor: expected threads or ray, got '${name}'`);
  if (address !== undefined && name !== 'ray')
    throw new UsageError(`--ray-address: not used without --executor ray, got '${address}'`);
  if (address !== undefined && address.trim() === '')
    throw new UsageError(`--ray-address: expected HOST:PORT, ray://HOST:PORT or auto, got ''`);
  if (name === undefined) return undefined;
  return name === 'threads' ? { kind: 'threads' } : address === undefined ? { kind: 'ray' } : { kind: 'ray', address };
}

/** `text` quoted for a POSIX shell (left bare when it has only safe characters). */
export function shellQuote(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * Runs a planned sweep (or resumes one) under the stopping discipline of src/cli/stop.ts, printing
 * a line per finished run, then the table; a stopped sweep says how to continue it and exits with
 * 128 + the signal. `command` names the command in messages (sweep, lab, demo).
 */
export async function executeSweep(
  io: CliIo,
  options: SweepOptions,
  outDir: string,
  command: string,
  print: { perRun?: boolean; after?: (result: SweepResult) => void } = {},
): Promise<number> {
  const plan = await planSweep(options);
  // The live line starts with the runs (a Ray cluster that cannot be had prints its one error line alone).
  let progress: SweepProgress = { runDone: () => {}, stop: () => {} };
  const unhandle = handleStopSignals(
    io,
    command,
    'no further run starts; the running ones stop after their current step',
  );
  let result: SweepResult;
  try {
    result = await runSweep({
      ...options,
      shouldStop: stopRequested,
      onStart: (workers) => {
        progress = sweepProgress(io, Math.min(workers, plan.runs.length), plan.runs.length);
      },
      onRunDone: (run, done, total) => {
        progress.runDone(done, total, run.ok);
        if (print.perRun !== false)
          io.out(
            `[${done}/${total}] ${run.dir}: ${run.ok ? `done in ${run.seconds.toFixed(1)} s` : `FAILED: ${run.error}`}`,
          );
      },
    });
  } catch (error) {
    progress.stop();
    if (!(error instanceof SweepStopped)) throw error;
    const reason = stopReason() ?? 'SIGINT';
    io.err(
      `qrl-sim ${command}: stopped (${reason}): ${error.finished} of ${error.total} runs finished, ${error.cut} stopped part-way (files whole); continue with: qrl-sim sweep --resume ${outDir}`,
    );
    return STOP_EXIT[reason];
  } finally {
    unhandle();
  }
  progress.stop();
  const failed = result.runs.filter((r) => !r.ok).length;
  io.out('');
  io.out(result.report.markdown);
  io.out(
    `${result.runs.length} runs (${failed} failed) on ${result.workers} worker${result.workers === 1 ? '' : 's'} in ${result.seconds.toFixed(1)} s`,
  );
  io.out(`report: ${result.report.files.reportHtml}`);
  print.after?.(result);
  return failed === 0 ? 0 : 1;
}
