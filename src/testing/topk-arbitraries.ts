// fast-check generators of the sampler's distribution for `qrl-sim check --suite estimators` with a
// fixed config that reads it (score centering, loss trpl, the exact on-policy ratio): `topk` and
// `onPolicy` shaped like a generated batch. Not the batch generator (arbitraries.ts).

import fc from 'fast-check';
import { readsTopkLoss } from '../rl/losses.js';

/** Slots and vocabulary of the generated top-k. */
const K = 3;
const V = 8;

/** True when `config` reads `topk` or `onPolicy` (then the generated params carry them). */
export function readsTopk(config: Record<string, unknown> | undefined): boolean {
  if (config === undefined) return false;
  return (
    readsTopkLoss((config.loss as { name?: unknown } | undefined)?.name) ||
    (config.scoreCentering !== undefined && config.scoreCentering !== null) ||
    (config.topkKl !== undefined && config.topkKl !== null) ||
    config.exactOnPolicyRatio === true
  );
}

/** One position's K distinct ids and two sub-normalised distributions over them (μ and πθ) in log form. */
const cellArb = fc
  .record({
    ids: fc.shuffledSubarray(
      Array.from({ length: V }, (_, v) => v),
      { minLength: K, maxLength: K },
    ),
    q: fc.array(fc.double({ min: 0.02, max: 1, noNaN: true }), { minLength: K + 1, maxLength: K + 1 }),
    p: fc.array(fc.double({ min: 0.02, max: 1, noNaN: true }), { minLength: K + 1, maxLength: K + 1 }),
    y: fc.integer({ min: 0, max: V - 1 }),
  })
  .map(({ ids, q, p, y }) => {
    const norm = (w: number[]) => {
      const s = w.reduce((a, x) => a + x, 0);
      return w.slice(0, K).map((x) => Math.log(x / s));
    };
    return { ids, lq: norm(q), lp: norm(p), y };
  });

/** `topk` and `onPolicy` for a batch of `B` rows × `T` positions. */
export function topkParamsArb(B: number, T: number): fc.Arbitrary<{ topk: unknown; onPolicy: number[] }> {
  return fc
    .record({
      cells: fc.array(fc.array(cellArb, { minLength: T, maxLength: T }), { minLength: B, maxLength: B }),
      onPolicy: fc.array(fc.constantFrom(0, 1), { minLength: B, maxLength: B }),
    })
    .map(({ cells, onPolicy }) => ({
      topk: {
        vocabSize: V,
        ids: cells.map((r) => r.map((c) => c.ids)),
        logpRollout: cells.map((r) => r.map((c) => c.lq)),
        logpTheta: cells.map((r) => r.map((c) => c.lp)),
        tokens: cells.map((r) => r.map((c) => c.y)),
      },
      onPolicy,
    }));
}
