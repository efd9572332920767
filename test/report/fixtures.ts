// Test helper: writes fixture run directories (config.json and JSONL files) without training.
// Not a test file itself.

import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface FixtureRun {
  config: Record<string, unknown>;
  metrics: Record<string, number>[];
  eval?: Record<string, number>[];
  timings?: Record<string, number>[];
  error?: string;
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `qrl-${prefix}-`));
}

const jsonl = (lines: readonly unknown[]): string => lines.map((l) => `${JSON.stringify(l)}\n`).join('');

/** Writes one run directory as `qrl-sim run` (or a failed sweep run) leaves it. */
export function writeFixtureRun(dir: string, run: FixtureRun): void {
  mkdirSync(dir, { recursive: true });
  if (run.error !== undefined) {
    writeFileSync(join(dir, 'error.json'), JSON.stringify({ error: run.error, config: run.config }));
    return;
  }
  writeFileSync(join(dir, 'config.json'), JSON.stringify(run.config, null, 2));
  writeFileSync(join(dir, 'metrics.jsonl'), jsonl(run.metrics));
  writeFileSync(join(dir, 'eval.jsonl'), jsonl(run.eval ?? []));
  writeFileSync(join(dir, 'timings.jsonl'), jsonl(run.timings ?? []));
}

/** A config in the resolved shape (only the fields the report reads, plus what differs). */
export function fixtureConfig(
  seed: number,
  plan: string,
  correction: Record<string, unknown>[],
): Record<string, unknown> {
  return {
    seed,
    steps: 3,
    task: { name: 'reverse', options: {} },
    policy: { kind: 'ar' },
    plan,
    rollout: { prompts: 2, groupSize: 2 },
    estimators: { correction, loss: { name: 'ppo-clip' } },
  };
}

/** Three metric lines with every plotted metric, shifted by `offset`. */
export function fixtureMetrics(
  offset: number,
  extra: (step: number) => Record<string, number> = () => ({}),
): Record<string, number>[] {
  return [1, 2, 3].map((step) => ({
    step,
    'reward/mean': 0.1 * step + offset,
    'reward/accuracy': 0.05 * step + offset,
    'response_length/mean': 8 + step,
    'rollout_corr/k3_kl': 0.001 * step + offset / 100,
    'rollout_corr/weights_ess_ratio': 1 - 0.01 * step,
    'rollout_corr/masked_fraction': 0,
    'actor/pg_clipfrac': 0.02 * step,
    'actor/entropy': 1 - 0.1 * step,
    'actor/grad_norm': 0.5 + offset,
    ...extra(step),
  }));
}
