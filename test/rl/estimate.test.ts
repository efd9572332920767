// Tests of estimate(): finite-difference gradients for every loss x aggregation x KL, masking, identity and permutation properties.
// Not a source of expected numbers: every expected value is derived in the test itself.

import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import type { EstimateBatch } from '../../src/rl/index.js';
import { aggregations, estimate, estimateJson, kl, losses, resolveConfig, topkLossNames } from '../../src/rl/index.js';
import { batchArb, fdCheck, fixedBatch, flat, toBatch } from './helpers.js';

/** Loss configs whose kinks are far from the test points (wide TBPO/GSPO bands), plus dual-clip. */
const LOSS_CONFIGS: object[] = [
  { name: 'ppo-clip', dualClip: 3 },
  { name: 'ppo-clip', epsLow: 0.1, epsHigh: 0.28 },
  { name: 'gspo', epsLow: 0.05, epsHigh: 0.08 },
  { name: 'sapo' },
  { name: 'cispo', epsLow: 0.1, epsHigh: 0.1 },
  { name: 'reinforce' },
  { name: 'tbpo', epsPosHigh: 0.12, epsNegLow: 0.1, epsNegHigh: 0.11, C: 1.3, mode: 'drop' },
  { name: 'tbpo', epsPosHigh: 0.12, epsNegLow: 0.1, epsNegHigh: 0.11, C: 1.3, mode: 'clamp' },
];
/** The stacks' losses (Δp masks), checked in their own test to keep each under the time limit. */
const STACK_LOSSES: object[] = [
  { name: 'dppo-tv', epsLow: 0.02, epsHigh: 0.03, c: 1.1 },
  { name: 'dppo-kl', epsLow: 0.002, epsHigh: 0.003 },
  { name: 'ipo', threshold: 0.03 },
];
const AGGREGATIONS: (string | object)[] = [
  ...Object.keys(aggregations),
  { name: 'seq-mean-token-sum-norm', normalizer: 7 },
];
const KLS: (object | null)[] = [null, ...Object.keys(kl).map((name) => ({ name, coef: 0.3 }))];
const CORRECTIONS: object[][] = [
  // token weights that vary within a sequence; IcePop rejections stay in the denominator
  [
    { name: 'tis', C: 1.2 },
    { name: 'icepop', lo: 0.8, hi: 1.3 },
  ],
  // sequence weights; k3 rejections leave numerator and denominator
  [
    { name: 'seq-tis', C: 1.5 },
    { name: 'rs-k3', level: 'token', hi: 0.02 },
  ],
  [{ name: 'ais', C: 1.4 }],
];
/** The stacks' masks: two-sided truncation, OPSM, Δp filter, M2PO, outlier veto. */
const STACK_CHAIN: object[] = [
  { name: 'tis', C: 1.2, lo: 0.9 },
  { name: 'opsm', delta: 0.01 },
  { name: 'dp-filter', lo: -0.05, hi: 0.05 },
  { name: 'm2po', tau: 0.03 },
  { name: 'outlier-veto', lo: 0.7, hi: 1.5 },
];

describe('gradient w.r.t. logpTheta against central finite differences', () => {
  it('every loss × aggregation × KL (× three correction chains)', () => {
    let checks = 0;
    let nonzero = 0;
    for (const [ci, correction] of CORRECTIONS.entries()) {
      const batch = fixedBatch(100 + ci, 4, 5, 0.3);
      for (const loss of LOSS_CONFIGS) {
        for (const aggregation of AGGREGATIONS) {
          for (const k of KLS) {
            const config = { advantage: { name: 'grpo' }, correction, loss, aggregation, ...(k ? { kl: k } : {}) };
            fdCheck(batch, config, 1e-6, 2e-7);
            const some = estimate(batch, resolveConfig(config)).gradLogpTheta.some((g) => g !== 0);
            nonzero += some ? 1 : 0;
            checks += 1;
          }
        }
      }
    }
    expect(checks).toBe(CORRECTIONS.length * LOSS_CONFIGS.length * AGGREGATIONS.length * KLS.length);
    expect(nonzero).toBe(checks);
  });

  it("the stacks' losses under every chain, and every loss under the stacks' mask chain", () => {
    let checks = 0;
    const pairs: [object[], object, number][] = [];
    for (const [ci, correction] of CORRECTIONS.entries())
      for (const loss of STACK_LOSSES) pairs.push([correction, loss, 100 + ci]);
    for (const loss of [...LOSS_CONFIGS, ...STACK_LOSSES]) pairs.push([STACK_CHAIN, loss, 104]);
    for (const [correction, loss, seed] of pairs) {
      const batch = fixedBatch(seed, 4, 5, 0.3);
      for (const aggregation of AGGREGATIONS) {
        for (const k of [null, { name: 'k3', coef: 0.3 }, { name: 'k1+', coef: 0.3 }]) {
          const config = { advantage: { name: 'grpo' }, correction, loss, aggregation, ...(k ? { kl: k } : {}) };
          fdCheck(batch, config, 1e-6, 2e-7);
          expect(
            estimate(batch, resolveConfig(config)).gradLogpTheta.some((g) => g !== 0),
            JSON.stringify(config),
          ).toBe(true);
          checks += 1;
        }
      }
    }
    expect(checks).toBe(pairs.length * AGGREGATIONS.length * 3);
  });

  it('bypass mode, bias-corrected KL (old / rollout), the mismatch penalty and the response-mask KL', () => {
    const batch = fixedBatch(211, 4, 5, 0.3);
    const extras: object[] = [
      {
        mode: 'bypass',
        correction: [
          { name: 'tis', C: 1.2 },
          { name: 'rs-k1', level: 'token', lo: 0.8, hi: 1.25 },
        ],
        loss: { name: 'reinforce' },
        kl: { name: 'k3', coef: 0.3 },
      },
      {
        mode: 'bypass',
        correction: [{ name: 'opsm', delta: 0.01 }],
        loss: { name: 'ppo-clip' },
        kl: { name: 'k2', coef: 0.3 },
      },
      { correction: { name: 'tis' }, loss: { name: 'ppo-clip' }, kl: { name: 'k3', coef: 0.3, biasCorrection: 'old' } },
      {
        correction: { name: 'tis' },
        loss: { name: 'cispo' },
        kl: { name: 'k1+', coef: 0.3, biasCorrection: 'rollout' },
      },
      {
        correction: { name: 'mis-token', C: 1.2 },
        loss: { name: 'dppo-tv' },
        kl: { name: 'k1', coef: 0.3, mask: 'response' },
        mismatchPenalty: { tau: 0.5 },
      },
    ];
    for (const config of extras)
      for (const aggregation of AGGREGATIONS) fdCheck(batch, { ...config, aggregation }, 1e-6, 2e-7);
  });

  it("dp-filter at ROLL's aggregated levels under every aggregation", () => {
    const batch = fixedBatch(104, 4, 5, 0.3);
    // bands that keep some rows and reject others on this batch (row means / sums of Δp)
    for (const [level, lo, hi] of [
      ['roll-geometric', -0.03, 0.01],
      ['roll-sequence', -0.05, 0.05],
    ] as const) {
      const correction = [
        { name: 'tis', C: 1.2 },
        { name: 'dp-filter', lo, hi, level },
      ];
      const rejected = estimate(batch, resolveConfig({ correction })).metrics[
        'rollout_corr/dp-filter/seq_masked_fraction'
      ]!;
      expect(rejected > 0 && rejected < 1, `${level}: ${rejected}`).toBe(true);
      for (const loss of [{ name: 'ppo-clip' }, { name: 'cispo' }]) {
        for (const aggregation of AGGREGATIONS)
          fdCheck(batch, { correction, loss, aggregation, kl: { name: 'k3', coef: 0.3 } }, 1e-6, 2e-7);
      }
    }
  });

  it('gspo and tbpo with the papers’ bands (ℓθ within 8e-4 of ℓold)', () => {
    const batch = fixedBatch(7, 8, 4, 8e-4);
    for (const loss of [{ name: 'gspo' }, { name: 'tbpo' }, { name: 'tbpo', mode: 'clamp' }]) {
      for (const aggregation of AGGREGATIONS)
        fdCheck(batch, { correction: { name: 'tis' }, loss, aggregation, kl: { name: 'k3', coef: 0.1 } }, 1e-8, 1e-5);
    }
    const r = estimate(batch, resolveConfig({ loss: { name: 'tbpo' } }));
    expect(r.metrics['actor/tbpo_drop_fraction']).toBeGreaterThan(0);
    expect(r.metrics['actor/tbpo_drop_fraction']).toBeLessThan(1);
  });

  it('k3 clamps: zero gradient where verl clamps the KL value', () => {
    const batch = fixedBatch(3, 1, 2, 0);
    const b = {
      ...batch,
      logpTheta: Float64Array.of(-30, -1),
      logpRef: Float64Array.of(-1, -1),
      mask: Float64Array.of(1, 1),
    };
    const r = estimate(
      b,
      resolveConfig({ loss: { name: 'reinforce' }, kl: { name: 'k3', coef: 1 }, aggregation: 'seq-mean-token-sum' }),
    );
    // d = −29 ⇒ u = 29 clamped to 20, value clamped to 10
    expect(r.tokenLoss[0]).toBeCloseTo(10 + 30 * 0, 12);
    expect(r.gradLogpTheta[0]).toBe(0);
  });
});

describe('estimate: properties', () => {
  const configs = [
    { correction: [{ name: 'ais' }], loss: { name: 'ppo-clip', dualClip: 3 }, kl: { name: 'k3', coef: 0.05 } },
    {
      correction: [{ name: 'tis' }, { name: 'geo-rs', lo: 0.8, hi: 1.25 }, { name: 'veto', v: 0.8 }],
      loss: { name: 'gspo', epsLow: 0.1, epsHigh: 0.1 },
      kl: { name: 'k1+', coef: 0.1 },
    },
    {
      correction: [{ name: 'icepop', level: 'sequence', lo: 0.7, hi: 1.4 }, { name: 'batch-norm' }],
      loss: { name: 'tbpo', epsPosHigh: 0.1, epsNegLow: 0.1, epsNegHigh: 0.1 },
      aggregation: 'token-mean',
    },
    {
      correction: [{ name: 'mis-token', C: 1.2, denominator: 'original' }],
      loss: { name: 'sapo' },
      aggregation: 'seq-mean-token-sum-norm',
      kl: { name: 'k2', coef: 0.2 },
    },
    { correction: [{ name: 'rs-k1', level: 'token', lo: 0.8, hi: 1.3 }], loss: { name: 'cispo' } },
    { correction: [{ name: 'seq-tis' }], loss: { name: 'reinforce' }, aggregation: 'seq-mean-token-sum' },
  ].map((c) => resolveConfig(c));

  test.prop([batchArb(0.4), fc.double({ min: -50, max: 50, noNaN: true })])(
    'masked tokens never influence the loss or its gradient',
    (raw, junk) => {
      const b = toBatch(raw);
      const garble = (x: Float64Array) => x.map((v, k) => (b.mask[k] === 1 ? v : junk * ((k % 3) - 1)));
      const g = {
        ...b,
        logpTheta: garble(b.logpTheta),
        logpOld: garble(b.logpOld),
        logpRollout: garble(b.logpRollout),
        logpRef: garble(b.logpRef!),
      };
      for (const config of configs) {
        const r1 = estimate(b, config);
        const r2 = estimate(g, config);
        expect(Object.is(r1.loss, r2.loss)).toBe(true);
        expect(Array.from(r2.gradLogpTheta)).toEqual(Array.from(r1.gradLogpTheta));
        expect(Array.from(r2.tokenLoss)).toEqual(Array.from(r1.tokenLoss));
        b.mask.forEach((m, k) => {
          if (m === 0) expect(r1.gradLogpTheta[k]).toBe(0);
        });
      }
    },
  );

  test.prop([batchArb(0.4)])(
    'ρ ≡ 1 ⇒ AIS / TIS / seq-TIS / MIS / IcePop losses equal the uncorrected loss exactly',
    (raw) => {
      const b0 = toBatch(raw);
      const b = { ...b0, logpRollout: Float64Array.from(b0.logpOld) };
      const names = ['ais', 'tis', 'seq-tis', 'mis-token', 'mis-seq', 'icepop', 'token-is'];
      // the top-k losses need the batch's topk (test/rl/topk-estimators.test.ts)
      for (const loss of Object.keys(losses).filter((l) => !(topkLossNames as readonly string[]).includes(l))) {
        for (const aggregation of Object.keys(aggregations)) {
          const base = estimate(b, resolveConfig({ loss: { name: loss }, aggregation, kl: { name: 'k3' } }));
          for (const name of names) {
            const r = estimate(
              b,
              resolveConfig({ correction: { name }, loss: { name: loss }, aggregation, kl: { name: 'k3' } }),
            );
            expect(Object.is(r.loss, base.loss), `${name} ${loss} ${aggregation}`).toBe(true);
            expect(Array.from(r.gradLogpTheta)).toEqual(Array.from(base.gradLogpTheta));
            expect(Array.from(r.advantages)).toEqual(Array.from(base.advantages));
          }
        }
      }
    },
    600_000,
  ); // 49 s alone, ~146 s once on a heavily shared two-core machine

  test.prop([batchArb(0.4, 2), fc.integer({ min: 0, max: 999 })])(
    'permuting sequences permutes every output',
    (raw, seed) => {
      const b = toBatch(raw);
      const { B, T } = b.shape;
      const perm = Array.from({ length: B }, (_, i) => i).sort(
        (i, j) => ((i * 37 + seed) % 11) - ((j * 37 + seed) % 11) || i - j,
      );
      const p2 = (x: Float64Array) => flat(perm.map((p) => Array.from(x.subarray(p * T, p * T + T))));
      const pb: EstimateBatch = {
        shape: b.shape,
        logpTheta: p2(b.logpTheta),
        logpOld: p2(b.logpOld),
        logpRollout: p2(b.logpRollout),
        logpRef: p2(b.logpRef!),
        mask: p2(b.mask),
        rewards: Float64Array.from(perm, (p) => b.rewards![p]!),
        groups: perm.map((p) => b.groups![p]!),
      };
      for (const config of configs) {
        const r = estimate(b, config);
        const q = estimate(pb, config);
        expect(q.loss).toBeCloseTo(r.loss, 10);
        expect(Array.from(q.lossMask)).toEqual(Array.from(p2(r.lossMask)));
        for (const field of ['advantages', 'weights', 'tokenLoss', 'gradLogpTheta'] as const) {
          const expected = p2(r[field]);
          q[field].forEach((v, k) => expect(v, field).toBeCloseTo(expected[k]!, 10));
        }
      }
    },
  );
});

describe('estimate: composition details', () => {
  it('numerator-only versus numerator-and-denominator rejection changes the token-mean normaliser', () => {
    const json = (denominator: string) => ({
      logpTheta: [[-1, -1, -1, -1]],
      logpOld: [[-1, -1, -1, -1]],
      logpRollout: [[-1, -1, -1, -2]], // last token ρ = e, rejected by mis-token C = 2
      mask: [[1, 1, 1, 1]],
      advantages: [1],
      config: {
        correction: { name: 'mis-token', denominator },
        loss: { name: 'reinforce' },
        aggregation: 'token-mean',
      },
    });
    // tokenLoss = −A·ℓθ = 1 on the three kept tokens
    expect(estimateJson(json('kept')).loss).toBeCloseTo(3 / 3, 15);
    expect(estimateJson(json('original')).loss).toBeCloseTo(3 / 4, 15);
  });

  it('KL is added with the aggregation of the denominator mask and without the correction weight', () => {
    const out = estimateJson({
      logpTheta: [[-1, -2]],
      logpOld: [[-1, -2]],
      logpRollout: [[-1.5, -2]],
      logpRef: [[-1.2, -2.5]],
      mask: [[1, 1]],
      advantages: [[0, 0]],
      config: { correction: { name: 'tis' }, loss: { name: 'ppo-clip' }, kl: { name: 'k1', coef: 0.5 } },
    });
    expect(out.loss).toBeCloseTo((0.5 * 0.2 + 0.5 * 0.5) / 2, 15);
    expect(out.gradLogpTheta[0]![0]).toBeCloseTo(0.25, 15);
    expect(out.weights[0]![0]).toBeCloseTo(Math.exp(0.5), 15);
  });
});
