// Tests of the policy losses on hand-computed vectors (values, gradients, metrics), TBPO with the paper's bands.
// Not a source of expected numbers: every expected value is derived in the test itself.

import { describe, expect, it } from 'vitest';
import type { PolicyLossInput } from '../../src/rl/index.js';
import { losses } from '../../src/rl/index.js';
import { gspo, ppoClip, sapo, tbpo } from '../../src/rl/losses/ratio.js';
import { cispo, reinforce } from '../../src/rl/losses/score-function.js';

const E = Math.exp;

/** A one-row-per-case loss input: each token its own sequence unless rows are given. */
function lossInput(
  rows: { dTheta: number[]; adv: number[]; dOldRoll?: number[]; up?: number[] }[],
  logpOld = -1,
): PolicyLossInput {
  const T = Math.max(...rows.map((r) => r.dTheta.length));
  const B = rows.length;
  const mk = () => new Float64Array(B * T);
  const x = { theta: mk(), old: mk(), roll: mk(), adv: mk(), mask: mk(), up: mk() };
  rows.forEach((r, i) =>
    r.dTheta.forEach((dt, t) => {
      const k = i * T + t;
      x.old[k] = logpOld;
      x.theta[k] = logpOld + dt;
      x.roll[k] = logpOld - (r.dOldRoll?.[t] ?? 0);
      x.adv[k] = r.adv[t]!;
      x.mask[k] = 1;
      x.up[k] = r.up?.[t] ?? 1;
    }),
  );
  return {
    shape: { B, T },
    logpTheta: x.theta,
    logpOld: x.old,
    logpRollout: x.roll,
    advantages: x.adv,
    lossMask: x.mask,
    upstream: x.up,
  };
}

function close(actual: Float64Array, expected: number[], digits = 13): void {
  expected.forEach((e, k) => expect(actual[k], `index ${k}`).toBeCloseTo(e, digits));
}

describe('ppo-clip', () => {
  const cases = [
    { d: 0.1, A: 1 }, // inside the band
    { d: 0.3, A: 1 }, // r > 1 + ε_high, A > 0: clipped
    { d: 0.3, A: -1 }, // r > 1 + ε_high, A < 0: unclipped (PPO's one-sided clip)
    { d: -0.5, A: -1 }, // r < 1 − ε_low, A < 0: clipped
    { d: -0.5, A: 1 }, // r < 1 − ε_low, A > 0: unclipped
    { d: 1.5, A: -1 }, // huge ratio, negative advantage: dual-clip territory
  ];
  const input = lossInput([{ dTheta: cases.map((c) => c.d), adv: cases.map((c) => c.A) }]);

  it('without dual-clip', () => {
    const r = ppoClip(input, { epsLow: 0.2, epsHigh: 0.2, dualClip: null });
    close(r.value.tokenLoss, [-E(0.1), -1.2, E(0.3), 0.8, -E(-0.5), E(1.5)]);
    close(r.value.gradLogpTheta, [-E(0.1), 0, E(0.3), 0, -E(-0.5), E(1.5)]);
    expect(r.metrics['actor/pg_clipfrac']).toBeCloseTo(2 / 6, 15);
    expect(r.metrics['actor/pg_clipfrac_lower']).toBe(0);
    expect(r.metrics['actor/ppo_kl']).toBeCloseTo(-(0.1 + 0.3 + 0.3 - 0.5 - 0.5 + 1.5) / 6, 15);
  });

  it('with dual-clip c = 3: min(L, −c·A) for A < 0', () => {
    const r = ppoClip(input, { epsLow: 0.2, epsHigh: 0.2, dualClip: 3 });
    close(r.value.tokenLoss, [-E(0.1), -1.2, E(0.3), 0.8, -E(-0.5), 3]);
    close(r.value.gradLogpTheta, [-E(0.1), 0, E(0.3), 0, -E(-0.5), 0]);
    expect(r.metrics['actor/pg_clipfrac_lower']).toBeCloseTo(1 / 6, 15);
  });

  it('clip-higher (DAPO 0.2/0.28) keeps r = e^0.2 unclipped for A > 0', () => {
    const r = ppoClip(lossInput([{ dTheta: [0.2], adv: [2] }]), { epsLow: 0.2, epsHigh: 0.28, dualClip: null });
    close(r.value.tokenLoss, [-2 * E(0.2)]);
    close(r.value.gradLogpTheta, [-2 * E(0.2)]);
  });

  it('multiplies the gradient by upstream', () => {
    const r = ppoClip(lossInput([{ dTheta: [0.1, 0.1], adv: [1, 1], up: [0.25, 0] }]), {
      epsLow: 0.2,
      epsHigh: 0.2,
      dualClip: null,
    });
    close(r.value.gradLogpTheta, [-0.25 * E(0.1), 0]);
  });
});

describe('gspo', () => {
  it('sequence ratio, clip with the paper band 3e-4 / 4e-4, exact sequence gradient', () => {
    const input = lossInput([
      { dTheta: [2e-4, 4e-4], adv: [1, 1], up: [0.5, 0.25] }, // s = e^3e-4, in band
      { dTheta: [1e-3, 1e-3], adv: [1, 1] }, // s = e^1e-3 > 1 + 4e-4, A > 0: clipped
      { dTheta: [1e-3, 1e-3], adv: [-1, -1] }, // A < 0: unclipped on the high side
    ]);
    const r = gspo(input, { epsLow: 3e-4, epsHigh: 4e-4 });
    const s1 = E(3e-4);
    const s2 = E(1e-3);
    close(r.value.tokenLoss, [-s1, -s1, -(1 + 4e-4), -(1 + 4e-4), s2, s2], 14);
    const g1 = (-0.75 * s1) / 2;
    const g3 = (2 * s2) / 2;
    close(r.value.gradLogpTheta, [g1, g1, 0, 0, g3, g3], 14);
    expect(r.metrics['actor/pg_clipfrac']).toBeCloseTo(2 / 6, 15);
  });
});

describe("gspo versus verl's token surrogate", () => {
  it('same gradient when weight and advantage are constant within each row, different otherwise', () => {
    const rows = [
      { dTheta: [0.01, -0.02, 0.005], adv: [0.7, 0.7, 0.7], up: [0.2, 0.2, 0.2] },
      { dTheta: [0.03, 0.0, -0.01], adv: [-1.2, -1.2, -1.2], up: [0.1, 0.1, 0.1] },
    ];
    const params = { epsLow: 0.2, epsHigh: 0.2 };
    // verl: log s_{i,t} = ℓθ_t − sg[ℓθ_t] + sg[log s_i] ⇒ ∂/∂ℓθ_u = upstream_u · ∂L_u/∂s · s_i
    const surrogate = (input: PolicyLossInput) =>
      Array.from(input.lossMask, (_, k) => {
        const i = Math.floor(k / input.shape.T);
        const row = rows[i]!;
        const s = E(row.dTheta.reduce((a, b) => a + b, 0) / row.dTheta.length);
        return input.upstream[k]! * -input.advantages[k]! * s;
      });
    const same = lossInput(rows);
    close(gspo(same, params).value.gradLogpTheta, surrogate(same), 15);
    const varying = lossInput(rows.map((r) => ({ ...r, up: [0.3, 0.1, 0.2] })));
    const exact = Array.from(gspo(varying, params).value.gradLogpTheta);
    expect(exact[0]).not.toBeCloseTo(surrogate(varying)[0]!, 6);
    expect(exact[0]).toBeCloseTo(exact[1]!, 15); // the exact gradient is shared by the row
  });
});

describe('sapo', () => {
  it('−σ(τ(r − 1))·(4/τ)·A with τ_pos / τ_neg and its gradient', () => {
    const input = lossInput([{ dTheta: [0.2, 0.2], adv: [1, -2] }]);
    const r = sapo(input, { tauPos: 1, tauNeg: 1.05 });
    const ratio = E(0.2);
    const sig = (z: number) => 1 / (1 + E(-z));
    const sp = sig(ratio - 1);
    const sn = sig(1.05 * (ratio - 1));
    close(r.value.tokenLoss, [-sp * 4, (-sn * 4 * -2) / 1.05]);
    close(r.value.gradLogpTheta, [-4 * sp * (1 - sp) * ratio, 8 * sn * (1 - sn) * ratio]);
  });
});

describe('cispo and reinforce', () => {
  it('cispo: −sg[clip(r)]·A·ℓθ; gradient −clip(r)·A', () => {
    const input = lossInput([{ dTheta: [0.3, -0.1], adv: [2, -1] }], -1);
    const r = cispo(input, { epsLow: 0.2, epsHigh: 0.2 });
    close(r.value.tokenLoss, [-1.2 * 2 * -0.7, -E(-0.1) * -1 * -1.1]);
    close(r.value.gradLogpTheta, [-2.4, E(-0.1)]);
    expect(r.metrics['actor/pg_clipfrac']).toBe(0.5);
  });

  it('reinforce: −A·ℓθ', () => {
    const r = reinforce(lossInput([{ dTheta: [0.5], adv: [3], up: [0.5] }], -2), {});
    close(r.value.tokenLoss, [4.5]);
    close(r.value.gradLogpTheta, [-1.5]);
  });
});

describe('tbpo with the paper bands (ε⁺_high 4e-4, ε⁻_low 3e-4, ε⁻_high 7e-4, C 2)', () => {
  const paper = { epsPosLow: 3e-4, epsPosHigh: 4e-4, epsNegLow: 3e-4, epsNegHigh: 7e-4, C: 2 };
  const rows = [
    { dTheta: [2e-4, 4e-4], adv: [1, 1], dOldRoll: [0.1, 0.3] }, // s = e^3e-4 in band, w = e^0.2
    { dTheta: [5e-4, 5e-4], adv: [1, 1], dOldRoll: [0.1, 0.3] }, // s > 1 + 4e-4: dropped
    { dTheta: [-2e-4, -2e-4], adv: [-1, -1], dOldRoll: [0, 0] }, // s = e^−2e-4 ≥ 1 − 3e-4: in band, w = 1
    { dTheta: [8e-4, 8e-4], adv: [-1, -1], dOldRoll: [0, 0] }, // s > 1 + 7e-4: dropped (negatives' upper band)
    { dTheta: [-4e-4, -4e-4], adv: [-1, -1], dOldRoll: [0, 0] }, // s < 1 − 3e-4: dropped
    { dTheta: [0, 0], adv: [0.5, 0.5], dOldRoll: [1, 1], up: [0.3, 0.1] }, // w capped at C = 2
  ];
  const input = lossInput(rows);
  const w1 = E(0.2);

  it('drop mode: per-sequence loss, band decisions and gradient', () => {
    const r = tbpo(input, { ...paper, mode: 'drop' });
    const s1 = E(3e-4);
    const s3 = E(-2e-4);
    close(r.value.tokenLoss, [-w1 * s1, -w1 * s1, 0, 0, s3, s3, 0, 0, 0, 0, -2 * 0.5, -2 * 0.5], 14);
    // d loss_i/dℓθ_u = (Σ_t upstream_t)·(−w·Ā)·s/n
    close(
      r.value.gradLogpTheta,
      [
        (2 * -w1 * s1) / 2,
        (2 * -w1 * s1) / 2,
        0,
        0,
        (2 * s3) / 2,
        (2 * s3) / 2,
        0,
        0,
        0,
        0,
        (0.4 * -1) / 2,
        (0.4 * -1) / 2,
      ],
      14,
    );
    expect(r.metrics['actor/tbpo_drop_fraction_pos']).toBeCloseTo(1 / 6, 15);
    expect(r.metrics['actor/tbpo_drop_fraction_neg']).toBeCloseTo(2 / 6, 15);
    expect(r.metrics['actor/tbpo_mismatch_capped_fraction']).toBeCloseTo(1 / 6, 15);
  });

  it('clamp mode: same gradient, out-of-band sequences report the clamped loss', () => {
    const d = tbpo(input, { ...paper, mode: 'drop' });
    const c = tbpo(input, { ...paper, mode: 'clamp' });
    expect(Array.from(c.value.gradLogpTheta)).toEqual(Array.from(d.value.gradLogpTheta));
    close(
      c.value.tokenLoss.subarray(2, 10),
      [-w1 * (1 + 4e-4), -w1 * (1 + 4e-4), E(-2e-4), E(-2e-4), 1 + 7e-4, 1 + 7e-4, 1 - 3e-4, 1 - 3e-4],
      14,
    );
  });
});

it('the loss table lists every loss', () => {
  expect(Object.keys(losses).sort()).toEqual([
    'cispo',
    'dppo-kl',
    'dppo-topk-kl',
    'dppo-topk-tv',
    'dppo-tv',
    'geo_mean',
    'gspo',
    'ipo',
    'luspo',
    'ppo-clip',
    'reinforce',
    'sapo',
    'tbpo',
    'topr',
    'trpl',
    'vespo',
  ]);
});
