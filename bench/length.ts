// Time per GRPO step of the long-response lab setting (sims/lab/length-long.json: 256-term `fibonacci`, the toy
// width with RoPE and two outlier channels) per precision plan, as ratios to `bf16` measured in the same process.
// Each plan runs the real GRPO loop (runGrpo) for two steps after one warm-start step; the second step is timed.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveRunConfig } from '../src/rl/index.js';
import { applyOverrides, policyFactory, runGrpo } from '../src/runs/index.js';
import type { BenchLine } from './cast.js';

const SPEC = fileURLToPath(new URL('../sims/lab/length-long.json', import.meta.url));

/** The plans `npm run bench length` times by default (QRL_BENCH_PLANS=a,b overrides). */
export const lengthBenchPlans: readonly string[] = Object.freeze([
  'bf16',
  'fp8-rollout',
  'int8-rollout',
  'full-fp8',
  'jet',
]);

interface StepTimes {
  total: number[];
  rollout: number[];
  old: number[];
  update: number[];
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

/**
 * Seconds of the second GRPO step of the long-response setting per plan (rollout, ℓold forward,
 * update, total) and `stepVsBf16`; plans run in turn, `repeats` rounds (interleaved).
 */
export async function benchLength(planNames: readonly string[] = lengthBenchPlans, repeats = 1): Promise<BenchLine[]> {
  const spec = JSON.parse(readFileSync(SPEC, 'utf8')) as { config: unknown };
  const names = planNames.includes('bf16') ? planNames : ['bf16', ...planNames];
  const times = new Map<string, StepTimes>(names.map((p) => [p, { total: [], rollout: [], old: [], update: [] }]));
  const work = mkdtempSync(join(tmpdir(), 'qrl-bench-length-'));
  let shape = '';
  try {
    for (let r = 0; r < repeats; r++) {
      for (const plan of names) {
        const config = resolveRunConfig(
          applyOverrides(spec.config, ['steps=2', 'sft.steps=1', 'sft.cache=false', 'eval.every=0', `plan=${plan}`]),
        );
        shape = `${config.rollout.prompts}×${config.rollout.groupSize} responses`;
        const out = join(work, `${plan}-${r}`);
        await runGrpo({
          config,
          outDir: out,
          factory: policyFactory(config.policy.kind),
          cacheDir: join(work, 'cache'),
        });
        const steps = readFileSync(join(out, 'timings.jsonl'), 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Record<string, number>);
        const last = steps[steps.length - 1] as Record<string, number>;
        const t = times.get(plan) as StepTimes;
        t.total.push(last['total'] as number);
        t.rollout.push(last['rollout'] as number);
        t.old.push(last['old'] as number);
        t.update.push(last['update'] as number);
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const base = median((times.get('bf16') as StepTimes).total);
  return planNames.map((plan) => {
    const t = times.get(plan) as StepTimes;
    return {
      name: `length ${plan}: one GRPO step of sims/lab/length-long.json (fibonacci 256 terms, ${shape}, outlier channels)`,
      figures: {
        stepS: median(t.total),
        rolloutS: median(t.rollout),
        oldS: median(t.old),
        updateS: median(t.update),
        stepVsBf16: median(t.total) / base,
      },
    };
  });
}
