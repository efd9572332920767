// End to end in a real browser: a sweep (fake policy factory) writes report.html, headless
// Chromium opens it from disk, every plot must show data marks, the console must stay clean, no
// request may leave the file, and a screenshot is written. Skips only when no Chromium exists.

import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { describe, expect, test } from 'vitest';
import { runSweep } from '../../src/runs/index.js';
import { tempDir } from './fixtures.js';

function findChromium(): string | null {
  const candidates = [
    process.env['CHROMIUM_PATH'],
    '/usr/bin/chromium',
    '/usr/bin/chromium-browser',
    '/usr/bin/google-chrome',
  ];
  for (const c of candidates) if (c !== undefined && c !== '' && existsSync(c)) return c;
  try {
    const bundled = chromium.executablePath();
    if (existsSync(bundled)) return bundled;
  } catch {
    // playwright-core ships no browser of its own
  }
  return null;
}

/** What the page reports about one figure (computed in the browser, where the SVG is laid out). */
interface PlotInfo {
  id: string;
  hasSvg: boolean;
  width: number;
  height: number;
  /** Line/area paths with a non-empty `d` and a non-empty bounding box. */
  lines: number;
  areas: number;
}

// Runs in the page (kept as source text: the project compiles without DOM types).
const MEASURE_PLOTS = `[...document.querySelectorAll('figure.plot')].map((fig) => {
  const svg = fig.querySelector('svg');
  const marks = (kind) => [...fig.querySelectorAll('g.mark-' + kind + '.role-mark path')].filter((p) => {
    const box = p.getBBox();
    return (p.getAttribute('d') || '').length > 1 && (box.width > 0 || box.height > 0);
  }).length;
  const rect = svg ? svg.getBoundingClientRect() : { width: 0, height: 0 };
  return { id: fig.id, hasSvg: svg !== null, width: rect.width, height: rect.height, lines: marks('line'), areas: marks('area') };
})`;

// The paired-difference figure: seed dots (symbol paths) and whisker/zero rules with a drawn size.
const DELTA_MARKS = `(() => {
  const fig = document.querySelector('figure#plot-delta');
  const drawn = (sel) => [...fig.querySelectorAll(sel)].filter((p) => { const b = p.getBBox(); return b.width > 0 || b.height > 0; }).length;
  return { symbols: drawn('g.mark-symbol.role-mark path'), ticks: drawn('g.mark-rect.role-mark path'), rules: drawn('g.mark-rule.role-mark line'), width: fig.querySelector('svg').getBoundingClientRect().width };
})()`;

const executablePath = findChromium();
if (executablePath === null) {
  console.warn('browser test skipped: no Chromium found (install the Debian package chromium, or set CHROMIUM_PATH)');
}

describe.skipIf(executablePath === null)('report.html in headless Chromium', () => {
  test('every plot renders data marks, no console errors, no external requests; screenshot written', async () => {
    const dir = tempDir('browser');
    const out = join(dir, 'sweep');
    await runSweep({
      baseConfig: {
        steps: 6,
        task: { name: 'reverse' },
        sft: { steps: 0, cache: false },
        rollout: { prompts: 2, groupSize: 4 },
        eval: { every: 2, problems: 4 },
        checkpoint: { every: 0 },
      },
      grid: 'correction=none,tis,ais;plan=bf16,fp16',
      seeds: 2,
      outDir: out,
      workers: 2,
      factory: { module: fileURLToPath(new URL('./fake-factory.ts', import.meta.url)), export: 'fakePolicyFactory' },
    });
    const report = join(out, 'report.html');
    const userDataDir = join(dir, 'chromium-profile');
    const context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: executablePath as string,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 1280, height: 900 },
    });
    try {
      const page = await context.newPage();
      const problems: string[] = [];
      const requests: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
      });
      page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
      page.on('request', (r) => {
        if (!r.url().startsWith('file:')) requests.push(r.url());
      });
      await page.goto(pathToFileURL(report).href, { waitUntil: 'load' });
      const plots = (await page.evaluate(MEASURE_PLOTS)) as PlotInfo[];
      expect(plots.length).toBeGreaterThanOrEqual(12);
      for (const p of plots) {
        expect(p.hasSvg, p.id).toBe(true);
        expect(p.width, p.id).toBeGreaterThan(200);
        expect(p.height, p.id).toBeGreaterThan(100);
        expect(p.lines, p.id).toBeGreaterThan(0);
      }
      // the AIS plots exist (an AIS point is in the grid) and show exactly the AIS configurations
      const alpha = plots.find((p) => p.id === 'plot-ais-alpha');
      expect(alpha?.lines).toBe(2);
      expect(plots.find((p) => p.id === 'plot-reward')?.lines).toBe(6);
      const rows = await page.locator('table.summary:not(.delta) tbody tr').count();
      expect(rows).toBe(6);
      // the paired table: one row per configuration, the bf16 baseline marked, bf16 + TIS identical to it
      const delta = page.locator('table.summary.delta tbody tr');
      expect(await delta.count()).toBe(6);
      expect(await delta.nth(0).innerText()).toContain('baseline');
      expect(
        await page.locator('table.summary.delta tbody tr', { hasText: 'plan=bf16, correction=tis' }).innerText(),
      ).toContain('identical');
      // the paired-difference plot, 3 panels: one hollow dot per seed and configuration (5 × 2), a
      // mean bar per configuration, and the Δ = 0 rule (whiskers of zero length draw nothing)
      const marks = (await page.evaluate(DELTA_MARKS)) as {
        symbols: number;
        ticks: number;
        rules: number;
        width: number;
      };
      expect(marks.symbols).toBe(3 * 5 * 2);
      expect(marks.ticks).toBe(3 * 5);
      expect(marks.rules).toBeGreaterThanOrEqual(3);
      expect(marks.width).toBeGreaterThan(600);
      // identical curves say so in the legend (bf16 with TIS is bit-identical to bf16 without)
      expect(await page.locator('#plot-reward').innerText()).toContain('identical to plan=bf16, correction=none');
      // no absolute path of the machine in the page
      expect(await page.content()).not.toContain(dir);
      expect(problems).toEqual([]);
      expect(requests).toEqual([]);
      const screenshot = process.env['REPORT_SCREENSHOT'] ?? join(dir, 'report.png');
      await page.screenshot({ path: screenshot, fullPage: true });
      expect(statSync(screenshot).size).toBeGreaterThan(20_000);
      console.log(`report screenshot: ${screenshot}`);
    } finally {
      await context.close();
    }
  });
});
