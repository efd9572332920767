// The comparison table of a sweep as Markdown and as HTML, in the style of the papers' tables
// (rows = configuration, cells = mean ± std over seeds, best mean in bold). Not the statistics.

import { STAT_COLUMNS, STAT_DEFINITIONS, type SeedStat, type Summary } from './summary.js';

type Column = (typeof STAT_COLUMNS)[number];

interface ColumnFormat {
  readonly header: string;
  readonly format: (x: number) => string;
  /** Whether a higher mean is better (the best is set in bold); null: no ranking. */
  readonly higherIsBetter: boolean | null;
}

const fixed = (digits: number) => (x: number): string => x.toFixed(digits);
const scientific = (x: number): string => (x === 0 ? '0' : Math.abs(x) >= 0.01 && Math.abs(x) < 1000 ? x.toPrecision(3) : x.toExponential(2));

/** How each column is headed and formatted. */
const COLUMNS: Readonly<Record<Column, ColumnFormat>> = {
  finalAccuracy: { header: 'final acc. (%)', format: (x) => (100 * x).toFixed(1), higherIsBetter: true },
  bestAccuracy: { header: 'best acc. (%)', format: (x) => (100 * x).toFixed(1), higherIsBetter: true },
  finalReward: { header: 'final reward', format: fixed(3), higherIsBetter: true },
  meanK3: { header: 'mismatch k3', format: scientific, higherIsBetter: null },
  stepSeconds: { header: 'time (s)', format: (x) => x.toFixed(x !== 0 && Math.abs(x) < 10 ? 2 : 1), higherIsBetter: null },
};

/**
 * `mean ± std` in the column's format, `—` when no run has a value.
 * @example formatStat({ mean: 0.625, std: 0.03, n: 2, values: [0.6, 0.65] }, 'finalAccuracy') // '62.5 ± 3.0'
 */
export function formatStat(stat: SeedStat, column: Column): string {
  if (stat.n === 0) return '—';
  const f = COLUMNS[column].format;
  return `${f(stat.mean)} ± ${f(stat.std)}`;
}

/** Rows whose mean is the best of the column (ties all bold); none when every row ties or the column is not ranked. */
function bestRows(summary: Summary, column: Column): Set<number> {
  const rule = COLUMNS[column].higherIsBetter;
  const means = summary.groups.map((g) => g.stats[column].mean);
  const finite = means.filter((m) => Number.isFinite(m));
  if (rule === null || finite.length < 2) return new Set();
  const best = rule ? Math.max(...finite) : Math.min(...finite);
  const rows = means.flatMap((m, i) => (m === best ? [i] : []));
  return rows.length === finite.length ? new Set() : new Set(rows);
}

function runsCell(g: Summary['groups'][number]): string {
  const failed = g.runs.filter((r) => r.error !== null).length;
  return failed === 0 ? String(g.runs.length) : `${g.runs.length - failed}/${g.runs.length} (${failed} failed)`;
}

/** The summary table as GitHub Markdown, with the column definitions and failures below it. */
export function summaryMarkdown(summary: Summary): string {
  const best = Object.fromEntries(STAT_COLUMNS.map((c) => [c, bestRows(summary, c)])) as Record<Column, Set<number>>;
  const escape = (s: string): string => s.replace(/\|/g, '\\|');
  const lines = [
    `| configuration | runs | ${STAT_COLUMNS.map((c) => COLUMNS[c].header).join(' | ')} |`,
    `| --- | ---: | ${STAT_COLUMNS.map(() => '---:').join(' | ')} |`,
  ];
  summary.groups.forEach((g, i) => {
    const cells = STAT_COLUMNS.map((c) => (best[c].has(i) ? `**${formatStat(g.stats[c], c)}**` : formatStat(g.stats[c], c)));
    lines.push(`| ${escape(g.label)} | ${runsCell(g)} | ${cells.join(' | ')} |`);
  });
  lines.push('', 'Mean ± sample std over seeds (std = 0 for one seed); best mean in bold (none when all tie).');
  for (const c of STAT_COLUMNS) lines.push(`- ${COLUMNS[c].header}: ${STAT_DEFINITIONS[c]}`);
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

/**
 * The summary table as an HTML fragment (`<table class="summary">` plus notes). `colors` maps a
 * group label to its plot color, drawn as a swatch before the label.
 */
export function summaryTableHtml(summary: Summary, colors: ReadonlyMap<string, string> = new Map()): string {
  const best = Object.fromEntries(STAT_COLUMNS.map((c) => [c, bestRows(summary, c)])) as Record<Column, Set<number>>;
  const head = `<tr><th>configuration</th><th class="num">runs</th>${STAT_COLUMNS.map((c) => `<th class="num" title="${escapeHtml(STAT_DEFINITIONS[c])}">${escapeHtml(COLUMNS[c].header)}</th>`).join('')}</tr>`;
  const rows = summary.groups.map((g, i) => {
    const color = colors.get(g.label);
    const swatch = color === undefined ? '' : `<span class="swatch" style="background:${color}"></span>`;
    const cells = STAT_COLUMNS.map((c) => {
      const text = escapeHtml(formatStat(g.stats[c], c));
      return `<td class="num">${best[c].has(i) ? `<strong>${text}</strong>` : text}</td>`;
    });
    return `<tr><td>${swatch}${escapeHtml(g.label)}</td><td class="num">${escapeHtml(runsCell(g))}</td>${cells.join('')}</tr>`;
  });
  const notes = STAT_COLUMNS.map((c) => `<li><b>${escapeHtml(COLUMNS[c].header)}</b>: ${escapeHtml(STAT_DEFINITIONS[c])}</li>`).join('');
  const failures =
    summary.failures.length === 0
      ? ''
      : `<div class="failures"><h3>Failed runs</h3><ul>${summary.failures.map((f) => `<li><code>${escapeHtml(f.run)}</code> (${escapeHtml(f.label)}): ${escapeHtml(f.error)}</li>`).join('')}</ul></div>`;
  return [
    '<table class="summary">',
    `<thead>${head}</thead>`,
    `<tbody>${rows.join('')}</tbody>`,
    '</table>',
    '<p class="note">Mean ± sample standard deviation over seeds (std = 0 for one seed); the best mean of a column is in bold.</p>',
    `<ul class="defs">${notes}</ul>`,
    failures,
  ].join('\n');
}
