// writeReport on fixture runs: the four files, one SVG per logged metric with data marks, stable
// colours per configuration, no external references. Not the browser check (browser.test.ts).

import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { PLOT_PANELS, configStyles, writeReport, type ReportResult } from '../../src/report/index.js';
import { fixtureConfig, fixtureMetrics, tempDir, writeFixtureRun } from './fixtures.js';

const ais = (step: number): Record<string, number> => ({
  'rollout_corr/ais/alpha': 0.1 * step,
  'rollout_corr/ais/alpha_ess': 0.9,
  'rollout_corr/ais/alpha_mis': 0.2 * step,
  'rollout_corr/ais/alpha_var': 0,
  'rollout_corr/ais/truncated_fraction': 0.01,
});

/** Writes a 3-configuration sweep (none, tis, ais) with 2 seeds each. */
export function writeFixtureSweep(): string {
  const root = tempDir('report');
  const corrections = [[{ name: 'none' }], [{ name: 'tis', C: 2 }], [{ name: 'ais', C: 5 }]];
  corrections.forEach((correction, c) => {
    for (const seed of [0, 1]) {
      writeFixtureRun(join(root, `c${c}`, `seed-${seed}`), {
        config: fixtureConfig(seed, c === 0 ? 'bf16' : 'fp8-rollout', correction),
        metrics: fixtureMetrics(
          0.05 * c + 0.02 * seed,
          c === 2 ? ais : () => ({ 'rollout_corr/tis/truncated_fraction': 0.02 }),
        ),
        eval: [0, 3].map((step) => ({
          step,
          'eval/rollout/greedy_accuracy': 0.25 + 0.1 * c + 0.05 * seed + 0.01 * step,
          'eval/trainer/greedy_accuracy': 0.3 + 0.01 * step,
        })),
        timings: [1, 2, 3].map((step) => ({ step, total: 0.5 })),
      });
    }
  });
  return root;
}

/** The inline SVGs of report.html by figure id. */
function figures(html: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of html.matchAll(/<figure class="plot" id="plot-([\w-]+)"[^>]*>([\s\S]*?)<\/figure>/g))
    out.set(m[1] as string, m[2] as string);
  return out;
}

describe('writeReport', () => {
  let result: ReportResult;
  let root: string;
  test('writes summary.json, summary.md, summary.html and report.html', async () => {
    root = writeFixtureSweep();
    result = await writeReport(root);
    for (const f of ['summary.json', 'summary.md', 'summary.html', 'report.html'])
      expect(existsSync(join(root, f))).toBe(true);
    expect(JSON.parse(readFileSync(join(root, 'summary.json'), 'utf8')).groups).toHaveLength(3);
    expect(readFileSync(join(root, 'summary.md'), 'utf8')).toContain('| configuration | runs |');
    expect(readFileSync(join(root, 'summary.html'), 'utf8')).toContain('<table class="summary">');
  });

  test('every logged metric has a plot, and every plot has line and band marks with data', () => {
    const html = readFileSync(join(root, 'report.html'), 'utf8');
    const figs = figures(html);
    // every panel whose metric the fixtures log: all of them except the TBPO drop fraction, and
    // the rejected-token fraction, which is 0 at every step of every configuration (nothing to show)
    const expected = PLOT_PANELS.filter((p) => p.id !== 'tbpo-drop' && p.id !== 'masked').map((p) => p.id);
    expect([...figs.keys()]).toEqual(expected);
    expect(result.plots).toEqual(expected);
    for (const [id, svg] of figs) {
      expect(svg, id).toMatch(/^\s*<svg /);
      const line = /<g class="mark-line role-mark[^"]*"[^>]*>([\s\S]*?)<\/g>/.exec(svg);
      const area = /<g class="mark-area role-mark[^"]*"[^>]*>([\s\S]*?)<\/g>/.exec(svg);
      expect(line, id).not.toBeNull();
      expect(area, id).not.toBeNull();
      const paths = [...(line?.[1] ?? '').matchAll(/<path[^>]* d="M[^"]+"/g)];
      expect(paths.length, id).toBeGreaterThan(0);
    }
    // AIS panels only show the AIS configuration: one line
    const alpha = figs.get('ais-alpha') as string;
    expect([...alpha.matchAll(/<path[^>]*class="[^"]*"?[^>]* d="M/g)].length).toBeGreaterThan(0);
    expect(alpha).toContain('correction=ais');
    expect(alpha).not.toContain('correction=none');
  });

  test('a configuration has the same colour in every plot that shows it', () => {
    const html = readFileSync(join(root, 'report.html'), 'utf8');
    const styles = configStyles(result.summary);
    const aisColor = styles.get(result.summary.groups[2]!.label)?.color as string;
    const noneColor = styles.get(result.summary.groups[0]!.label)?.color as string;
    const figs = figures(html);
    expect(figs.get('ais-alpha')).toContain(`stroke="${aisColor}"`);
    expect(figs.get('reward')).toContain(`stroke="${aisColor}"`);
    expect(figs.get('reward')).toContain(`stroke="${noneColor}"`);
    expect(figs.get('ais-alpha')).not.toContain(`stroke="${noneColor}"`);
  });

  test('the page is self-contained: no scripts, no external resources, unique ids', () => {
    const html = readFileSync(join(root, 'report.html'), 'utf8');
    expect(html).not.toMatch(/<script|<link|<img|<iframe|@import|url\(\s*['"]?https?:/i);
    expect(html).not.toMatch(/\b(src|href)="https?:/i);
    const ids = [...html.matchAll(/\bid="([^"]+)"/g)].map((m) => m[1]);
    expect(new Set(ids).size).toBe(ids.length);
  });

  test('a directory without runs is an error naming it', async () => {
    const empty = tempDir('empty');
    await expect(writeReport(empty)).rejects.toThrow(/no run directory/);
  });
});

describe('what the plots say about identical, all-zero and log-scale series', () => {
  // bf16 with and without TIS: bit-identical metrics (k3 = 0); fp8-rollout: a mismatch with one spike.
  const root = tempDir('identical');
  const k3 = (step: number): Record<string, number> => ({ 'rollout_corr/k3_kl': step === 2 ? 5 : 0.002 * step });
  for (const seed of [0, 1]) {
    for (const [dir, plan, correction, extra] of [
      ['a', 'bf16', [{ name: 'none' }], () => ({ 'rollout_corr/k3_kl': 0 })],
      ['b', 'bf16', [{ name: 'tis', C: 2 }], () => ({ 'rollout_corr/k3_kl': 0 })],
      ['c', 'fp8-rollout', [{ name: 'none' }], k3],
    ] as const) {
      writeFixtureRun(join(root, dir, `seed-${seed}`), {
        config: fixtureConfig(seed, plan, [...correction]),
        metrics: fixtureMetrics(plan === 'bf16' ? 0.01 * seed : 0.05 + 0.01 * seed, extra),
        eval: [{ step: 3, 'eval/rollout/greedy_accuracy': 0.5 + 0.25 * seed, 'eval/trainer/greedy_accuracy': 0.5 }],
      });
    }
  }
  let html = '';
  test('a configuration identical to an earlier one says so in the legend and is drawn as a halo', async () => {
    const result = await writeReport(root);
    html = readFileSync(join(root, 'report.html'), 'utf8');
    const reward = figures(html).get('reward') as string;
    expect(reward).toContain('plan=bf16, correction=tis — identical to plan=bf16, correction=none');
    expect(reward).not.toContain('plan=fp8-rollout, correction=none — identical');
    expect(reward).toMatch(/stroke-width="6"/);
    expect(result.summary.groups[1]!.delta?.finalAccuracy.values).toEqual([0, 0]);
  });

  test('mismatch KL: log axis, configurations at 0 everywhere named under the plot instead of drawn', () => {
    const fig = /<figure class="plot" id="plot-k3"[\s\S]*?<\/figure>/.exec(html)?.[0] as string;
    expect(fig).toContain('log scale');
    expect(fig).toContain(
      'Not drawn, 0 at every step (a log axis has no 0): plan=bf16, correction=none; plan=bf16, correction=tis.',
    );
    const svg = (figures(html).get('k3') as string).split('</svg>')[0] as string;
    expect(svg).toContain('plan=fp8-rollout, correction=none');
    expect(svg).not.toContain('plan=bf16, correction=none');
    // the spike (5) and the small values (0.002…) are both on the axis: log ticks span decades
    expect(svg).toMatch(/>0\.00[1-9]</);
  });

  test('the page names its directory, never an absolute path of the machine', () => {
    expect(html).not.toContain(root);
    expect(html).toContain(`<code>${basename(root)}</code>`);
  });
});
