// `qrl-sim/report`: reading run directories, per-configuration statistics, tables, plots and the report page.
// Chosen names, not `export *` (the rule: docs/decisions.md; pinned by test/api-surface.test.ts).

// `writeReport`: the report of a run or sweep directory.
export { writeReport, type ReportOptions, type ReportResult } from './write.js';

// Reading run directories.
export { readRuns, readRunDir, findRunDirs, type RunRecord, type MetricLine } from './runs.js';

// Per-configuration statistics and paired deltas.
export {
  summarizeRuns,
  type Summary,
  type SummaryOptions,
  type GroupSummary,
  type GroupStats,
  type GroupRun,
  seedStat,
  type SeedStat,
  pairedDelta,
  type DeltaStat,
  BaselineError,
  parseBaselineSelector,
  rewardTailSteps,
  type BaselineInfo,
  type StatColumn,
  DEFAULT_BASELINE,
  TRAINER_ACCURACY_METRIC,
  ACCURACY_METRIC,
  STAT_COLUMNS,
} from './summary.js';

// Summary tables (Markdown, HTML).
export { summaryMarkdown, summaryTableHtml, deltaTableHtml, type SeriesStyle } from './table.js';

// Plots (Vega-Lite specs, SVG).
export { plotSpec, deltaSpec, renderSvg, configStyles, type CurvePoint } from './plots.js';
export { PLOT_PANELS, type PlotPanel } from './plot-panels.js';

// The report page.
export type { ReportContext } from './html.js';
