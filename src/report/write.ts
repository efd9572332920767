// `writeReport(dir)`: reads the runs under a run or sweep directory and writes summary.json,
// summary.md, summary.html and report.html next to them. Not the sweep runner (sweep.ts).

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, resolve, sep } from 'node:path';
import { writeJsonAtomic } from '../core/files.js';
import { reportPage, summaryPage, type ReportContext } from './html.js';
import { configStyles, renderDeltaPlot, renderPlots } from './plots.js';
import { PLOT_PANELS, moePanels } from './plot-panels.js';
import { readRuns, type RunRecord } from './runs.js';
import { summarizeRuns, type Summary, type SummaryOptions } from './summary.js';
import { summaryMarkdown } from './table.js';

/** The manifest a sweep writes into its output directory (run order = grid order × seeds). */
export const SWEEP_MANIFEST = 'sweep.json';

/** What {@link writeReport} wrote. */
export interface ReportResult {
  readonly summary: Summary;
  /** Paths of the files written. */
  readonly files: {
    readonly summaryJson: string;
    readonly summaryMd: string;
    readonly summaryHtml: string;
    readonly reportHtml: string;
  };
  /** Ids of the plots drawn. */
  readonly plots: readonly string[];
  /** The Markdown table (also in summary.md). */
  readonly markdown: string;
}

/**
 * The runs of a sweep directory: only those its manifest lists (a reused output directory may
 * hold runs of an earlier grid), in grid order. Without a manifest, every run found.
 */
function manifestRuns(dir: string, runs: RunRecord[]): RunRecord[] {
  const path = join(dir, SWEEP_MANIFEST);
  if (!existsSync(path)) return runs;
  const manifest = JSON.parse(readFileSync(path, 'utf8')) as { runs?: { dir?: string }[] };
  const order = new Map((manifest.runs ?? []).map((r, i) => [r.dir ?? '', i]));
  return runs
    .filter((r) => order.has(r.name))
    .sort((a, b) => (order.get(a.name) as number) - (order.get(b.name) as number));
}

/** Options of {@link writeReport}: the page's context and the baseline selector. */
export type ReportOptions = ReportContext & SummaryOptions;

/** Error messages as the page shows them: the report root's absolute path removed (the page is mailed and committed). */
function withoutRoot(runs: RunRecord[], root: string): RunRecord[] {
  return runs.map((r) =>
    r.error === null
      ? r
      : {
          ...r,
          error: r.error
            .split(root + sep)
            .join('')
            .split(root)
            .join('.'),
        },
  );
}

/**
 * Writes the summary and the report of every run under `dir` (a run directory or a sweep
 * directory) into `dir`. A sweep directory reports the runs its `sweep.json` lists. Throws when
 * `dir` holds no run, and a `BaselineError` (before writing anything) when `options.baseline`
 * does not select exactly one configuration.
 * @example const { files } = await writeReport('runs/sweep', { baseline: 'plan=bf16,correction=none' }); // files.reportHtml
 */
export async function writeReport(dir: string, options: ReportOptions = {}): Promise<ReportResult> {
  const root = resolve(dir);
  if (!existsSync(root)) throw new Error(`report: no such directory ${dir}`);
  const runs = withoutRoot(manifestRuns(root, readRuns(root)), root);
  if (runs.length === 0) throw new Error(`report: no run directory (config.json) under ${dir}`);
  const summary = summarizeRuns(runs, options.baseline === undefined ? {} : { baseline: options.baseline });
  const byLabel = new Map<string, RunRecord[]>();
  for (const g of summary.groups) {
    const names = new Set(g.runs.filter((r) => r.error === null).map((r) => r.name));
    byLabel.set(
      g.label,
      runs.filter((r) => names.has(r.name)),
    );
  }
  const styles = configStyles(summary);
  const plots = await renderPlots(summary, byLabel, [...PLOT_PANELS, ...moePanels(runs)]);
  const deltaSvg = await renderDeltaPlot(summary, styles);
  const ctx: ReportContext = {
    directory: basename(root),
    deltaSvg,
    ...(options.title === undefined ? {} : { title: options.title }),
    ...(options.directory === undefined ? {} : { directory: options.directory }),
  };
  const markdown = summaryMarkdown(summary);
  const files = {
    summaryJson: join(root, 'summary.json'),
    summaryMd: join(root, 'summary.md'),
    summaryHtml: join(root, 'summary.html'),
    reportHtml: join(root, 'report.html'),
  };
  writeJsonAtomic(files.summaryJson, summary);
  writeFileSync(files.summaryMd, markdown);
  writeFileSync(files.summaryHtml, summaryPage(summary, styles, ctx));
  writeFileSync(files.reportHtml, reportPage(summary, plots, styles, ctx));
  return { summary, files, plots: plots.map((p) => p.panel.id), markdown };
}
