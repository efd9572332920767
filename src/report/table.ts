// The comparison tables of a sweep as Markdown and as HTML: per-configuration mean ± std over
// seeds, and the paired differences to the baseline. Not the statistics (summary.ts).

import {
  DELTA_COLUMNS,
  STAT_COLUMNS,
  STAT_DEFINITIONS,
  type DeltaColumn,
  type DeltaStat,
  type GroupSummary,
  type SeedStat,
  type StatColumn,
  type Summary,
} from './summary.js';

interface ColumnFormat {
  readonly header: string;
  readonly format: (x: number) => string;
}

const scientific = (x: number): string =>
  x === 0 ? '0' : Math.abs(x) >= 0.01 && Math.abs(x) < 1000 ? x.toPrecision(3) : x.toExponential(2);
const percent = (x: number): string => (100 * x).toFixed(1);
/** A formatted number with an explicit sign (+, − or none when it rounds to 0). */
const signed = (text: string, x: number): string => {
  const digits = text.replace(/^-/, '');
  return Number(digits) === 0 ? digits : x > 0 ? `+${digits}` : `−${digits}`;
};

/** How each column is headed and formatted. */
const COLUMNS: Readonly<Record<StatColumn, ColumnFormat>> = {
  finalTrainerAccuracy: { header: 'acc. trainer (%)', format: percent },
  finalAccuracy: { header: 'acc. rollout (%)', format: percent },
  bestAccuracy: { header: 'best acc. rollout (%)', format: percent },
  tailReward: { header: 'reward, last K', format: (x) => x.toFixed(3) },
  meanK3: { header: 'mismatch k3', format: scientific },
  stepSeconds: { header: 'time (s)', format: (x) => x.toFixed(x !== 0 && Math.abs(x) < 10 ? 2 : 1) },
};

/** How each paired-difference column is headed and formatted (accuracy in percentage points). */
const DELTA_FORMATS: Readonly<Record<DeltaColumn, ColumnFormat>> = {
  finalTrainerAccuracy: { header: 'Δ acc. trainer (pp)', format: (x) => signed((100 * x).toFixed(1), x) },
  finalAccuracy: { header: 'Δ acc. rollout (pp)', format: (x) => signed((100 * x).toFixed(1), x) },
  tailReward: { header: 'Δ reward, last K', format: (x) => signed(x.toFixed(3), x) },
};

/** The K of the tail-reward header: one number when every configuration has the same, else `K`. */
function tailK(summary: Summary): string {
  const ks = new Set(summary.groups.map((g) => g.rewardTailSteps));
  return ks.size === 1 ? String([...ks][0]) : 'K';
}

const lastK = (k: string): string => (k === 'K' ? 'last K steps' : k === '1' ? 'last step' : `last ${k} steps`);

function header(summary: Summary, column: StatColumn): string {
  return COLUMNS[column].header.replace('last K', lastK(tailK(summary)));
}

function deltaHeader(summary: Summary, column: DeltaColumn): string {
  return DELTA_FORMATS[column].header.replace('last K', lastK(tailK(summary)));
}

/** Seeds paired in a row: the most any column could pair (a column without data pairs none). */
const pairedSeeds = (g: GroupSummary): number => Math.max(...DELTA_COLUMNS.map((c) => g.delta?.[c].n ?? 0));

/**
 * `mean ± std` in the column's format; `mean ± n/a` for a single seed (no spread to measure);
 * `—` when no run has a value.
 * @example formatStat({ mean: 0.625, std: 0.03, n: 2, values: [0.6, 0.65] }, 'finalAccuracy') // '62.5 ± 3.0'
 */
export function formatStat(stat: SeedStat, column: StatColumn): string {
  if (stat.n === 0) return '—';
  const f = COLUMNS[column].format;
  return stat.n < 2 || !Number.isFinite(stat.std) ? `${f(stat.mean)} ± n/a` : `${f(stat.mean)} ± ${f(stat.std)}`;
}

/**
 * A paired difference as `mean ± std` (signed, accuracy in percentage points) and the count of
 * seeds below zero, e.g. `−16.7 ± 10.3 (3/3 < 0)`; `—` without pairs.
 */
export function formatDelta(stat: DeltaStat, column: DeltaColumn): { value: string; count: string } {
  if (stat.n === 0) return { value: '—', count: '' };
  if (stat.values.every((v) => v === 0)) return { value: 'identical', count: `0 on all ${stat.n}` };
  const f = DELTA_FORMATS[column].format;
  const spread = stat.n < 2 ? 'n/a' : f(stat.std).replace(/^[+−]/, '');
  return { value: `${f(stat.mean)} ± ${spread}`, count: `${stat.below}/${stat.n} < 0` };
}

/** Runs, with failed ones and ones that stopped before the configured `steps` (interrupted or still running) counted. */
function runsCell(g: GroupSummary): string {
  const failed = g.runs.filter((r) => r.error !== null).length;
  const steps = g.config?.['steps'];
  const short = typeof steps === 'number' ? g.runs.filter((r) => r.error === null && r.steps < steps).length : 0;
  const base = failed === 0 ? String(g.runs.length) : `${g.runs.length - failed}/${g.runs.length} (${failed} failed)`;
  return short === 0 ? base : `${base} (${short} incomplete)`;
}

/** The held-out set size and its resolution, e.g. `64 problems per evaluation: accuracy moves in steps of 1/64 = 1.6 pp`. */
export function evalResolution(summary: Summary): string | null {
  const ns = [...new Set(summary.groups.map((g) => g.evalProblems).filter((n): n is number => n !== null))];
  if (ns.length === 0) return null;
  const parts = ns.map((n) => `1/${n} = ${(100 / n).toFixed(1)} pp`);
  return `Held-out set: ${ns.join(' / ')} problems per evaluation, so one accuracy moves in steps of ${parts.join(' / ')}.`;
}

/** What the paired table's marks mean (also under the HTML table). */
export const DELTA_RULE =
  'Δ = this configuration’s run of seed s minus the baseline’s run of the same seed (same warm start), over the seeds both completed; mean ± sample std of the differences, and how many are below zero. ' +
  'Bold: outside the seed spread, |mean Δ| > std Δ. “within spread”: |mean Δ| ≤ std Δ, the interval mean ± one std contains 0. One pair: no spread (n/a). This is a description of the seeds, not a significance test.';

/** Notes shared by both renderings, as plain-text lines. */
function notes(summary: Summary): string[] {
  const out = [
    'Mean ± sample std over seeds (n − 1 in the denominator; “± n/a” for one seed). No row is singled out: compare with the baseline in the paired table.',
  ];
  const res = evalResolution(summary);
  if (res !== null) out.push(res);
  return out;
}

function deltaCellMarkdown(stat: DeltaStat, column: DeltaColumn): string {
  const { value, count } = formatDelta(stat, column);
  if (stat.n === 0) return value;
  if (value === 'identical') return `identical (${count})`;
  if (stat.insideSpread === false) return `**${value}** (${count})`;
  return stat.insideSpread === true ? `${value} (${count}), within spread` : `${value} (${count})`;
}

/** The paired comparison as Markdown lines (empty when there is no baseline). */
function deltaMarkdown(summary: Summary, escape: (s: string) => string): string[] {
  if (summary.baseline.label === null) return [`No paired comparison: ${summary.baseline.note ?? 'no baseline'}.`];
  const lines = [
    `Difference to the baseline \`${summary.baseline.label}\`, paired by seed:`,
    '',
    `| configuration | seeds paired | ${DELTA_COLUMNS.map((c) => deltaHeader(summary, c)).join(' | ')} |`,
    `| --- | ---: | ${DELTA_COLUMNS.map(() => '---:').join(' | ')} |`,
  ];
  for (const g of summary.groups) {
    if (g.delta === null) {
      lines.push(
        `| ${escape(g.label)} | ${g.runs.filter((r) => r.error === null).length} | ${DELTA_COLUMNS.map(() => 'baseline').join(' | ')} |`,
      );
      continue;
    }
    const d = g.delta;
    lines.push(
      `| ${escape(g.label)} | ${pairedSeeds(g)} | ${DELTA_COLUMNS.map((c) => deltaCellMarkdown(d[c], c)).join(' | ')} |`,
    );
  }
  lines.push('', DELTA_RULE);
  return lines;
}

/** The summary and paired tables as GitHub Markdown, with the column definitions and failures below them. */
export function summaryMarkdown(summary: Summary): string {
  const escape = (s: string): string => s.replace(/\|/g, '\\|');
  const lines = [
    `| configuration | runs | ${STAT_COLUMNS.map((c) => header(summary, c)).join(' | ')} |`,
    `| --- | ---: | ${STAT_COLUMNS.map(() => '---:').join(' | ')} |`,
  ];
  for (const g of summary.groups)
    lines.push(
      `| ${escape(g.label)}${g.isBaseline ? ' (baseline)' : ''} | ${runsCell(g)} | ${STAT_COLUMNS.map((c) => formatStat(g.stats[c], c)).join(' | ')} |`,
    );
  lines.push('', ...notes(summary));
  for (const c of STAT_COLUMNS) lines.push(`- ${header(summary, c)}: ${STAT_DEFINITIONS[c]}`);
  lines.push('', ...deltaMarkdown(summary, escape));
  if (summary.failures.length > 0) {
    lines.push('', 'Failed runs:');
    for (const f of summary.failures) lines.push(`- \`${f.run}\` (${escape(f.label)}): ${f.error}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** How a configuration is drawn: colour (its correction, or what else differs) and dash pattern (its plan). */
export interface SeriesStyle {
  /** CSS colour. */
  readonly color: string;
  /** SVG stroke-dasharray lengths; empty for a solid line. */
  readonly dash: readonly number[];
}

/** A short line in the configuration's colour and dash pattern, as inline SVG (the table's and legend's swatch). */
export function swatchHtml(style: SeriesStyle | undefined): string {
  if (style === undefined) return '';
  const dash = style.dash.length === 0 ? '' : ` stroke-dasharray="${style.dash.join(' ')}"`;
  return `<svg class="swatch" width="30" height="10" viewBox="0 0 30 10" aria-hidden="true"><line x1="1" y1="5" x2="29" y2="5" stroke="${style.color}" stroke-width="3"${dash}/></svg>`;
}

function deltaCellHtml(stat: DeltaStat, column: DeltaColumn): string {
  const { value, count } = formatDelta(stat, column);
  if (stat.n === 0) return '<td class="num">—</td>';
  if (value === 'identical')
    return `<td class="num delta inside" title="every paired difference is exactly 0">identical <span class="count">${escapeHtml(count)}</span></td>`;
  const v = escapeHtml(value);
  const c = `<span class="count">${escapeHtml(count)}</span>`;
  if (stat.insideSpread === false) return `<td class="num delta outside"><strong>${v}</strong> ${c}</td>`;
  if (stat.insideSpread === true)
    return `<td class="num delta inside" title="|mean Δ| ≤ std Δ">${v} ${c} <span class="spread">within spread</span></td>`;
  return `<td class="num delta">${v} ${c}</td>`;
}

/** The paired comparison as an HTML fragment (`<table class="summary delta">` plus its rule). */
export function deltaTableHtml(summary: Summary, styles: ReadonlyMap<string, SeriesStyle> = new Map()): string {
  if (summary.baseline.label === null)
    return `<p class="note">No paired comparison: ${escapeHtml(summary.baseline.note ?? 'no baseline')}.</p>`;
  const head = `<tr><th>configuration</th><th class="num">seeds paired</th>${DELTA_COLUMNS.map((c) => `<th class="num" title="${escapeHtml(STAT_DEFINITIONS[c])}">${escapeHtml(deltaHeader(summary, c))}</th>`).join('')}</tr>`;
  const rows = summary.groups.map((g) => {
    const label = `<td>${swatchHtml(styles.get(g.label))}${escapeHtml(g.label)}</td>`;
    if (g.delta === null)
      return `<tr class="baseline">${label}<td class="num">${g.runs.filter((r) => r.error === null).length}</td>${DELTA_COLUMNS.map(() => '<td class="num">baseline</td>').join('')}</tr>`;
    const d = g.delta;
    return `<tr>${label}<td class="num">${pairedSeeds(g)}</td>${DELTA_COLUMNS.map((c) => deltaCellHtml(d[c], c)).join('')}</tr>`;
  });
  return [
    `<p class="note">Baseline: <b>${escapeHtml(summary.baseline.label)}</b> (selector <code>${escapeHtml(summary.baseline.selector)}</code>).</p>`,
    '<table class="summary delta">',
    `<thead>${head}</thead>`,
    `<tbody>${rows.join('')}</tbody>`,
    '</table>',
    `<p class="note">${escapeHtml(DELTA_RULE)}</p>`,
  ].join('\n');
}

/**
 * The summary table as an HTML fragment (`<table class="summary">` plus notes). `styles` maps a
 * group label to its plot style, drawn as a swatch before the label.
 */
export function summaryTableHtml(summary: Summary, styles: ReadonlyMap<string, SeriesStyle> = new Map()): string {
  const head = `<tr><th>configuration</th><th class="num">runs</th>${STAT_COLUMNS.map((c) => `<th class="num" title="${escapeHtml(STAT_DEFINITIONS[c])}">${escapeHtml(header(summary, c))}</th>`).join('')}</tr>`;
  const rows = summary.groups.map((g) => {
    const cells = STAT_COLUMNS.map((c) => `<td class="num">${escapeHtml(formatStat(g.stats[c], c))}</td>`);
    const tag = g.isBaseline ? ' <span class="tag">baseline</span>' : '';
    return `<tr${g.isBaseline ? ' class="baseline"' : ''}><td>${swatchHtml(styles.get(g.label))}${escapeHtml(g.label)}${tag}</td><td class="num">${escapeHtml(runsCell(g))}</td>${cells.join('')}</tr>`;
  });
  const defs = STAT_COLUMNS.map(
    (c) => `<li><b>${escapeHtml(header(summary, c))}</b>: ${escapeHtml(STAT_DEFINITIONS[c])}</li>`,
  ).join('');
  const failures =
    summary.failures.length === 0
      ? ''
      : `<div class="failures"><h3>Failed runs</h3><ul>${summary.failures.map((f) => `<li><code>${escapeHtml(f.run)}</code> (${escapeHtml(f.label)}): ${escapeHtml(f.error)}</li>`).join('')}</ul></div>`;
  return [
    '<table class="summary">',
    `<thead>${head}</thead>`,
    `<tbody>${rows.join('')}</tbody>`,
    '</table>',
    ...notes(summary).map((n) => `<p class="note">${escapeHtml(n)}</p>`),
    `<ul class="defs">${defs}</ul>`,
    failures,
  ].join('\n');
}
