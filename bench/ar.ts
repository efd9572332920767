// Timing of the AR toy policy at its default size: rollout of 16 sequences × 32 tokens and a trainer
// forward + backward of the same batch, per precision plan. Figures only; nothing is asserted.

import { arConfig, backwardLogprobs, computeLogprobs, createArPolicy, numericsFor, precisionPlans, rollout } from '../src/policies/index.js';
import { createRng } from '../src/rng.js';
import { makeTask } from '../src/tasks/index.js';
import type { BenchLine } from './cast.js';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

/** Milliseconds per rollout (16 × 32, EOS ignored) and per trainer forward+backward, for each plan. */
export async function benchAr(B = 16, L = 32, repeats = 7): Promise<BenchLine[]> {
  const task = makeTask('reverse');
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + L }), 0);
  const prompts = task.trainProblems(B, 0).map((p) => [...p.prompt]);
  const lines: BenchLine[] = [];
  for (const [name, plan] of Object.entries(precisionPlans)) {
    const tRoll: number[] = [], tFwd: number[] = [], tBwd: number[] = [];
    for (let i = 0; i < repeats; i++) {
      const t0 = performance.now();
      const r = rollout(policy, prompts, { maxNewTokens: L, numerics: numericsFor(plan.rollout), rng: createRng(i), eos: null });
      const t1 = performance.now();
      const lp = computeLogprobs(policy, r.tokens, B, r.promptLength, r.responseMask, { numerics: numericsFor(plan.trainer) });
      const t2 = performance.now();
      policy.params.grads.fill(0);
      backwardLogprobs(policy, lp, new Float64Array(B * L).fill(1 / (B * L)));
      const t3 = performance.now();
      tRoll.push(t1 - t0); tFwd.push(t2 - t1); tBwd.push(t3 - t2);
    }
    lines.push({
      name: `ar ${name}: rollout ${B}×${L} (prompt ${task.promptLength}), trainer forward/backward on (${B}, ${task.promptLength + L})`,
      figures: { rolloutMs: median(tRoll), trainerForwardMs: median(tFwd), trainerBackwardMs: median(tBwd) },
    });
  }
  return lines;
}
