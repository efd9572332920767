// `qrl-sim lab`: list the lab's experiments (one per finding of the papers) and run one as a sweep,
// saying before it starts how long it will take. Not the experiments (sims/lab/) or their pages (docs/lab/).

import { isAbsolute, resolve } from 'node:path';
import { availableParallelism } from 'node:os';
import { estimateLabSeconds, labExperimentNames, labSweepOptions, loadLabExperiment } from '../runs/lab.js';
import { planSweep } from '../runs/sweep.js';
import type { Command } from './command.js';
import { UsageError } from '../errors.js';
import { claimOutDir } from './outdir.js';
import { booleans, integerOption, PARALLEL_OPTIONS, parseCommandArgs } from './parse.js';
import { executeSweep, MAX_SEEDS, MAX_WORKERS } from './sweep.js';

const help = `usage: qrl-sim lab list
       qrl-sim lab run NAME [--seeds N] [--workers N] [--out DIR] [--smoke]

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

The estimate printed before a run is the experiment's measured time per run on two idle cores
(times the runs per worker, plus uncached warm starts).

examples:
  qrl-sim lab list
  qrl-sim lab run alignment --smoke --seeds 1 --out runs/lab-smoke-alignment`;

function minutes(seconds: number): string {
  return seconds < 90 ? `${Math.round(seconds)} s` : `${(seconds / 60).toFixed(0)} min`;
}

/** The `lab` subcommand. */
export const labCommand: Command = {
  summary: 'the lab: one experiment per finding of the papers (list, run NAME)',
  help,
  async run(args, io) {
    const [verb, ...rest] = args;
    if (verb === 'list') {
      parseCommandArgs(rest, {});
      const rows = labExperimentNames().map((name) => loadLabExperiment(name));
      io.out('| experiment | finding | source | runs | estimate (2 cores) |');
      io.out('| --- | --- | --- | ---: | ---: |');
      for (const exp of rows) {
        const plan = await planSweep(labSweepOptions(exp, { outDir: 'unused' }));
        io.out(`| ${exp.name} | ${exp.title} | ${exp.source} | ${plan.runs.length} | ${minutes(estimateLabSeconds(exp, plan.runs.length, plan.seeds.length, 2))} |`);
      }
      return 0;
    }
    if (verb !== 'run') throw new UsageError(`lab: expected 'list' or 'run NAME', got ${verb === undefined ? 'nothing' : `'${verb}'`}`);
    const { values, positionals } = parseCommandArgs(rest, { ...PARALLEL_OPTIONS, ...booleans('smoke') }, true);
    if (positionals.length !== 1) throw new UsageError(`lab run: expected one experiment name, got ${positionals.length}`);
    const exp = loadLabExperiment(positionals[0] as string);
    const seeds = values.seeds === undefined ? undefined : integerOption(values.seeds, 'seeds', 1, 1, MAX_SEEDS);
    const workers = values.workers === undefined ? Math.min(availableParallelism(), MAX_WORKERS) : integerOption(values.workers, 'workers', 1, 1, MAX_WORKERS);
    // A smoke run has its own default directory: the real run's stays free.
    const out = values.out ?? `runs/lab/${exp.name}${values.smoke === true ? '-smoke' : ''}`;
    const outDir = isAbsolute(out) ? out : resolve(out);
    const smoke = values.smoke === true;
    const options = { outDir, workers, smoke, ...(seeds === undefined ? {} : { seeds }) };
    const plan = await planSweep(labSweepOptions(exp, options));
    claimOutDir(out, 'sweep');
    io.out(`${exp.title} — ${exp.source}`);
    io.out(`claim: ${exp.claim}`);
    io.out(
      smoke
        ? `smoke run: ${plan.runs.length} runs at a tiny size (seconds); it measures nothing`
        : `${plan.runs.length} runs (${plan.points.length} configurations × ${plan.seeds.length} seeds) on ${Math.min(workers, plan.runs.length)} workers: about ${minutes(estimateLabSeconds(exp, plan.runs.length, plan.seeds.length, Math.min(workers, plan.runs.length)))} on two idle cores`,
    );
    return executeSweep(io, labSweepOptions(exp, options), out, 'lab', {
      perRun: false,
      after: () => io.out(`the page: ${exp.page}`),
    });
  },
};
