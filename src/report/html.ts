// The self-contained report page: summary table, plots as inline SVG, captions saying what each
// plot shows, configurations and runs. No script, no external request. Not the plotting itself.

import type { RenderedPlot } from './plots.js';
import { configAt, type Summary } from './summary.js';
import { deltaTableHtml, escapeHtml, summaryTableHtml, swatchHtml, type SeriesStyle } from './table.js';

/** Inline stylesheet shared by report.html and summary.html. */
export const REPORT_CSS = `
:root { color-scheme: light; }
body { margin: 0; background: #fafafa; color: #1f2328; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 24px 48px; }
h1 { font-size: 26px; margin: 0 0 4px; font-weight: 650; }
h2 { font-size: 19px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 1px solid #ddd; font-weight: 600; }
h3 { font-size: 15px; margin: 16px 0 6px; }
p.sub, p.note, ul.defs, footer { color: #57606a; font-size: 13.5px; }
code, pre { font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: #fff; border: 1px solid #e1e4e8; padding: 10px; overflow-x: auto; border-radius: 4px; }
table.summary { border-collapse: collapse; background: #fff; font-variant-numeric: tabular-nums; margin: 8px 0; }
table.summary th, table.summary td { padding: 6px 9px; text-align: left; white-space: nowrap; }
table.summary thead th { white-space: normal; vertical-align: bottom; max-width: 130px; }
table.summary thead th { border-top: 2px solid #333; border-bottom: 1px solid #333; font-weight: 600; font-size: 13.5px; }
table.summary tbody tr:last-child td { border-bottom: 2px solid #333; }
table.summary tbody tr:nth-child(even) td { background: #f6f8fa; }
table.summary .num { text-align: right; }
.swatch { display: inline-block; margin-right: 8px; vertical-align: middle; }
.tag { font-size: 11px; font-weight: 500; color: #57606a; border: 1px solid #d0d7de; border-radius: 8px; padding: 0 6px; margin-left: 6px; }
td.delta .count { color: #57606a; font-size: 12px; margin-left: 4px; }
td.delta.inside { color: #6e7781; }
td.delta .spread { font-size: 11.5px; font-style: italic; margin-left: 4px; }
figure.delta { margin: 14px 0 0; background: #fff; border: 1px solid #e1e4e8; border-radius: 6px; padding: 10px 12px 12px; }
figure.delta svg { display: block; max-width: 100%; height: auto; }
figcaption .omitted { display: block; margin-top: 4px; color: #57606a; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 18px; }
figure.plot { margin: 0; background: #fff; border: 1px solid #e1e4e8; border-radius: 6px; padding: 10px 12px 12px; }
figure.plot svg { display: block; max-width: 100%; height: auto; }
figcaption { font-size: 13px; color: #444; margin-top: 6px; }
figcaption code { color: #6e7781; }
.failures { border-left: 3px solid #d1242f; padding-left: 12px; }
ul.runs { columns: 2; font-size: 13px; }
`;

/** Optional context shown in the report's header. */
export interface ReportContext {
  /** Page title. @defaultValue `'qrl-sim report'` */
  readonly title?: string;
  /** The name of the directory the report describes, as shown to the reader (a name, never an absolute path: the page is mailed and committed). */
  readonly directory?: string;
  /** The paired-difference plot (inline SVG from `renderDeltaPlot`), or null. */
  readonly deltaSvg?: string | null;
}

function describeSetup(summary: Summary): string {
  const first = summary.groups.find((g) => g.config !== null)?.config;
  const runs = summary.groups.reduce((a, g) => a + g.runs.length, 0);
  const parts = [
    `${runs} run${runs === 1 ? '' : 's'} in ${summary.groups.length} configuration${summary.groups.length === 1 ? '' : 's'}`,
  ];
  const task = configAt(first, 'task.name');
  const kind = configAt(first, 'policy.kind');
  const steps = configAt(first, 'steps');
  const prompts = configAt(first, 'rollout.prompts');
  const groupSize = configAt(first, 'rollout.groupSize');
  if (task !== undefined) parts.push(`task ${String(task)}`);
  if (kind !== undefined) parts.push(`${String(kind)} policy`);
  if (steps !== undefined) parts.push(`${String(steps)} steps`);
  if (prompts !== undefined && groupSize !== undefined)
    parts.push(`${String(prompts)} prompts × ${String(groupSize)} responses per step`);
  return parts.join(' · ');
}

/** The notes under a plot: configurations left out (0 at every step) and identical curves. */
function plotNotes(p: RenderedPlot): string {
  const notes: string[] = [];
  if (p.zeroOmitted.length > 0)
    notes.push(
      `Not drawn, 0 at every step${p.panel.yLog === true ? ' (a log axis has no 0)' : ''}: ${p.zeroOmitted.join('; ')}.`,
    );
  for (const [label, same] of p.identical) notes.push(`${label} is identical to ${same} (drawn as the halo under it).`);
  return notes.map((n) => `<span class="omitted">${escapeHtml(n)}</span>`).join('');
}

/** A standalone page holding only the summary table (summary.html). */
export function summaryPage(
  summary: Summary,
  styles: ReadonlyMap<string, SeriesStyle>,
  context: ReportContext = {},
): string {
  const title = context.title ?? 'qrl-sim summary';
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(title)}</title><style>${REPORT_CSS}</style></head>`,
    '<body><main>',
    `<h1>${escapeHtml(title)}</h1>`,
    `<p class="sub">${escapeHtml(describeSetup(summary))}${context.directory === undefined ? '' : ` · <code>${escapeHtml(context.directory)}</code>`}</p>`,
    summaryTableHtml(summary, styles),
    '<h2>Difference to the baseline, paired by seed</h2>',
    deltaTableHtml(summary, styles),
    '</main></body></html>',
    '',
  ].join('\n');
}

/** The whole report page (report.html): header, table, plots by section, configurations, runs. */
export function reportPage(
  summary: Summary,
  plots: readonly RenderedPlot[],
  styles: ReadonlyMap<string, SeriesStyle>,
  context: ReportContext = {},
): string {
  const title = context.title ?? 'qrl-sim report';
  const sections: string[] = [];
  const order = [...new Set(plots.map((p) => p.panel.section))];
  for (const section of order) {
    const figures = plots
      .filter((p) => p.panel.section === section)
      .map(
        (p) =>
          `<figure class="plot" id="plot-${p.panel.id}" data-metric="${escapeHtml(p.panel.metric)}">\n${p.svg}\n<figcaption>${escapeHtml(p.panel.reading)} <code>${escapeHtml(p.panel.source === 'eval' ? 'eval.jsonl' : 'metrics.jsonl')}: ${escapeHtml(p.panel.metric)}</code>${plotNotes(p)}</figcaption></figure>`,
      );
    sections.push(
      `<section><h2>${escapeHtml(section)}</h2><div class="grid">\n${figures.join('\n')}\n</div></section>`,
    );
  }
  const configs = summary.groups
    .map((g) => {
      const runs = g.runs
        .map(
          (r) =>
            `<li><code>${escapeHtml(r.name)}</code> seed ${r.seed ?? '?'} · ${r.steps} steps${r.error === null ? '' : ` · <b>failed</b>: ${escapeHtml(r.error)}`}</li>`,
        )
        .join('');
      return `<h3>${swatchHtml(styles.get(g.label))}${escapeHtml(g.label)}${g.isBaseline ? ' <span class="tag">baseline</span>' : ''}</h3><ul class="runs">${runs}</ul><details><summary>resolved config (without seed)</summary><pre>${escapeHtml(JSON.stringify(g.config, null, 2))}</pre></details>`;
    })
    .join('\n');
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(title)}</title><style>${REPORT_CSS}</style></head>`,
    '<body><main>',
    `<header><h1>${escapeHtml(title)}</h1><p class="sub">${escapeHtml(describeSetup(summary))}${context.directory === undefined ? '' : ` · <code>${escapeHtml(context.directory)}</code>`}</p></header>`,
    '<section><h2>Summary</h2>',
    summaryTableHtml(summary, styles),
    '</section>',
    '<section id="paired"><h2>Difference to the baseline, paired by seed</h2>',
    '<p class="note">Every plan of a seed starts from the same warm-started weights, so the sharp comparison is per seed: each configuration’s run minus the baseline’s run of the same seed.</p>',
    deltaTableHtml(summary, styles),
    context.deltaSvg === undefined || context.deltaSvg === null
      ? ''
      : `<figure class="delta" id="plot-delta">\n${context.deltaSvg}\n<figcaption>One hollow dot per seed (configuration − baseline, same seed), the bar at the mean of the differences and the whisker mean ± one sample std; the vertical rule is the baseline (Δ = 0). A whisker that crosses the rule is a difference inside the seed spread. Accuracy at the last evaluation, in percentage points; reward averaged over the last K steps.</figcaption></figure>`,
    '</section>',
    '<section><h2>Reading the plots</h2><p class="note">Every plot has GRPO steps on the x axis. A line is the mean over seeds of one configuration, the shaded band spans the minimum to the maximum over its seeds (no band for a single seed). A configuration keeps its colour and dash pattern in every plot and in the tables: the colour is its correction (or whatever else differs), the dash pattern its precision plan (the baseline’s plan solid); colours are the Okabe–Ito colour-blind-safe palette. A configuration whose curve is exactly that of another (same values at every step and seed, e.g. bf16 with and without a correction) is drawn as a wide pale halo under it and its legend entry says “identical to …”. Plots of metrics that no run logged (for example AIS α without an AIS run) are left out, and so is a configuration that is 0 at every step of a plot where 0 means “nothing happened” (named under that plot). The mismatch KL has a log axis.</p></section>',
    ...sections,
    `<section><h2>Configurations and runs</h2>\n${configs}\n</section>`,
    '<footer><p>Written by <code>qrl-sim report</code> from config.json, metrics.jsonl, eval.jsonl and timings.jsonl of each run. The page is self-contained: inline SVG and CSS, no scripts, no external requests.</p></footer>',
    '</main></body></html>',
    '',
  ].join('\n');
}
