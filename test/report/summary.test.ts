// Summary statistics of fixture runs (mean ± sample std over seeds) against hand computations,
// and the rendered tables. Not the plots (report.test.ts).

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { fc, test as fcTest } from '@fast-check/vitest';
import {
  BaselineError,
  readRuns,
  seedStat,
  summarizeRuns,
  summaryMarkdown,
  pairedDelta,
  parseBaselineSelector,
  rewardTailSteps,
} from '../../src/report/index.js';
import { formatStat } from '../../src/report/table.js';
import { shortFieldName } from '../../src/report/summary.js';
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
      eval: [
        { step: 0, 'eval/rollout/greedy_accuracy': 0.9 },
        { step: 2, 'eval/rollout/greedy_accuracy': acc + 0.125 },
        { step: 3, 'eval/rollout/greedy_accuracy': acc },
      ],
      timings: [
        { step: 1, total: 1 + seed },
        { step: 2, total: 2 },
        { step: 3, total: 0.5 },
      ],
    }),
  );
  [0, 1].forEach((seed) =>
    writeFixtureRun(join(root, 'b', `seed-${seed}`), {
      config: fixtureConfig(seed, 'fp8-rollout', tis),
      metrics: fixtureMetrics(0.2 * seed),
      eval: [
        { step: 0, 'eval/rollout/greedy_accuracy': 0.5 },
        { step: 3, 'eval/rollout/greedy_accuracy': 0.5 + 0.25 * seed },
      ],
      timings: [
        { step: 1, total: 3 },
        { step: 2, total: 3 },
        { step: 3, total: 3 },
      ],
    }),
  );
  writeFixtureRun(join(root, 'b', 'seed-2'), {
    config: fixtureConfig(2, 'fp8-rollout', tis),
    metrics: [],
    error: 'boom: engine exploded',
  });
  return root;
}

describe('summarizeRuns', () => {
  const root = writeSweep();
  const summary = summarizeRuns(readRuns(root));

  test('groups runs by every config field except seed and labels them by what differs', () => {
    expect(summary.groups.map((g) => g.label)).toEqual([
      'plan=bf16, correction=none',
      'plan=fp8-rollout, correction=tis',
    ]);
    expect(summary.groups.map((g) => g.runs.map((r) => r.seed))).toEqual([
      [0, 1, 2],
      [0, 1, 2],
    ]);
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
    // 3 steps: K = ⌈0.2·3⌉ = 1, the last step's reward = 0.3 + seed/10 → 0.3, 0.4, 0.5: mean 0.4, std 0.1
    expect(a.tailReward.mean).toBeCloseTo(0.4, 12);
    expect(a.tailReward.std).toBeCloseTo(0.1, 12);
    // mean k3 over steps = 0.002 + seed/1000 → 0.002, 0.003, 0.004: mean 0.003, std 0.001
    expect(a.meanK3.mean).toBeCloseTo(0.003, 12);
    expect(a.meanK3.std).toBeCloseTo(0.001, 12);
    // time = (1 + seed) + 2 + 0.5 → 3.5, 4.5, 5.5: mean 4.5, std 1
    expect(a.stepSeconds.mean).toBeCloseTo(4.5, 12);
    expect(a.stepSeconds.std).toBeCloseTo(1, 12);
    expect(summary.groups[1]!.stats.stepSeconds).toMatchObject({ mean: 9, std: 0, n: 2 });
  });

  test('a failed run is reported with its error and left out of the statistics', () => {
    expect(summary.failures).toEqual([
      { run: join('b', 'seed-2'), label: 'plan=fp8-rollout, correction=tis', error: 'boom: engine exploded' },
    ]);
    const md = summaryMarkdown(summary);
    expect(md).toContain('2/3 (1 failed)');
    expect(md).toContain('boom: engine exploded');
  });

  test('the Markdown table has one row per configuration with mean ± std cells, no best-mean bold', () => {
    const md = summaryMarkdown(summary);
    const table = md.slice(0, md.indexOf('Difference to the baseline'));
    const rows = table.split('\n').filter((l) => l.startsWith('| plan='));
    expect(rows).toHaveLength(2);
    expect(rows[0]).toContain('plan=bf16, correction=none (baseline)');
    expect(rows[0]).toContain('50.0 ± 25.0');
    expect(rows[1]).toContain('62.5 ± 17.7');
    expect(table).not.toContain('**');
  });

  test('a single seed has no std (n/a, not ± 0); no value gives a dash', () => {
    const one = seedStat([0.3]);
    expect(one).toMatchObject({ mean: 0.3, n: 1, values: [0.3] });
    expect(one.std).toBeNaN();
    expect(formatStat(one, 'finalAccuracy')).toBe('30.0 ± n/a');
    expect(formatStat(seedStat([]), 'tailReward')).toBe('—');
  });
});

describe('a plan given as data (a plan file of the grid)', () => {
  test('is one field, labelled by its name, and selectable by it as a baseline', () => {
    const root = tempDir('summary-plan-data');
    const data = { name: 'my-fault', rollout: { gemm: { kind: 'fp32' } }, trainer: { gemm: { kind: 'fp32' } } };
    for (const [dir, plan] of [
      ['a', 'fp8-rollout'],
      ['b', data],
    ] as const) {
      writeFixtureRun(join(root, dir, 'seed-0'), {
        config: { ...fixtureConfig(0, 'x', none), plan },
        metrics: fixtureMetrics(0),
        eval: [{ step: 3, 'eval/rollout/greedy_accuracy': 0.5 }],
        timings: [{ step: 1, total: 1 }],
      });
    }
    const summary = summarizeRuns(readRuns(root), { baseline: 'plan=my-fault' });
    expect(summary.groups.map((g) => g.label)).toEqual(['plan=fp8-rollout', 'plan=my-fault']);
    expect(summaryMarkdown(summary)).toContain('plan=my-fault (baseline)');
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
  writeFixtureRun(join(root, 'c2'), {
    config: fixtureConfig(0, 'bf16', [{ name: 'tis', C: 2 }]),
    metrics: fixtureMetrics(0),
  });
  writeFixtureRun(join(root, 'c5'), {
    config: fixtureConfig(0, 'bf16', [{ name: 'tis', C: 5 }]),
    metrics: fixtureMetrics(0),
  });
  expect(summarizeRuns(readRuns(root)).groups.map((g) => g.label)).toEqual([
    'correction=tis(C=2)',
    'correction=tis(C=5)',
  ]);
});

/**
 * Paired comparison on hand-made metrics where every number is known: baseline B (bf16/none) and
 * Q (mxfp4-rollout/none), seeds 0–3, 10 steps each (K = 2 last steps).
 *   trainer accuracy at the last eval: B = .50 .60 .40 .70, Q = .30 .50 .35 .70
 *     Δ = −.20 −.10 −.05 0 → mean −.0875; deviations −.1125 −.0125 .0375 .0875;
 *     sum of squares .012656+.000156+.001406+.007656 = .021875; var = .021875/3; std = .085391…
 *     below zero: 3 of 4; |mean| .0875 > std .0854 → outside the seed spread.
 *   rollout accuracy: B = .5 .5 .5 .5, Q = .55 .45 .5 .5 → Δ = +.05 −.05 0 0: mean 0, std .040825, 1 below → inside.
 *   reward: B's steps 9–10 = 0.4 + s/10 each; Q's = B's − 0.03·(s+1) → Δ = −.03 −.06 −.09 −.12:
 *     mean −.075, std = .03·√(5/3) = .038730, 4 below → outside.
 */
describe('paired difference to the baseline (hand-computed)', () => {
  const root = tempDir('paired');
  const trainerB = [0.5, 0.6, 0.4, 0.7];
  const trainerQ = [0.3, 0.5, 0.35, 0.7];
  const rolloutQ = [0.55, 0.45, 0.5, 0.5];
  const metrics = (seed: number, shift: number) =>
    Array.from({ length: 10 }, (_, i) => ({ step: i + 1, 'reward/mean': i >= 8 ? 0.4 + seed / 10 - shift : 0.9 }));
  for (const seed of [0, 1, 2, 3]) {
    writeFixtureRun(join(root, 'b', `seed-${seed}`), {
      config: fixtureConfig(seed, 'bf16', none),
      metrics: metrics(seed, 0),
      eval: [
        { step: 0, 'eval/trainer/greedy_accuracy': 0.1, 'eval/rollout/greedy_accuracy': 0.1 },
        { step: 10, 'eval/trainer/greedy_accuracy': trainerB[seed]!, 'eval/rollout/greedy_accuracy': 0.5 },
      ],
    });
    writeFixtureRun(join(root, 'q', `seed-${seed}`), {
      config: fixtureConfig(seed, 'mxfp4-rollout', none),
      metrics: metrics(seed, 0.03 * (seed + 1)),
      eval: [
        { step: 0, 'eval/trainer/greedy_accuracy': 0.1, 'eval/rollout/greedy_accuracy': 0.1 },
        { step: 10, 'eval/trainer/greedy_accuracy': trainerQ[seed]!, 'eval/rollout/greedy_accuracy': rolloutQ[seed]! },
      ],
    });
  }
  const summary = summarizeRuns(readRuns(root));
  const q = summary.groups[1]!;

  test('the default baseline is bf16/none, and it has no Δ of its own', () => {
    expect(summary.baseline).toEqual({ selector: 'plan=bf16, correction=none', label: 'plan=bf16', note: null });
    expect(summary.groups[0]!.isBaseline).toBe(true);
    expect(summary.groups[0]!.delta).toBeNull();
    expect(q.rewardTailSteps).toBe(2);
    expect(rewardTailSteps(60)).toBe(12);
  });

  test('trainer accuracy: Δ mean, std and count below zero by hand; outside the spread', () => {
    const d = q.delta!.finalTrainerAccuracy;
    expect(d.seeds).toEqual([0, 1, 2, 3]);
    expect(d.values.map((v) => Math.round(v * 1e12) / 1e12)).toEqual([-0.2, -0.1, -0.05, 0]);
    expect(d.mean).toBeCloseTo(-0.0875, 12);
    expect(d.std).toBeCloseTo(Math.sqrt(0.021875 / 3), 12);
    expect(d.below).toBe(3);
    expect(d.insideSpread).toBe(false);
  });

  test('rollout accuracy: Δ inside the spread; reward over the last K steps outside', () => {
    const r = q.delta!.finalAccuracy;
    expect(r.mean).toBeCloseTo(0, 12);
    expect(r.std).toBeCloseTo(Math.sqrt(0.005 / 3), 12);
    expect(r.below).toBe(1);
    expect(r.insideSpread).toBe(true);
    const w = q.delta!.tailReward;
    expect(w.mean).toBeCloseTo(-0.075, 12);
    expect(w.std).toBeCloseTo(0.03 * Math.sqrt(5 / 3), 12);
    expect(w.below).toBe(4);
    expect(w.insideSpread).toBe(false);
  });

  test('the paired table: bold outside the spread, "within spread" inside, counts below zero', () => {
    const md = summaryMarkdown(summary);
    const row = md
      .split('\n')
      .filter((l) => l.startsWith('| plan=mxfp4-rollout | 4 |'))
      .at(-1);
    expect(row).toBe(
      '| plan=mxfp4-rollout | 4 | **−8.8 ± 8.5** (3/4 < 0) | 0.0 ± 4.1 (1/4 < 0), within spread | **−0.075 ± 0.039** (4/4 < 0) |',
    );
    expect(md).toContain('Difference to the baseline `plan=bf16`, paired by seed');
  });

  test('--baseline picks another configuration; a selector matching none or several is a BaselineError', () => {
    const other = summarizeRuns(readRuns(root), { baseline: 'plan=mxfp4-rollout' });
    expect(other.baseline.label).toBe('plan=mxfp4-rollout');
    expect(other.groups[0]!.delta!.finalTrainerAccuracy.mean).toBeCloseTo(0.0875, 12);
    expect(other.groups[0]!.delta!.finalTrainerAccuracy.below).toBe(0);
    expect(() => summarizeRuns(readRuns(root), { baseline: 'plan=fp8-rollout' })).toThrow(BaselineError);
    expect(() => summarizeRuns(readRuns(root), { baseline: 'plan=fp8-rollout' })).toThrow(
      /'plan=fp8-rollout' matches no configuration/,
    );
    expect(() => summarizeRuns(readRuns(root), { baseline: 'correction=none' })).toThrow(/matches 2 configurations/);
    expect(() => parseBaselineSelector('plan')).toThrow(/'plan' in 'plan' is not KEY=VALUE/);
    expect(parseBaselineSelector('correction=tis(C=2,x=1),plan=bf16')).toEqual([
      ['correction', 'tis(C=2,x=1)'],
      ['plan', 'bf16'],
    ]);
  });

  test('pairs only the seeds both configurations have; one pair has no spread', () => {
    const d = pairedDelta(
      new Map([
        [0, 0.4],
        [1, 0.5],
        [7, 0.9],
      ]),
      new Map([
        [0, 0.6],
        [1, 0.5],
      ]),
    );
    expect(d.seeds).toEqual([0, 1]);
    expect(d.below).toBe(1);
    const one = pairedDelta(new Map([[3, 0.4]]), new Map([[3, 0.5]]));
    expect(one.n).toBe(1);
    expect(one.insideSpread).toBeNull();
  });

  test('without a matching default baseline there is no paired table, and the page says why', () => {
    const other = tempDir('nobase');
    writeFixtureRun(join(other, 'a'), { config: fixtureConfig(0, 'fp16', none), metrics: fixtureMetrics(0) });
    writeFixtureRun(join(other, 'b'), { config: fixtureConfig(0, 'fp8-rollout', none), metrics: fixtureMetrics(0) });
    const s = summarizeRuns(readRuns(other));
    expect(s.baseline.label).toBeNull();
    expect(s.baseline.note).toMatch(
      /no configuration matches the default baseline plan=bf16, correction=none; choose one with --baseline/,
    );
    expect(s.groups.every((g) => g.delta === null)).toBe(true);
    expect(summaryMarkdown(s)).toContain('No paired comparison');
  });
});

test('a run with fewer steps than its config asks for is counted as incomplete', () => {
  const root = tempDir('incomplete');
  writeFixtureRun(join(root, 's0'), { config: fixtureConfig(0, 'bf16', none), metrics: fixtureMetrics(0) });
  writeFixtureRun(join(root, 's1'), { config: fixtureConfig(1, 'bf16', none), metrics: fixtureMetrics(0).slice(0, 2) });
  expect(summaryMarkdown(summarizeRuns(readRuns(root)))).toContain(
    '| plan=bf16, correction=none (baseline) | 2 (1 incomplete) |',
  );
});

test('an incomplete run is not paired with the baseline', () => {
  const root = tempDir('incomplete-pair');
  for (const seed of [0, 1])
    writeFixtureRun(join(root, 'b', `s${seed}`), {
      config: fixtureConfig(seed, 'bf16', none),
      metrics: fixtureMetrics(0),
    });
  writeFixtureRun(join(root, 'q', 's0'), { config: fixtureConfig(0, 'fp16', none), metrics: fixtureMetrics(0.1) });
  writeFixtureRun(join(root, 'q', 's1'), {
    config: fixtureConfig(1, 'fp16', none),
    metrics: fixtureMetrics(0.1).slice(0, 1),
  });
  const d = summarizeRuns(readRuns(root)).groups[1]!.delta!.tailReward;
  expect(d.seeds).toEqual([0]);
  expect(d.mean).toBeCloseTo(0.1, 12);
});
