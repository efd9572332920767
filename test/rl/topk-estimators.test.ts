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

  /**
   * One token, q = (0.5, 0.1) and p = (0.45, 0.3) on a head of 2 of 4 ids: ratios p/q 0.9 and 3, ρ = 0.4/0.25 =
   * 1.6; the sampled token is id 0 (ratio 0.9, kept by every band below).
   */
  const vimeBatch = (): EstimateBatch => ({
    shape: { B: 1, T: 1 },
    logpTheta: Float64Array.of(Math.log(0.45)),
    logpOld: Float64Array.of(Math.log(0.45)),
    logpRollout: Float64Array.of(Math.log(0.5)),
    mask: Float64Array.of(1),
    advantages: Float64Array.of(2),
    topk: {
      K: 2,
      vocabSize: 4,
      ids: Int32Array.of(0, 1),
      logpRollout: Float64Array.of(Math.log(0.5), Math.log(0.1)),
      logpTheta: Float64Array.of(Math.log(0.45), Math.log(0.3)),
    },
  });

  it('vime form (vime score_centering.py @2b83ea2): coef = q·w(p/q) − ρ·w(1/ρ)·p, TIS clamp and IcePop band by hand', () => {
    // TIS C = 2: w = (0.9, 2), α = 1.6·w(0.625) = 1 → coef = (0.45 − 0.45, 0.2 − 0.3) = (0, −0.1); gradient A·coef
    const tis = estimate(
      vimeBatch(),
      resolveConfig({ loss: { name: 'reinforce' }, correction: { name: 'tis' }, scoreCentering: { form: 'vime' } }),
    );
    expect(tis.gradTopkLogpTheta![0]).toBeCloseTo(0, 15);
    expect(tis.gradTopkLogpTheta![1]).toBeCloseTo(2 * -0.1, 15);
    expect(tis.metrics['actor/score_centering/tail_ratio']).toBeCloseTo(1.6, 15);
    // IcePop [0.5, 2]: the ratio 3 is outside the band, w = 0 → coef = (0, −0.3)
    const ice = estimate(
      vimeBatch(),
      resolveConfig({
        loss: { name: 'reinforce' },
        correction: { name: 'icepop', lo: 0.5, hi: 2 },
        scoreCentering: { form: 'vime' },
      }),
    );
    expect(ice.gradTopkLogpTheta![0]).toBeCloseTo(0, 15);
    expect(ice.gradTopkLogpTheta![1]).toBeCloseTo(2 * -0.3, 15);
  });

  it('vime form without a correction is the proportional tail bit for bit', () => {
    const batch = topkBatch(11, 2, 3, 9, 4, 0.4);
    const a = estimate(batch, resolveConfig({ loss: { name: 'reinforce' }, scoreCentering: {} }));
    const b = estimate(batch, resolveConfig({ loss: { name: 'reinforce' }, scoreCentering: { form: 'vime' } }));
    expect(Array.from(b.gradTopkLogpTheta!)).toEqual(Array.from(a.gradTopkLogpTheta!));
    expect(b.loss).toBe(a.loss);
  });

  it('vime form over the whole vocabulary: the logit gradient is exactly A·Σ_v q_v·w(p_v/q_v)·∇ℓ_v (the tail term cancels)', () => {
    const u = lcg(5);
    const mu = logDist(u, 6, 2);
    const pi = logDist(u, 6, 2);
    const batch: EstimateBatch = {
      shape: { B: 1, T: 1 },
      logpTheta: Float64Array.of(pi[0]!),
      logpOld: Float64Array.of(pi[0]!),
      logpRollout: Float64Array.of(mu[0]!),
      mask: Float64Array.of(1),
      advantages: Float64Array.of(1.5),
      topk: {
        K: 6,
        vocabSize: 6,
        ids: Int32Array.of(0, 1, 2, 3, 4, 5),
        logpRollout: Float64Array.from(mu),
        logpTheta: Float64Array.from(pi),
      },
    };
    const r = estimate(
      batch,
      resolveConfig({
        loss: { name: 'reinforce' },
        correction: { name: 'tis', C: 1.2 },
        scoreCentering: { form: 'vime' },
      }),
    );
    const p = pi.map(Math.exp);
    // through log-softmax: dℓ_j/dz_v = δ_jv − p_v; the sampled token's own gradient is not part of the term
    const logit = (g: readonly number[]) => p.map((pv, v) => g[v]! - pv * g.reduce((a, x) => a + x, 0));
    const got = logit(Array.from(r.gradTopkLogpTheta!));
    const want = logit(mu.map((lq, v) => 1.5 * Math.exp(lq) * Math.min(1.2, Math.exp(pi[v]! - lq))));
    for (let v = 0; v < 6; v++) expect(got[v]).toBeCloseTo(want[v]!, 14);
  });

  it('vime form takes its rule from the correction chain, or refuses one it cannot weight', () => {
    expect(
      resolveConfig({ correction: { name: 'tis', C: 3 }, scoreCentering: { form: 'vime' } }).scoreCentering?.weight,
    ).toEqual({ rule: 'clamp', lo: 0, hi: 3 });
    expect(
      resolveConfig({ correction: { name: 'icepop' }, scoreCentering: { form: 'vime' } }).scoreCentering?.weight,
    ).toEqual({ rule: 'band', lo: 0.5, hi: 5 });
    expect(resolveConfig({ scoreCentering: { form: 'vime' } }).scoreCentering?.weight).toEqual({ rule: 'one' });
    const explicit = { rule: 'clamp', lo: 0.1, hi: 4 } as const;
    expect(
      resolveConfig({
        correction: [{ name: 'tis' }, { name: 'icepop' }],
        scoreCentering: { form: 'vime', weight: explicit },
      }).scoreCentering?.weight,
    ).toEqual(explicit);
    expect(() =>
      resolveConfig({ correction: [{ name: 'tis' }, { name: 'icepop' }], scoreCentering: { form: 'vime' } }),
    ).toThrow(
      /^config\.scoreCentering\.form: 'vime' weights the sampler's head by the correction's token rule.*got correction \[tis, icepop\]/,
    );
    expect(() => resolveConfig({ correction: { name: 'seq-tis' }, scoreCentering: { form: 'vime' } })).toThrow(
      /got correction \[seq-tis\]/,
    );
  });

  it.each([
    [{ loss: { name: 'reinforce' }, scoreCentering: {} }],
    [{ loss: { name: 'ppo-clip' }, correction: { name: 'tis' }, scoreCentering: { form: 'ipo' } }],
    [{ loss: { name: 'cispo' }, aggregation: 'seq-mean-token-sum', scoreCentering: {} }],
    [{ loss: { name: 'ppo-clip' }, correction: { name: 'tis' }, scoreCentering: { form: 'vime' } }],
    [
      {
        loss: { name: 'reinforce' },
        correction: { name: 'icepop', lo: 0.7, hi: 1.4 },
        scoreCentering: { form: 'vime' },
      },
    ],
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

describe('DPPO top-k (TRL dppo_trainer.py @23eedc6, _compute_divergence_mask topk_tv / topk_kl)', () => {
  /** One token: the engine's ids and ℓμ, the trainer's ℓθ at them, the sampled y with its own ℓθ and ℓroll. */
  function oneToken(o: { q: number[]; p: number[]; ids: number[]; y: number; py: number; qy: number; A: number }) {
    const batch: EstimateBatch = {
      shape: { B: 1, T: 1 },
      logpTheta: Float64Array.of(Math.log(o.py)),
      logpOld: Float64Array.of(Math.log(o.py)),
      logpRollout: Float64Array.of(Math.log(o.qy)),
      mask: Float64Array.of(1),
      advantages: Float64Array.of(o.A),
      topk: {
        K: o.ids.length,
        vocabSize: 6,
        ids: Int32Array.from(o.ids),
        logpRollout: Float64Array.from(o.q, Math.log),
        logpTheta: Float64Array.from(o.p, Math.log),
        tokens: Int32Array.of(o.y),
      },
    };
    return batch;
  }
  // y = 1 in the top-k: q = (0.5, 0.3 | rest 0.2), p = (0.3, 0.45 | rest 0.25); p(y) = 0.45 > μ(y) = 0.3
  const inK = { q: [0.5, 0.3], p: [0.3, 0.45], ids: [0, 1], y: 1, py: 0.45, qy: 0.3 };

  it('topk_tv: D = (Σ|p − q| + |rest_p − rest_q|)/2 = 0.2 masks A > 0 at δ_high 0.15 (p(y) > μ(y)), keeps A < 0', () => {
    const pos = estimate(oneToken({ ...inK, A: 1 }), resolveConfig({ loss: { name: 'dppo-topk-tv' } }));
    expect(pos.metrics['actor/dppo_topk/divergence/mean']).toBeCloseTo((0.2 + 0.15 + 0.05) / 2, 15);
    expect(pos.gradLogpTheta[0]).toBe(0);
    expect(pos.metrics['actor/dppo_topk/mask_ratio/positive_adv_mean']).toBe(1);
    // A < 0: invalid_neg needs p(y) < μ(y), so the token is kept: gradient −A·r, r = 0.45/0.3
    const neg = estimate(oneToken({ ...inK, A: -2 }), resolveConfig({ loss: { name: 'dppo-topk-tv' } }));
    expect(neg.gradLogpTheta[0]).toBeCloseTo(2 * 1.5, 14);
    expect(neg.metrics['actor/dppo_topk/mask_ratio/overall_mean']).toBe(0);
    // δ_high 0.25 > D: kept for A > 0 too
    const wide = estimate(oneToken({ ...inK, A: 1 }), resolveConfig({ loss: { name: 'dppo-topk-tv', epsHigh: 0.25 } }));
    expect(wide.gradLogpTheta[0]).toBeCloseTo(-1.5, 14);
    expect(wide.metrics['actor/dppo_topk/prob_diff/mean']).toBeCloseTo(0.15, 15);
    for (const g of wide.gradTopkLogpTheta!) expect(g).toBe(0); // the mask is boolean: nothing through the top-k ℓθ
  });

  it('topk_kl: D = Σ q·(ℓμ − ℓθ) + rest_q·(log rest_q − log rest_p)', () => {
    const D = 0.5 * Math.log(0.5 / 0.3) + 0.3 * Math.log(0.3 / 0.45) + 0.2 * Math.log(0.2 / 0.25);
    const r = estimate(oneToken({ ...inK, A: 1 }), resolveConfig({ loss: { name: 'dppo-topk-kl', epsHigh: 0.05 } }));
    expect(r.metrics['actor/dppo_topk/divergence/mean']).toBeCloseTo(D, 15);
    expect(D).toBeGreaterThan(0.05);
    expect(r.gradLogpTheta[0]).toBe(0);
    const loose = estimate(
      oneToken({ ...inK, A: 1 }),
      resolveConfig({ loss: { name: 'dppo-topk-kl', epsHigh: D + 1e-9 } }),
    );
    expect(loose.gradLogpTheta[0]).toBeCloseTo(-1.5, 14);
  });

  it('a sampled token outside the top-k takes the K-th slot (TRL keeps K slots), the rest buckets follow', () => {
    // ids (0, 1), y = 3: the set is {0, 3}; q = (0.5, 0.1 | rest 0.4), p = (0.3, 0.02 | rest 0.68)
    const b = oneToken({ q: [0.5, 0.3], p: [0.3, 0.45], ids: [0, 1], y: 3, py: 0.02, qy: 0.1, A: -1 });
    const r = estimate(b, resolveConfig({ loss: { name: 'dppo-topk-tv' } }));
    expect(r.metrics['actor/dppo_topk/divergence/mean']).toBeCloseTo((0.2 + 0.08 + 0.28) / 2, 15);
    expect(r.gradLogpTheta[0]).toBe(0); // A < 0, p(y) < μ(y), D = 0.28 > 0.15
    expect(r.metrics['actor/dppo_topk/mask_ratio/negative_adv_mean']).toBe(1);
  });

  it('the detached ratio is exp(min(ℓθ − ℓroll, log c)); rest buckets floor at 1e-12', () => {
    // p(y) = 0.9 vs μ(y) = 0.01: r = 90 → c = 20; K = V: no rest (floored), D over the full support
    const b = oneToken({ q: [0.01, 0.99], p: [0.9, 0.1], ids: [0, 1], y: 0, py: 0.9, qy: 0.01, A: -1 });
    const r = estimate(b, resolveConfig({ loss: { name: 'dppo-topk-tv', epsLow: 1 } }));
    expect(r.gradLogpTheta[0]).toBeCloseTo(20, 12);
    expect(r.metrics['actor/dppo_topk/divergence/mean']).toBeCloseTo(0.89, 14);
    const c5 = estimate(b, resolveConfig({ loss: { name: 'dppo-topk-tv', epsLow: 1, c: 5 } }));
    expect(c5.gradLogpTheta[0]).toBeCloseTo(5, 12);
  });

  it('K = V: the top-k TV and KL are the exact ones over the vocabulary', () => {
    const batch = topkBatch(17, 2, 3, 6, 6, 0.8);
    const topk = batch.topk!;
    let tv = 0;
    let kl = 0;
    let n = 0;
    for (let k = 0; k < batch.mask.length; k++) {
      if (batch.mask[k] !== 1) continue;
      n++;
      for (let j = 0; j < 6; j++) {
        const p = Math.exp(topk.logpTheta[k * 6 + j]!);
        const q = Math.exp(topk.logpRollout[k * 6 + j]!);
        tv += Math.abs(p - q) / 2;
        kl += q * Math.log(q / p);
      }
    }
    const r1 = estimate(batch, resolveConfig({ loss: { name: 'dppo-topk-tv' } }));
    const r2 = estimate(batch, resolveConfig({ loss: { name: 'dppo-topk-kl' } }));
    // the rest buckets are ≈ 0 (rounding of 1 − Σ, floored at 1e-12), so they add at most ~1e-12
    expect(Math.abs(r1.metrics['actor/dppo_topk/divergence/mean']! - tv / n)).toBeLessThan(1e-9);
    expect(Math.abs(r2.metrics['actor/dppo_topk/divergence/mean']! - kl / n)).toBeLessThan(1e-9);
  });

  it.each([
    [{ loss: { name: 'dppo-topk-tv' } }],
    [{ loss: { name: 'dppo-topk-kl', epsLow: 0.05, epsHigh: 0.05 } }],
    [
      {
        loss: { name: 'dppo-topk-tv', epsLow: 0.3 },
        correction: { name: 'icepop' },
        aggregation: 'seq-mean-token-sum',
      },
    ],
    [{ loss: { name: 'dppo-topk-kl' }, scoreCentering: {} }],
  ])('gradient against central differences (mask held at the detached point): %j', (raw) => {
    const batch = topkBatch(19, 3, 4, 10, 4, 1.2);
    const r = estimate(batch, resolveConfig(raw));
    const frac = r.metrics['actor/dppo_topk/mask_ratio/overall_mean']!;
    expect(frac).toBeGreaterThan(0); // some tokens masked, some kept: both branches are exercised
    expect(frac).toBeLessThan(1);
    fdCheckTopk(batch, raw, 1e-6, 1e-6);
  });
});

describe('top-k KL (EMA-PG arXiv 2602.04417; ema-pg core_algos.py @f9b9776 compute_memory_efficient_kl)', () => {
  /** One token: ids (0, 1), μ = (0.5, 0.3), πθ = (0.3, 0.45) at them; y with its own ℓθ, ℓroll and ℓold. */
  function one(y: number, py: number, qy: number, pold: number): EstimateBatch {
    return {
      shape: { B: 1, T: 1 },
      logpTheta: Float64Array.of(Math.log(py)),
      logpOld: Float64Array.of(Math.log(pold)),
      logpRollout: Float64Array.of(Math.log(qy)),
      mask: Float64Array.of(1),
      advantages: Float64Array.of(0), // the policy term vanishes: the loss is the KL term alone
      topk: {
        K: 2,
        vocabSize: 6,
        ids: Int32Array.of(0, 1),
        logpRollout: Float64Array.of(Math.log(0.5), Math.log(0.3)),
        logpTheta: Float64Array.of(Math.log(0.3), Math.log(0.45)),
        tokens: Int32Array.of(y),
      },
    };
  }
  const cfg = (topkKl: object) => resolveConfig({ loss: { name: 'reinforce' }, topkKl: { coef: 1, ...topkKl } });
  const headRev = 0.3 * Math.log(0.3 / 0.5) + 0.45 * Math.log(0.45 / 0.3);
  const headFwd = 0.5 * Math.log(0.5 / 0.3) + 0.3 * Math.log(0.3 / 0.45);

  it('full_reverse, y in the top-k: L1 = Σ p·(ℓθ − ℓμ), gradient p·(ℓθ − ℓμ + 1) at the slots, no tail', () => {
    const r = estimate(one(1, 0.45, 0.3, 0.45), cfg({}));
    expect(r.loss).toBeCloseTo(headRev, 15);
    expect(r.gradTopkLogpTheta![0]).toBeCloseTo(0.3 * (Math.log(0.3 / 0.5) + 1), 15);
    expect(r.gradTopkLogpTheta![1]).toBeCloseTo(0.45 * (Math.log(0.45 / 0.3) + 1), 15);
    expect(r.gradLogpTheta[0]).toBeCloseTo(0, 15);
    expect(r.metrics['actor/topk_kl/tail_frac']).toBe(0);
  });

  it('full_reverse, y outside: + sg(ℓθ − ℓroll)·exp(ℓθ − sg ℓθ), times sg exp(ℓθ − ℓold) with iw', () => {
    const d = Math.log(0.02 / 0.1);
    const r = estimate(one(3, 0.02, 0.1, 0.04), cfg({}));
    expect(r.loss).toBeCloseTo(headRev + d, 14);
    expect(r.gradLogpTheta[0]).toBeCloseTo(d, 15);
    const iw = estimate(one(3, 0.02, 0.1, 0.04), cfg({ iw: true }));
    expect(iw.loss).toBeCloseTo(headRev + 0.5 * d, 14);
    expect(iw.gradLogpTheta[0]).toBeCloseTo(0.5 * d, 15);
    const truncated = estimate(one(3, 0.02, 0.1, 0.04), cfg({ tailSampling: false }));
    expect(truncated.loss).toBeCloseTo(headRev, 15);
  });

  it('iwClip bounds the iw weight (clamp(w, lower, upper), dp_actor.py kl_iw_clip_*); read only with iw', () => {
    const d = Math.log(0.02 / 0.1);
    // w = 0.02 / 0.04 = 0.5: a lower bound 0.8 lifts it, an upper bound 0.4 lowers it, [0.1, 2] leaves it
    const cases: [object, number][] = [
      [{ lower: 0.8 }, 0.8],
      [{ upper: 0.4 }, 0.4],
      [{ lower: 0.1, upper: 2 }, 0.5],
      [{ lower: 0.5, upper: 0.5 }, 0.5],
    ];
    for (const [iwClip, w] of cases) {
      const r = estimate(one(3, 0.02, 0.1, 0.04), cfg({ iw: true, iwClip }));
      expect(r.loss).toBeCloseTo(headRev + w * d, 14);
      expect(r.gradLogpTheta[0]).toBeCloseTo(w * d, 15);
      expect(r.metrics['actor/topk_kl/tail']).toBeCloseTo(w * d, 14);
    }
    // without iw the weight is 1 whatever the bounds say (ema-pg reads them only under use_kl_iw)
    const off = estimate(one(3, 0.02, 0.1, 0.04), cfg({ iwClip: { lower: 0.8, upper: 0.9 } }));
    expect(off.loss).toBeCloseTo(headRev + d, 14);
    // full_forward: the K4 tail is weighted the same way
    const w4 = 0.1 / 0.02;
    const fwd = estimate(one(3, 0.02, 0.1, 0.04), cfg({ type: 'full_forward', iw: true, iwClip: { lower: 0.8 } }));
    expect(fwd.loss).toBeCloseTo(headFwd + 0.8 * w4 * Math.log(w4), 13);
    expect(fwd.gradLogpTheta[0]).toBeCloseTo(0.8 * (1 - w4), 14);
  });

  it('iwClip with lower above upper is refused, naming the field and both values', () => {
    expect(() => cfg({ iw: true, iwClip: { lower: 2, upper: 1 } })).toThrow(
      /config\.topkKl\.iwClip.*lower 2 is above upper 1/,
    );
    expect(() => cfg({ iw: true, iwClip: { lower: 1, bound: 2 } })).toThrow(/config\.topkKl\.iwClip/);
  });

  it('full_forward: L1 = Σ q·(ℓμ − ℓθ) (gradient −q); the K4 tail w·log w + ℓθ − sg ℓθ, gradient 1 − w', () => {
    const w = 0.1 / 0.02;
    const r = estimate(one(3, 0.02, 0.1, 0.02), cfg({ type: 'full_forward' }));
    expect(r.loss).toBeCloseTo(headFwd + w * Math.log(w), 13);
    expect(r.gradTopkLogpTheta![0]).toBeCloseTo(-0.5, 15);
    expect(r.gradTopkLogpTheta![1]).toBeCloseTo(-0.3, 15);
    expect(r.gradLogpTheta[0]).toBeCloseTo(1 - w, 14);
  });

  it('K = V, no tail: the exact KL of either direction over the vocabulary', () => {
    const batch = { ...topkBatch(23, 2, 3, 6, 6, 0.7), advantages: new Float64Array(6) };
    const topk = batch.topk!;
    for (const type of ['full_reverse', 'full_forward'] as const) {
      let s = 0;
      let n = 0;
      for (let k = 0; k < 6; k++) {
        if (batch.mask[k] !== 1) continue;
        n++;
        for (let j = 0; j < 6; j++) {
          const lp = topk.logpTheta[k * 6 + j]!;
          const lq = topk.logpRollout[k * 6 + j]!;
          s += type === 'full_reverse' ? Math.exp(lp) * (lp - lq) : Math.exp(lq) * (lq - lp);
        }
      }
      const r = estimate(batch, resolveConfig({ loss: { name: 'reinforce' }, topkKl: { type } }));
      expect(r.metrics['actor/topk_kl_loss']).toBeCloseTo(s / n, 14);
      expect(r.metrics['actor/topk_kl/tail_frac']).toBe(0);
    }
  });

  it.each([
    [{ loss: { name: 'reinforce' }, topkKl: { coef: 0.5 } }],
    [{ loss: { name: 'ppo-clip' }, topkKl: { type: 'full_forward', iw: true } }],
    [{ loss: { name: 'cispo' }, aggregation: 'seq-mean-token-sum', topkKl: { coef: 2, iw: true }, scoreCentering: {} }],
    [{ loss: { name: 'dppo-topk-tv' }, correction: { name: 'icepop' }, topkKl: { type: 'full_forward' } }],
  ])('gradient against central differences (tail tokens included): %j', (raw) => {
    const batch = topkBatch(29, 3, 4, 10, 3, 0.9, 4);
    expect(estimate(batch, resolveConfig(raw)).metrics['actor/topk_kl/tail_frac']).toBeGreaterThan(0);
    fdCheckTopk(batch, raw, 1e-6, 1e-6);
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
      { ...base, topk: undefined, config: { loss: { name: 'dppo-topk-kl' } } },
      /^topk: required by config.loss.name 'dppo-topk-kl'/,
    ],
    [
      { ...base, topk: { ...base.topk, tokens: undefined }, config: { loss: { name: 'dppo-topk-tv' } } },
      /^topk.tokens: required by loss 'dppo-topk-tv'/,
    ],
    [{ ...base, config: { loss: { name: 'dppo-topk-tv', c: 0 } } }, /^config.loss.c: must be > 0/],
    [{ ...base, topk: undefined, config: { topkKl: {} } }, /^topk: required by config.topkKl/],
    [
      { ...base, topk: { ...base.topk, tokens: undefined }, config: { topkKl: {} } },
      /^topk.tokens: required by config.topkKl with tailSampling/,
    ],
    [{ ...base, config: { topkKl: { type: 'forward' } } }, /^config.topkKl.type/],
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
