// writeReport on fixture runs: the four files, one SVG per logged metric with data marks, stable
// colours per configuration, no external references. Not the browser check (browser.test.ts).

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { PLOT_PANELS, configColors, writeReport, type ReportResult } from '../../src/report/index.js';
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
        metrics: fixtureMetrics(0.05 * c + 0.02 * seed, c === 2 ? ais : () => ({ 'rollout_corr/tis/truncated_fraction': 0.02 })),
        eval: [0, 3].map((step) => ({ step, 'eval/rollout/greedy_accuracy': 0.25 + 0.1 * c + 0.05 * seed + 0.01 * step, 'eval/trainer/greedy_accuracy': 0.3 + 0.01 * step })),
        timings: [1, 2, 3].map((step) => ({ step, total: 0.5 })),
      });
    }
  });
  return root;
}

/** The inline SVGs of report.html by figure id. */
function figures(html: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of html.matchAll(/<figure class="plot" id="plot-([\w-]+)"[^>]*>([\s\S]*?)<\/figure>/g)) out.set(m[1] as string, m[2] as string);
  return out;
}

describe('writeReport', () => {
  let result: ReportResult;
  let root: string;
  test('writes summary.json, summary.md, summary.html and report.html', async () => {
    root = writeFixtureSweep();
    result = await writeReport(root);
    for (const f of ['summary.json', 'summary.md', 'summary.html', 'report.html']) expect(existsSync(join(root, f))).toBe(true);
    expect(JSON.parse(readFileSync(join(root, 'summary.json'), 'utf8')).groups).toHaveLength(3);
    expect(readFileSync(join(root, 'summary.md'), 'utf8')).toContain('| configuration | runs |');
    expect(readFileSync(join(root, 'summary.html'), 'utf8')).toContain('<table class="summary">');
  });

  test('every logged metric has a plot, and every plot has line and band marks with data', () => {
    const html = readFileSync(join(root, 'report.html'), 'utf8');
    const figs = figures(html);
    // every panel whose metric the fixtures log: all of them except the TBPO drop fraction
    const expected = PLOT_PANELS.filter((p) => p.id !== 'tbpo-drop').map((p) => p.id);
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
    const colors = configColors(result.summary);
    const aisColor = colors.get(result.summary.groups[2]!.label) as string;
    const noneColor = colors.get(result.summary.groups[0]!.label) as string;
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
