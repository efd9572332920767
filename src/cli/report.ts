// `qrl-sim report DIR`: writes summary.json/md/html and report.html for a run or sweep directory
// and prints the table. Not the report's logic (src/report/).

import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { BaselineError } from '../report/summary.js';
import { writeReport } from '../report/write.js';
import { readRuns } from '../report/runs.js';
import type { Command } from './command.js';
import { UsageError } from '../core/errors.js';
import { parseCommandArgs, strings } from './parse.js';

const help = `usage: qrl-sim report DIR [--title TEXT] [--baseline KEY=V[,KEY=V…]]

DIR is a run directory (with config.json, metrics.jsonl, eval.jsonl, timings.jsonl) or a sweep
directory holding run directories. Groups the runs by configuration (every config field except
seed), writes into DIR:
  summary.json   per-configuration statistics, mean ± sample std over seeds
  summary.md     the same as a Markdown table
  summary.html   the table as a page
  report.html    the table and every plot (inline SVG, opens offline)
and prints the Markdown table and the path of report.html. Every configuration is compared with
the baseline, paired by seed: --baseline selects it by label fields or config values (default
plan=bf16,correction=none when exactly one configuration matches). See docs/reports.md.

A malformed config.json or JSONL line exits with code 2 naming the file and the line; a
directory whose runs have no steps yet exits with code 2 and says so.

examples:
  qrl-sim run --config sims/smoke-reverse.json --out runs/smoke-report
  qrl-sim report runs/smoke-report --title "smoke run"`;

/** The baseline a sweep directory's sweep.json records (`--baseline` of the sweep), if any. */
function recordedBaseline(dir: string): string | undefined {
  try {
    const manifest = JSON.parse(readFileSync(join(dir, 'sweep.json'), 'utf8')) as { options?: { baseline?: unknown } };
    return typeof manifest.options?.baseline === 'string' ? manifest.options.baseline : undefined;
  } catch {
    return undefined;
  }
}

/** The `report` subcommand. */
export const reportCommand: Command = {
  summary: 'summary table and self-contained HTML report (plots) of a run or sweep directory',
  help,
  async run(args, io) {
    const { values, positionals } = parseCommandArgs(args, strings('title', 'baseline'), true);
    if (positionals.length !== 1)
      throw new UsageError(
        `expected one directory, got ${positionals.length === 0 ? 'none' : positionals.map((p) => `'${p}'`).join(' ')}`,
      );
    const dir = positionals[0] as string;
    if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new UsageError(`DIR: no such directory '${dir}'`);
    let runs;
    try {
      runs = readRuns(dir);
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('report: no run directory'))
        throw new UsageError(`DIR: no run directory (config.json) under '${dir}'`);
      throw error;
    }
    if (runs.length === 0) throw new UsageError(`DIR: no run directory (config.json) under '${dir}'`);
    if (runs.every((r) => r.metrics.length === 0 && r.error === null)) {
      throw new UsageError(
        `DIR: no steps recorded yet in '${dir}' (metrics.jsonl is empty in ${runs.length === 1 ? 'its run' : `all ${runs.length} runs`}): nothing to report`,
      );
    }
    // A sweep directory's recorded baseline (sweep.json) is the default, as the sweep itself reported.
    const baseline = values.baseline ?? recordedBaseline(dir);
    let result;
    try {
      result = await writeReport(dir, {
        ...(values.title === undefined ? {} : { title: values.title }),
        ...(baseline === undefined ? {} : { baseline }),
      });
    } catch (error) {
      if (error instanceof BaselineError) throw new UsageError(`--${error.message}`);
      if (error instanceof Error && error.message.startsWith('report: no run directory'))
        throw new UsageError(`DIR: no run directory (config.json) under '${dir}'`);
      const code = (error as NodeJS.ErrnoException).code;
      if (typeof code === 'string' && /^E[A-Z]+$/.test(code))
        throw new UsageError(
          `DIR: cannot write the report into '${dir}' (${code}${'path' in (error as object) ? `: ${(error as NodeJS.ErrnoException).path}` : ''})`,
        );
      throw error;
    }
    io.out(result.markdown);
    io.out(`report: ${result.files.reportHtml}`);
    return 0;
  },
};
