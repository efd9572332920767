// Parity with prime-rl's loss classes after the class refactor (trainer/rl/loss.py: IPOLoss, IcePopLoss,
// PPOLoss, CISPOLoss; config IPOLossConfig … CISPOLossConfig), hand-computed from those lines. prime-rl's
// ratio is π_train/π_inference with no separate π_old: qrl-sim's setting is ℓold = ℓroll (so its
// correction weights are 1) except for IcePop, whose band lives in qrl-sim's correction stage (there
// ℓold carries the trainer's detached ℓ, the first step of a batch). Gradients are prime-rl's per-token
// ∂(Σ loss)/∂ℓθ divided by the token count (rl_scale), which is qrl-sim's token-mean.
import { describe, expect, it } from 'vitest';
import { estimateJson } from '../../src/rl/index.js';
import { fdCheck, fixedBatch } from './helpers.js';

const L = Math.log;

function one(theta: number[], old: number[], roll: number[], adv: number[], config: object) {
  return estimateJson({
    logpTheta: [theta],
    logpOld: [old],
    logpRollout: [roll],
    mask: [theta.map(() => 1)],
    advantages: [adv],
    config: { aggregation: 'token-mean', ...config },
  });
}

describe('prime-rl IPOLoss (|Δp| > eps mask, capped ratio max_importance_ratio)', () => {
  // p = 1e-3 vs q = 1e-8 (|Δp| ≈ 1e-3 kept, r = 1e5 capped at 1e4); 0.65 vs 0.3 (|Δp| = 0.35 > 0.3 masked);
  // 0.5 vs 0.4 (kept, r = 1.25, A = −1)
  const th = [L(1e-3), L(0.65), L(0.5)];
  const inf = [L(1e-8), L(0.3), L(0.4)];
  const adv = [1, 1, -1];
  const cfg = { loss: { name: 'ipo', threshold: 0.3, c: 1e4 } };

  it('gradient −A·min(r, max_importance_ratio) on kept tokens, 0 on masked ones; is_masked = pg_clipfrac', () => {
    const out = one(th, inf, inf, adv, cfg);
    const g = out.gradLogpTheta[0]!;
    // _capped_importance_ratio: exp(clamp(sg lr, log M) + lr − sg lr) has derivative min(r, M)
    expect(g[0]).toBeCloseTo((-1 * 1e4) / 3, 8);
    expect(g[1]).toBe(0);
    expect(g[2]).toBeCloseTo((1 * 1.25) / 3, 12);
    expect(out.metrics['actor/pg_clipfrac']).toBeCloseTo(1 / 3, 15);
  });

  it('the 559b447 defaults (threshold 0.1, c 20) cap the kept ratio at 20 instead', () => {
    const old = one(th, inf, inf, adv, { loss: { name: 'ipo' } });
    const g = old.gradLogpTheta[0]!;
    expect(g[0]).toBeCloseTo(-20 / 3, 12);
    expect(g[1]).toBe(0);
    // |0.5 − 0.4| = 0.1 is not > 0.1: kept under both
    expect(g[2]).toBeCloseTo(1.25 / 3, 12);
  });
});

describe('prime-rl IcePopLoss (ratio band [ratio_low, ratio_high] = [0.2, 5])', () => {
  it("= icepop correction with lo 0.2, hi 5 and loss reinforce, ℓold carrying the trainer's ℓ", () => {
    // r = πθ/π_inf: 0.5/0.05 = 10 (masked high), 0.3/0.5 = 0.6 (kept), 0.01/0.1 = 0.1 (masked low)
    const th = [L(0.5), L(0.3), L(0.01)];
    const inf = [L(0.05), L(0.5), L(0.1)];
    const out = one(th, th, inf, [1, -1, 1], {
      loss: { name: 'reinforce' },
      correction: { name: 'icepop', lo: 0.2, hi: 5 },
    });
    const g = out.gradLogpTheta[0]!;
    expect(g[0]).toBe(0);
    expect(g[1]).toBeCloseTo((1 * 0.6) / 3, 12);
    expect(g[2]).toBe(0);
    // masked tokens stay in prime-rl's denominator (rl_scale counts loss tokens): denominator 'original'
    expect(out.metrics['rollout_corr/icepop/oob_fraction']).toBeCloseTo(2 / 3, 15);
  });
});

describe('prime-rl PPOLoss (ratio_low 0.8, ratio_high 1.2, max_importance_ratio 1e4)', () => {
  it('= ppo-clip with ℓold = ℓroll while r < 1e4: gradients of −min(A·r, A·clip(r))', () => {
    // r = 1.5 (A > 0: clipped, 0), 0.9 (A > 0: −0.9), 2 (A < 0: unclipped side, +2)
    const th = [L(0.6), L(0.36), L(0.5)];
    const inf = [L(0.4), L(0.4), L(0.25)];
    const out = one(th, inf, inf, [1, 1, -1], { loss: { name: 'ppo-clip', epsLow: 0.2, epsHigh: 0.2 } });
    const g = out.gradLogpTheta[0]!;
    expect(g[0]).toBe(0);
    expect(g[1]).toBeCloseTo(-0.9 / 3, 12);
    expect(g[2]).toBeCloseTo(2 / 3, 12);
  });
});

describe('prime-rl PPOLoss above the cap (maxImportanceRatio = max_importance_ratio 1e4)', () => {
  // r = 0.5/1e-6 = 5e5 > 1e4 with A = −1 (the unclipped side: −min(A·M, A·1.2) = M, gradient −A·M) and
  // A = +1 (clipped at 1.2, gradient 0); r = 0.55/0.5 = 1.1 inside the clip range (gradient −A·r)
  const th = [L(0.5), L(0.5), L(0.55)];
  const inf = [L(1e-6), L(1e-6), L(0.5)];
  const adv = [-1, 1, 1];
  const cfg = { loss: { name: 'ppo-clip', epsLow: 0.2, epsHigh: 0.2, maxImportanceRatio: 1e4 } };

  it('_capped_importance_ratio: the gradient −A·M above r = M, loss and is_clipped / ratio_capped as prime-rl', () => {
    const out = one(th, inf, inf, adv, cfg);
    const g = out.gradLogpTheta[0]!;
    expect(g[0]).toBeCloseTo(1e4 / 3, 8);
    expect(g[1]).toBe(0);
    expect(g[2]).toBeCloseTo(-1.1 / 3, 12);
    // per_token_loss = −min(A·min(r, M), A·clamp(min(r, M), 0.8, 1.2)): (1e4, −1.2, −1.1), summed / rl_scale 3
    expect(out.loss).toBeCloseTo((1e4 - 1.2 - 1.1) / 3, 9);
    expect(out.metrics['actor/pg_clipfrac']).toBeCloseTo(1 / 3, 15); // is_clipped
    expect(out.metrics['actor/ratio_capped']).toBeCloseTo(2 / 3, 15); // log r > log 1e4
  });

  it('without it the unclipped side keeps −A·r (r = 5e5): the documented difference the option closes', () => {
    const out = one(th, inf, inf, adv, { loss: { name: 'ppo-clip', epsLow: 0.2, epsHigh: 0.2 } });
    expect(out.gradLogpTheta[0]![0]).toBeCloseTo(5e5 / 3, 4);
    expect(out.metrics['actor/ratio_capped']).toBeUndefined();
  });

  it('straight-through: central differences with the detached point held, a cap that bites', () => {
    fdCheck(fixedBatch(5, 3, 4, 0.6), { loss: { name: 'ppo-clip', maxImportanceRatio: 1.05 } }, 1e-6, 1e-7);
    fdCheck(fixedBatch(6, 3, 4, 0.6), { loss: { name: 'ppo-clip', maxImportanceRatio: 1.5, dualClip: 3 } }, 1e-6, 1e-7);
  });
});

describe('prime-rl CISPOLoss (ratio_low 0 = no lower clip, ratio_high 5)', () => {
  it("= cispo with anchor 'rollout', epsLow 1, epsHigh 4: −sg[clamp(r, max 5)]·A·ℓθ", () => {
    // r = 0.5/0.05 = 10 → 5 (clipped); 0.2/0.25 = 0.8
    const th = [L(0.5), L(0.2)];
    const inf = [L(0.05), L(0.25)];
    const out = one(th, inf, inf, [1, -1], { loss: { name: 'cispo', anchor: 'rollout', epsLow: 1, epsHigh: 4 } });
    const g = out.gradLogpTheta[0]!;
    expect(g[0]).toBeCloseTo(-5 / 2, 12);
    expect(g[1]).toBeCloseTo(0.8 / 2, 12);
    // is_clipped: r > ratio_high (or < ratio_low when set) → qrl-sim's pg_clipfrac
    expect(out.metrics['actor/pg_clipfrac']).toBeCloseTo(1 / 2, 15);
  });
});
