// Example (docs/library.md): a tiny GRPO run driven from code — resolve a config, run it, read its metrics.
// Not the CLI (`qrl-sim run`, docs/grpo.md); test/docs/examples.test.ts runs this file into a temp directory.

import { readJsonl } from 'qrl-sim';
import { resolveRunConfig } from 'qrl-sim/rl';
import { runGrpo } from 'qrl-sim/runs';
import { join } from 'node:path';

/** Two GRPO steps of a one-layer AR policy on string reversal under the bf16 plan; returns each step's mean reward. */
export async function runGrpoExample(outDir: string, cacheDir = join(outDir, 'sft-cache')): Promise<number[]> {
  const config = resolveRunConfig({
    seed: 0,
    steps: 2,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
    plan: 'bf16',
    sft: { steps: 4, batchSize: 8 },
    rollout: { prompts: 2, groupSize: 4 },
    eval: { every: 0 },
  });
  // The policy comes from config.policy.kind (the registry); pass `factory` or `backend` to use your own.
  await runGrpo({ config, outDir, cacheDir });
  return readJsonl<Record<string, number>>(join(outDir, 'metrics.jsonl')).map((m) => m['reward/mean'] as number);
}

if (import.meta.url === `file://${process.argv[1]}`)
  console.log(await runGrpoExample(process.argv[2] ?? 'runs/example'));
