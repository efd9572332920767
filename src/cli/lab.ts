// `qrl-sim lab`: list the lab's experiments (one per finding of the papers) and run one as a sweep,
// saying before it starts how long it will take. Not the experiments (sims/lab/) or their pages (docs/lab/).

import { docRef } from './bundled.js';
import { existsSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { availableParallelism } from 'node:os';
import {
  checkLabBackendPlans,
  estimateLabSeconds,
  type LabEstimate,
  type LabExperiment,
  labExperimentNames,
  labSweepOptions,
  loadLabExperiment,
} from '../runs/lab.js';
import { warmStartCacheDir } from '../runs/run.js';
import { type PlannedRun, planSweep } from '../runs/sweep.js';
import type { Command } from './command.js';
import { UsageError } from '../core/errors.js';
import { claimOutDir } from './outdir.js';
import { booleans, integerOption, PARALLEL_OPTIONS, parseCommandArgs, strings } from './parse.js';
import { resolveBackendAddress } from './self-command.js';
import { executeSweep, MAX_SEEDS, MAX_WORKERS } from './sweep.js';

const help = `usage: qrl-sim lab list
       qrl-sim lab run NAME [--seeds N] [--workers N] [--out DIR] [--smoke] [--backend COMMAND]

The lab: one experiment per finding of the papers (QaRL, Jet-RL, FP8-RL, FlashRL, AIS), each a
small sweep spec in sims/lab/NAME.json with a page docs/lab/NAME.md that states the claim, the
mechanism, the measured result and a verdict (index: docs/lab/README.md).

  list            the experiments, their finding, runs and estimated time
  run NAME        runs the experiment's sweep into --out (default runs/lab/NAME), then prints the
                  summary and the paired comparison with the baseline and writes report.html
  --seeds N       seeds (default: the experiment's, at most ${MAX_SEEDS})
  --workers N     worker threads (default: available cores = ${availableParallelism()})
  --out DIR       output directory; must be new or empty (default runs/lab/NAME, with --smoke
                  runs/lab/NAME-smoke)
  --smoke         the seconds-long version (tiny sizes, one step): checks that it runs, measures nothing
  --backend CMD   run every run on this backend command (one process per run, one run at a time
                  unless --workers), each of the experiment's plans mapped to the backend's own
                  (sims/lab/NAME.json backendPlans; CMD's {plan} is replaced by it, else
                  --plan P is appended); an experiment without a mapping for a plan exits 2

The estimates (list, and before a run) are wall times on an idle machine as fast as the one that
measured them: each run takes the CPU seconds measured for it (sims/lab/NAME.json secondsPerRun,
plus warmStartSeconds for each run that trains a warm start; measured by npm run
lab-timings, on the machine and date of timedOn), min(workers, cores) runs proceed at once, and a
run that shares a warm start waits for the run that trains it, as the sweep schedules them. list
assumes two cores and an empty warm-start cache; run counts the workers, this machine's cores and
the warm starts already in .cache/sft. A busy machine stretches the wall time, not the CPU time.

examples:
  qrl-sim lab list
  qrl-sim lab run alignment --smoke --seeds 1 --out runs/lab-smoke-alignment
  qrl-sim lab run length --smoke --seeds 1 --backend "PYTHONPATH=python python3 -m qrl_backend.hf"`;

/** A duration for people: seconds below 90 s, minutes below 90 min, hours with one decimal above. */
export function humanDuration(seconds: number): string {
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 90 * 60) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

/** Cores `lab list` and the docs assume: the project's two-core machine. */
export const LAB_LIST_CORES = 2;

/** An experiment's runs as the full sweep plans them (its seeds, no smoke overrides). */
export async function labPlannedRuns(exp: LabExperiment): Promise<readonly PlannedRun[]> {
  return (await planSweep(labSweepOptions(exp, { outDir: 'unused' }))).runs;
}

/** `R runs (W warm starts), about T on two idle cores`: what the lab pages and the demo quote. */
export function labSizeText(exp: LabExperiment, runs: readonly PlannedRun[]): string {
  const estimate = estimateLabSeconds(exp, runs, LAB_LIST_CORES);
  return `${runs.length} runs (${estimate.warmStarts} warm start${estimate.warmStarts === 1 ? '' : 's'}), about ${humanDuration(estimate.wallSeconds)} on two idle cores`;
}

/** The `lab list` table, one markdown line each (docs/lab/README.md embeds it). */
export async function labListLines(): Promise<string[]> {
  const lines = [
    `| experiment | finding | source | runs | warm starts | CPU time | estimate (${LAB_LIST_CORES} idle cores) |`,
    '| --- | --- | --- | ---: | ---: | ---: | ---: |',
  ];
  for (const exp of labExperimentNames().map((name) => loadLabExperiment(name))) {
    const runs = await labPlannedRuns(exp);
    const estimate = estimateLabSeconds(exp, runs, LAB_LIST_CORES);
    lines.push(
      `| ${exp.name} | ${exp.title} | ${exp.source} | ${runs.length} | ${estimate.warmStarts} | ${humanDuration(estimate.cpuSeconds)} | ${humanDuration(estimate.wallSeconds)} |`,
    );
  }
  return lines;
}

/**
 * The estimate of a sweep about to run here: `min(workers, this machine's cores)` runs at a time,
 * warm starts already in the cache (`.cache/sft` under the working directory, where the sweep
 * looks) not counted.
 */
export function estimateHere(
  exp: LabExperiment,
  runs: readonly PlannedRun[],
  workers: number,
): LabEstimate & { readonly slots: number } {
  const slots = Math.max(1, Math.min(workers, availableParallelism(), runs.length));
  const cacheDir = resolve('.cache', 'sft');
  return {
    ...estimateLabSeconds(exp, runs, slots, (run) => existsSync(warmStartCacheDir(cacheDir, run.config))),
    slots,
  };
}

/** The estimate `lab run` and `demo` print before the runs start. */
export function estimateHereText(exp: LabExperiment, runs: readonly PlannedRun[], workers: number): string {
  const estimate = estimateHere(exp, runs, workers);
  return `${estimate.warmStarts} warm start${estimate.warmStarts === 1 ? '' : 's'} to train; about ${humanDuration(estimate.wallSeconds)} with ${estimate.slots} at a time on idle cores (${humanDuration(estimate.cpuSeconds)} of CPU in all)`;
}

/** `--backend` of `lab run`: a command (a URL serves one plan, so it cannot take each run's), its leading `qrl-sim` resolved. */
function labBackend(value: string): { command: string; address: string } {
  const address = resolveBackendAddress(value);
  if (!('command' in address))
    throw new UsageError(
      `--backend: lab run needs a command it can start with each run's plan, got the URL '${value}'`,
    );
  return { command: address.command, address: value };
}

/** The `lab` subcommand. */
export const labCommand: Command = {
  summary: 'the lab: one experiment per finding of the papers (list, run NAME)',
  help,
  async run(args, io) {
    const [verb, ...rest] = args;
    if (verb === 'list') {
      parseCommandArgs(rest, {});
      for (const line of await labListLines()) io.out(line);
      io.out('');
      io.out(
        `Estimates: wall time on ${LAB_LIST_CORES} idle cores with an empty warm-start cache, from the CPU seconds measured per run and`,
      );
      io.out('per warm start (sims/lab/NAME.json, npm run lab-timings); qrl-sim lab --help says what they assume.');
      return 0;
    }
    if (verb !== 'run')
      throw new UsageError(`lab: expected 'list' or 'run NAME', got ${verb === undefined ? 'nothing' : `'${verb}'`}`);
    const { values, positionals } = parseCommandArgs(
      rest,
      { ...PARALLEL_OPTIONS, ...strings('backend'), ...booleans('smoke') },
      true,
    );
    if (positionals.length !== 1)
      throw new UsageError(`lab run: expected one experiment name, got ${positionals.length}`);
    const exp = loadLabExperiment(positionals[0] as string);
    const seeds = values.seeds === undefined ? undefined : integerOption(values.seeds, 'seeds', 1, 1, MAX_SEEDS);
    // On a backend, one run (one backend process) at a time unless --workers says otherwise.
    const workers =
      values.workers === undefined
        ? values.backend === undefined
          ? Math.min(availableParallelism(), MAX_WORKERS)
          : 1
        : integerOption(values.workers, 'workers', 1, 1, MAX_WORKERS);
    // A smoke run has its own default directory: the real run's stays free.
    const out = values.out ?? `runs/lab/${exp.name}${values.smoke === true ? '-smoke' : ''}`;
    const outDir = isAbsolute(out) ? out : resolve(out);
    const smoke = values.smoke === true;
    const backend = values.backend === undefined ? undefined : labBackend(values.backend);
    const options = {
      outDir,
      workers,
      smoke,
      ...(seeds === undefined ? {} : { seeds }),
      ...(backend === undefined ? {} : { backend }),
    };
    const plan = await planSweep(labSweepOptions(exp, options));
    if (backend !== undefined) checkLabBackendPlans(exp, plan.runs);
    claimOutDir(out, 'sweep');
    io.out(`${exp.title} — ${exp.source}`);
    io.out(`claim: ${exp.claim}`);
    io.out(
      smoke
        ? `smoke run: ${plan.runs.length} runs at a tiny size (seconds); it measures nothing`
        : `${plan.runs.length} runs (${plan.points.length} configurations × ${plan.seeds.length} seeds) on ${Math.min(workers, plan.runs.length)} workers: ${estimateHereText(exp, plan.runs, workers)}`,
    );
    if (backend !== undefined)
      io.out(
        `on the backend '${backend.address}', plans mapped ${Object.entries(exp.backendPlans ?? {})
          .map(([a, b]) => `${a} → ${b}`)
          .join(', ')} (the estimate is the in-process toy's)`,
      );
    return executeSweep(io, labSweepOptions(exp, options), out, 'lab', {
      perRun: false,
      after: () => io.out(`the page: ${docRef(exp.page)}`),
    });
  },
};
