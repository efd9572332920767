// veRL's optimal token baseline (OTB): compute_optimal_token_baseline_advantage, verl-project 1dda039
// verl/trainer/ppo/core_algos.py l.871–987. Every expected value is worked out here from that formula.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { paramsArb } from '../../src/testing/differential.js';
import { advantages, estimate, estimateJson, resolveConfig, resolveRunConfig } from '../../src/rl/index.js';

const L = Math.log;

// group 0 = rows 0, 1; group 1 = row 2 (a singleton). T = 3.
// row 0: R = 1, mask [1 1 1], π = 0.5, Σπ² = 0.5  → w = 1 − 1 + 0.5 = 0.5,   W = [0.5, 1, 1.5]
// row 1: R = 0, mask [1 1 0], π = 0.25, Σπ² = 0.25 → w = 1 − 0.5 + 0.25 = 0.75, W = [0.75, 1.5, (1.5)]
// row 2: R = 2, mask [1 0 0]
// G: row 0 = [1 1 1], row 1 = [0 0 0], row 2 = [2 0 0]
// B_t (ε = 0): t0 = 0.5/1.25 = 0.4, t1 = 1/2.5 = 0.4, t2 = 1.5/1.5 = 1 (row 1 masked)
// zero tail: row 0 is the unique longest (3 > 2) → its baseline is 0 from column 2 on
const MASK = [
  [1, 1, 1],
  [1, 1, 0],
  [1, 0, 0],
];
const OLD = [
  [L(0.5), L(0.5), L(0.5)],
  [L(0.25), L(0.25), L(0.25)],
  [L(0.9), -3, -3],
];
const PSQ = [
  [0.5, 0.5, 0.5],
  [0.25, 0.25, 0.25],
  [0.82, 0.3, 0.3],
];
const json = (advantage: object, extra: object = {}) => ({
  logpTheta: OLD,
  logpOld: OLD,
  logpRollout: OLD,
  mask: MASK,
  rewards: [1, 0, 2],
  groups: [0, 0, 1],
  probSqSum: PSQ,
  config: { advantage, loss: { name: 'reinforce' } },
  ...extra,
});

describe('veRL optimal_token_baseline (core_algos.py l.871–987)', () => {
  it('B_t = Σ G·W·m / (Σ W·m + ε) per group and column; a singleton keeps A = G; the unique longest row gets B = 0 past L₂', () => {
    const a = estimateJson(json({ name: 'optimal_token_baseline', epsilon: 0 })).advantages;
    expect(a[0]![0]).toBeCloseTo(0.6, 14);
    expect(a[0]![1]).toBeCloseTo(0.6, 14);
    expect(a[0]![2]).toBe(1); // zero tail: G − 0
    expect(a[1]![0]).toBeCloseTo(-0.4, 14);
    expect(a[1]![1]).toBeCloseTo(-0.4, 14);
    expect(a[1]![2]).toBe(0);
    expect(a[2]).toEqual([2, 0, 0]);
  });

  it('handleZeroTail false keeps the column baseline; the default ε = 1e-8 enters the denominator', () => {
    const off = estimateJson(json({ name: 'optimal_token_baseline', epsilon: 0, handleZeroTail: false })).advantages;
    expect(off[0]![2]).toBeCloseTo(0, 14); // 1 − 1.5/1.5
    const def = estimateJson(json({ name: 'optimal_token_baseline' })).advantages;
    expect(def[0]![0]).toBeCloseTo(1 - 0.5 / (1.25 + 1e-8), 15);
    expect(resolveConfig({ advantage: { name: 'optimal_token_baseline' } }).advantage).toEqual({
      name: 'optimal_token_baseline',
      epsilon: 1e-8,
      handleZeroTail: true,
    });
  });

  it('w uses ℓold (ℓroll in bypass mode), never ℓθ', () => {
    const moved = json(
      { name: 'optimal_token_baseline', epsilon: 0 },
      { logpTheta: OLD.map((r) => r.map((v) => v - 0.3)) },
    );
    expect(estimateJson(moved).advantages[0]![0]).toBeCloseTo(0.6, 14);
    // bypass: row 1's rollout π = 0.5 → w = 1 − 1 + 0.25 = 0.25, B_0 = 0.5/(0.5 + 0.25) = 2/3
    const roll = [OLD[0]!, [L(0.5), L(0.5), L(0.5)], OLD[2]!];
    const bypass = { ...json({ name: 'optimal_token_baseline', epsilon: 0 }), logpRollout: roll };
    (bypass.config as Record<string, unknown>).mode = 'bypass';
    expect(estimateJson(bypass).advantages[0]![0]).toBeCloseTo(1 - 2 / 3, 14);
  });

  it('advantages/* metrics summarise the valid tokens', () => {
    const m = estimateJson(json({ name: 'optimal_token_baseline', epsilon: 0 })).metrics;
    expect(m['advantages/mean']).toBeCloseTo((0.6 + 0.6 + 1 - 0.4 - 0.4 + 2) / 6, 14);
    expect(m['advantages/max']).toBe(2);
  });

  it('without probSqSum: estimate, the library call and diffusion run configs refuse with one line naming the field', () => {
    const { probSqSum: _, ...noPsq } = json({ name: 'optimal_token_baseline' });
    expect(() => estimateJson(noPsq)).toThrow(
      /^probSqSum: required when config\.advantage\.name is 'optimal_token_baseline'/,
    );
    // other advantages do not need it
    expect(() => estimateJson({ ...noPsq, config: { advantage: { name: 'grpo' } } })).not.toThrow();
    expect(() =>
      estimateJson(
        json(
          { name: 'optimal_token_baseline' },
          {
            probSqSum: [
              [0.5, 0.5, 1.5],
              [0, 0, 0],
              [0, 0, 0],
            ],
          },
        ),
      ),
    ).toThrow('probSqSum[0][2]: a sum of squared probabilities lies in [0, 1], got 1.5');
    const flat = (m: number[][]) => m.flat();
    const batch = {
      shape: { B: 3, T: 3 },
      logpTheta: flat(OLD),
      logpOld: flat(OLD),
      logpRollout: flat(OLD),
      mask: flat(MASK),
      rewards: [1, 0, 2],
      groups: [0, 0, 1],
    };
    const cfg = resolveConfig({ advantage: { name: 'optimal_token_baseline' } });
    expect(() => estimate(batch, cfg)).toThrow(/^probSqSum: required/);
    expect(estimate({ ...batch, probSqSum: flat(PSQ) }, cfg).advantages[2 * 3]).toBe(2);
    // runs take Σπ² from the ℓold pass (test/rl/grpo/otb-run.test.ts); a policy without one softmax row per token refuses
    expect(() =>
      resolveRunConfig({
        policy: { kind: 'diffusion' },
        estimators: { advantage: { name: 'optimal_token_baseline' } },
      }),
    ).toThrow(/^config\.estimators\.advantage\.name: 'optimal_token_baseline' needs Σ_v π\(v\)²/);
  });

  it('the table entry returns (B, T) advantages from tokens', () => {
    const r = advantages.optimal_token_baseline(
      {
        rewards: Float64Array.of(1, 0),
        groups: [0, 0],
        tokens: {
          T: 1,
          mask: Float64Array.of(1, 1),
          logpOld: Float64Array.of(L(0.5), L(0.5)),
          probSqSum: Float64Array.of(0.5, 0.5),
        },
      },
      { epsilon: 0, handleZeroTail: true },
    );
    expect(Array.from(r.value)).toEqual([0.5, -0.5]);
  });
});

describe('qrl-sim check with a fixed optimal_token_baseline config', () => {
  it('draws probSqSum shaped like the mask, so every drawn batch is a valid estimate input', () => {
    const config = { advantage: { name: 'optimal_token_baseline' }, loss: { name: 'ppo-clip' }, kl: null };
    for (const p of fc.sample(paramsArb('estimate', config), { seed: 7, numRuns: 20 })) {
      const mask = p.mask as number[][];
      expect((p.probSqSum as number[][]).map((r) => r.length)).toEqual(mask.map((r) => r.length));
      expect(() => estimateJson(p)).not.toThrow();
    }
  });
});

describe('optimal_token_baseline: properties', () => {
  it('permuting sequences permutes the (B, T) advantages', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 6 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 0, max: 1e6 }),
        (B, T, seed) => {
          const u = (k: number) => (((Math.sin(seed + k * 12.9898) * 43758.5453) % 1) + 1) % 1;
          const rewards = Float64Array.from({ length: B }, (_, i) => Math.round(u(i) * 2));
          const groups = Array.from({ length: B }, (_, i) => i % 2);
          const mask = Float64Array.from({ length: B * T }, (_, k) =>
            k % T < 1 + Math.floor(u(100 + Math.floor(k / T)) * T) ? 1 : 0,
          );
          const logpOld = Float64Array.from({ length: B * T }, (_, k) => -0.05 - 3 * u(200 + k));
          const probSqSum = Float64Array.from(logpOld, (l, k) => Math.exp(2 * l) + (1 - Math.exp(2 * l)) * u(400 + k));
          const run = (perm: number[]) => {
            const rows = (x: Float64Array) =>
              Float64Array.from(perm.flatMap((p) => Array.from(x.subarray(p * T, p * T + T))));
            return advantages.optimal_token_baseline(
              {
                rewards: Float64Array.from(perm, (p) => rewards[p]!),
                groups: perm.map((p) => groups[p]!),
                tokens: { T, mask: rows(mask), logpOld: rows(logpOld), probSqSum: rows(probSqSum) },
              },
              { epsilon: 1e-8, handleZeroTail: true },
            ).value;
          };
          const id = Array.from({ length: B }, (_, i) => i);
          const perm = [...id].reverse();
          const a = run(id);
          const b = run(perm);
          perm.forEach((p, i) => {
            for (let t = 0; t < T; t++) expect(b[i * T + t]).toBeCloseTo(a[p * T + t]!, 12);
          });
        },
      ),
      { seed: 20261125, numRuns: 50 },
    );
  });
});
