// The stacks' 2026 estimators: veRL rollout_rs, AReaL rejection_sampling (incl. KPop), SkyRL's CISPO anchor,
// veRL geo_mean, TRL LUSPO/VESPO, ROLL TOPR, NeMo-RL's sequence log-prob error gate, AReaL's log-linear proximal
// policy. Every expected value is worked out here from the cited formula (file and line in docs/estimators.md).

import { describe, expect, it } from 'vitest';
import { applyCorrection, estimateJson, resolveConfig } from '../../src/rl/index.js';
import { corrInput, fdCheck, fixedBatch } from './helpers.js';

const E = Math.exp;
const L = Math.log;

// δ = ℓold − ℓroll: row 0 [0.5, −0.1, 0], row 1 [−0.5, 0, padding]
const OLD = [
  [-1.0, -2.0, -0.5],
  [-1.5, -0.2, -15],
];
const ROLL = [
  [-1.5, -1.9, -0.5],
  [-1.0, -0.2, -0.1],
];
const MASK = [
  [1, 1, 1],
  [1, 1, 0],
];
const inp = corrInput(OLD, ROLL, MASK, [
  [1, 1, 1],
  [-1, -1, 0],
]);
const run = (s: object | object[]) => applyCorrection(inp, resolveConfig({ correction: s }).correction);

describe('veRL rollout_rs (rollout_corr_helper.py compute_rollout_rejection_mask, l.197–413)', () => {
  it('token_k1 keeps log lo ≤ −δ ≤ log hi (veRL code band); seq_max_k3 keeps max_t(e^δ − 1 − δ) ≤ hi', () => {
    // k1 = −δ = [−0.5, 0.1, 0, 0.5, 0]; band [log 0.7, log 1.5] = [−0.357, 0.405]
    expect(
      Array.from(run({ name: 'rollout_rs', rollout_rs: 'token_k1', rollout_rs_threshold: '0.7_1.5' }).value.lossMask),
    ).toEqual([0, 1, 1, 0, 1, 0]);
    // k3 row maxima: row 0 e^0.5 − 1.5 = 0.1487, row 1 e^−0.5 − 0.5 = 0.1065
    const k3 = run({ name: 'rollout_rs', rollout_rs: 'seq_max_k3', rollout_rs_threshold: 0.12 });
    expect(Array.from(k3.value.lossMask)).toEqual([0, 0, 0, 1, 1, 0]);
    expect(k3.metrics['rollout_corr/rollout_rs_seq_max_k3_max']).toBeCloseTo(E(0.5) - 1.5, 15);
    expect(k3.metrics['rollout_corr/rollout_rs_seq_max_k3_min']).toBeCloseTo(E(-0.5) - 0.5, 15);
    expect(k3.metrics['rollout_corr/rollout_rs_seq_max_k3_fraction_high']).toBe(1 / 2);
    expect(k3.metrics['rollout_corr/rollout_rs_seq_max_k3_fraction_low']).toBe(0);
  });

  it('chains options with one threshold each; the global seq fraction is over all B rows (l.402–406)', () => {
    const r = run({ name: 'rollout_rs', rollout_rs: 'token_k1, seq_max_k3', rollout_rs_threshold: '0.7_1.5,0.12' });
    expect(Array.from(r.value.lossMask)).toEqual([0, 0, 0, 0, 1, 0]);
    expect(r.metrics['rollout_corr/rollout_rs_masked_fraction']).toBe(4 / 5);
    expect(r.metrics['rollout_corr/rollout_rs_seq_masked_fraction']).toBe(1);
    expect(r.metrics['rollout_corr/rollout_rs_token_k1_masked_fraction']).toBe(2 / 5);
    // a k1 threshold without '_' is the upper bound, lower = 1/upper (l.163–166): [0.5, 2] keeps every token
    expect(
      Array.from(run({ name: 'rollout_rs', rollout_rs: 'token_k1', rollout_rs_threshold: 2 }).value.lossMask),
    ).toEqual([1, 1, 1, 1, 1, 0]);
  });

  it('rejects what veRL rejects, naming the field', () => {
    const bad = (rs: string, th: string | number) => () =>
      resolveConfig({ correction: { name: 'rollout_rs', rollout_rs: rs, rollout_rs_threshold: th } });
    expect(bad('seq_max_k1', 1)).toThrow(/config\.correction\.rollout_rs: unknown option 'seq_max_k1'/);
    expect(bad('token_k3', '0.5_2')).toThrow(
      /config\.correction\.rollout_rs_threshold: 'token_k3' takes one upper bound/,
    );
    expect(bad('token_k1,token_k2,token_k3', '1,2')).toThrow(
      /config\.correction\.rollout_rs_threshold: expected one threshold or 3, got 2/,
    );
    expect(bad('token_k2', '-1')).toThrow(/rollout_rs_threshold/);
  });
});

describe('AReaL rejection_sampling (areal/utils/functional/functional.py apply_rejection_sampling)', () => {
  it('kl_k3 at token level uses AReaL k3 = e^(−δ) − 1 + δ and weighs kept tokens by the raw ratio e^δ', () => {
    // AReaL k3: δ = 0.5 → 0.1065 > 0.1 (rejected), δ = −0.5 → 0.1487 (rejected); veRL's k3 would swap them
    const r = run({ name: 'rejection_sampling', metric: 'kl_k3', upper: 0.1 });
    expect(Array.from(r.value.lossMask)).toEqual([0, 1, 1, 0, 1, 0]);
    expect(r.value.weights[1]).toBeCloseTo(E(-0.1), 15);
    expect(r.value.weights[4]).toBe(1);
    // rejected tokens stay in the denominator (loss_mask_count of the original mask, l.484–488)
    expect(Array.from(r.value.denominatorMask)).toEqual([1, 1, 1, 1, 1, 0]);
    expect(r.metrics['rollout_corr/rejection_sampling/filtered_fraction']).toBe(2 / 5);
    const upper = run({ name: 'rejection_sampling', metric: 'kl_k3', upper: 0.12 });
    expect(Array.from(upper.value.lossMask)).toEqual([1, 1, 1, 0, 1, 0]);
  });

  it('ratio at sequence level: the geometric-mean row ratio is both the test and the weight', () => {
    // row 0: exp((0.5 − 0.1 + 0)/3) = 1.1426 > 1.1 → masked; row 1: exp(−0.25) = 0.7788 ∈ [0.75, 1.1]
    const r = run({ name: 'rejection_sampling', level: 'sequence', upper: 1.1, lower: 0.75 });
    expect(Array.from(r.value.lossMask)).toEqual([0, 0, 0, 1, 1, 0]);
    expect(r.value.weights[3]).toBeCloseTo(E(-0.25), 15);
    expect(r.value.weights[4]).toBeCloseTo(E(-0.25), 15);
    // agg sum: row 1 exp(−0.5) = 0.607 < 0.75 → masked as well, row 0 exp(0.4) = 1.49 > 1.1
    expect(
      Array.from(
        run({ name: 'rejection_sampling', level: 'sequence', agg: 'sum', upper: 1.1, lower: 0.75 }).value.lossMask,
      ),
    ).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it('clamp truncates the weight into [lower, upper] and masks nothing', () => {
    const r = run({ name: 'rejection_sampling', action: 'clamp', upper: 1.5, lower: 0.7 });
    expect(Array.from(r.value.lossMask)).toEqual([1, 1, 1, 1, 1, 0]);
    [1.5, E(-0.1), 1, 0.7, 1, 0].forEach((w, k) => expect(r.value.weights[k]).toBeCloseTo(w, 15));
    expect(r.metrics['rollout_corr/rejection_sampling/filtered_fraction']).toBe(2 / 5);
    // sequence clamp with agg sum: row 0 exp(0.4) > 1.1 → its geometric weight 1.1426 is clamped to 1.1
    const s = run({ name: 'rejection_sampling', level: 'sequence', agg: 'sum', action: 'clamp', upper: 1.1 });
    expect(s.value.weights[0]).toBe(1.1);
    expect(s.value.weights[3]).toBeCloseTo(E(-0.25), 15);
  });

  it('KPop (metric binary_kl): max of the two Bernoulli KLs of p_old and p_roll (l.248–258, l.440–449)', () => {
    const bkl = (p: number, q: number) => p * L(p / q) + (1 - p) * L((1 - p) / (1 - q));
    const stat = (o: number, r: number) => Math.max(bkl(E(o), E(r)), bkl(E(r), E(o)));
    const s0 = stat(-1, -1.5); // 0.0536
    const s3 = stat(-1.5, -1.0);
    expect(s0).toBeCloseTo(0.05356, 4);
    const upper = Math.min(s0, s3) - 1e-6;
    const r = run({ name: 'rejection_sampling', metric: 'binary_kl', upper });
    expect(Array.from(r.value.lossMask)).toEqual([0, stat(-2, -1.9) <= upper ? 1 : 0, 1, 0, 1, 0]);
  });

  it('validates as AReaL RejectionSamplingConfig.__post_init__', () => {
    expect(() => resolveConfig({ correction: { name: 'rejection_sampling', upper: 1 } })).toThrow(
      /config\.correction\.upper: must be > 1 for metric 'ratio'/,
    );
    expect(() =>
      resolveConfig({ correction: { name: 'rejection_sampling', metric: 'kl_k2', action: 'clamp', upper: 1 } }),
    ).toThrow(/config\.correction\.action/);
    expect(() => resolveConfig({ correction: { name: 'rejection_sampling', upper: 2, lower: 3 } })).toThrow(
      /config\.correction\.lower: must be <= upper/,
    );
  });
});

describe('NeMo-RL seq_logprob_error_threshold (grpo.py compute_and_apply_seq_logprob_error_masking)', () => {
  it('keeps a row iff mean_t e^|δ| ≤ threshold; metrics under NeMo-RL names', () => {
    // row 0: (e^0.5 + e^0.1 + 1)/3 = 1.2839; row 1: (e^0.5 + 1)/2 = 1.3244
    const e0 = (E(0.5) + E(0.1) + 1) / 3;
    const e1 = (E(0.5) + 1) / 2;
    const r = run({ name: 'seq_logprob_error_threshold', threshold: 1.3 });
    expect(Array.from(r.value.lossMask)).toEqual([1, 1, 1, 0, 0, 0]);
    expect(Array.from(r.value.denominatorMask)).toEqual([1, 1, 1, 0, 0, 0]);
    const m = (k: string) => r.metrics[`rollout_corr/seq_logprob_error_threshold/${k}`];
    expect(m('max_seq_mult_prob_error')).toBeCloseTo(e1, 15);
    expect(m('min_seq_mult_prob_error')).toBeCloseTo(e0, 15);
    expect(m('mean_seq_mult_prob_error_after_mask')).toBeCloseTo(e0, 15);
    expect(m('num_masked_seqs')).toBe(1);
    expect(resolveConfig({ correction: { name: 'seq_logprob_error_threshold' } }).correction[0]).toMatchObject({
      threshold: 2,
    });
  });
});

describe('slime tis_batch_normalize at sequence level (examples/train_infer_mismatch_helper/mis.py l.273–297)', () => {
  it('divides by the mean over all B rows of the row means, an empty row counting 0', () => {
    const i3 = corrInput(
      [
        [-1, -1],
        [-1, -1],
        [-1, -1],
      ],
      [
        [-1.2, -1.2],
        [-0.9, -0.9],
        [-1, -1],
      ],
      [
        [1, 1],
        [1, 0],
        [0, 0],
      ],
    );
    const chain = (level: string) =>
      applyCorrection(
        i3,
        resolveConfig({ correction: [{ name: 'token-is' }, { name: 'batch-norm', level }] }).correction,
      );
    const mu = (E(0.2) + E(-0.1) + 0) / 3;
    expect(chain('slime-sequence').metrics['rollout_corr/batch-norm/factor']).toBeCloseTo(mu, 15);
    expect(chain('slime-sequence').value.weights[0]).toBeCloseTo(E(0.2) / mu, 14);
    // veRL leaves the empty row out
    expect(chain('sequence').metrics['rollout_corr/batch-norm/factor']).toBeCloseTo((E(0.2) + E(-0.1)) / 2, 15);
  });
});

/** One-row-per-sequence estimate with given advantages (token-level rows). */
function est(
  theta: number[][],
  old: number[][],
  roll: number[][],
  adv: number[][],
  config: object,
  rewards?: number[],
) {
  const mask = theta.map((r) => r.map(() => 1));
  return estimateJson({
    logpTheta: theta,
    logpOld: old,
    logpRollout: roll,
    mask,
    ...(rewards ? { rewards } : { advantages: adv }),
    config,
  });
}

describe('policy losses of 2026', () => {
  it('CISPO anchored on the rollout (SkyRL cispo_anchor, ppo_utils.py l.769–784): r = π_θ/π_roll', () => {
    const out = est([[-1.0]], [[-1.0]], [[-1.5]], [[2]], {
      loss: { name: 'cispo', anchor: 'rollout', epsLow: 1, epsHigh: 0.5 },
    });
    // r = e^0.5 = 1.65 → clamp at 1.5; L = −1.5·2·ℓθ, grad −3
    expect(out.loss).toBeCloseTo(-1.5 * 2 * -1.0, 15);
    expect(out.gradLogpTheta[0]![0]).toBeCloseTo(-3, 15);
    // anchored on ℓold r = 1: L = −2·ℓθ
    expect(est([[-1.0]], [[-1.0]], [[-1.5]], [[2]], { loss: { name: 'cispo' } }).loss).toBeCloseTo(2, 15);
  });

  it('GMPO (veRL geo_mean, core_algos.py l.1968–1983): exp of the mean sign-clipped log-ratio times −Ā', () => {
    // A = +1: lr = [0.3, −0.1] → clipped [min(0.3, 0.2), min(−0.1, −0.1)] = [0.2, −0.1] → ratio e^(0.1/2)
    const out = est([[-0.7, -2.1]], [[-1.0, -2.0]], [[-1.0, -2.0]], [[1, 1]], { loss: { name: 'geo_mean' } });
    const n = 2 + 1e-8;
    expect(out.loss).toBeCloseTo(-(2 / n) * E(0.1 / n), 14);
    // the clipped token has no gradient; the other −Ā·ratio/n (seq-mean-token-mean, one row: c = 1/2 per token, Σ c = 1)
    expect(out.gradLogpTheta[0]![0]).toBe(0);
    expect(out.gradLogpTheta[0]![1]).toBeCloseTo((-(2 / n) * E(0.1 / n)) / n, 14);
    expect(out.metrics['actor/pg_clipfrac']).toBe(1 / 2);
    // A = −1: lr = −0.3 is clipped at −0.2 (σ·lr = 0.3 > σ·clamp = 0.2 → the clamp is kept)
    const neg = est([[-1.3]], [[-1.0]], [[-1.0]], [[-1]], { loss: { name: 'geo_mean' } });
    expect(neg.loss).toBeCloseTo((1 / (1 + 1e-8)) * E(-0.2 / (1 + 1e-8)), 14);
    expect(neg.metrics['actor/pg_clipfrac_lower']).toBe(1);
  });

  it('LUSPO (TRL grpo_trainer.py l.3143–3148): Σ_i n_i·L_i / B with the uncapped sequence ratio', () => {
    // rows of lengths 2 and 1; s_0 = e^(0.05), s_1 = e^(−0.1); ε = 0.2 keeps both unclipped
    const theta = [
      [-0.9, -2.0],
      [-1.1, -5],
    ];
    const old = [
      [-1.0, -2.0],
      [-1.0, -5],
    ];
    const mask = [
      [1, 1],
      [1, 0],
    ];
    const out = estimateJson({
      logpTheta: theta,
      logpOld: old,
      logpRollout: old,
      mask,
      advantages: [1, -1],
      config: { loss: { name: 'luspo', epsLow: 0.2, epsHigh: 0.2 } },
    });
    expect(out.loss).toBeCloseTo((2 * -E(0.05) + 1 * E(-0.1)) / 2, 14);
    // no cap at 10: mean log-ratio 12 gives e^12 (gspo would cap it at e^10)
    const big = est([[11]], [[-1]], [[-1]], [[-1]], { loss: { name: 'luspo', epsLow: 100, epsHigh: 1e9 } });
    expect(big.loss).toBeCloseTo(E(12), 6);
  });

  it('VESPO (TRL get_gamma_weights, l.2943–2991): L = −φ(w)·A·ℓθ with φ = e^(λ + k log w − λw)', () => {
    // row log w = 0.1 + 0.2 = 0.3, A ≥ 0: k = 2, λ = 3
    const out = est([[-0.9, -1.8]], [[-1.0, -2.0]], [[-1.0, -2.0]], [[1, 1]], {
      loss: { name: 'vespo' },
      aggregation: 'token-mean',
    });
    const phi = E(3 + 2 * 0.3 - 3 * E(0.3));
    expect(out.loss).toBeCloseTo((-phi * -0.9 + -phi * -1.8) / 2, 14);
    expect(out.gradLogpTheta[0]![0]).toBeCloseTo(-phi / 2, 14);
    // A < 0: k = 3, λ = 2; φ(1) = 1
    const at1 = est([[-1.0]], [[-1.0]], [[-1.0]], [[-1]], { loss: { name: 'vespo' } });
    expect(at1.gradLogpTheta[0]![0]).toBeCloseTo(1, 15);
  });

  it('TOPR (ROLL agentic_actor_pg_worker.py l.260–330): SFT for reward > 0, clamp(r, 0, 1)-weighted REINFORCE otherwise', () => {
    // rewards [1, 0] in one group: GRPO advantages ±0.7071; row 1 r = e^0.5 → clamped to 1; row 0 no ratio
    const theta = [[-0.5], [-0.5]];
    const old = [[-1.0], [-1.0]];
    const out = estimateJson({
      logpTheta: theta,
      logpOld: old,
      logpRollout: old,
      mask: [[1], [1]],
      rewards: [1, 0],
      config: { loss: { name: 'topr', negativeWeight: 0.5 } },
    });
    const a = out.advantages[0]![0]!;
    expect(out.gradLogpTheta[0]![0]).toBeCloseTo(-a / 2, 15);
    expect(out.gradLogpTheta[1]![0]).toBeCloseTo((-0.5 * 1 * -a) / 2, 15);
    // r < 1 tapers: ℓθ − ℓold = −0.5
    const low = estimateJson({
      logpTheta: [[-1.5]],
      logpOld: [[-1.0]],
      logpRollout: [[-1.0]],
      mask: [[1]],
      advantages: [-1],
      config: { loss: { name: 'topr' } },
    });
    expect(low.gradLogpTheta[0]![0]).toBeCloseTo(E(-0.5), 15);
  });
});

describe('the 2026 stages against central differences', () => {
  it('rollout_rs and rejection_sampling under PPO and CISPO', () => {
    const batch = fixedBatch(401, 4, 5, 0.3);
    const chains: object[][] = [
      [{ name: 'rollout_rs', rollout_rs: 'token_k1,seq_mean_k3', rollout_rs_threshold: '0.8_1.25,0.02' }],
      [{ name: 'rejection_sampling', metric: 'kl_k2', upper: 0.02 }],
      [{ name: 'rejection_sampling', level: 'sequence', action: 'clamp', upper: 1.05, lower: 0.95 }],
      [{ name: 'rejection_sampling', metric: 'binary_kl', upper: 0.002 }],
    ];
    chains.push(
      [{ name: 'seq_logprob_error_threshold', threshold: 1.12 }],
      [
        { name: 'tis', C: 1.2 },
        { name: 'batch-norm', level: 'slime-sequence' },
      ],
    );
    for (const correction of chains) {
      for (const loss of [{ name: 'ppo-clip' }, { name: 'cispo' }]) {
        for (const aggregation of ['token-mean', 'seq-mean-token-mean'])
          fdCheck(batch, { correction, loss, aggregation, kl: { name: 'k3', coef: 0.3 } }, 1e-6, 2e-7);
      }
    }
  });
});

describe('the 2026 losses against central differences', () => {
  it('every new loss under a token-weight chain, every aggregation, with and without KL', () => {
    const batch = fixedBatch(402, 4, 5, 0.3);
    const losses = [
      { name: 'cispo', anchor: 'rollout' },
      { name: 'geo_mean' },
      { name: 'luspo', epsLow: 0.5, epsHigh: 0.5 },
      { name: 'vespo' },
      { name: 'topr' },
    ];
    for (const loss of losses) {
      for (const aggregation of [
        'token-mean',
        'seq-mean-token-sum',
        'seq-mean-token-mean',
        'seq-mean-token-sum-norm',
        'slime-per-token',
      ]) {
        for (const kl of [null, { name: 'k3', coef: 0.3 }]) {
          fdCheck(
            batch,
            { correction: [{ name: 'tis', C: 1.2 }], loss, aggregation, ...(kl ? { kl } : {}) },
            1e-6,
            2e-7,
          );
        }
      }
    }
  });
});

describe("AReaL's log-linear proximal policy (actor.py compute_prox_logp_approximations l.768–830)", () => {
  it('replaces ℓold by ℓroll + α(sg[ℓθ] − ℓroll), α = (k − 1)/k, for the stages and the loss', () => {
    // k = 4: α = 0.75; ℓprox = −1.2 + 0.75·(−1.0 + 1.2) = −1.05; r = e^(−1.0 + 1.05) = e^0.05
    const out = estimateJson({
      logpTheta: [[-1.0]],
      logpOld: [[-7]],
      logpRollout: [[-1.2]],
      mask: [[1]],
      advantages: [1],
      config: { proxLogp: { method: 'loglinear', versionLag: 4 }, correction: { name: 'token-is' } },
    });
    // token-is weight e^(ℓprox − ℓroll) = e^0.15; ppo-clip gradient −A·w·r (r inside the band)
    expect(out.weights[0]![0]).toBeCloseTo(E(0.15), 14);
    expect(out.gradLogpTheta[0]![0]).toBeCloseTo(-E(0.15) * E(0.05), 14);
    // k = 1 (and 0): α = 0, ℓprox = ℓroll
    const k1 = estimateJson({
      logpTheta: [[-1.0]],
      logpOld: [[-7]],
      logpRollout: [[-1.2]],
      mask: [[1]],
      advantages: [1],
      config: { proxLogp: { method: 'loglinear', versionLag: 1 } },
    });
    expect(k1.loss).toBeCloseTo(-Math.min(E(0.2), 1.2), 14);
    expect(() => resolveConfig({ proxLogp: { method: 'loglinear', versionLag: 1.5 } })).toThrow(
      /config\.proxLogp\.versionLag/,
    );
  });

  it('against central differences (ℓprox held at the detached ℓθ)', () => {
    const batch = fixedBatch(403, 4, 5, 0.3);
    for (const aggregation of ['token-mean', 'seq-mean-token-mean']) {
      fdCheck(
        batch,
        {
          proxLogp: { method: 'loglinear', versionLag: 3 },
          correction: [{ name: 'rejection_sampling', upper: 1.5 }],
          loss: { name: 'ppo-clip' },
          aggregation,
          kl: { name: 'k3', coef: 0.3 },
        },
        1e-6,
        2e-7,
      );
    }
  });
});
