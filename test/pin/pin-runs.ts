// Short runs of every config under sims/ whose metrics.jsonl and eval.jsonl are pinned byte for byte
// (test/pin/pin.test.ts); `npx tsx test/pin/pin-runs.ts --write` records the fixture. Not a benchmark.

import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveRunConfig } from '../../src/rl/index.js';
import { applyOverrides, policyFactory, runGrpo } from '../../src/runs/index.js';

/** The overrides every pinned run gets: two GRPO steps of 2 prompts, five warm-start steps, eval of 4 problems every step. */
export const PIN_OVERRIDES = [
  'steps=2',
  'sft.steps=5',
  'eval.problems=4',
  'eval.every=1',
  'sft.cache=false',
  'rollout.prompts=2',
];

const here = fileURLToPath(new URL('.', import.meta.url));
export const SIMS_DIR = join(here, '..', '..', 'sims');
export const FIXTURE = join(here, 'pin.json');

const sha = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex');

/** Runs one sim with {@link PIN_OVERRIDES} and returns the sha256 of its deterministic files. */
export async function pinRun(
  sim: string,
  workDir: string,
): Promise<{ metrics: string; eval: string; timings: string }> {
  const raw = JSON.parse(readFileSync(join(SIMS_DIR, sim), 'utf8')) as unknown;
  const config = resolveRunConfig(applyOverrides(raw, PIN_OVERRIDES));
  const outDir = join(workDir, sim.replace(/\.json$/, ''));
  await runGrpo({ config, outDir, factory: policyFactory(config.policy.kind), cacheDir: join(workDir, 'cache') });
  return {
    metrics: sha(join(outDir, 'metrics.jsonl')),
    eval: sha(join(outDir, 'eval.jsonl')),
    timings: join(outDir, 'timings.jsonl'),
  };
}

export const sims = (): string[] =>
  readdirSync(SIMS_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort();

if (process.argv.includes('--write')) {
  const work = mkdtempSync(join(tmpdir(), 'qrl-pin-'));
  const out: Record<string, { metrics: string; eval: string }> = {};
  for (const sim of sims()) {
    const r = await pinRun(sim, work);
    out[sim] = { metrics: r.metrics, eval: r.eval };
    const steps = readFileSync(r.timings, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { step: number; total: number });
    console.log(sim, r.metrics.slice(0, 12), steps.map((s) => s.total.toFixed(3)).join(' '));
  }
  writeFileSync(FIXTURE, `${JSON.stringify(out, null, 2)}\n`);
  rmSync(work, { recursive: true, force: true });
}
