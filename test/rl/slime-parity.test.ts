// slime's own behaviour where it differs from the other stacks: OPSM without --use-rollout-logprobs, the KL
// reduced with the rejection-modified reducer, and --calculate-per-token-loss with an empty sample.
// Expected values are worked out here from slime's code (THUDM/slime 624b824, file and line cited per case).

import { describe, expect, it } from 'vitest';
import { estimateJson, resolveConfig } from '../../src/rl/index.js';
import { fdCheck, fixedBatch } from './helpers.js';

const E = Math.exp;

/** PPO clip token loss max(−A·r, −A·clip(r, 0.8, 1.2)), r = e^(ℓθ − ℓold) (slime ppo_utils.py compute_policy_loss). */
function ppo(theta: number, old: number, A: number): number {
  const r = E(theta - old);
  return Math.max(-A * r, -A * Math.min(1.2, Math.max(0.8, r)));
}

describe('slime OPSM without --use-rollout-logprobs (ppo_utils.py l.79–89, loss.py l.965, l.1011–1017)', () => {
  // row 0: mean(ℓold − ℓθ) = (0.2 + 0.1)/2 = 0.15 > δ; per-token advantages −1, +1
  // row 1: mean(ℓold − ℓθ) = (−0.1 + 0)/2 = −0.05 ≤ δ; advantages −1, −1
  // the rollout is far from ℓold in row 1 (the DeepSeek form would drop it)
  const theta = [
    [-1.2, -2.1],
    [-0.4, -0.7],
  ];
  const old = [
    [-1.0, -2.0],
    [-0.5, -0.7],
  ];
  const roll = [
    [-1.0, -2.0],
    [-0.1, -0.4],
  ];
  const adv = [
    [-1, 1],
    [-1, -1],
  ];
  const input = (config: object, th = theta) => ({
    logpTheta: th,
    logpOld: old,
    logpRollout: roll,
    mask: [
      [1, 1],
      [1, 1],
    ],
    advantages: adv,
    config,
  });

  it('drops the tokens with A_t < 0 of rows whose mean(ℓold − ℓθ) exceeds δ, keeping the denominator', () => {
    const out = estimateJson(input({ correction: { name: 'opsm', form: 'slime' }, aggregation: 'token-mean' }));
    expect(out.mask).toEqual([
      [0, 1],
      [1, 1],
    ]);
    // pg_loss * opsm_mask (loss.py l.1046–1047), the reducer unchanged: four tokens in the denominator
    const expected = (ppo(-2.1, -2.0, 1) + ppo(-0.4, -0.5, -1) + ppo(-0.7, -0.7, -1)) / 4;
    expect(out.loss).toBeCloseTo(expected, 14);
  });

  it('never masks at θ = θ_old, however far the rollout is; the DeepSeek form does', () => {
    const atOld = estimateJson(input({ correction: { name: 'opsm', form: 'slime' } }, old));
    expect(atOld.mask).toEqual([
      [1, 1],
      [1, 1],
    ]);
    // DeepSeek / TRL form: row 1 has mean(ℓroll − ℓold) = (0.4 + 0.3)/2 = 0.35 > δ and mean A < 0
    const deepseek = estimateJson(input({ correction: { name: 'opsm' } }, old));
    expect(deepseek.mask).toEqual([
      [1, 1],
      [0, 0],
    ]);
  });

  it('is refused in bypass mode (no ℓold there), where the default form is slime --use-rollout-logprobs', () => {
    expect(() =>
      resolveConfig({ mode: 'bypass', correction: [{ name: 'tis' }, { name: 'opsm', form: 'slime' }] }),
    ).toThrow(/config\.correction\[1\]\.form: "slime"/);
    expect(() => resolveConfig({ correction: { name: 'opsm', form: 'kimi' } })).toThrow(/config\.correction\.form/);
  });
});

describe('slime KL under a rejection mask (loss.py l.1086–1092 rebuilds the reducer, l.1128 reduces the KL with it)', () => {
  // mis-token with C = 1.5: token (0, 1) has ρ = e^0.5 = 1.65 > C and is rejected; the reducer keeps the
  // original per-sample denominators (rollout_mask_sums of the original loss masks)
  const theta = [
    [-1.0, -2.0, -0.3],
    [-0.5, -0.9, 0],
  ];
  const old = [
    [-1.1, -1.5, -0.3],
    [-0.5, -1.0, 0],
  ];
  const roll = [
    [-1.0, -2.0, -0.4],
    [-0.6, -1.0, 0],
  ];
  const ref = [
    [-0.8, -2.2, -0.3],
    [-0.7, -0.9, 0],
  ];
  const mask = [
    [1, 1, 1],
    [1, 1, 0],
  ];
  const adv = [
    [1, 1, 1],
    [-1, -1, 0],
  ];
  const beta = 0.5;
  const base = { logpTheta: theta, logpOld: old, logpRollout: roll, logpRef: ref, mask, advantages: adv };
  const keep = [
    [1, 0, 1],
    [1, 1, 0],
  ];
  // per-token pg loss × ρ (MIS weight on kept tokens), and k1 = ℓθ − ℓref
  const pg = (i: number, t: number) => E(old[i]![t]! - roll[i]![t]!) * ppo(theta[i]![t]!, old[i]![t]!, adv[i]![t]!);
  const k1 = (i: number, t: number) => theta[i]![t]! - ref[i]![t]!;

  it('seq-mean-token-mean: Σ_i Σ_t m′(pg + β·kl)/n_i / B, n_i the original counts', () => {
    const out = estimateJson({
      ...base,
      config: {
        correction: { name: 'mis-token', C: 1.5, denominator: 'original' },
        aggregation: 'seq-mean-token-mean',
        kl: { name: 'k1', coef: beta, mask: 'numerator' },
      },
    });
    expect(out.mask).toEqual(keep);
    let expected = 0;
    for (let i = 0; i < 2; i++) {
      const n = mask[i]!.reduce((a, b) => a + b, 0);
      for (let t = 0; t < 3; t++) if (keep[i]![t]) expected += (pg(i, t) + beta * k1(i, t)) / n / 2;
    }
    expect(out.loss).toBeCloseTo(expected, 14);
    // the rejected token carries neither term; the default KL mask keeps its KL
    expect(out.tokenLoss[0]![1]).toBe(0);
    const dflt = estimateJson({
      ...base,
      config: {
        correction: { name: 'mis-token', C: 1.5, denominator: 'original' },
        aggregation: 'seq-mean-token-mean',
        kl: { name: 'k1', coef: beta },
      },
    });
    expect(dflt.loss - out.loss).toBeCloseTo((beta * k1(0, 1)) / 3 / 2, 14);
  });

  it('with --calculate-per-token-loss: Σ m′(pg + β·kl) / Σ_i max(n_i, 1)', () => {
    const out = estimateJson({
      ...base,
      config: {
        correction: { name: 'mis-token', C: 1.5, denominator: 'original' },
        aggregation: 'slime-per-token',
        kl: { name: 'k1', coef: beta, mask: 'numerator' },
      },
    });
    let expected = 0;
    for (let i = 0; i < 2; i++)
      for (let t = 0; t < 3; t++) if (keep[i]![t]) expected += (pg(i, t) + beta * k1(i, t)) / 5;
    expect(out.loss).toBeCloseTo(expected, 14);
    expect(out.metrics['actor/kl_loss']).toBeCloseTo((k1(0, 0) + k1(0, 2) + k1(1, 0) + k1(1, 1)) / 5, 14);
  });
});

describe('slime --calculate-per-token-loss with an empty sample (loss.py l.1317, cp_utils.py l.83–88)', () => {
  it('an empty sample adds one to the normaliser Σ_i clamp_min(loss_mask_i.sum(), 1)', () => {
    const theta = [
      [-1.0, -0.5],
      [-2.0, -1.0],
      [-0.3, -0.3],
    ];
    const old = [
      [-1.1, -0.5],
      [-2.0, -0.9],
      [-0.3, -0.3],
    ];
    const mask = [
      [1, 1],
      [1, 0],
      [0, 0],
    ];
    const adv = [
      [1, 1],
      [-1, 0],
      [0, 0],
    ];
    const cfg = (aggregation: string) => ({
      logpTheta: theta,
      logpOld: old,
      logpRollout: old,
      mask,
      advantages: adv,
      config: { aggregation },
    });
    const sum = ppo(-1.0, -1.1, 1) + ppo(-0.5, -0.5, 1) + ppo(-2.0, -2.0, -1);
    expect(estimateJson(cfg('slime-per-token')).loss).toBeCloseTo(sum / (2 + 1 + 1), 15);
    expect(estimateJson(cfg('token-mean')).loss).toBeCloseTo(sum / 3, 15);
    // the gradient of the first token: −A·r / 4
    expect(estimateJson(cfg('slime-per-token')).gradLogpTheta[0]![0]).toBeCloseTo(-E(0.1) / 4, 15);
  });

  it("slime's metrics take the same normaliser: Σ_{i,t} f / Σ_i max(n_i, 1) (loss.py l.1159–1163, l.1377)", () => {
    // ℓtrain = ℓold, ℓroll 0.2 below it on row 0 and 0.1 above it on row 1's one token; row 2 empty
    const old = [
      [-1.0, -0.5],
      [-2.0, -0.9],
      [-0.3, -0.3],
    ];
    const roll = [
      [-1.2, -0.7],
      [-1.9, -0.9],
      [-0.3, -0.3],
    ];
    const mask = [
      [1, 1],
      [1, 0],
      [0, 0],
    ];
    const metrics = (aggregation: string) =>
      estimateJson({
        logpTheta: old,
        logpOld: old,
        logpRollout: roll,
        mask,
        advantages: mask,
        config: { aggregation, diagnostics: { stacks: ['slime'] } },
      }).metrics;
    const x = [0.2, 0.2, -0.1]; // ℓtrain − ℓroll on the three response tokens
    const perToken = metrics('slime-per-token');
    expect(perToken['train/tis']).toBeCloseTo((E(0.2) + E(0.2) + E(-0.1)) / (2 + 1 + 1), 14);
    expect(perToken['train/train_rollout_logprob_abs_diff']).toBeCloseTo((0.2 + 0.2 + 0.1) / 4, 14);
    expect(perToken['train/tis_abs']).toBeCloseTo(x.reduce((a, v) => a + Math.abs(E(v) - 1), 0) / 4, 14);
    // the default reducer: per-sample means over the B = 3 samples, the empty one adding 0
    const perSample = metrics('seq-mean-token-mean');
    expect(perSample['train/tis']).toBeCloseTo((E(0.2) + E(-0.1)) / 3, 14);
    expect(perSample['train/train_rollout_logprob_abs_diff']).toBeCloseTo((0.2 + 0.1) / 3, 14);
  });
});

describe("slime's options against central differences", () => {
  it('opsm form slime, KL over the numerator, slime-per-token aggregation', () => {
    const batch = fixedBatch(301, 4, 5, 0.3);
    for (const aggregation of ['token-mean', 'seq-mean-token-mean', 'slime-per-token']) {
      for (const config of [
        {
          correction: [
            { name: 'tis', C: 1.2 },
            { name: 'opsm', form: 'slime', delta: 0.01 },
          ],
          loss: { name: 'ppo-clip' },
          kl: { name: 'k3', coef: 0.3 },
        },
        {
          correction: [{ name: 'mis-token', C: 1.2, denominator: 'original' }],
          loss: { name: 'cispo' },
          kl: { name: 'k1+', coef: 0.3, mask: 'numerator' },
        },
        {
          correction: [{ name: 'rs-k3', level: 'token', hi: 0.02 }],
          loss: { name: 'ppo-clip' },
          kl: { name: 'k2', coef: 0.3, mask: 'numerator' },
        },
      ]) {
        fdCheck(batch, { ...config, aggregation }, 1e-6, 2e-7);
      }
    }
  });
});
