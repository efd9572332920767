// What the stacks ship: hand-computed vectors for the estimators taken from veRL, TRL, prime-rl, NeMo-RL, SkyRL, ROLL, AReaL.
// Not a copy of their code: each expected value is worked out here from the cited formula (file and line).

import { describe, expect, it } from 'vitest';
import { encode } from '../../src/numerics/index.js';
import { supportLogProb } from '../../src/nn/index.js';
import { applyCorrection, estimateJson, mismatchDiagnostics, resolveConfig } from '../../src/rl/index.js';
import {
  passkAdvantage,
  reinforcePlusPlusAdvantage,
  reinforcePlusPlusBaselineAdvantage,
  rlooAdvantage,
} from '../../src/rl/advantages.js';
import { centralDifference, corrInput, flat } from './helpers.js';

const E = Math.exp;
const L = Math.log;

// δ = ℓold − ℓroll: row 0 [0.5, −0.1, 0], row 1 [−0.5, 0, padding]; advantages +1 / −1
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
const ADV = [
  [1, 1, 1],
  [-1, -1, 0],
];
const inp = corrInput(OLD, ROLL, MASK, ADV);
const run = (s: object | object[]) => applyCorrection(inp, resolveConfig({ correction: s }).correction);

describe('correction stages from the stacks', () => {
  it('two-sided truncation clamp(ρ, lo, C) (TRL grpo_trainer.py l.2596–2601, token_truncate)', () => {
    const r = run({ name: 'tis', C: 1.2, lo: 0.9 });
    const w = [1.2, E(-0.1), 1, 0.9, 1, 0];
    w.forEach((x, k) => expect(r.value.weights[k]).toBeCloseTo(x, 15));
    expect(r.metrics['rollout_corr/tis/truncated_low_fraction']).toBe(1 / 5);
    expect(() => resolveConfig({ correction: { name: 'tis', C: 1, lo: 2 } })).toThrow(
      /config\.correction\.lo: must be <= C/,
    );
  });

  it('OPSM: drop A < 0 rows whose mean(ℓroll − ℓold) > δ (TRL get_off_policy_mask, grpo_trainer.py l.2920–2938)', () => {
    // row 1: A < 0 and mean(0.5, 0) = 0.25 > 1e-4 → dropped; row 0: A > 0 → kept
    const r = run({ name: 'opsm' });
    expect(Array.from(r.value.lossMask)).toEqual([1, 1, 1, 0, 0, 0]);
    // numerator only by default (TRL multiplies per_token_loss by the mask, l.3111–3112)
    expect(Array.from(r.value.denominatorMask)).toEqual([1, 1, 1, 1, 1, 0]);
    // row 0 with A < 0: mean(−0.5, 0.1, 0) = −0.133 ≤ δ → kept
    const neg = applyCorrection(
      corrInput(OLD, ROLL, MASK, [
        [-1, -1, -1],
        [-1, -1, 0],
      ]),
      resolveConfig({ correction: { name: 'opsm' } }).correction,
    );
    expect(Array.from(neg.value.lossMask)).toEqual([1, 1, 1, 0, 0, 0]);
  });

  it('two-sided outlier veto (SkyRL outlier_token_is_threshold_low/high)', () => {
    // row 0 has ρ = e^0.5 = 1.65 (< 1.7), row 1 has ρ = e^−0.5 = 0.61 (< 0.7) → row 1 vetoed
    const r = run({ name: 'outlier-veto', lo: 0.7, hi: 1.7 });
    expect(Array.from(r.value.lossMask)).toEqual([1, 1, 1, 0, 0, 0]);
    expect(r.metrics['rollout_corr/outlier-veto/low_token_fraction']).toBe(1 / 5);
  });

  it('Δp filter on e^ℓold − e^ℓroll (ROLL train_infer_corrections.py diff_low/high)', () => {
    // Δp = [0.145, −0.014, 0, −0.145, 0]
    expect(E(-1) - E(-1.5)).toBeGreaterThan(0.1);
    expect(Array.from(run({ name: 'dp-filter', lo: -0.1, hi: 0.1 }).value.lossMask)).toEqual([0, 1, 1, 0, 1, 0]);
    expect(Array.from(run({ name: 'dp-filter', lo: -0.1, hi: 0.1, level: 'sequence' }).value.lossMask)).toEqual([
      0, 0, 0, 0, 0, 0,
    ]);
  });

  it("ROLL's aggregated Δp levels: masked mean / masked sum of Δp broadcast to the row (ROLL train_infer_corrections.py l.25, l.30, commit 8eb27cc)", () => {
    // Δp row 0 = [0.14475, −0.01423, 0] (sum 0.13052, mean 0.04351); row 1 = [−0.14475, 0] (sum
    // −0.14475, mean −0.07238); row 1's padding (Δp = e^−15 − e^−0.1 = −0.905) is outside the mask.
    const level = (name: string, lo: number, hi: number) =>
      Array.from(run({ name: 'dp-filter', lo, hi, level: name }).value.lossMask);
    expect(level('roll-geometric', -0.05, 0.1)).toEqual([1, 1, 1, 0, 0, 0]);
    expect(level('roll-geometric', -0.1, 0.1)).toEqual([1, 1, 1, 1, 1, 0]);
    expect(level('roll-sequence', -0.1, 0.14)).toEqual([1, 1, 1, 0, 0, 0]);
    // with the padding in the sum row 1 would be −1.05 and fail; ROLL's masked_sum leaves it out
    expect(level('roll-sequence', -0.2, 0.14)).toEqual([1, 1, 1, 1, 1, 0]);
    // qrl-sim's `sequence` differs: row 0's first token alone (0.145 > 0.14) rejects the row
    expect(level('sequence', -0.2, 0.14)).toEqual([0, 0, 0, 1, 1, 0]);
    // value pinned from ROLL's formula: masked_sum(e^ℓold − e^ℓinfer) (l.20, l.30), band inclusive (l.154–155)
    const rowSum = E(-1) - E(-1.5) + (E(-2) - E(-1.9)) + (E(-0.5) - E(-0.5));
    expect(rowSum).toBeCloseTo(0.1305159, 7);
    expect(level('roll-sequence', -1, rowSum)).toEqual([1, 1, 1, 1, 1, 0]);
    expect(level('roll-sequence', -1, rowSum - 1e-12)).toEqual([0, 0, 0, 1, 1, 0]);
    expect(level('roll-geometric', -1, rowSum / 3)).toEqual([1, 1, 1, 1, 1, 0]);
    expect(level('roll-geometric', -1, rowSum / 3 - 1e-12)).toEqual([0, 0, 0, 1, 1, 0]);
    expect(() => resolveConfig({ correction: { name: 'dp-filter', level: 'geometric' } })).toThrow(
      /config\.correction\.level/,
    );
  });

  it('M2PO: drop the largest δ² until the second moment is ≤ τ (AReaL m2_threshold)', () => {
    // δ² = [0.25, 0.01, 0, 0.25, 0]: M2 = 0.102 → drop index 0 (0.065) → drop index 3 (0.0033)
    const r = run({ name: 'm2po', tau: 0.04 });
    expect(Array.from(r.value.lossMask)).toEqual([0, 1, 1, 0, 1, 0]);
    expect(r.metrics['rollout_corr/m2po/m2_before']).toBeCloseTo(0.51 / 5, 15);
    expect(r.metrics['rollout_corr/m2po/m2_after']).toBeCloseTo(0.01 / 3, 15);
  });

  it('M2PO boundaries as AReaL (areal/trainer/ppo/actor.py l.835–847): stop only below τ, keep at least one token', () => {
    // δ² = [0.25, 0.25] with τ = 0.25: the mean is not < τ, so AReaL masks the largest (the first, ties
    // earliest) and then stops at one kept token although its δ² = 0.25 is still not below τ.
    const two = corrInput([[-1, -1]], [[-1.5, -0.5]], [[1, 1]]);
    const r = applyCorrection(two, resolveConfig({ correction: { name: 'm2po', tau: 0.25 } }).correction);
    expect(Array.from(r.value.lossMask)).toEqual([0, 1]);
    expect(r.metrics['rollout_corr/m2po/m2_after']).toBe(0.25);
    // with τ just above the mean nothing is masked
    const none = applyCorrection(two, resolveConfig({ correction: { name: 'm2po', tau: 0.2500001 } }).correction);
    expect(Array.from(none.value.lossMask)).toEqual([1, 1]);
  });
});

/** One-row estimate with given per-token advantages. */
function one(theta: number[], old: number[], roll: number[], adv: number[], config: object, ref?: number[]) {
  return estimateJson({
    logpTheta: [theta],
    logpOld: [old],
    logpRollout: [roll],
    ...(ref ? { logpRef: [ref] } : {}),
    mask: [theta.map(() => 1)],
    advantages: [adv],
    config,
  });
}

describe('losses on Δp (veRL dppo_tv / dppo_kl, prime-rl IPO)', () => {
  // p_θ = 0.6, p_old = 0.3: Δp = 0.3, r = 2
  const th = [L(0.6), L(0.6)];
  const old = [L(0.3), L(0.3)];
  it('dppo-tv: A > 0 with Δp > ε_high is masked, A < 0 kept; L = −A·sg(min(r, c))·ℓθ (core_algos.py l.1425–1450)', () => {
    const out = one(th, old, old, [1, -1], { loss: { name: 'dppo-tv' }, aggregation: 'token-mean' });
    expect(out.tokenLoss[0]).toEqual([0, expect.closeTo(2 * L(0.6), 14)]);
    expect(out.gradLogpTheta[0]![0]).toBe(0);
    expect(out.gradLogpTheta[0]![1]).toBeCloseTo(2 / 2, 15);
    expect(out.metrics['actor/pg_clipfrac']).toBe(0.5);
    expect(out.metrics['actor/pg_clipfrac_lower']).toBe(0);
    // c = 1.5 < r: truncated weight, and pg_clipfrac_lower counts the valid token with r > c
    const c = one(th, old, old, [1, -1], { loss: { name: 'dppo-tv', c: 1.5 }, aggregation: 'token-mean' });
    expect(c.gradLogpTheta[0]![1]).toBeCloseTo(1.5 / 2, 15);
    expect(c.metrics['actor/pg_clipfrac_lower']).toBe(0.5);
  });

  it('dppo-kl: binary KL D = q log(q/p) + (1−q) log((1−q+1e-8)/(1−p+1e-8)) (core_algos.py l.1513–1519)', () => {
    const D = 0.3 * L(0.3 / 0.6) + 0.7 * L((0.7 + 1e-8) / (0.4 + 1e-8)); // 0.1838
    expect(D).toBeGreaterThan(0.1);
    expect(D).toBeLessThan(0.2);
    const kept = one(th, old, old, [1, 1], { loss: { name: 'dppo-kl', epsHigh: 0.2 } });
    const masked = one(th, old, old, [1, 1], { loss: { name: 'dppo-kl', epsHigh: 0.1 } });
    expect(kept.metrics['actor/pg_clipfrac']).toBe(0);
    expect(masked.metrics['actor/pg_clipfrac']).toBe(1);
    // A < 0 and p ≥ q: always valid whatever the divergence
    expect(one(th, old, old, [-1, -1], { loss: { name: 'dppo-kl', epsLow: 0 } }).metrics['actor/pg_clipfrac']).toBe(0);
  });

  it('ipo: |Δp| > threshold masked for either sign (prime-rl loss.py l.177–179)', () => {
    expect(one(th, old, old, [1, -1], { loss: { name: 'ipo' } }).metrics['actor/pg_clipfrac']).toBe(1);
    expect(one(th, old, old, [1, -1], { loss: { name: 'ipo', threshold: 0.35 } }).metrics['actor/pg_clipfrac']).toBe(0);
  });
});

describe('KL corrections and the mismatch penalty', () => {
  // ℓθ = −1, ℓold = −1.2, ℓroll = −1.3, ℓref = −1.5: d = ℓθ − ℓref = 0.5, k3 = e^−0.5 − 1 + 0.5
  const k3 = E(-0.5) - 1 + 0.5;
  it("biasCorrection 'old': KL·exp(ℓθ − ℓold) with gradient through the ratio (TRL grpo_trainer.py l.3068–3076)", () => {
    const out = one(
      [-1],
      [-1.2],
      [-1.3],
      [0],
      { loss: { name: 'reinforce' }, kl: { name: 'k3', coef: 1, biasCorrection: 'old' } },
      [-1.5],
    );
    expect(out.metrics['actor/kl_loss']).toBeCloseTo(k3 * E(0.2), 15);
    expect(out.gradLogpTheta[0]![0]).toBeCloseTo((1 - E(-0.5)) * E(0.2) + k3 * E(0.2), 14);
  });
  it("biasCorrection 'rollout': KL·sg[exp(ℓθ − ℓroll)] (NeMo-RL use_on_policy_kl_approximation)", () => {
    const out = one(
      [-1],
      [-1.2],
      [-1.3],
      [0],
      { loss: { name: 'reinforce' }, kl: { name: 'k3', coef: 1, biasCorrection: 'rollout' } },
      [-1.5],
    );
    expect(out.metrics['actor/kl_loss']).toBeCloseTo(k3 * E(0.3), 15);
    expect(out.gradLogpTheta[0]![0]).toBeCloseTo((1 - E(-0.5)) * E(0.3), 14);
  });
  it('mismatch penalty τ·(ℓθ − ℓroll)² (prime-rl loss.py l.144–146, kl_tau)', () => {
    const out = one([-1], [-1.2], [-1.3], [0], { loss: { name: 'reinforce' }, mismatchPenalty: { tau: 0.5 } });
    expect(out.loss).toBeCloseTo(0.5 * 0.09, 15);
    expect(out.gradLogpTheta[0]![0]).toBeCloseTo(2 * 0.5 * 0.3, 15);
    expect(resolveConfig({ mismatchPenalty: {} }).mismatchPenalty).toEqual({ tau: 1e-3 });
  });
});

describe('advantages (veRL core_algos.py)', () => {
  const inp2 = (r: number[], g: number[], lengths?: number[]) => ({
    rewards: Float64Array.from(r),
    groups: g,
    lengths: lengths ? Float64Array.from(lengths) : undefined,
  });
  it('rloo: R·n/(n−1) − mean·n/(n−1) (l.587–636)', () => {
    const a = rlooAdvantage(inp2([1, 0, 0, 7], [0, 0, 0, 1]), {}).value;
    [1, -0.5, -0.5, 0].forEach((x, i) => expect(a[i]).toBeCloseTo(x, 15));
    expect(rlooAdvantage(inp2([1, 0, 0, 7], [0, 0, 0, 1]), { singleton: 'verl' }).value[3]).toBe(7);
  });
  it('reinforce++: returns whitened over every valid token, (x − μ)/√(var + 1e-8) (l.693–731; torch_functional.py l.311–346)', () => {
    // tokens [1, 1, 1, 0]: μ = 0.75, unbiased var = 0.25
    const a = reinforcePlusPlusAdvantage(inp2([1, 0], [0, 1], [3, 1]), {}).value;
    expect(a[0]).toBeCloseTo(0.25 / Math.sqrt(0.25 + 1e-8), 15);
    expect(a[1]).toBeCloseTo(-0.75 / Math.sqrt(0.25 + 1e-8), 15);
  });
  it('reinforce++-baseline: group mean subtracted, then whitened (l.536–584)', () => {
    const x = [0.5, -0.5, 5]; // singleton group 1 keeps R with verl's mean 0
    const mu = 5 / 3;
    const v = x.reduce((s, y) => s + (y - mu) ** 2, 0) / 2;
    const a = reinforcePlusPlusBaselineAdvantage(inp2([1, 0, 5], [0, 0, 1]), { singleton: 'verl' }).value;
    x.forEach((y, i) => expect(a[i]).toBeCloseTo((y - mu) / Math.sqrt(v + 1e-8), 14));
  });
  it('passk: only the best response gets (r_max − r_second)/(std + eps) (l.471–530)', () => {
    const r = [0.2, 1, 0.5];
    const m = (0.2 + 1 + 0.5) / 3;
    const std = Math.sqrt(r.reduce((s, y) => s + (y - m) ** 2, 0) / 2);
    const a = passkAdvantage(inp2(r, [0, 0, 0]), { normalize: true, eps: 1e-6 }).value;
    expect(Array.from(a)).toEqual([0, expect.closeTo(0.5 / (std + 1e-6), 14), 0]);
    expect(() => passkAdvantage(inp2([1, 0, 1], [0, 0, 1]), { normalize: false, eps: 0 })).toThrow(/at least 2/);
  });
  it('the new advantages are in the config schema', () => {
    for (const name of ['rloo', 'reinforce++', 'reinforce++-baseline', 'passk'])
      expect(resolveConfig({ advantage: { name } }).advantage.name).toBe(name);
  });
});

describe('bypass mode (veRL compute_policy_loss_bypass_mode, core_algos.py l.2412–2548)', () => {
  // ℓθ = [−1, −2], ℓold (ignored) = [−5, −5], ℓroll = [−1.5, −1.9]
  const base = {
    logpTheta: [[-1, -2]],
    logpOld: [[-5, -5]],
    logpRollout: [[-1.5, -1.9]],
    mask: [[1, 1]],
    advantages: [[1, 1]],
  };
  it('reinforce: weights min(exp(ℓθ − ℓroll), C) from the current policy, applied (l.2495–2526)', () => {
    const out = estimateJson({
      ...base,
      config: {
        mode: 'bypass',
        correction: { name: 'tis', C: 1.2 },
        loss: { name: 'reinforce' },
        aggregation: 'token-mean',
      },
    });
    expect(out.weights[0]).toEqual([1.2, expect.closeTo(E(-0.1), 15)]);
    expect(out.loss).toBeCloseTo((1.2 * 1 + E(-0.1) * 2) / 2, 15);
    // ppo_kl of reinforce against ℓroll (l.2400–2406)
    expect(out.metrics['actor/ppo_kl']).toBeCloseTo((-0.5 + 0.1) / 2, 15);
  });
  it('ppo-clip: ratio πθ/πroll, IS weights not applied (l.2528–2540)', () => {
    const out = estimateJson({
      ...base,
      config: {
        mode: 'bypass',
        correction: { name: 'tis', C: 1.2 },
        loss: { name: 'ppo-clip' },
        aggregation: 'token-mean',
      },
    });
    expect(out.weights[0]).toEqual([1, 1]);
    // r = e^0.5 clipped at 1.2 (A > 0), r = e^−0.1 unclipped
    expect(out.loss).toBeCloseTo((-1.2 - E(-0.1)) / 2, 15);
  });
  it('the KL defaults to the full response mask in bypass mode', () => {
    expect(resolveConfig({ mode: 'bypass', kl: { name: 'k3' } }).kl!.mask).toBe('response');
    expect(resolveConfig({ mode: 'bypass', kl: { name: 'k3', mask: 'denominator' } }).kl!.mask).toBe('denominator');
    expect(resolveConfig({ kl: { name: 'k3' } }).kl!.mask).toBe('denominator');
  });
});

describe('mismatch metrics of the stacks', () => {
  it('NeMo-RL token_mult_prob_error, gen/policy KL, JS; prime-rl masked/unmasked mismatch KL', () => {
    const shape = { B: 1, T: 2 };
    const d = mismatchDiagnostics({
      shape,
      logpOld: flat([[-1, -2]]),
      logpRollout: flat([[-1.2, -2]]),
      responseMask: flat([[1, 1]]),
      lossMask: flat([[0, 1]]),
    }).metrics;
    const k3 = (x: number) => E(x) - x - 1;
    const lm = L(0.5 * E(-1) + 0.5 * E(-1.2));
    expect(d['rollout_corr/token_mult_prob_error']).toBeCloseTo((E(0.2) + 1) / 2, 15);
    expect(d['rollout_corr/gen_kl_error']).toBeCloseTo(k3(0.2) / 2, 15);
    expect(d['rollout_corr/policy_kl_error']).toBeCloseTo(k3(-0.2) / 2, 15);
    expect(d['rollout_corr/js_divergence_error']).toBeCloseTo((0.5 * k3(-1 - lm) + 0.5 * k3(-1.2 - lm)) / 2, 15);
    expect(d['rollout_corr/masked_mismatch_kl']).toBeCloseTo(k3(0.2), 15);
    expect(d['rollout_corr/unmasked_mismatch_kl']).toBe(0);
  });
});

describe('sampling-support replay (TRL PR 7269, prime-rl PR 2601)', () => {
  it('log-prob under logits renormalised over the kept set, and its gradient against central differences', () => {
    const z = Float64Array.of(1, 2, 3, 0.5);
    const r = supportLogProb(z, [1, 2], 2, 2);
    expect(r.logp).toBeCloseTo(1.5 - L(E(1) + E(1.5)), 15);
    const fd = centralDifference((x) => supportLogProb(x, [1, 2], 2, 2).logp, z, 1e-6);
    fd.forEach((g, k) => expect(r.gradLogits[k]).toBeCloseTo(g, 9));
    expect(r.gradLogits[0]).toBe(0);
    expect(() => supportLogProb(z, [1, 2], 3)).toThrow(/not in the kept set/);
    expect(() => supportLogProb(z, [2, 1], 2)).toThrow(/strictly ascending/);
  });
});

describe('cast profiles torch-2.13 and torch-2.11 (PyTorch PR 178817 in between)', () => {
  it('E4M3FN finite overflow and ±Inf saturate to ±448 under torch-2.13, NaN stays NaN; torch-2.11 gives NaN', () => {
    expect(encode('e4m3fn', 465, { profile: 'torch-2.13' })).toBe(0x7e);
    expect(encode('e4m3fn', -1e6, { profile: 'torch-2.13' })).toBe(0xfe);
    expect(encode('e4m3fn', Infinity, { profile: 'torch-2.13' })).toBe(0x7e);
    expect(encode('e4m3fn', -Infinity, { profile: 'torch-2.13' })).toBe(0xfe);
    expect(encode('e4m3fn', Number.NaN, { profile: 'torch-2.13' })).toBe(0x7f);
    expect(encode('e4m3fn', 465, { profile: 'torch-2.11' })).toBe(0x7f);
    expect(encode('e4m3fn', Infinity, { profile: 'torch-2.11' })).toBe(0x7f);
    expect(encode('e5m2', 1e6, { profile: 'torch-2.13' })).toBe(encode('e5m2', 1e6, { profile: 'torch-2.11' }));
  });
});
