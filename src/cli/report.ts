// `qrl-sim report DIR`: writes summary.json/md/html and report.html for a run or sweep directory
// and prints the table. Not the report's logic (src/report/).

import { existsSync, statSync } from 'node:fs';
import { writeReport } from '../report/index.js';
import type { Command } from './command.js';
import { UsageError } from '../errors.js';
import { parseCommandArgs } from './parse.js';

const help = `usage: qrl-sim report DIR [--title TEXT]

DIR is a run directory (with config.json, metrics.jsonl, eval.jsonl, timings.jsonl) or a sweep
directory holding run directories. Groups the runs by configuration (every config field except
seed), writes into DIR:
  summary.json   per-configuration statistics, mean ± sample std over seeds
  summary.md     the same as a Markdown table
  summary.html   the table as a page
  report.html    the table and every plot (inline SVG, opens offline)
and prints the Markdown table and the path of report.html. See docs/reports.md.`;

/** The `report` subcommand. */
export const reportCommand: Command = {
  summary: 'summary table and self-contained HTML report (plots) of a run or sweep directory',
  help,
  async run(args, io) {
    const { values, positionals } = parseCommandArgs(args, { title: { type: 'string' } }, true);
    if (positionals.length !== 1) throw new UsageError(`expected one directory, got ${positionals.length === 0 ? 'none' : positionals.map((p) => `'${p}'`).join(' ')}`);
    const dir = positionals[0] as string;
    if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new UsageError(`DIR: no such directory '${dir}'`);
    let result;
    try {
      result = await writeReport(dir, values.title === undefined ? {} : { title: values.title });
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('report: no run directory')) throw new UsageError(`DIR: no run directory (config.json) under '${dir}'`);
      throw error;
    }
    io.out(result.markdown);
    io.out(`report: ${result.files.reportHtml}`);
    return 0;
  },
};
