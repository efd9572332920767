// The AR rollout's MoE routing record: one (B, P + L, k) array per layer, reproducible from the seed,
// equal to the trainer's routing under identical plans, flipped by a quantized rollout; none for dense.

import { describe, expect, it } from 'vitest';
import {
  arConfig,
  arForward,
  createArPolicy,
  numericsFor,
  precisionPlans,
  rollout,
  type ArPolicy,
} from '../../../src/policies/index.js';
import { routingFlipRate } from '../../../src/nn/moe.js';
import { createRng } from '../../../src/core/rng.js';
import { makeTask } from '../../../src/tasks/index.js';

const task = makeTask('reverse');
const P = task.promptLength;
const prompts = task.trainProblems(4, 5).map((p) => [...p.prompt]);
const moe = { experts: 4, topK: 2, auxCoeff: 0.01 };

function moePolicy(): ArPolicy {
  const policy = createArPolicy(
    arConfig({ vocabSize: task.vocabSize, maxLen: 40, C: 16, H: 2, layers: 2, hidden: 16, moe }),
    7,
  );
  const d = policy.params.data;
  for (let i = 0; i < d.length; i++) d[i] = d[i]! * 8;
  return policy;
}

/** The trainer's routing of layer l at the positions the rollout ran, as (B, T, k) with −1 elsewhere. */
function trainerRouting(
  policy: ArPolicy,
  tokens: Int32Array,
  B: number,
  T: number,
  like: Int32Array,
  l: number,
  plan: keyof typeof precisionPlans,
): Int32Array {
  const r = arForward(policy, tokens, B, T, numericsFor(precisionPlans[plan]!.trainer)).blocks[l]!.moe!.routing;
  return Int32Array.from(r, (e, i) => (like[i] === -1 ? -1 : e));
}

describe('AR rollout routing record (MoE)', () => {
  const L = 8;
  const run = (plan: keyof typeof precisionPlans, decode: 'incremental' | 'recompute' = 'incremental') =>
    rollout(moePolicy(), prompts, {
      maxNewTokens: L,
      numerics: numericsFor(precisionPlans[plan]!.rollout),
      rng: createRng(3),
      eos: null,
      decode,
    });

  it('same seed ⇒ same record; layout (B, P + L, k) per layer, −1 only at the never-run last slot', () => {
    const a = run('bf16');
    const b = run('bf16');
    expect(a.routing).not.toBeNull();
    expect(a.routing!.length).toBe(2);
    a.routing!.forEach((r, l) => {
      expect(r.length).toBe(a.B * (P + L) * moe.topK);
      expect(Array.from(r)).toEqual(Array.from(b.routing![l]!));
      for (let row = 0; row < a.B; row++)
        for (let t = 0; t < P + L; t++) {
          const e = r.subarray((row * (P + L) + t) * 2, (row * (P + L) + t + 1) * 2);
          if (t === P + L - 1) expect(Array.from(e)).toEqual([-1, -1]);
          else expect(e[0]! >= 0 && e[0]! < 4 && e[1]! >= 0 && e[1]! < 4 && e[0] !== e[1]).toBe(true);
        }
    });
  });

  it('bf16 (identical sides): the record equals the trainer routing, in both decode modes; a quantized rollout flips some', () => {
    const policy = moePolicy();
    for (const decode of ['incremental', 'recompute'] as const) {
      const r = run('bf16', decode);
      r.routing!.forEach((rec, l) =>
        expect(Array.from(rec)).toEqual(Array.from(trainerRouting(policy, r.tokens, r.B, P + L, rec, l, 'bf16'))),
      );
    }
    const q = run('int8-rollout');
    const N = q.B * (P + L);
    const flips = q.routing!.map((rec, l) =>
      routingFlipRate(rec, trainerRouting(policy, q.tokens, q.B, P + L, rec, l, 'int8-rollout'), N, moe.topK),
    );
    expect(flips.some((f) => f > 0)).toBe(true);
    expect(flips.every((f) => f < 0.5)).toBe(true);
  });

  it('a dense policy records no routing', () => {
    const dense = createArPolicy(
      arConfig({ vocabSize: task.vocabSize, maxLen: 40, C: 16, H: 2, layers: 1, hidden: 16 }),
      7,
    );
    const r = rollout(dense, prompts, {
      maxNewTokens: 4,
      numerics: numericsFor(precisionPlans.bf16!.rollout),
      rng: createRng(3),
    });
    expect(r.routing).toBeNull();
  });
});
