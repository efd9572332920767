// `qrl-sim sweep`: a grid of configs × seeds run in parallel worker threads, then the summary
// table and the report. Not the sweep logic (src/report/sweep.ts) nor the grid syntax (grid.ts).

import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { availableParallelism } from 'node:os';
import { GRID_ALIASES, runSweep, type FactorySource } from '../runs/index.js';
import type { Command } from './command.js';
import { UsageError } from '../errors.js';
import { integerOption, parseCommandArgs, required } from './parse.js';

const aliases = Object.entries(GRID_ALIASES)
  .map(([k, a]) => `  ${k.padEnd(12)}${a.path}${a.spec === true ? '  (a bare name becomes {"name": …})' : ''}`)
  .join('\n');

const help = `usage: qrl-sim sweep --config FILE [--grid "KEY=V1,V2;KEY2=V3"] [--seeds N] [--workers N]
                     [--out DIR] [--steps N] [--set PATH=VALUE …] [--factory MODULE[#EXPORT]]

Runs every grid point × seed of a run config in parallel worker threads. Each run writes its own
directory <out>/<point>/seed-<s>/ exactly as 'qrl-sim run' does; then the sweep writes
summary.json, summary.md, summary.html and report.html into <out> and prints the table.

  --config FILE    base run config (JSON, see docs/grpo.md)
  --grid SPEC      axes separated by ';', values by ','; keys are config paths or aliases;
                   values are parsed like --set values (JSON if it parses, else a string)
  --seeds N        seeds per grid point: the config's seed, seed+1, … (default 1)
  --workers N      worker threads (default: available cores = ${availableParallelism()})
  --out DIR        output directory (default runs/sweep)
  --steps N        GRPO steps of every run
  --set P=V        override a config field of every run (repeatable), applied before the grid
  --factory M#E    module exporting the policy factory (default: the built-in policies)

Grid key aliases:
${aliases}

Every run's config is validated before anything runs or is written: an unknown key, an empty
value list or an invalid value exits with code 2. A run that fails is recorded in the summary
(with its error) and does not stop the others; the sweep then exits with code 1.

example: qrl-sim sweep --config sims/reverse-ar.json --grid "correction=none,tis,ais;plan=bf16,fp8-rollout" --seeds 3`;

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
      config: { type: 'string' },
      grid: { type: 'string' },
      seeds: { type: 'string' },
      workers: { type: 'string' },
      out: { type: 'string' },
      steps: { type: 'string' },
      set: { type: 'string', multiple: true },
      factory: { type: 'string' },
    });
    const file = required(values.config, 'config');
    if (!existsSync(file)) throw new UsageError(`--config: no such file '${file}'`);
    let baseConfig: unknown;
    try {
      baseConfig = JSON.parse(readFileSync(file, 'utf8'));
    } catch (error) {
      throw new UsageError(`--config: ${file} is not valid JSON (${error instanceof Error ? error.message : String(error)})`);
    }
    const seeds = integerOption(values.seeds, 'seeds', 1, 1);
    const workers = values.workers === undefined ? undefined : integerOption(values.workers, 'workers', 1, 1);
    const steps = values.steps === undefined ? undefined : integerOption(values.steps, 'steps', 1, 1);
    const outDir = values.out ?? 'runs/sweep';
    const factory = parseFactory(values.factory);
    const result = await runSweep({
      baseConfig,
      grid: values.grid ?? '',
      seeds,
      overrides: values.set ?? [],
      outDir: isAbsolute(outDir) ? outDir : resolve(outDir),
      ...(workers === undefined ? {} : { workers }),
      ...(steps === undefined ? {} : { steps }),
      ...(factory === undefined ? {} : { factory }),
      onRunDone: (run, done, total) => {
        io.out(`[${done}/${total}] ${run.dir}: ${run.ok ? `done in ${run.seconds.toFixed(1)} s` : `FAILED: ${run.error}`}`);
      },
    });
    const failed = result.runs.filter((r) => !r.ok).length;
    io.out('');
    io.out(result.report.markdown);
    io.out(`${result.runs.length} runs (${failed} failed) on ${result.workers} worker${result.workers === 1 ? '' : 's'} in ${result.seconds.toFixed(1)} s`);
    io.out(`report: ${result.report.files.reportHtml}`);
    return failed === 0 ? 0 : 1;
  },
};
