// Tests of the advantage estimators: hand-computed vectors and properties (zero-sum, shift invariance, permutation).
// Not a source of expected numbers: every expected value is derived in the test itself.

import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { advantages } from '../../src/rl/index.js';
import { batchStdAdvantage, drgrpoAdvantage, grpoAdvantage } from '../../src/rl/advantages.js';

const input = (rewards: number[], groups: (string | number)[]) => ({ rewards: Float64Array.from(rewards), groups });

describe('advantages: hand-computed vectors', () => {
  it('grpo: (R − mean_g)/(unbiased std_g + 1e-6), per group', () => {
    // group a: [1, 0, 0, 1] mean 0.5, unbiased std sqrt(1/3); group b: [2, 4] mean 3, std sqrt(2)
    const a = grpoAdvantage(input([1, 0, 2, 0, 1, 4], ['a', 'a', 'b', 'a', 'a', 'b']), { eps: 1e-6 }).value;
    const sa = Math.sqrt(1 / 3) + 1e-6;
    const sb = Math.sqrt(2) + 1e-6;
    const expected = [0.5 / sa, -0.5 / sa, -1 / sb, -0.5 / sa, 0.5 / sa, 1 / sb];
    expected.forEach((e, i) => expect(a[i]).toBeCloseTo(e, 14));
  });

  it('grpo: a group of size 1 gets advantage 0', () => {
    const a = grpoAdvantage(input([3, 1, 0], [0, 1, 1]), { eps: 1e-6 }).value;
    expect(a[0]).toBe(0);
  });

  it('drgrpo: R − mean_g', () => {
    const a = drgrpoAdvantage(input([1, 0, 0, 0, 5, 3], [0, 0, 0, 0, 1, 1]), {}).value;
    expect(Array.from(a)).toEqual([0.75, -0.25, -0.25, -0.25, 1, -1]);
  });

  it('batch-std: group mean, batch std', () => {
    // rewards [1, 0, 3, 1], groups [0,0,1,1]: group means 0.5, 2; batch mean 1.25,
    // batch unbiased var = (0.0625+1.5625+3.0625+0.0625)/3 = 4.75/3
    const a = batchStdAdvantage(input([1, 0, 3, 1], [0, 0, 1, 1]), { eps: 1e-6 }).value;
    const s = Math.sqrt(4.75 / 3) + 1e-6;
    [0.5 / s, -0.5 / s, 1 / s, -1 / s].forEach((e, i) => expect(a[i]).toBeCloseTo(e, 14));
  });

  it('string and numeric group ids are distinct groups', () => {
    const a = drgrpoAdvantage(input([1, 3], ['1', 1]), {}).value;
    expect(Array.from(a)).toEqual([0, 0]);
  });
});

const rewardsArb = fc.integer({ min: 1, max: 8 }).chain((B) =>
  fc.record({
    rewards: fc.array(fc.double({ min: -10, max: 10, noNaN: true }), { minLength: B, maxLength: B }),
    groups: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: B, maxLength: B }),
    shift: fc.double({ min: -5, max: 5, noNaN: true }),
  }),
);

/**
 * passk is defined only when every group has at least two responses; the token-level
 * optimal_token_baseline needs per-token inputs (its own tests: test/rl/otb.test.ts).
 */
function defined(name: string, groups: readonly number[]): boolean {
  if (name === 'optimal_token_baseline') return false;
  if (name !== 'passk') return true;
  return groups.every((g) => groups.filter((h) => h === g).length >= 2);
}

describe('advantages: properties', () => {
  test.prop([rewardsArb])('drgrpo advantages sum to zero per group', ({ rewards, groups }) => {
    const a = drgrpoAdvantage(input(rewards, groups), {}).value;
    for (const g of new Set(groups)) {
      let s = 0;
      let scale = 1;
      groups.forEach((gi, i) => {
        if (gi === g) {
          s += a[i]!;
          scale += Math.abs(rewards[i]!);
        }
      });
      expect(Math.abs(s)).toBeLessThanOrEqual(1e-13 * scale);
    }
  });

  test.prop([rewardsArb])('every estimator is invariant to a constant reward shift', ({ rewards, groups, shift }) => {
    for (const [name, fn] of Object.entries(advantages)) {
      if (!defined(name, groups)) continue;
      const a = fn(input(rewards, groups), { eps: 1e-6 } as never).value;
      const b = fn(
        input(
          rewards.map((r) => r + shift),
          groups,
        ),
        { eps: 1e-6 } as never,
      ).value;
      a.forEach((v, i) => expect(b[i], name).toBeCloseTo(v, 8));
    }
  });

  test.prop([fc.integer({ min: 1, max: 6 }), fc.double({ min: -5, max: 5, noNaN: true })])(
    'constant rewards give A = 0',
    (B, r) => {
      const groups = Array.from({ length: B }, (_, i) => i % 2);
      for (const [name, fn] of Object.entries(advantages)) {
        if (!defined(name, groups)) continue;
        const a = fn(
          input(
            Array.from({ length: B }, () => r),
            groups,
          ),
          { eps: 1e-6 } as never,
        ).value;
        for (const v of a) expect(v).toBe(0);
      }
    },
  );

  test.prop([rewardsArb, fc.integer({ min: 0, max: 1000 })])(
    'permuting sequences permutes advantages',
    ({ rewards, groups }, seed) => {
      const perm = rewards
        .map((_, i) => i)
        .sort((i, j) => ((i * 7919 + seed) % 13) - ((j * 7919 + seed) % 13) || i - j);
      for (const [name, fn] of Object.entries(advantages)) {
        if (!defined(name, groups)) continue;
        const a = fn(input(rewards, groups), { eps: 1e-6 } as never).value;
        const b = fn(
          input(
            perm.map((p) => rewards[p]!),
            perm.map((p) => groups[p]!),
          ),
          { eps: 1e-6 } as never,
        ).value;
        perm.forEach((p, i) => expect(b[i]).toBeCloseTo(a[p]!, 12));
      }
    },
  );
});
