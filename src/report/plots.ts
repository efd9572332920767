// Curves vs step for the report: per-configuration mean over seeds with a min–max band, as
// vega-lite specs rendered to SVG strings in Node (renderer 'none', no canvas, no network). Not
// the page around them (html.ts).

import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import type { MetricLine, RunRecord } from './runs.js';
import type { Summary } from './summary.js';

/** What one plot shows. */
export interface PlotPanel {
  /** Stable identifier (also the SVG's id prefix). */
  readonly id: string;
  /** Section of the report the plot belongs to. */
  readonly section: string;
  readonly title: string;
  /** Which file the metric comes from. */
  readonly source: 'metrics' | 'eval';
  /** The metric name in that file. */
  readonly metric: string;
  /** Y axis title, with the unit. */
  readonly yTitle: string;
  /** Whether the y axis starts at 0. */
  readonly yZero: boolean;
  /** What the plot shows and what to look for (the caption). */
  readonly reading: string;
}

/**
 * Every plot the report can draw, in page order. A plot is drawn only when at least one run
 * logged its metric (AIS α only for AIS runs, TBPO drops only for TBPO, …).
 */
export const PLOT_PANELS: readonly PlotPanel[] = [
  { id: 'reward', section: 'Learning', title: 'Training reward', source: 'metrics', metric: 'reward/mean', yTitle: 'mean reward per response', yZero: false, reading: 'Mean task reward of the step’s sampled responses (reward/mean). Learning shows as a rising curve; an uncorrected quantized rollout that departs from the bf16 baseline shows as a lower or collapsing curve.' },
  { id: 'eval-rollout', section: 'Learning', title: 'Held-out accuracy, rollout engine (greedy)', source: 'eval', metric: 'eval/rollout/greedy_accuracy', yTitle: 'greedy pass@1 (fraction)', yZero: true, reading: 'Greedy pass@1 on the held-out split, answered by the rollout engine (the quantized side of the plan). This is the accuracy column of the table.' },
  { id: 'eval-trainer', section: 'Learning', title: 'Held-out accuracy, trainer plan (greedy)', source: 'eval', metric: 'eval/trainer/greedy_accuracy', yTitle: 'greedy pass@1 (fraction)', yZero: true, reading: 'The same problems answered at the trainer’s precision. A gap to the rollout-engine plot is accuracy lost to quantized inference alone.' },
  { id: 'k3', section: 'Rollout/trainer mismatch', title: 'Mismatch KL (k3)', source: 'metrics', metric: 'rollout_corr/k3_kl', yTitle: 'k3 KL per token (nats)', yZero: true, reading: 'mean(e^δ − δ − 1) with δ = ℓold − ℓroll over the batch’s tokens: how far the rollout engine’s distribution is from the trainer’s. Zero for identical plans; growth during training means the policy is drifting into regions where quantization matters.' },
  { id: 'ess', section: 'Rollout/trainer mismatch', title: 'Effective sample size ratio', source: 'metrics', metric: 'rollout_corr/weights_ess_ratio', yTitle: 'ESS / N', yZero: true, reading: '1 / mean((w / mean w)²) of the applied importance weights: 1 when every token weighs the same, lower when a few tokens dominate the corrected gradient.' },
  { id: 'ais-alpha', section: 'Adaptive correction (AIS)', title: 'AIS α', source: 'metrics', metric: 'rollout_corr/ais/alpha', yTitle: 'α (0 none, 1 full TIS)', yZero: true, reading: 'The per-mini-batch mixing coefficient of AIS, averaged over the step’s mini-batches: how much of the truncated-IS correction is applied.' },
  { id: 'ais-alpha-ess', section: 'Adaptive correction (AIS)', title: 'AIS α_ess (weight reliability)', source: 'metrics', metric: 'rollout_corr/ais/alpha_ess', yTitle: 'α_ess', yZero: true, reading: 'α_ess = (1 + CV²)^(−1/2) of the truncated weights: falls when they are uneven (high coefficient of variation).' },
  { id: 'ais-alpha-mis', section: 'Adaptive correction (AIS)', title: 'AIS α_mis (mismatch size)', source: 'metrics', metric: 'rollout_corr/ais/alpha_mis', yTitle: 'α_mis', yZero: true, reading: 'α_mis = min(1, mean|δ| / δ₀): rises with the mean absolute log-prob gap between rollout and trainer; no mismatch, no correction.' },
  { id: 'ais-alpha-var', section: 'Adaptive correction (AIS)', title: 'AIS α_var (variance penalty)', source: 'metrics', metric: 'rollout_corr/ais/alpha_var', yTitle: 'α_var', yZero: true, reading: 'Positive when weighting inflates the spread of the advantages beyond γ; it is subtracted from α_ess.' },
  { id: 'clipfrac', section: 'Clipping, masking, dropping', title: 'PPO clip fraction', source: 'metrics', metric: 'actor/pg_clipfrac', yTitle: 'fraction of tokens clipped', yZero: true, reading: 'Fraction of tokens whose ratio r = e^(ℓθ − ℓold) was clipped in the policy loss.' },
  { id: 'masked', section: 'Clipping, masking, dropping', title: 'Tokens rejected by the correction', source: 'metrics', metric: 'rollout_corr/masked_fraction', yTitle: 'fraction of tokens masked', yZero: true, reading: 'Fraction of valid tokens a rejecting correction (IcePop, MIS, RS, veto) removed from the loss.' },
  { id: 'tbpo-drop', section: 'Clipping, masking, dropping', title: 'TBPO dropped sequences', source: 'metrics', metric: 'actor/tbpo_drop_fraction', yTitle: 'sequences dropped', yZero: true, reading: 'Fraction of sequences TBPO dropped because their sequence ratio left the trust band.' },
  { id: 'tis-truncated', section: 'Clipping, masking, dropping', title: 'TIS truncated weights', source: 'metrics', metric: 'rollout_corr/tis/truncated_fraction', yTitle: 'fraction of tokens with ρ > C', yZero: true, reading: 'Fraction of tokens whose importance ratio exceeded the truncation cap C.' },
  { id: 'ais-truncated', section: 'Clipping, masking, dropping', title: 'AIS truncated weights', source: 'metrics', metric: 'rollout_corr/ais/truncated_fraction', yTitle: 'fraction of tokens with ρ > C', yZero: true, reading: 'Fraction of tokens whose importance ratio exceeded the AIS cap C.' },
  { id: 'length', section: 'Policy', title: 'Response length', source: 'metrics', metric: 'response_length/mean', yTitle: 'tokens per response', yZero: false, reading: 'Mean number of generated tokens (EOS included). Length blow-ups are a classic symptom of an uncorrected mismatch.' },
  { id: 'entropy', section: 'Policy', title: 'Policy entropy', source: 'metrics', metric: 'actor/entropy', yTitle: 'entropy per token (nats)', yZero: true, reading: 'Mean token entropy of π_old at the trainer’s precision. A fast drop is entropy collapse; sharp policies are where quantization error changes sampled tokens.' },
  { id: 'grad-norm', section: 'Policy', title: 'Gradient norm', source: 'metrics', metric: 'actor/grad_norm', yTitle: '‖∇θ L‖ before clipping', yZero: true, reading: 'Spikes point to steps where a few heavily weighted tokens dominate the update.' },
];

/** Colour-blind-safe palette (Okabe–Ito, yellow last) followed by further distinct colours. */
export const PALETTE: readonly string[] = ['#0072B2', '#E69F00', '#009E73', '#D55E00', '#CC79A7', '#56B4E9', '#000000', '#8C564B', '#7F7F7F', '#BCBD22', '#17BECF', '#F0E442'];

/** One colour per configuration label, in table order (the same in every plot). */
export function configColors(summary: Summary): Map<string, string> {
  return new Map(summary.groups.map((g, i) => [g.label, PALETTE[i % PALETTE.length] as string]));
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

/** Mean and min–max over seeds of `panel`'s metric, per configuration and step. */
export function curvePoints(panel: PlotPanel, groups: readonly { label: string; runs: readonly RunRecord[] }[]): CurvePoint[] {
  const out: CurvePoint[] = [];
  for (const g of groups) {
    const byStep = new Map<number, number[]>();
    for (const run of g.runs) {
      const lines: readonly MetricLine[] = panel.source === 'eval' ? run.eval : run.metrics;
      for (const line of lines) {
        const v = line[panel.metric];
        const step = line['step'];
        if (typeof v !== 'number' || !Number.isFinite(v) || typeof step !== 'number') continue;
        const list = byStep.get(step) ?? [];
        list.push(v);
        byStep.set(step, list);
      }
    }
    for (const step of [...byStep.keys()].sort((a, b) => a - b)) {
      const xs = byStep.get(step) as number[];
      out.push({ config: g.label, step, mean: xs.reduce((a, b) => a + b, 0) / xs.length, min: Math.min(...xs), max: Math.max(...xs), n: xs.length });
    }
  }
  return out;
}

/** The y scale: zero-based or not; a constant series gets a readable domain around its value. */
function yScale(panel: PlotPanel, points: readonly CurvePoint[]): { zero: boolean; domain?: [number, number] } {
  const lo = Math.min(...points.map((p) => p.min));
  const hi = Math.max(...points.map((p) => p.max));
  if (lo !== hi) return { zero: panel.yZero };
  if (panel.yZero && lo >= 0) return { zero: true, domain: [0, lo === 0 ? 1 : 1.25 * lo] };
  const pad = Math.max(Math.abs(lo) * 0.1, 1e-3);
  return { zero: false, domain: [lo - pad, hi + pad] };
}

const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';

/** The vega-lite spec of one plot: a min–max band and a mean line per configuration. */
export function plotSpec(panel: PlotPanel, points: readonly CurvePoint[], colors: ReadonlyMap<string, string>): TopLevelSpec {
  const present = [...colors.keys()].filter((label) => points.some((p) => p.config === label));
  const fewSteps = new Set(points.map((p) => p.step)).size <= 12;
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    width: 440,
    height: 190,
    background: 'white',
    padding: { left: 4, right: 12, top: 4, bottom: 4 },
    title: { text: panel.title, anchor: 'start', fontSize: 13, fontWeight: 600, color: '#222', offset: 8 },
    data: { values: points.map((p) => ({ ...p })) },
    encoding: {
      x: { field: 'step', type: 'quantitative', title: 'GRPO step', axis: { tickMinStep: 1, format: 'd' } },
      color: {
        field: 'config',
        type: 'nominal',
        title: null,
        scale: { domain: present, range: present.map((l) => colors.get(l) as string) },
        legend: { orient: 'bottom', direction: 'vertical', labelLimit: 440, symbolType: 'stroke', symbolStrokeWidth: 3, symbolOpacity: 1, labelFontSize: 11 },
      },
    },
    layer: [
      {
        mark: { type: 'area', opacity: 0.12, interpolate: 'linear' },
        encoding: { y: { field: 'min', type: 'quantitative', title: panel.yTitle, scale: yScale(panel, points) }, y2: { field: 'max' } },
      },
      {
        mark: { type: 'line', strokeWidth: 2, interpolate: 'linear', point: fewSteps ? { size: 18, filled: true } : false },
        encoding: { y: { field: 'mean', type: 'quantitative' } },
      },
    ],
    config: {
      font: FONT,
      axis: { labelFontSize: 11, titleFontSize: 11, titleFontWeight: 500, titleColor: '#333', labelColor: '#444', gridColor: '#ececec', domainColor: '#999', tickColor: '#999' },
      view: { stroke: null },
    },
  };
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
}

/**
 * Renders every panel of {@link PLOT_PANELS} for which some run logged data, with the colours of
 * {@link configColors}. `runsByLabel` maps each configuration label to its successful runs.
 */
export async function renderPlots(summary: Summary, runsByLabel: ReadonlyMap<string, readonly RunRecord[]>, panels: readonly PlotPanel[] = PLOT_PANELS): Promise<RenderedPlot[]> {
  const colors = configColors(summary);
  const groups = summary.groups.map((g) => ({ label: g.label, runs: runsByLabel.get(g.label) ?? [] }));
  const out: RenderedPlot[] = [];
  for (const panel of panels) {
    const points = curvePoints(panel, groups);
    if (points.length === 0) continue;
    const svg = await renderSvg(plotSpec(panel, points, colors));
    out.push({ panel, svg: prefixSvgIds(svg, `plot-${panel.id}`), points: points.length });
  }
  return out;
}
