// Public surface of the reports: reading runs, per-configuration statistics, tables, plots, the
// report page and sweeps. Not the command-line wrappers (src/cli/report.ts, src/cli/sweep.ts).

export * from './runs.js';
export * from './summary.js';
export * from './table.js';
export * from './plots.js';
export * from './html.js';
export * from './write.js';
