// Curves vs step for the report (per-configuration mean over seeds with a min–max band) and the
// paired-difference plot, as vega-lite specs rendered to SVG strings in Node (renderer 'none', no
// canvas, no network). Not the page around them (html.ts).

import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import type { MetricLine, RunRecord } from './runs.js';
import { DELTA_COLUMNS, type DeltaColumn, type Summary } from './summary.js';
import type { SeriesStyle } from './table.js';
import { PLOT_PANELS, type PlotPanel } from './plot-panels.js';

/**
 * Colour-blind-safe palette of Okabe & Ito ("Color Universal Design", 2008; also Wong, Nature
 * Methods 8:441, 2011), yellow last because it is faint on white. Beyond eight colours hues repeat.
 */
export const PALETTE: readonly string[] = [
  '#0072B2',
  '#E69F00',
  '#009E73',
  '#D55E00',
  '#CC79A7',
  '#56B4E9',
  '#000000',
  '#F0E442',
];

/** Dash patterns by plan, in order of first appearance (the baseline's plan first, solid). */
export const DASHES: readonly (readonly number[])[] = [[], [7, 4], [2, 3], [10, 3, 2, 3], [4, 2], [1, 4]];

/**
 * The style of every configuration, encoding the experiment's structure: the plan by dash pattern
 * (the baseline's plan solid) and everything else that differs (the correction) by colour. With
 * only one differing field, that field gets the colour and every line is solid.
 */
export function configStyles(summary: Summary): Map<string, SeriesStyle> {
  const hasPlan = summary.groups.some((g) => g.fields['plan'] !== undefined);
  const hasOther = summary.groups.some((g) => Object.keys(g.fields).some((k) => k !== 'plan'));
  const byPlan = hasPlan && hasOther;
  const hueKey = (g: Summary['groups'][number]): string =>
    byPlan
      ? Object.entries(g.fields)
          .filter(([k]) => k !== 'plan')
          .map(([k, v]) => `${k}=${v}`)
          .join(', ')
      : g.label;
  const baseline = summary.groups.find((g) => g.isBaseline);
  const plans = [
    ...new Set([
      ...(baseline === undefined ? [] : [baseline.fields['plan'] ?? '']),
      ...summary.groups.map((g) => g.fields['plan'] ?? ''),
    ]),
  ];
  const hues = [...new Set(summary.groups.map(hueKey))];
  return new Map(
    summary.groups.map((g) => [
      g.label,
      {
        color: PALETTE[hues.indexOf(hueKey(g)) % PALETTE.length] as string,
        dash: byPlan ? (DASHES[plans.indexOf(g.fields['plan'] ?? '') % DASHES.length] as number[]) : [],
      },
    ]),
  );
}

/** One point of a curve: a configuration at a step, over its seeds. */
export interface CurvePoint {
  readonly config: string;
  readonly step: number;
  readonly mean: number;
  readonly min: number;
  readonly max: number;
  /** Seeds that logged the metric at this step. */
  readonly n: number;
}

/** The metric's series of one run as `[step, value]` pairs. */
function runSeries(panel: PlotPanel, run: RunRecord): [number, number][] {
  const lines: readonly MetricLine[] = panel.source === 'eval' ? run.eval : run.metrics;
  const out: [number, number][] = [];
  for (const line of lines) {
    const v = line[panel.metric];
    const step = line['step'];
    if (typeof v !== 'number' || !Number.isFinite(v) || typeof step !== 'number') continue;
    out.push([step, v]);
  }
  return out;
}

/** Mean and min–max over seeds of `panel`'s metric, per configuration and step. */
export function curvePoints(
  panel: PlotPanel,
  groups: readonly { label: string; runs: readonly RunRecord[] }[],
): CurvePoint[] {
  const out: CurvePoint[] = [];
  for (const g of groups) {
    const byStep = new Map<number, number[]>();
    for (const run of g.runs) {
      for (const [step, v] of runSeries(panel, run)) {
        const list = byStep.get(step) ?? [];
        list.push(v);
        byStep.set(step, list);
      }
    }
    for (const step of [...byStep.keys()].sort((a, b) => a - b)) {
      const xs = byStep.get(step) as number[];
      out.push({
        config: g.label,
        step,
        mean: xs.reduce((a, b) => a + b, 0) / xs.length,
        min: Math.min(...xs),
        max: Math.max(...xs),
        n: xs.length,
      });
    }
  }
  return out;
}

/**
 * Configurations whose series of `panel`'s metric are exactly those of an earlier configuration
 * (same seeds, same steps, same values compared with `===`): label → the earlier label.
 * bf16 with any correction is bit-identical to bf16 without, and would hide it.
 */
export function identicalSeries(
  panel: PlotPanel,
  groups: readonly { label: string; runs: readonly RunRecord[] }[],
): Map<string, string> {
  const seen = new Map<string, string>();
  const out = new Map<string, string>();
  for (const g of groups) {
    const series = g.runs.map((r) => [r.config?.['seed'] ?? r.name, runSeries(panel, r)] as const);
    if (series.every(([, s]) => s.length === 0)) continue;
    const key = JSON.stringify(series);
    const first = seen.get(key);
    if (first === undefined) seen.set(key, g.label);
    else out.set(g.label, first);
  }
  return out;
}

/** The y scale: zero-based, log or not; a constant series gets a readable domain around its value. */
function yScale(
  panel: PlotPanel,
  points: readonly CurvePoint[],
): { type?: 'log'; zero?: boolean; domain?: [number, number] } {
  if (panel.yLog === true) return { type: 'log' };
  const lo = Math.min(...points.map((p) => p.min));
  const hi = Math.max(...points.map((p) => p.max));
  if (lo !== hi) return { zero: panel.yZero };
  if (panel.yZero && lo >= 0) return { zero: true, domain: [0, lo === 0 ? 1 : 1.25 * lo] };
  const pad = Math.max(Math.abs(lo) * 0.1, 1e-3);
  return { zero: false, domain: [lo - pad, hi + pad] };
}

const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';

const CONFIG = {
  font: FONT,
  axis: {
    labelFontSize: 11,
    titleFontSize: 11,
    titleFontWeight: 500,
    titleColor: '#333',
    labelColor: '#444',
    gridColor: '#ececec',
    domainColor: '#999',
    tickColor: '#999',
  },
  axisY: { labelLimit: 320 },
  legend: { labelLimit: 0 },
  view: { stroke: null },
} as const;

/** Legend text of a configuration in one plot: its label, and what it is identical to. */
export function seriesName(label: string, sameAs: string | undefined): string {
  return sameAs === undefined ? label : `${label} — identical to ${sameAs}`;
}

/**
 * The vega-lite spec of one plot: a min–max band and a mean line per configuration, coloured and
 * dashed by {@link configStyles}. A configuration in `identical` is drawn first, wider, so that it
 * shows as a halo around the curve it coincides with, and its legend entry says so.
 */
export function plotSpec(
  panel: PlotPanel,
  points: readonly CurvePoint[],
  styles: ReadonlyMap<string, SeriesStyle>,
  identical: ReadonlyMap<string, string> = new Map(),
): TopLevelSpec {
  const present = [...styles.keys()].filter((label) => points.some((p) => p.config === label));
  const names = present.map((l) => seriesName(l, identical.get(l)));
  const fewSteps = new Set(points.map((p) => p.step)).size <= 12;
  const data = points.map((p) => ({
    ...p,
    series: seriesName(p.config, identical.get(p.config)),
    duplicate: identical.has(p.config),
  }));
  const legend = {
    orient: 'bottom',
    direction: 'vertical',
    labelLimit: 520,
    symbolType: 'stroke',
    symbolStrokeWidth: 3,
    symbolSize: 400,
    symbolOpacity: 1,
    labelFontSize: 11,
  } as const;
  const y = { field: 'mean', type: 'quantitative' } as const;
  const line = (duplicate: boolean) =>
    ({
      transform: [{ filter: `datum.duplicate === ${String(duplicate)}` }],
      mark: {
        type: 'line',
        strokeWidth: duplicate ? 6 : 2,
        opacity: duplicate ? 0.55 : 1,
        interpolate: 'linear',
        point: fewSteps && !duplicate ? { size: 18, filled: true } : false,
      },
      encoding: {
        y,
        strokeDash: {
          field: 'series',
          type: 'nominal',
          title: null,
          scale: { domain: names, range: present.map((l) => [...(styles.get(l)?.dash ?? [])]) },
          legend,
        },
      },
    }) as const;
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    width: 440,
    height: 190,
    background: 'white',
    padding: { left: 4, right: 12, top: 4, bottom: 4 },
    title: { text: panel.title, anchor: 'start', fontSize: 13, fontWeight: 600, color: '#222', offset: 8 },
    data: { values: data },
    encoding: {
      x: { field: 'step', type: 'quantitative', title: 'GRPO step', axis: { tickMinStep: 1, format: 'd' } },
      color: {
        field: 'series',
        type: 'nominal',
        title: null,
        scale: { domain: names, range: present.map((l) => styles.get(l)?.color as string) },
        legend,
      },
    },
    layer: [
      {
        mark: { type: 'area', opacity: 0.12, interpolate: 'linear' },
        encoding: {
          y: { field: 'min', type: 'quantitative', title: panel.yTitle, scale: yScale(panel, points) },
          y2: { field: 'max' },
        },
      },
      ...(identical.size > 0 ? [line(true)] : []),
      line(false),
    ],
    config: CONFIG,
  } as TopLevelSpec;
}

/** Prefixes every `id` in an SVG (and its `url(#…)`/`href="#…"` references) so that many SVGs can share one page. */
export function prefixSvgIds(svg: string, prefix: string): string {
  return svg
    .replace(/\bid="([^"]+)"/g, `id="${prefix}-$1"`)
    .replace(/url\(#([^)]+)\)/g, `url(#${prefix}-$1)`)
    .replace(/href="#([^"]+)"/g, `href="#${prefix}-$1"`);
}

/** Renders a vega-lite spec to an SVG string in Node (no DOM, no canvas, no network). */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const runtime = vega.parse(compile(spec).spec);
  // No loader is ever used (data is inline); the default one is replaced so nothing can be fetched.
  const loader = vega.loader({ mode: 'file' });
  loader.load = () => Promise.reject(new Error('report plots must not load external data'));
  const view = new vega.View(runtime, { renderer: 'none', loader });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** A rendered plot. */
export interface RenderedPlot {
  readonly panel: PlotPanel;
  /** Inline SVG markup (ids prefixed with `plot-<panel.id>`). */
  readonly svg: string;
  /** Curve points drawn. */
  readonly points: number;
  /** Configurations left out because they are 0 at every step ({@link PlotPanel.omitAllZero}). */
  readonly zeroOmitted: readonly string[];
  /** Configurations drawn as identical to an earlier one: label → that label. */
  readonly identical: ReadonlyMap<string, string>;
}

/** Points a log axis can draw: means > 0, band floors cut at the smallest positive value. */
function forLogAxis(points: readonly CurvePoint[]): CurvePoint[] {
  const positive = points.flatMap((p) => [p.min, p.mean, p.max]).filter((v) => v > 0);
  const floor = positive.length === 0 ? 0 : Math.min(...positive);
  return points.filter((p) => p.mean > 0).map((p) => ({ ...p, min: p.min > 0 ? p.min : floor }));
}

/**
 * Renders every panel of {@link PLOT_PANELS} for which some run logged data, with the styles of
 * {@link configStyles}. `runsByLabel` maps each configuration label to its successful runs.
 */
export async function renderPlots(
  summary: Summary,
  runsByLabel: ReadonlyMap<string, readonly RunRecord[]>,
  panels: readonly PlotPanel[] = PLOT_PANELS,
): Promise<RenderedPlot[]> {
  const styles = configStyles(summary);
  const groups = summary.groups.map((g) => ({ label: g.label, runs: runsByLabel.get(g.label) ?? [] }));
  const out: RenderedPlot[] = [];
  for (const panel of panels) {
    let points = curvePoints(panel, groups);
    const zeroOmitted: string[] = [];
    if (panel.omitAllZero === true) {
      for (const g of groups) {
        const own = points.filter((p) => p.config === g.label);
        if (own.length > 0 && own.every((p) => p.min === 0 && p.max === 0)) zeroOmitted.push(g.label);
      }
      points = points.filter((p) => !zeroOmitted.includes(p.config));
    }
    if (panel.yLog === true) points = forLogAxis(points);
    if (points.length === 0) continue;
    const identical = identicalSeries(
      panel,
      groups.filter((g) => !zeroOmitted.includes(g.label)),
    );
    const svg = await renderSvg(plotSpec(panel, points, styles, identical));
    out.push({ panel, svg: prefixSvgIds(svg, `plot-${panel.id}`), points: points.length, zeroOmitted, identical });
  }
  return out;
}

/** Titles and scale factors of the paired-difference plot's panels. */
const DELTA_PANELS: Readonly<Record<DeltaColumn, { title: string; scale: number }>> = {
  finalTrainerAccuracy: { title: 'Δ held-out acc., trainer precision (pp)', scale: 100 },
  finalAccuracy: { title: 'Δ held-out acc., rollout engine (pp)', scale: 100 },
  tailReward: { title: 'Δ reward, last K steps', scale: 1 },
};

/**
 * The vega-lite spec of the paired-difference plot: one panel per column of the paired table;
 * per configuration one hollow dot per seed, the mean as a bar and mean ± std as a whisker (dashed
 * like the configuration's curves), and
 * a rule at 0 (the baseline). Null when there is no baseline or nothing to pair.
 */
export function deltaSpec(
  summary: Summary,
  styles: ReadonlyMap<string, SeriesStyle>,
  tailSteps: number | null = null,
): TopLevelSpec | null {
  const groups = summary.groups.filter(
    (g) => g.delta !== null && g.delta.finalTrainerAccuracy.n + g.delta.finalAccuracy.n + g.delta.tailReward.n > 0,
  );
  if (summary.baseline.label === null || groups.length === 0) return null;
  const labels = groups.map((g) => g.label);
  const color = {
    field: 'config',
    type: 'nominal',
    title: null,
    legend: null,
    scale: { domain: labels, range: labels.map((l) => styles.get(l)?.color ?? '#999') },
  } as const;
  // the whisker carries the plan's dash pattern, as the curves do
  const strokeDash = {
    field: 'config',
    type: 'nominal',
    title: null,
    legend: null,
    scale: { domain: labels, range: labels.map((l) => [...(styles.get(l)?.dash ?? [])]) },
  } as const;
  const panel = (c: DeltaColumn, first: boolean) => {
    const { title, scale } = DELTA_PANELS[c];
    const seeds = groups.flatMap((g) =>
      (g.delta?.[c].values ?? []).map((v, i) => ({ config: g.label, seed: g.delta?.[c].seeds[i], delta: scale * v })),
    );
    const stats = groups.flatMap((g) => {
      const d = g.delta?.[c];
      if (d === undefined || d.n === 0) return [];
      const sd = Number.isFinite(d.std) ? d.std : 0;
      return [{ config: g.label, mean: scale * d.mean, lo: scale * (d.mean - sd), hi: scale * (d.mean + sd) }];
    });
    const y = {
      field: 'config',
      type: 'nominal',
      title: null,
      sort: labels,
      axis: first ? { labelLimit: 600, labelFontSize: 11 } : null,
    } as const;
    return {
      width: 230,
      height: { step: 26 },
      title: {
        text: title.replace('last K', tailSteps === null ? 'last K' : `last ${tailSteps}`),
        fontSize: 12,
        fontWeight: 600,
        anchor: 'start',
      },
      layer: [
        {
          data: { values: [{ zero: 0 }] },
          mark: { type: 'rule', color: '#555', strokeWidth: 1 },
          encoding: { x: { field: 'zero', type: 'quantitative' } },
        },
        {
          data: { values: stats },
          mark: { type: 'rule', strokeWidth: 2 },
          encoding: {
            y,
            x: { field: 'lo', type: 'quantitative', title: first ? 'configuration − baseline, same seed' : ' ' },
            x2: { field: 'hi' },
            color,
            strokeDash,
          },
        },
        {
          data: { values: stats },
          mark: { type: 'tick', thickness: 3, size: 16 },
          encoding: { y, x: { field: 'mean', type: 'quantitative' }, color },
        },
        {
          data: { values: seeds },
          mark: { type: 'point', filled: false, size: 40, strokeWidth: 1.5, opacity: 0.9 },
          encoding: { y, x: { field: 'delta', type: 'quantitative' }, color },
        },
      ],
    };
  };
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    background: 'white',
    padding: { left: 4, right: 12, top: 4, bottom: 4 },
    title: {
      text: `Paired difference to the baseline (${summary.baseline.label})`,
      anchor: 'start',
      fontSize: 13,
      fontWeight: 600,
      color: '#222',
      offset: 10,
    },
    hconcat: DELTA_COLUMNS.map((c, i) => panel(c, i === 0)),
    spacing: 18,
    config: CONFIG,
  } as TopLevelSpec;
}

/** Renders {@link deltaSpec} (ids prefixed with `plot-delta`), or null when there is nothing to pair. */
export async function renderDeltaPlot(
  summary: Summary,
  styles: ReadonlyMap<string, SeriesStyle> = configStyles(summary),
): Promise<string | null> {
  const ks = new Set(summary.groups.map((g) => g.rewardTailSteps));
  const spec = deltaSpec(summary, styles, ks.size === 1 ? ([...ks][0] as number) : null);
  return spec === null ? null : prefixSvgIds(await renderSvg(spec), 'plot-delta');
}
