// Parity with veRL where qrl-sim used to differ: each expected value is computed by hand from veRL's formula.
// Not a copy of veRL: sources are cited as verl-project/verl@1dda039b9 (file, line) beside each case.

import { describe, expect, it } from 'vitest';
import { applyCorrection, estimateJson, mismatchDiagnostics, resolveConfig } from '../../src/rl/index.js';
import { drgrpoAdvantage, grpoAdvantage } from '../../src/rl/advantages.js';
import { corrInput, flat } from './helpers.js';

const E = Math.exp;
const input = (rewards: number[], groups: (string | number)[]) => ({ rewards: Float64Array.from(rewards), groups });

describe('1. singleton groups', () => {
  // verl core_algos.py l.315–317: a group of one gets mean 0, std 1; l.325–328: A = (R − 0)/(1 + eps) or R − 0
  it("grpo with singleton: 'verl' gives R/(1 + eps); the default gives 0", () => {
    const rewards = [3, 1, 0];
    const groups = [0, 1, 1];
    expect(grpoAdvantage(input(rewards, groups), { eps: 1e-6, singleton: 'verl' }).value[0]).toBe(3 / (1 + 1e-6));
    expect(grpoAdvantage(input(rewards, groups), { eps: 1e-6 }).value[0]).toBe(0);
    // the other group is unchanged by the rule: (1 − 0.5)/(√0.5 + 1e-6)
    expect(grpoAdvantage(input(rewards, groups), { eps: 1e-6, singleton: 'verl' }).value[1]).toBeCloseTo(
      0.5 / (Math.sqrt(0.5) + 1e-6),
      14,
    );
  });

  it("drgrpo with singleton: 'verl' gives R (norm_adv_by_std_in_grpo = false)", () => {
    expect(drgrpoAdvantage(input([3, 1, 0], [0, 1, 1]), { singleton: 'verl' }).value[0]).toBe(3);
    expect(drgrpoAdvantage(input([3, 1, 0], [0, 1, 1]), {}).value[0]).toBe(0);
  });

  it('the option is in the config schema', () => {
    expect(resolveConfig({ advantage: { name: 'grpo', singleton: 'verl' } }).advantage).toEqual({
      name: 'grpo',
      eps: 1e-6,
      singleton: 'verl',
    });
    expect(() => resolveConfig({ advantage: { name: 'grpo', singleton: 'one' } })).toThrow(
      /config\.advantage\.singleton/,
    );
  });
});

/** One-row batch helper for the loss-metric cases. */
function lossJson(
  logpTheta: number[],
  logpOld: number[],
  logpRollout: number[],
  adv: number[],
  config: object,
  mask?: number[],
) {
  return estimateJson({
    logpTheta: [logpTheta],
    logpOld: [logpOld],
    logpRollout: [logpRollout],
    mask: [mask ?? logpTheta.map(() => 1)],
    advantages: [adv],
    config,
  });
}

describe('2. CISPO actor/ppo_kl clamps the log-ratio to ±20', () => {
  it('ppo_kl = mean(−clamp(ℓθ − ℓold, ±20)) (core_algos.py l.2068–2072)', () => {
    // log-ratios 25 (clamped to 20) and 0.1
    const out = lossJson([-1, -1.9], [-26, -2], [-26, -2], [1, 1], { loss: { name: 'cispo' } });
    expect(out.metrics['actor/ppo_kl']).toBeCloseTo((-20 - 0.1) / 2, 13);
    // pg_clipfrac: r ≠ clip(r) on the first token only (l.2086); pg_clipfrac_lower is 0 (l.2097)
    expect(out.metrics['actor/pg_clipfrac']).toBe(0.5);
    expect(out.metrics['actor/pg_clipfrac_lower']).toBe(0);
  });
});

describe('3. IcePop: loss metrics over every valid token', () => {
  it('pg_clipfrac and ppo_kl average over the response mask, zero-weight tokens included', () => {
    // IcePop zeroes the weight of token 0 (ρ = e^2 > hi = 5) and keeps response_mask
    // (rollout_corr_helper.py l.599–604); vanilla PPO then averages over response_mask (core_algos.py l.1338–1357).
    // Token log-ratios ℓθ − ℓold: 0.5 (clipped, A > 0), 0.1, −0.1.
    const out = lossJson([-0.5, -1.9, -3.1], [-1, -2, -3], [-3, -2, -3], [1, 1, 1], {
      correction: { name: 'icepop' },
      loss: { name: 'ppo-clip' },
    });
    expect(out.mask[0]).toEqual([0, 1, 1]);
    expect(out.metrics['actor/pg_clipfrac']).toBeCloseTo(1 / 3, 15);
    expect(out.metrics['actor/ppo_kl']).toBeCloseTo((-0.5 - 0.1 + 0.1) / 3, 15);
  });
});

describe('4. every token rejected: the loss metrics are 0, not absent', () => {
  it('verl masked_mean over an empty mask is 0/(0 + 1e-8) = 0 (torch_functional.py l.294–308)', () => {
    for (const loss of ['ppo-clip', 'cispo', 'gspo', 'sapo']) {
      // seq-level MIS with C = 1.01 rejects both tokens (ρ_seq = e^0.2) from numerator and denominator
      const out = lossJson([-1, -1], [-1, -1], [-1.1, -1.1], [1, 1], {
        correction: { name: 'mis-seq', C: 1.01 },
        loss: { name: loss },
      });
      expect(out.mask[0]).toEqual([0, 0]);
      for (const name of ['actor/pg_clipfrac', 'actor/ppo_kl', 'actor/pg_clipfrac_lower'])
        expect(out.metrics[name], `${loss} ${name}`).toBe(0);
      expect(out.loss).toBe(0);
    }
  });
});

describe('5. veRL metric names carry veRL meanings', () => {
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
  const inp = corrInput(OLD, ROLL, MASK);
  const spec = (s: object) => resolveConfig({ correction: s }).correction;

  it('token TIS: rollout_is_* as verl compute_is_metrics (rollout_corr_helper.py l.719–783)', () => {
    const m = applyCorrection(
      inp,
      spec([
        { name: 'tis', C: 1.2 },
        { name: 'rs-k3', level: 'token', hi: 0.1 },
      ]),
    ).metrics;
    const w = [1.2, E(-0.1), 1, E(-0.5), 1]; // min(ρ, C) over the original mask (the k3 rejection does not enter)
    const mean = w.reduce((a, b) => a + b) / 5;
    expect(m['rollout_corr/rollout_is_mean']).toBeCloseTo(mean, 14);
    expect(m['rollout_corr/rollout_is_max']).toBe(1.2);
    expect(m['rollout_corr/rollout_is_min']).toBeCloseTo(E(-0.5), 15);
    // raw ρ above C (e^0.5) and below 1/C (e^−0.5 < 0.833)
    expect(m['rollout_corr/rollout_is_ratio_fraction_high']).toBe(1 / 5);
    expect(m['rollout_corr/rollout_is_ratio_fraction_low']).toBe(1 / 5);
    const m2 = w.reduce((a, b) => a + b * b, 0) / 5;
    expect(m['rollout_corr/rollout_is_std']).toBeCloseTo(Math.sqrt(m2 - mean * mean), 14);
    expect(m['rollout_corr/rollout_is_eff_sample_size']).toBeCloseTo(1 / (m2 / (mean + 1e-8) ** 2), 12);
    const row0 = (1.2 + E(-0.1) + 1) / 3;
    const row1 = (E(-0.5) + 1) / 2;
    expect(m['rollout_corr/rollout_is_seq_mean']).toBeCloseTo((row0 + row1) / 2, 14);
    expect(m['rollout_corr/rollout_is_seq_std']).toBeCloseTo(Math.abs(row0 - row1) / Math.sqrt(2), 14);
    expect(m['rollout_corr/rollout_is_seq_max_deviation']).toBeCloseTo(1 - row1, 14);
    // raw row means: (e^0.5 + e^−0.1 + 1)/3 = 1.18 < C; (e^−0.5 + 1)/2 = 0.80 < 1/C
    expect(m['rollout_corr/rollout_is_seq_fraction_high']).toBe(0);
    expect(m['rollout_corr/rollout_is_seq_fraction_low']).toBe(1 / 2);
  });

  it('sequence TIS: max/min from the row log-ratio sums, fractions over all B rows (l.702–718)', () => {
    const m = applyCorrection(inp, spec({ name: 'seq-tis', C: 1.4 })).metrics;
    // row sums 0.4 and −0.5
    expect(m['rollout_corr/rollout_is_max']).toBeCloseTo(E(0.4), 15);
    expect(m['rollout_corr/rollout_is_min']).toBeCloseTo(E(-0.5), 15);
    expect(m['rollout_corr/rollout_is_ratio_fraction_high']).toBe(0.5); // 0.4 > log 1.4 = 0.336
    expect(m['rollout_corr/rollout_is_ratio_fraction_low']).toBe(0.5); // −0.5 < −0.336
    expect(m['rollout_corr/rollout_is_mean']).toBeCloseTo((3 * 1.4 + 2 * E(-0.5)) / 5, 14);
  });

  it('icepop: rollout_is_oob_ratio and the zeroed weights in std/ESS (l.599–621, l.741–759)', () => {
    const m = applyCorrection(inp, spec({ name: 'icepop', lo: 0.7, hi: 1.5 })).metrics;
    expect(m['rollout_corr/rollout_is_oob_ratio']).toBe(2 / 5);
    const w = [0, E(-0.1), 1, 0, 1];
    const mean = w.reduce((a, b) => a + b) / 5;
    const m2 = w.reduce((a, b) => a + b * b, 0) / 5;
    expect(m['rollout_corr/rollout_is_mean']).toBeCloseTo(mean, 14);
    expect(m['rollout_corr/rollout_is_std']).toBeCloseTo(Math.sqrt(m2 - mean * mean), 14);
    expect(m['rollout_corr/rollout_is_min']).toBe(0);
  });

  it('sequence-level rejection: fraction_high counts sequences, token_fraction_high tokens (compute_rs_metrics l.468–482)', () => {
    // seq-mean k3 per row: (k3(0.5) + k3(−0.1) + 0)/3 and (k3(−0.5) + 0)/2
    const k3 = (x: number) => E(x) - 1 - x;
    const r0 = (k3(0.5) + k3(-0.1)) / 3;
    const r1 = k3(-0.5) / 2;
    expect(r0).toBeLessThan(0.052);
    expect(r1).toBeGreaterThan(0.052);
    const m = applyCorrection(inp, spec({ name: 'rs-k3', level: 'seq-mean', hi: 0.052 })).metrics;
    expect(m['rollout_corr/rs-k3-seq-mean/fraction_high']).toBe(1 / 2);
    expect(m['rollout_corr/rs-k3-seq-mean/token_fraction_high']).toBe(2 / 5);
    expect(m['rollout_corr/rs-k3-seq-mean/seq_mean']).toBeCloseTo((r0 + r1) / 2, 15);
    expect(m['rollout_corr/rs-k3-seq-mean/seq_std']).toBeCloseTo(Math.abs(r0 - r1) / Math.sqrt(2), 15);
    // std (l.484–496): population std over tokens of the statistic clamped to [0, hi]
    const c = [r0, r0, r0, 0.052, 0.052];
    const cm = c.reduce((a, b) => a + b) / 5;
    expect(m['rollout_corr/rs-k3-seq-mean/std']).toBeCloseTo(
      Math.sqrt(c.reduce((a, b) => a + b * b, 0) / 5 - cm * cm),
      13,
    );
  });

  it("per-sequence diagnostics: emptyRows 'verl' averages over all B rows (rollout_corr_helper.py l.946–1008)", () => {
    const shape = { B: 2, T: 2 };
    const d = {
      shape,
      logpOld: flat([
        [-1, -2],
        [-5, -5],
      ]),
      logpRollout: flat([
        [-1.2, -2],
        [-5, -5],
      ]),
      responseMask: flat([
        [1, 1],
        [0, 0],
      ]),
    };
    const skip = mismatchDiagnostics(d).metrics;
    const verl = mismatchDiagnostics({ ...d, emptyRows: 'verl' }).metrics;
    expect(skip['rollout_corr/training_ppl']).toBeCloseTo(E(1.5), 14);
    expect(verl['rollout_corr/training_ppl']).toBeCloseTo((E(1.5) + 1) / 2, 14);
    expect(verl['rollout_corr/log_ppl_diff']).toBeCloseTo(-0.1 / 2, 14);
    expect(verl['rollout_corr/log_ppl_diff_max']).toBe(0);
    expect(verl['rollout_corr/chi2_seq']).toBeCloseTo((E(0.4) + 1) / 2 - 1, 14);
  });
});

describe('6. RS mask on the policy loss only, KL over the full response mask', () => {
  it("kl.mask: 'response' aggregates the KL over the response mask (workers/utils/losses.py l.132–141; core_algos.py l.2513–2536)", () => {
    // token 2 rejected by token k1 (ρ = e^−1 outside [0.5, 2]); reinforce, token-mean, k1 KL coef 0.5
    const out = estimateJson({
      logpTheta: [[-1, -2, -3]],
      logpOld: [[-1, -2, -3]],
      logpRollout: [[-1, -2, -2]],
      logpRef: [[-1.5, -2, -3.3]],
      mask: [[1, 1, 1]],
      advantages: [1],
      config: {
        correction: { name: 'rs-k1', level: 'token', lo: 0.5, hi: 2 },
        loss: { name: 'reinforce' },
        aggregation: 'token-mean',
        kl: { name: 'k1', coef: 0.5, mask: 'response' },
      },
    });
    // pg: (1 + 2)/2 over the two kept tokens; KL: (0.5 + 0 + 0.3)/3 over all three
    expect(out.metrics['actor/pg_loss']).toBeCloseTo(1.5, 15);
    expect(out.metrics['actor/kl_loss']).toBeCloseTo(0.8 / 3, 15);
    expect(out.loss).toBeCloseTo(1.5 + 0.5 * (0.8 / 3), 15);
    out.gradLogpTheta[0]!.forEach((g, k) => expect(g).toBeCloseTo([-0.5 + 0.5 / 3, -0.5 + 0.5 / 3, 0.5 / 3][k]!, 15));
  });
});
