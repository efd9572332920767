// The estimators that read the sampler's distribution (score centering, TRPL) and the two cheap ratio
// variants (exact on-policy ratio, slime's current-policy TIS): hand vectors from the stacks' cited
// lines, the central-difference gradient through ℓθ and the top-k ℓθ, and refusals naming the field.

import { describe, expect, it } from 'vitest';
import { estimate, estimateJson, resolveConfig } from '../../src/rl/index.js';
import type { EstimateBatch } from '../../src/rl/index.js';
import type { TopkBatch } from '../../src/rl/topk.js';
import { centralDifference, fdCheck, fixedBatch, lcg } from './helpers.js';

/** A normalised random distribution over V ids (log-probs), from `u`. */
function logDist(u: () => number, V: number, sharp: number): number[] {
  const z = Array.from({ length: V }, () => sharp * (2 * u() - 1));
  const m = Math.max(...z);
  const s = z.reduce((a, x) => a + Math.exp(x - m), 0);
  return z.map((x) => x - m - Math.log(s));
}

/** A batch with top-k: μ and πθ full distributions over V ids; the top-k of μ, the sampled token drawn from μ. */
function topkBatch(
  seed: number,
  B: number,
  T: number,
  V: number,
  K: number,
  drift: number,
  outside = 2,
): EstimateBatch {
  const u = lcg(seed);
  const base = fixedBatch(seed, B, T, 0.2);
  const n = B * T;
  const ids = new Int32Array(n * K).fill(-1);
  const lr = new Float64Array(n * K);
  const lt = new Float64Array(n * K);
  const tokens = new Int32Array(n).fill(-1);
  const logpTheta = new Float64Array(n);
  const logpRollout = new Float64Array(n);
  const logpOld = new Float64Array(n);
  for (let k = 0; k < n; k++) {
    const mu = logDist(u, V, 2);
    const th = mu.map((x) => x + drift * (2 * u() - 1));
    const m = Math.max(...th);
    const z = th.reduce((a, x) => a + Math.exp(x - m), 0);
    const pi = th.map((x) => x - m - Math.log(z));
    const order = mu.map((_, v) => v).sort((a, b) => mu[b]! - mu[a]! || a - b);
    for (let j = 0; j < K; j++) {
      ids[k * K + j] = order[j]!;
      lr[k * K + j] = mu[order[j]!]!;
      lt[k * K + j] = pi[order[j]!]!;
    }
    const y = order[Math.floor(u() * Math.min(V, K + outside))]!; // sometimes outside the top-k
    tokens[k] = y;
    logpTheta[k] = pi[y]!;
    logpRollout[k] = mu[y]!;
    logpOld[k] = pi[y]! + 0.05 * (2 * u() - 1);
  }
  const topk: TopkBatch = { K, vocabSize: V, ids, logpRollout: lr, logpTheta: lt, tokens };
  return { ...base, logpTheta, logpRollout, logpOld, topk };
}

/** Central differences of the loss along ℓθ and along the top-k ℓθ, detached copies held. */
function fdCheckTopk(batch: EstimateBatch, raw: object, h: number, tol: number): void {
  const config = resolveConfig(raw);
  const topk = batch.topk!;
  const r = estimate(batch, config);
  expect(r.gradTopkLogpTheta).toBeDefined();
  const f = (x: Float64Array) =>
    estimate(
      {
        ...batch,
        logpThetaDetached: batch.logpTheta,
        topk: { ...topk, logpTheta: x, logpThetaDetached: topk.logpTheta },
      },
      config,
    ).loss;
  const fd = centralDifference(f, topk.logpTheta, h);
  for (let j = 0; j < fd.length; j++) {
    const scale = Math.max(1, Math.abs(fd[j]!));
    expect(
      Math.abs(r.gradTopkLogpTheta![j]! - fd[j]!),
      `${JSON.stringify(raw)} slot ${j} ${r.gradTopkLogpTheta![j]} ${fd[j]} ids ${Array.from(topk.ids.subarray(j - (j % topk.K), j - (j % topk.K) + topk.K))} y ${topk.tokens?.[Math.floor(j / topk.K)]}`,
    ).toBeLessThanOrEqual(tol * scale);
  }
  const ft = (x: Float64Array) =>
    estimate(
      {
        ...batch,
        logpTheta: x,
        logpThetaDetached: batch.logpTheta,
        topk: { ...topk, logpThetaDetached: topk.logpTheta },
      },
      config,
    ).loss;
  const fdt = centralDifference(ft, batch.logpTheta, h);
  for (let k = 0; k < fdt.length; k++)
    expect(Math.abs(r.gradLogpTheta[k]! - fdt[k]!), `${JSON.stringify(raw)} k=${k}`).toBeLessThanOrEqual(
      tol * Math.max(1, Math.abs(fdt[k]!)),
    );
}

describe('score centering (prime-rl score_centering.py @349283d; loss.py IPOLoss.score_centering_loss)', () => {
  it('proportional tail: one token by hand, ρ = (1 − Σq)/(1 − Σp), coef = q − ρp, term = A·Σ coef·ℓθ', () => {
    const q = [0.5, 0.3];
    const p = [0.4, 0.35];
    const batch: EstimateBatch = {
      shape: { B: 1, T: 1 },
      logpTheta: Float64Array.of(Math.log(0.35)),
      logpOld: Float64Array.of(Math.log(0.35)),
      logpRollout: Float64Array.of(Math.log(0.3)),
      mask: Float64Array.of(1),
      advantages: Float64Array.of(2),
      topk: {
        K: 2,
        vocabSize: 5,
        ids: Int32Array.of(0, 1),
        logpRollout: Float64Array.from(q, Math.log),
        logpTheta: Float64Array.from(p, Math.log),
      },
    };
    const r = estimate(batch, resolveConfig({ loss: { name: 'reinforce' }, scoreCentering: {} }));
    const rho = 0.2 / 0.25;
    const coef = [0.5 - rho * 0.4, 0.3 - rho * 0.35];
    const term = 2 * (coef[0]! * Math.log(0.4) + coef[1]! * Math.log(0.35));
    // prime-rl ScoreCenteringLoss: −A·(ℓθ − correction) with correction = Σ coef·ℓθ; qrl-sim's term has the opposite sign of
    // the correction inside the bracket, i.e. the same loss: −A·ℓθ + A·Σ coef·ℓθ
    expect(r.loss).toBeCloseTo(-2 * Math.log(0.35) + term, 14);
    expect(r.metrics['actor/score_centering/tail_ratio']).toBeCloseTo(rho, 15);
    expect(r.gradTopkLogpTheta![0]).toBeCloseTo(2 * coef[0]!, 15);
    expect(r.gradTopkLogpTheta![1]).toBeCloseTo(2 * coef[1]!, 15);
    expect(r.gradLogpTheta[0]).toBe(-2);
  });

  it('a full-vocabulary head with q = p cancels: the centered gradient equals the plain one plus a zero term', () => {
    const l = [Math.log(0.6), Math.log(0.3), Math.log(0.1)];
    const batch: EstimateBatch = {
      shape: { B: 1, T: 1 },
      logpTheta: Float64Array.of(l[1]!),
      logpOld: Float64Array.of(l[1]!),
      logpRollout: Float64Array.of(l[1]!),
      mask: Float64Array.of(1),
      advantages: Float64Array.of(1),
      topk: {
        K: 3,
        vocabSize: 3,
        ids: Int32Array.of(0, 1, 2),
        logpRollout: Float64Array.from(l),
        logpTheta: Float64Array.from(l),
      },
    };
    const r = estimate(batch, resolveConfig({ loss: { name: 'reinforce' }, scoreCentering: {} }));
    for (const g of r.gradTopkLogpTheta!) expect(Math.abs(g)).toBeLessThan(1e-15);
  });

  it('ipo form: coef = q·min(p/q, cap) inside |p − q| ≤ ε, 0 outside', () => {
    const q = [0.5, 0.1];
    const p = [0.45, 0.5];
    const batch: EstimateBatch = {
      shape: { B: 1, T: 1 },
      logpTheta: Float64Array.of(Math.log(0.45)),
      logpOld: Float64Array.of(Math.log(0.45)),
      logpRollout: Float64Array.of(Math.log(0.5)),
      mask: Float64Array.of(1),
      advantages: Float64Array.of(-1.5),
      topk: {
        K: 2,
        vocabSize: 4,
        ids: Int32Array.of(0, 1),
        logpRollout: Float64Array.from(q, Math.log),
        logpTheta: Float64Array.from(p, Math.log),
      },
    };
    const r = estimate(
      batch,
      resolveConfig({ loss: { name: 'reinforce' }, scoreCentering: { form: 'ipo', eps: 0.3 } }),
    );
    expect(r.gradTopkLogpTheta![0]).toBeCloseTo(-1.5 * 0.45, 15); // q·(p/q) = p inside the region
    expect(r.gradTopkLogpTheta![1]).toBe(0); // |0.5 − 0.1| > 0.3
    const capped = estimate(
      batch,
      resolveConfig({ loss: { name: 'reinforce' }, scoreCentering: { form: 'ipo', eps: 1, maxRatio: 1 } }),
    );
    expect(capped.gradTopkLogpTheta![1]).toBeCloseTo(-1.5 * 0.1, 15); // q·min(5, 1)
  });

  it.each([
    [{ loss: { name: 'reinforce' }, scoreCentering: {} }],
    [{ loss: { name: 'ppo-clip' }, correction: { name: 'tis' }, scoreCentering: { form: 'ipo' } }],
    [{ loss: { name: 'cispo' }, aggregation: 'seq-mean-token-sum', scoreCentering: {} }],
  ])('gradient against central differences: %j', (raw) => {
    fdCheckTopk(topkBatch(7, 3, 4, 9, 4, 0.4), raw, 1e-6, 1e-6);
  });
});

describe('TRPL (prime-rl trpl_loss.py @776e97b)', () => {
  it('inside the trust region η = 0: proj = π, ratio = π(y)/μ̂(y), projection loss 0', () => {
    const batch = topkBatch(3, 2, 3, 8, 8, 0.05); // K = V: no tail
    const r = estimate(batch, resolveConfig({ loss: { name: 'trpl', klBound: 10 } }));
    expect(r.metrics['actor/trpl/projected_frac']).toBe(0);
    expect(Math.abs(r.metrics['actor/trpl/projection_loss']!)).toBeLessThan(1e-12);
    // with K = V and μ normalised, μ̂ = μ and the ratio is exp(ℓθ(y) − ℓμ(y))
    const { T } = batch.shape;
    let s = 0;
    let n = 0;
    for (let k = 0; k < batch.mask.length; k++) {
      if (batch.mask[k] !== 1) continue;
      s += Math.exp(batch.logpTheta[k]! - batch.logpRollout[k]!);
      n++;
    }
    expect(T).toBe(3);
    expect(r.metrics['actor/trpl/importance_ratio']).toBeCloseTo(s / n, 12);
  });

  it('outside it the bisection lands on the bound: KL(proj‖μ) within 1e-4 of klBound, never far above', () => {
    const batch = topkBatch(5, 3, 4, 12, 6, 1.5);
    const r = estimate(batch, resolveConfig({ loss: { name: 'trpl', klBound: 0.01 } }));
    expect(r.metrics['actor/trpl/projected_frac']).toBeGreaterThan(0.5);
    expect(r.metrics['actor/trpl/max_vio']).toBeLessThan(1e-4);
    expect(r.metrics['actor/trpl/initial_kl']).toBeGreaterThan(r.metrics['actor/trpl/final_kl']!);
  });

  it.each([
    [{ loss: { name: 'trpl' } }],
    [{ loss: { name: 'trpl', klBound: 0.01, alpha: 0.5 } }],
    [{ loss: { name: 'trpl', klBound: 0.02 }, correction: { name: 'icepop' }, scoreCentering: {} }],
    [{ loss: { name: 'trpl', sampledOld: 'rollout' } }],
  ])('gradient against central differences (η held; the sampled token in the top-k): %j', (raw) => {
    fdCheckTopk(topkBatch(11, 3, 4, 10, 4, 1.2, 0), raw, 1e-6, 2e-6);
  });

  it("a sampled token outside μ's top-k: ratio e^20 (prime-rl's default) or from ℓroll ('rollout'), gradient still exact", () => {
    const batch = topkBatch(13, 3, 4, 10, 3, 0.3, 4);
    const sat = estimate(batch, resolveConfig({ loss: { name: 'trpl', klBound: 10 } }));
    expect(sat.metrics['actor/trpl/importance_ratio']).toBeGreaterThan(1e6);
    const own = estimate(batch, resolveConfig({ loss: { name: 'trpl', klBound: 10, sampledOld: 'rollout' } }));
    expect(own.metrics['actor/trpl/importance_ratio']).toBeLessThan(10);
    fdCheckTopk(batch, { loss: { name: 'trpl', sampledOld: 'rollout' } }, 1e-6, 2e-6);
  });
});

describe("TRPL's importance_ratio with identical sides: prime-rl's value by hand (trpl_loss.py @776e97b)", () => {
  // V 4, π = μ = (0.6, 0.3, 0.05, 0.05), the engine's top-2 = {0, 1}, the sampled y = 3 outside it.
  // l.154 (`_gather_old_at_union`): a union id outside μ's top-k (y here) gets default_log_prob −27.6;
  // l.408 renormalises μ over the union {0, 1, 3} and the tail {2}, both at −27.6: lse = log(0.9 + 2e^−27.6);
  // l.453 clamps proj_y − o_y to ±20. π's own tail (id 2, mass 0.05) keeps Σ proj = 1 at η = 0.
  const lseMu = Math.log(0.9 + 2 * Math.exp(-27.6));
  const batch = (): EstimateBatch => {
    const l = Math.log(0.05);
    return {
      shape: { B: 1, T: 1 },
      logpTheta: Float64Array.of(l),
      logpOld: Float64Array.of(l),
      logpRollout: Float64Array.of(l),
      mask: Float64Array.of(1),
      advantages: Float64Array.of(1),
      topk: {
        K: 2,
        vocabSize: 4,
        ids: Int32Array.of(0, 1),
        logpRollout: Float64Array.of(Math.log(0.6), Math.log(0.3)),
        logpTheta: Float64Array.of(Math.log(0.6), Math.log(0.3)),
        tokens: Int32Array.of(3),
      },
    };
  };

  it('η = 0 (klBound 10): proj_y − o_y = log 0.05 + 27.6 + lse = 24.4989 > 20, so the ratio is e^20', () => {
    const r = estimate(batch(), resolveConfig({ loss: { name: 'trpl', klBound: 10 } }));
    expect(Math.log(0.05) + 27.6 + lseMu).toBeCloseTo(24.4989, 4);
    // KL(π‖μ̂) = 0.9·lse + 0.1·(log 0.05 + 27.6 + lse): above 10 is false, so no projection
    expect(r.metrics['actor/trpl/initial_kl']).toBeCloseTo(0.9 * lseMu + 0.1 * (Math.log(0.05) + 27.6 + lseMu), 12);
    expect(r.metrics['actor/trpl/projected_frac']).toBe(0);
    expect(r.metrics['actor/trpl/importance_ratio']).toBe(Math.exp(20));
    expect(r.metrics['actor/trpl/mismatch_kl']).toBe(0); // the sides are identical
  });

  it('default klBound 0.05: projected onto the ball (final KL 0.05) and still e^20 — μ̂_y ≈ 1.1e−12 makes room', () => {
    const r = estimate(batch(), resolveConfig({ loss: { name: 'trpl' } }));
    expect(r.metrics['actor/trpl/initial_kl']).toBeCloseTo(2.355066, 6);
    expect(r.metrics['actor/trpl/projected_frac']).toBe(1);
    expect(r.metrics['actor/trpl/final_kl']).toBeCloseTo(0.05, 6);
    // proj_y = e^20·μ̂_y ≈ 5.6e−4 adds ≈ 0.011 to KL(proj‖μ̂): inside the ball, so the bisection does not pull it in
    expect(r.metrics['actor/trpl/importance_ratio']).toBe(Math.exp(20));
  });

  it("sampledOld 'rollout' (η = 0): o_y = ℓroll_y − log(0.95 + e^−27.6), the ratio 0.95 + e^−27.6", () => {
    const r = estimate(batch(), resolveConfig({ loss: { name: 'trpl', klBound: 10, sampledOld: 'rollout' } }));
    expect(r.metrics['actor/trpl/importance_ratio']).toBeCloseTo(0.95 + Math.exp(-27.6), 14);
  });
});

describe('exact on-policy ratio (prime-rl PR 3555) and current-policy TIS (slime PR 2084)', () => {
  it('an on-policy row has ratio 1 and the REINFORCE gradient −c·A; an off-policy row keeps its ratio', () => {
    const batch = { ...fixedBatch(2, 2, 3, 0.3), onPolicy: Float64Array.of(1, 0) };
    const cfg = resolveConfig({ loss: { name: 'ppo-clip' }, exactOnPolicyRatio: true });
    const r = estimate(batch, cfg);
    const plain = estimate(batch, resolveConfig({ loss: { name: 'ppo-clip' } }));
    const reinforce = estimate(batch, resolveConfig({ loss: { name: 'reinforce' } }));
    for (let t = 0; t < 3; t++) {
      expect(r.gradLogpTheta[t]).toBeCloseTo(reinforce.gradLogpTheta[t]!, 15);
      expect(r.gradLogpTheta[3 + t]).toBe(plain.gradLogpTheta[3 + t]);
    }
    fdCheck(batch, { loss: { name: 'ppo-clip' }, exactOnPolicyRatio: true }, 1e-6, 1e-7);
  });

  it('refuses exactOnPolicyRatio without onPolicy, naming the field', () => {
    expect(() => estimate(fixedBatch(2, 2, 3, 0.3), resolveConfig({ exactOnPolicyRatio: true }))).toThrow(
      /^onPolicy: required/,
    );
  });

  it("tis anchor 'current': w = clip(sg πθ/π_roll, lo, C) in place of π_old/π_roll", () => {
    const batch = fixedBatch(4, 2, 3, 0.4);
    const r = estimate(
      batch,
      resolveConfig({ loss: { name: 'reinforce' }, correction: { name: 'tis', C: 1.2, lo: 0.8, anchor: 'current' } }),
    );
    for (let k = 0; k < 6; k++) {
      if (batch.mask[k] !== 1) continue;
      const w = Math.min(1.2, Math.max(0.8, Math.exp(batch.logpTheta[k]! - batch.logpRollout[k]!)));
      expect(r.weights[k]).toBeCloseTo(w, 15);
    }
    fdCheck(batch, { loss: { name: 'ppo-clip' }, correction: { name: 'tis', anchor: 'current' } }, 1e-6, 1e-7);
  });
});

describe('estimate JSON: topk in, gradTopkLogpTheta out, refusals', () => {
  const base = {
    logpTheta: [[-1, -0.5]],
    logpOld: [[-1, -0.5]],
    logpRollout: [[-1.1, -0.4]],
    mask: [[1, 1]],
    advantages: [1],
    topk: {
      vocabSize: 4,
      ids: [
        [
          [0, 1],
          [2, -1],
        ],
      ],
      logpRollout: [
        [
          [-0.7, -1.1],
          [-0.4, 0],
        ],
      ],
      logpTheta: [
        [
          [-0.8, -1],
          [-0.5, 0],
        ],
      ],
      tokens: [[1, 2]],
    },
  };
  it('returns the (B, T, K) gradient for score centering and for trpl', () => {
    const sc = estimateJson({ ...base, config: { loss: { name: 'reinforce' }, scoreCentering: {} } });
    expect(sc.gradTopkLogpTheta?.[0]?.[1]?.[1]).toBe(0); // the empty slot
    const tr = estimateJson({ ...base, config: { loss: { name: 'trpl' } } });
    expect(tr.gradTopkLogpTheta?.[0]?.length).toBe(2);
    expect(Number.isFinite(tr.loss)).toBe(true);
  });
  it.each([
    [{ ...base, topk: undefined, config: { loss: { name: 'trpl' } } }, /^topk: required by config.loss.name 'trpl'/],
    [{ ...base, topk: undefined, config: { scoreCentering: {} } }, /^topk: required by config.scoreCentering/],
    [
      {
        ...base,
        topk: {
          ...base.topk,
          ids: [
            [
              [0, 0],
              [2, -1],
            ],
          ],
        },
        config: {},
      },
      /^topk.ids\[0\]\[0\]\[1\]: id 0 appears twice/,
    ],
    [
      {
        ...base,
        topk: {
          ...base.topk,
          ids: [
            [
              [0, 4],
              [2, -1],
            ],
          ],
        },
        config: {},
      },
      /^topk.ids\[0\]\[0\]\[1\]: expected an id in \[-1, 4\)/,
    ],
    [
      {
        ...base,
        topk: {
          ...base.topk,
          logpTheta: [
            [
              [-0.8, 0.1],
              [-0.5, 0],
            ],
          ],
        },
        config: {},
      },
      /^topk.logpTheta\[0\]\[0\]\[1\]: a log-prob is ≤ 0/,
    ],
    [
      { ...base, topk: { ...base.topk, tokens: undefined }, config: { loss: { name: 'trpl' } } },
      /^topk.tokens: required by loss 'trpl'/,
    ],
    [{ ...base, config: { loss: { name: 'trpl', klBound: 0 } } }, /^config.loss.klBound: must be > 0/],
  ])('refuses %#', (json, re) => {
    expect(() => estimateJson(json)).toThrow(re);
  });
});
