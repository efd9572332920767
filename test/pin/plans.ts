// Per precision plan, the sha256 of one rollout's tokens and log-probs, the trainer's log-probs and the
// gradients of a weighted sum of them, on a toy AR policy with outlier channels (test/pin/plans.test.ts);
// `npx tsx test/pin/plans.ts --write` records the fixture. Not a benchmark: it pins the bits of every GEMM path.

import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  arConfig,
  backwardLogprobs,
  computeLogprobs,
  createArPolicy,
  numericsFor,
  precisionPlans,
  rollout,
} from '../../src/policies/index.js';
import { createRng } from '../../src/core/rng.js';
import { makeTask } from '../../src/tasks/index.js';

export const PLAN_FIXTURE = fileURLToPath(new URL('plans.json', import.meta.url));

/** Shapes pinned: the toy width (decode GEMMs of 6 rows, trainer GEMMs of 6·T rows) and a wider one (trainer GEMMs over the SIMD threshold on every site). */
export const PLAN_PIN_SHAPES = {
  tiny: { model: { C: 32, H: 4, layers: 2, hidden: 64, outliers: 2 }, batch: 6, length: 20 },
  wide: {
    model: { C: 64, H: 4, layers: 1, hidden: 128, outliers: 2, positions: 'rope' as const },
    batch: 8,
    length: 12,
  },
} as const;

function sha(x: ArrayLike<number> & { buffer: ArrayBufferLike; byteOffset: number; byteLength: number }): string {
  return createHash('sha256')
    .update(new Uint8Array(x.buffer, x.byteOffset, x.byteLength))
    .digest('hex')
    .slice(0, 16);
}

/** Hashes of one plan's rollout, trainer log-probs and gradients at one pinned shape. */
export function planHashes(
  shape: keyof typeof PLAN_PIN_SHAPES,
  planName: string,
): { tokens: string; logpRollout: string; logp: string; grads: string } {
  const s = PLAN_PIN_SHAPES[shape];
  const task = makeTask('fibonacci', { minLength: s.length, maxLength: s.length });
  const policy = createArPolicy(
    arConfig({ ...s.model, vocabSize: task.vocabSize, maxLen: task.promptLength + s.length }),
    3,
  );
  // Sharper than the init so sampled tokens depend on the log-probs' low bits less often than on the plan.
  const d = policy.params.data;
  for (let i = 0; i < d.length; i++) d[i] = (d[i] as number) * 6;
  const prompts = task.trainProblems(s.batch, 1).map((p) => [...p.prompt]);
  const plan = precisionPlans[planName as keyof typeof precisionPlans];
  const r = rollout(policy, prompts, {
    maxNewTokens: s.length,
    numerics: numericsFor(plan.rollout),
    rng: createRng(5),
    eos: null,
  });
  const lp = computeLogprobs(policy, r.tokens, r.B, r.promptLength, r.responseMask, {
    numerics: numericsFor(plan.trainer),
  });
  policy.params.grads.fill(0);
  const w = new Float64Array(r.B * s.length);
  const rng = createRng(7);
  for (let i = 0; i < w.length; i++) w[i] = rng.normal() / w.length;
  backwardLogprobs(policy, lp, w);
  return {
    tokens: sha(Int32Array.from(r.tokens)),
    logpRollout: sha(Float64Array.from(r.logpRollout)),
    logp: sha(Float64Array.from(lp.logp)),
    grads: sha(policy.params.grads),
  };
}

if (process.argv.includes('--write')) {
  const out: Record<string, Record<string, ReturnType<typeof planHashes>>> = {};
  for (const shape of Object.keys(PLAN_PIN_SHAPES) as (keyof typeof PLAN_PIN_SHAPES)[]) {
    out[shape] = {};
    for (const name of Object.keys(precisionPlans)) {
      out[shape][name] = planHashes(shape, name);
      console.log(shape, name, JSON.stringify(out[shape][name]));
    }
  }
  writeFileSync(PLAN_FIXTURE, `${JSON.stringify(out, null, 2)}\n`);
} else if (process.argv.includes('--check')) {
  const fixture = JSON.parse(readFileSync(PLAN_FIXTURE, 'utf8')) as Record<
    string,
    Record<string, ReturnType<typeof planHashes>>
  >;
  let bad = 0;
  for (const [shape, plans] of Object.entries(fixture)) {
    for (const [name, want] of Object.entries(plans)) {
      const got = planHashes(shape as keyof typeof PLAN_PIN_SHAPES, name);
      const ok = JSON.stringify(got) === JSON.stringify(want);
      if (!ok) bad++;
      console.log(ok ? 'ok  ' : 'DIFF', shape, name);
    }
  }
  process.exitCode = bad === 0 ? 0 : 1;
}
