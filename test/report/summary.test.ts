// Summary statistics of fixture runs (mean ± sample std over seeds) against hand computations,
// and the rendered tables. Not the plots (report.test.ts).

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { fc, test as fcTest } from '@fast-check/vitest';
import { readRuns, seedStat, summarizeRuns, summaryMarkdown, formatStat, shortFieldName } from '../../src/report/index.js';
import { fixtureConfig, fixtureMetrics, tempDir, writeFixtureRun } from './fixtures.js';

const none = [{ name: 'none' }];
const tis = [{ name: 'tis', C: 2 }];

/** Group A (bf16, none): 3 seeds. Group B (fp8-rollout, tis): 2 seeds and one failed run. */
function writeSweep(): string {
  const root = tempDir('summary');
  const accA = [0.5, 0.75, 0.25];
  accA.forEach((acc, seed) =>
    writeFixtureRun(join(root, 'a', `seed-${seed}`), {
      config: fixtureConfig(seed, 'bf16', none),
      metrics: fixtureMetrics(seed / 10),
      // step 0 has the highest accuracy: "best" must ignore it
      eval: [{ step: 0, 'eval/rollout/greedy_accuracy': 0.9 }, { step: 2, 'eval/rollout/greedy_accuracy': acc + 0.125 }, { step: 3, 'eval/rollout/greedy_accuracy': acc }],
      timings: [{ step: 1, total: 1 + seed }, { step: 2, total: 2 }, { step: 3, total: 0.5 }],
    }),
  );
  [0, 1].forEach((seed) =>
    writeFixtureRun(join(root, 'b', `seed-${seed}`), {
      config: fixtureConfig(seed, 'fp8-rollout', tis),
      metrics: fixtureMetrics(0.2 * seed),
      eval: [{ step: 0, 'eval/rollout/greedy_accuracy': 0.5 }, { step: 3, 'eval/rollout/greedy_accuracy': 0.5 + 0.25 * seed }],
      timings: [{ step: 1, total: 3 }, { step: 2, total: 3 }, { step: 3, total: 3 }],
    }),
  );
  writeFixtureRun(join(root, 'b', 'seed-2'), { config: fixtureConfig(2, 'fp8-rollout', tis), metrics: [], error: 'boom: engine exploded' });
  return root;
}

describe('summarizeRuns', () => {
  const root = writeSweep();
  const summary = summarizeRuns(readRuns(root));

  test('groups runs by every config field except seed and labels them by what differs', () => {
    expect(summary.groups.map((g) => g.label)).toEqual(['plan=bf16, correction=none', 'plan=fp8-rollout, correction=tis']);
    expect(summary.groups.map((g) => g.runs.map((r) => r.seed))).toEqual([[0, 1, 2], [0, 1, 2]]);
  });

  test('final and best accuracy: mean ± sample std over seeds, by hand', () => {
    const a = summary.groups[0]!.stats;
    // final: 0.5, 0.75, 0.25 → mean 0.5, deviations 0, .25, −.25 → var = 0.125/2 → std 0.25
    expect(a.finalAccuracy.mean).toBeCloseTo(0.5, 12);
    expect(a.finalAccuracy.std).toBeCloseTo(0.25, 12);
    // best after step 0: 0.625, 0.875, 0.375 → mean 0.625, std 0.25 (step 0's 0.9 ignored)
    expect(a.bestAccuracy.mean).toBeCloseTo(0.625, 12);
    expect(a.bestAccuracy.std).toBeCloseTo(0.25, 12);
    const b = summary.groups[1]!.stats;
    // two successful seeds: 0.5, 0.75 → mean 0.625, std = |0.75 − 0.5|/√2
    expect(b.finalAccuracy.n).toBe(2);
    expect(b.finalAccuracy.mean).toBeCloseTo(0.625, 12);
    expect(b.finalAccuracy.std).toBeCloseTo(0.25 / Math.SQRT2, 12);
  });

  test('final reward, mean k3 and step time, by hand', () => {
    const a = summary.groups[0]!.stats;
    // final reward = 0.3 + seed/10 → 0.3, 0.4, 0.5: mean 0.4, std 0.1
    expect(a.finalReward.mean).toBeCloseTo(0.4, 12);
    expect(a.finalReward.std).toBeCloseTo(0.1, 12);
    // mean k3 over steps = 0.002 + seed/1000 → 0.002, 0.003, 0.004: mean 0.003, std 0.001
    expect(a.meanK3.mean).toBeCloseTo(0.003, 12);
    expect(a.meanK3.std).toBeCloseTo(0.001, 12);
    // time = (1 + seed) + 2 + 0.5 → 3.5, 4.5, 5.5: mean 4.5, std 1
    expect(a.stepSeconds.mean).toBeCloseTo(4.5, 12);
    expect(a.stepSeconds.std).toBeCloseTo(1, 12);
    expect(summary.groups[1]!.stats.stepSeconds).toMatchObject({ mean: 9, std: 0, n: 2 });
  });

  test('a failed run is reported with its error and left out of the statistics', () => {
    expect(summary.failures).toEqual([{ run: join('b', 'seed-2'), label: 'plan=fp8-rollout, correction=tis', error: 'boom: engine exploded' }]);
    const md = summaryMarkdown(summary);
    expect(md).toContain('2/3 (1 failed)');
    expect(md).toContain('boom: engine exploded');
  });

  test('the Markdown table has one row per configuration with mean ± std cells', () => {
    const md = summaryMarkdown(summary);
    const rows = md.split('\n').filter((l) => l.startsWith('| plan='));
    expect(rows).toHaveLength(2);
    expect(rows[0]).toContain('50.0 ± 25.0');
    // group B has the better final accuracy (62.5 > 50.0): bold
    expect(rows[1]).toContain('**62.5 ± 17.7**');
  });

  test('a single seed has std 0; no value gives a dash', () => {
    expect(seedStat([0.3])).toEqual({ mean: 0.3, std: 0, n: 1, values: [0.3] });
    expect(formatStat(seedStat([]), 'finalReward')).toBe('—');
  });
});

describe('seedStat', () => {
  fcTest.prop([fc.array(fc.double({ min: -1e3, max: 1e3, noNaN: true }), { minLength: 2, maxLength: 20 })])(
    'equals the two-pass sample variance and is shift invariant',
    (xs) => {
      const s = seedStat(xs);
      const m = xs.reduce((a, b) => a + b, 0) / xs.length;
      const v = xs.reduce((a, b) => a + (b - m) ** 2, 0) / (xs.length - 1);
      expect(s.mean).toBeCloseTo(m, 6);
      expect(s.std).toBeCloseTo(Math.sqrt(v), 6);
      expect(seedStat(xs.map((x) => x + 7)).std).toBeCloseTo(s.std, 6);
    },
  );
});

test('shortFieldName strips estimators.', () => {
  expect(shortFieldName('estimators.correction')).toBe('correction');
  expect(shortFieldName('estimators.loss')).toBe('loss');
  expect(shortFieldName('optim.lr')).toBe('optim.lr');
});

test('one configuration is labelled by its plan and correction', () => {
  const root = tempDir('one');
  writeFixtureRun(root, { config: fixtureConfig(0, 'fp8-rollout', tis), metrics: fixtureMetrics(0) });
  const summary = summarizeRuns(readRuns(root));
  expect(summary.groups.map((g) => g.label)).toEqual(['plan=fp8-rollout, correction=tis']);
  expect(JSON.parse(JSON.stringify(summary)).groups[0].runs[0].name).toBe('.');
  expect(readFileSync(join(root, 'config.json'), 'utf8')).toContain('fp8-rollout');
});

test('estimator specs that share a name are labelled with their hyper-parameters', () => {
  const root = tempDir('params');
  writeFixtureRun(join(root, 'c2'), { config: fixtureConfig(0, 'bf16', [{ name: 'tis', C: 2 }]), metrics: fixtureMetrics(0) });
  writeFixtureRun(join(root, 'c5'), { config: fixtureConfig(0, 'bf16', [{ name: 'tis', C: 5 }]), metrics: fixtureMetrics(0) });
  expect(summarizeRuns(readRuns(root)).groups.map((g) => g.label)).toEqual(['correction=tis(C=2)', 'correction=tis(C=5)']);
});
