// The report's MoE routing plots: one flip-rate panel per layer some run logged, the k3 pair with and
// without replay, drawn only for MoE runs. Not the other panels (report.test.ts).

import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { writeReport } from '../../src/report/index.js';
import { moePanels } from '../../src/report/plot-panels.js';
import type { RunRecord } from '../../src/report/runs.js';
import { fixtureConfig, fixtureMetrics, tempDir, writeFixtureRun } from './fixtures.js';

const record = (metrics: Record<string, number>[]): RunRecord => ({
  dir: '.',
  name: '.',
  config: null,
  metrics,
  eval: [],
  timings: [],
  error: null,
});

describe('MoE routing panels', () => {
  test('one flip-rate panel per logged layer, in layer order, then the k3 pair; none for dense runs', () => {
    expect(moePanels([record([{ step: 1, 'reward/mean': 0 }])])).toEqual([]);
    const panels = moePanels([
      record([{ step: 1, 'moe/flip_rate/l1': 0.1 }]),
      record([{ step: 1, 'moe/flip_rate/l0': 0.2, 'moe/flip_rate/l10': 0 }]),
    ]);
    expect(panels.map((p) => p.metric)).toEqual([
      'moe/flip_rate/l0',
      'moe/flip_rate/l1',
      'moe/flip_rate/l10',
      'moe/k3_kl_own_routing',
      'moe/k3_kl_rollout_routing',
    ]);
  });

  test('the report of an MoE sweep draws a flip-rate plot per layer (and no k3 pair without replay)', async () => {
    const root = tempDir('report-moe');
    for (const seed of [0, 1]) {
      writeFixtureRun(join(root, `seed-${seed}`), {
        config: fixtureConfig(seed, 'fp8-rollout', [{ name: 'none' }]),
        metrics: fixtureMetrics(0.01 * seed, (step) => ({
          'moe/flip_rate/l0': 0.01 * step,
          'moe/flip_rate/l1': 0.02 * step + 0.01 * seed,
        })),
        eval: [0, 3].map((step) => ({
          step,
          'eval/rollout/greedy_accuracy': 0.25,
          'eval/trainer/greedy_accuracy': 0.3,
        })),
        timings: [1, 2, 3].map((step) => ({ step, total: 0.5 })),
      });
    }
    const result = await writeReport(root);
    expect(result.plots.filter((id) => id.startsWith('moe-'))).toEqual(['moe-flip-l0', 'moe-flip-l1']);
  });
});
