// Ratio surrogates, differentiated through the ratio r = πθ/π_old: PPO clip, SAPO, GSPO, LUSPO, GMPO (geo_mean), TBPO.
// Not the losses whose coefficient of ℓθ is detached (score-function.ts): here the gradient flows through r.

import type { Estimate } from '../types.js';
import { rowMaskedSums } from '../types.js';
import type { LossFn, PolicyLossInput, PolicyLossValue } from './loss.js';
import { Means, clampLog, clip, counted, visited } from './loss.js';

/** PPO clip parameters. */
export interface PpoClipParams {
  /** @defaultValue 0.2 (verl `clip_ratio_low`; DAPO also 0.2) */
  readonly epsLow: number;
  /** @defaultValue 0.2 (verl `clip_ratio_high`; DAPO 0.28) */
  readonly epsHigh: number;
  /** Dual-clip constant c > 1 for A < 0, or null for off. @defaultValue null */
  readonly dualClip: number | null;
  /**
   * prime-rl `PPOLossConfig.max_importance_ratio`: the ratio capped straight-through,
   * exp(min(sg d, log M) + d − sg d) with d = ℓθ − ℓold unclamped (value and derivative min(r, M)),
   * before the clip; absent = verl's r = exp(clamp(d, ±20)). @defaultValue undefined
   */
  readonly maxImportanceRatio?: number | undefined;
}
/** Clip range (GSPO, CISPO). */
export interface ClipParams {
  /** Lower clip offset ε_low. */
  readonly epsLow: number;
  /** Upper clip offset ε_high. */
  readonly epsHigh: number;
}
/** SAPO temperatures. */
export interface SapoParams {
  /** τ for A > 0. @defaultValue 1.0 */
  readonly tauPos: number;
  /** τ for A ≤ 0. @defaultValue 1.05 */
  readonly tauNeg: number;
}
/** TBPO hyper-parameters (QaRL App. B). */
export interface TbpoParams {
  /** Positives' lower offset; no effect on the loss under the PPO bound (logged only). @defaultValue 3e-4 */
  readonly epsPosLow: number;
  /** Positives in band iff s ≤ 1 + epsPosHigh. @defaultValue 4e-4 */
  readonly epsPosHigh: number;
  /** Negatives in band iff 1 − epsNegLow ≤ s. @defaultValue 3e-4 */
  readonly epsNegLow: number;
  /** Negatives in band iff s ≤ 1 + epsNegHigh. @defaultValue 7e-4 */
  readonly epsNegHigh: number;
  /** Two-sided cap of the sequence mismatch weight, w ∈ [1/C, C], C ≥ 1. @defaultValue 2 */
  readonly C: number;
  /** `drop`: out-of-band sequences contribute 0; `clamp`: s clamped into the band. @defaultValue 'drop' */
  readonly mode: 'drop' | 'clamp';
}

/**
 * PPO clipped surrogate (verl `vanilla`): L = max(−A·r, −A·clip(r, 1−ε_low, 1+ε_high)),
 * r = exp(clamp(ℓθ − ℓold, ±20)); with dual-clip c and A < 0: L = min(L, −c·A). With `maxImportanceRatio`
 * M (prime-rl loss.py `PPOLoss.loss` and `_capped_importance_ratio`, the stored class version, l.165–167
 * and l.270–296): r = exp(min(sg d, log M) + d − sg d), d unclamped, so above r = M a token on the
 * unclipped side (A < 0) keeps the gradient −A·M.
 * MetricRecord: `actor/pg_clipfrac`, `actor/pg_clipfrac_lower`, `actor/ppo_kl`, `actor/clip_ratio_low`,
 * `actor/clip_ratio_high`, `actor/ratio_mean`; with M also `actor/ratio_capped` (prime-rl `ratio_capped`:
 * the fraction with d > log M).
 */
export const ppoClip: LossFn<PpoClipParams> = (input, params) => {
  const n = input.lossMask.length;
  const tokenLoss = new Float64Array(n);
  const grad = new Float64Array(n);
  const cap = params.maxImportanceRatio;
  const det = input.logpThetaDetached ?? input.logpTheta;
  const m = new Means([
    'actor/pg_clipfrac',
    'actor/pg_clipfrac_lower',
    'actor/ppo_kl',
    'actor/clip_ratio_low',
    'actor/clip_ratio_high',
    'actor/ratio_mean',
  ]);
  const capped = new Means(['actor/ratio_capped']);
  for (let k = 0; k < n; k++) {
    if (!visited(input, k)) continue;
    const raw = input.logpTheta[k]! - input.logpOld[k]!;
    const d = clampLog(raw);
    const r = Math.exp(d);
    const A = input.advantages[k]!;
    // prime-rl _capped_importance_ratio: the cap on the detached log-ratio, the gradient straight through
    const detRaw = det[k]! - input.logpOld[k]!;
    const rho = cap === undefined ? r : Math.exp(Math.min(detRaw, Math.log(cap)) + raw - detRaw);
    const l1 = -A * rho;
    const l2 = -A * clip(rho, 1 - params.epsLow, 1 + params.epsHigh);
    let loss = Math.max(l1, l2);
    let dLoss = l1 >= l2 && (cap !== undefined || d === raw) ? -A * rho : 0;
    let lower = 0;
    if (params.dualClip !== null && A < 0) {
      const l3 = -params.dualClip * A;
      if (loss > l3) {
        loss = l3;
        dLoss = 0;
        lower = 1;
      }
    }
    if (input.lossMask[k] === 1) {
      tokenLoss[k] = loss;
      grad[k] = input.upstream[k]! * dLoss;
    }
    if (counted(input, k))
      m.add({
        'actor/pg_clipfrac': l2 > l1 ? 1 : 0,
        'actor/pg_clipfrac_lower': lower,
        'actor/ppo_kl': -d,
        'actor/clip_ratio_low': r < 1 - params.epsLow && A < 0 ? 1 : 0,
        'actor/clip_ratio_high': r > 1 + params.epsHigh && A > 0 ? 1 : 0,
        'actor/ratio_mean': r,
      });
    if (cap !== undefined && counted(input, k)) capped.add({ 'actor/ratio_capped': detRaw > Math.log(cap) ? 1 : 0 });
  }
  const metrics = cap === undefined ? m.result() : { ...m.result(), ...capped.result() };
  return { value: { tokenLoss, gradLogpTheta: grad }, metrics };
};

/** Per-row geometric-mean log ratio Σ_t m(ℓθ − ℓold)/max(Σ m, 1) and the row count. */
function rowMeanLogRatio(input: PolicyLossInput, i: number): { mean: number; count: number } {
  const { T } = input.shape;
  let s = 0;
  let c = 0;
  for (let t = 0; t < T; t++) {
    const k = i * T + t;
    if (input.lossMask[k] !== 1) continue;
    s += input.logpTheta[k]! - input.logpOld[k]!;
    c += 1;
  }
  return { mean: s / Math.max(c, 1), count: c };
}

/**
 * GSPO (arXiv 2507.18071; verl `gspo`): sequence ratio s_i = exp(min(mean_t(ℓθ − ℓold), 10)),
 * per token L = max(−A_t·s_i, −A_t·clip(s_i, 1−ε_low, 1+ε_high)). The gradient is the exact one of
 * this function: d/dℓθ_u = (Σ_t upstream_t·∂L_t/∂s)·s_i/n_i. (verl's token surrogate gives the same
 * gradient whenever the correction weight and the advantage are constant within each sequence.)
 */
export const gspo: LossFn<ClipParams> = (input, params) => sequenceRatioLoss(input, params, 10);

/**
 * The GSPO surrogate with the sequence log-ratio capped at `cap` (GSPO: 10, verl; LUSPO: none, TRL's
 * `importance_sampling_level="sequence"` takes exp of the plain mean, grpo_trainer.py l.3058–3060).
 */
function sequenceRatioLoss(input: PolicyLossInput, params: ClipParams, cap: number): Estimate<PolicyLossValue> {
  const { B, T } = input.shape;
  const tokenLoss = new Float64Array(B * T);
  const grad = new Float64Array(B * T);
  const m = new Means(['actor/pg_clipfrac', 'actor/pg_clipfrac_lower', 'actor/ppo_kl']);
  let seqSum = 0;
  let seqs = 0;
  for (let i = 0; i < B; i++) {
    const { mean, count } = rowMeanLogRatio(input, i);
    if (count === 0) {
      // a row with no kept token: only its metric-mask tokens' ppo_kl counts (clipfrac 0, no ratio)
      for (let t = 0; t < T; t++) {
        const k = i * T + t;
        if (counted(input, k))
          m.add({ 'actor/pg_clipfrac': 0, 'actor/ppo_kl': -clampLog(input.logpTheta[k]! - input.logpOld[k]!) });
      }
      continue;
    }
    const logS = Math.min(mean, cap);
    const s = Math.exp(logS);
    seqSum += s;
    seqs += 1;
    let dTotalDs = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (!visited(input, k)) continue;
      const A = input.advantages[k]!;
      const l1 = -A * s;
      const l2 = -A * clip(s, 1 - params.epsLow, 1 + params.epsHigh);
      if (input.lossMask[k] === 1) {
        tokenLoss[k] = Math.max(l1, l2);
        if (l1 >= l2) dTotalDs += input.upstream[k]! * -A;
      }
      // verl gspo (core_algos.py l.1612) averages the unclamped token log-ratio
      if (counted(input, k))
        m.add({ 'actor/pg_clipfrac': l2 > l1 ? 1 : 0, 'actor/ppo_kl': -(input.logpTheta[k]! - input.logpOld[k]!) });
    }
    if (logS !== mean) continue;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.lossMask[k] === 1) grad[k] = (dTotalDs * s) / count;
    }
  }
  return {
    value: { tokenLoss, gradLogpTheta: grad },
    metrics: { ...m.result(), 'actor/seq_ratio_mean': seqs > 0 ? seqSum / seqs : 0 },
  };
}

/**
 * LUSPO (TRL `loss_type="luspo"`, grpo_trainer.py l.3083–3090, l.3143–3148): the GSPO clipped surrogate on
 * s_i = exp(mean_t m(ℓθ − ℓold)) without GSPO's cap at 10; TRL scales each row's loss by its length n_i
 * and averages over rows, which is this loss under `seq-mean-token-sum` (its default aggregation).
 */
export const luspo: LossFn<ClipParams> = (input, params) => sequenceRatioLoss(input, params, Infinity);

/**
 * GMPO, veRL `loss_mode=geo_mean` (`compute_policy_loss_geo_mean`, core_algos.py l.1927–2015, arXiv
 * 2507.20673): with lr_t = ℓθ − ℓold (unclamped) and σ = sign(A_t), the token-clipped log-ratio
 * lr̃_t = σ·min(σ·lr_t, σ·clamp(lr_t, −ε_low, ε_high)); per row ratio_i = exp(Σ m·lr̃/(n_i + 1e-8)),
 * Ā_i = Σ m·A/(n_i + 1e-8), loss_i = −Ā_i·ratio_i, broadcast to the row's tokens (veRL averages over the B
 * rows: `seq-mean-token-mean`, the default, gives that when no row is empty). Gradient:
 * ∂/∂ℓθ_u = (Σ_t upstream_t)·(−Ā_i)·ratio_i·[lr̃_u = lr_u]/(n_i + 1e-8).
 */
export const geoMean: LossFn<ClipParams> = (input, params) => {
  const { B, T } = input.shape;
  const tokenLoss = new Float64Array(B * T);
  const grad = new Float64Array(B * T);
  const m = new Means(['actor/pg_clipfrac', 'actor/pg_clipfrac_lower', 'actor/ppo_kl']);
  const live = new Uint8Array(T);
  for (let i = 0; i < B; i++) {
    let n = 0;
    let s = 0;
    let a = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      live[t] = 0;
      if (visited(input, k)) {
        const lr = input.logpTheta[k]! - input.logpOld[k]!;
        const A = input.advantages[k]!;
        const c = clip(lr, -params.epsLow, params.epsHigh);
        if (counted(input, k))
          m.add({
            'actor/pg_clipfrac': c !== lr && A > 0 ? 1 : 0,
            'actor/pg_clipfrac_lower': c !== lr && A < 0 ? 1 : 0,
            'actor/ppo_kl': -lr,
          });
        if (input.lossMask[k] !== 1) continue;
        const sg = Math.sign(A);
        const picked = Math.min(sg * lr, sg * c);
        s += sg * picked;
        a += A;
        n += 1;
        live[t] = sg !== 0 && sg * lr <= sg * c ? 1 : 0;
      }
    }
    if (n === 0) continue;
    const ratio = Math.exp(s / (n + 1e-8));
    const Abar = a / (n + 1e-8);
    let upstreamSum = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.lossMask[k] !== 1) continue;
      tokenLoss[k] = -Abar * ratio;
      upstreamSum += input.upstream[k]!;
    }
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.lossMask[k] === 1 && live[t] === 1) grad[k] = (upstreamSum * -Abar * ratio) / (n + 1e-8);
    }
  }
  return { value: { tokenLoss, gradLogpTheta: grad }, metrics: m.result() };
};

/**
 * SAPO (arXiv 2511.20347; verl / TRL `sapo`): L = −σ(τ(r − 1))·(4/τ)·A, τ = tauPos if A > 0 else tauNeg,
 * r = exp(clamp(ℓθ − ℓold, ±20)). dL/dℓθ = −4·A·σ(1 − σ)·r.
 */
export const sapo: LossFn<SapoParams> = (input, params) => {
  const n = input.lossMask.length;
  const tokenLoss = new Float64Array(n);
  const grad = new Float64Array(n);
  const m = new Means([
    'actor/pg_clipfrac',
    'actor/pg_clipfrac_lower',
    'actor/ppo_kl',
    'actor/ratio_mean',
    'actor/sapo_gate_mean',
  ]);
  for (let k = 0; k < n; k++) {
    if (!visited(input, k)) continue;
    const raw = input.logpTheta[k]! - input.logpOld[k]!;
    const d = clampLog(raw);
    const r = Math.exp(d);
    const A = input.advantages[k]!;
    const tau = A > 0 ? params.tauPos : params.tauNeg;
    const sig = 1 / (1 + Math.exp(-tau * (r - 1)));
    if (input.lossMask[k] === 1) {
      tokenLoss[k] = -sig * (4 / tau) * A;
      grad[k] = d === raw ? input.upstream[k]! * -4 * A * sig * (1 - sig) * r : 0;
    }
    // verl sapo reports pg_clipfrac = pg_clipfrac_lower = 0 (core_algos.py l.1692–1693)
    if (counted(input, k))
      m.add({
        'actor/pg_clipfrac': 0,
        'actor/pg_clipfrac_lower': 0,
        'actor/ppo_kl': -d,
        'actor/ratio_mean': r,
        'actor/sapo_gate_mean': sig * (4 / tau),
      });
  }
  return { value: { tokenLoss, gradLogpTheta: grad }, metrics: m.result() };
};

/**
 * TBPO (QaRL §3.2, App. B/E; reconstruction, see docs): per sequence with n_i = max(Σ m, 1),
 * s_i = exp(clamp(Σ m(ℓθ − ℓold)/n_i, ±20)), w_i = exp(clamp(Σ m(ℓold − ℓroll)/n_i, ±log C)),
 * Ā_i = Σ m·A/n_i. Band: Ā ≥ 0 ⇒ s ≤ 1 + epsPosHigh; Ā < 0 ⇒ 1 − epsNegLow ≤ s ≤ 1 + epsNegHigh.
 * `drop`: loss_i = −w·s·Ā in band, else 0; `clamp`: loss_i = −w·clamp(s, band)·Ā. Gradient only in band.
 * The sequence loss is broadcast to its valid tokens (aggregate with `seq-mean-token-mean` for the paper's mean over sequences).
 */
export const tbpo: LossFn<TbpoParams> = (input, params) => {
  const { B, T } = input.shape;
  const tokenLoss = new Float64Array(B * T);
  const grad = new Float64Array(B * T);
  const logC = Math.log(params.C);
  // per sequence: the counts and sums the metrics average over the non-empty rows
  const tally = { seqs: 0, dropPos: 0, dropNeg: 0, belowLow: 0, capped: 0, sSum: 0, wSum: 0 };
  const { sums: policyLogRatio, counts } = rowMaskedSums(
    input.lossMask,
    input.shape,
    (k) => input.logpTheta[k]! - input.logpOld[k]!,
  );
  const mismatchLogRatio = rowMaskedSums(
    input.lossMask,
    input.shape,
    (k) => input.logpOld[k]! - input.logpRollout[k]!,
  ).sums;
  const advantageSum = rowMaskedSums(input.lossMask, input.shape, (k) => input.advantages[k]!).sums;
  for (let i = 0; i < B; i++) {
    const c = counts[i]!;
    if (c === 0) continue;
    const sp = policyLogRatio[i]!;
    const sm = mismatchLogRatio[i]!;
    const sa = advantageSum[i]!;
    tally.seqs += 1;
    const lp = sp / c;
    const lpc = clampLog(lp);
    const s = Math.exp(lpc);
    const lw = sm / c;
    const lwc = Math.min(logC, Math.max(-logC, lw));
    const w = Math.exp(lwc);
    const A = sa / c;
    const lo = A >= 0 ? 0 : 1 - params.epsNegLow;
    const hi = A >= 0 ? 1 + params.epsPosHigh : 1 + params.epsNegHigh;
    const inBand = s >= lo && s <= hi;
    if (!inBand) {
      if (A >= 0) tally.dropPos += 1;
      else tally.dropNeg += 1;
    }
    if (A >= 0 && s < 1 - params.epsPosLow) tally.belowLow += 1;
    if (lwc !== lw) tally.capped += 1;
    tally.sSum += s;
    tally.wSum += w;
    const loss = params.mode === 'drop' ? (inBand ? -w * s * A : 0) : -w * clip(s, lo, hi) * A;
    const dLossDs = inBand && lpc === lp ? -w * A : 0;
    let upstreamSum = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.lossMask[k] !== 1) continue;
      tokenLoss[k] = loss;
      upstreamSum += input.upstream[k]!;
    }
    if (dLossDs === 0) continue;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.lossMask[k] === 1) grad[k] = (upstreamSum * dLossDs * s) / c;
    }
  }
  const { seqs, dropPos, dropNeg, belowLow, capped, sSum, wSum } = tally;
  const f = (x: number): number => (seqs > 0 ? x / seqs : 0);
  return {
    value: { tokenLoss, gradLogpTheta: grad },
    metrics: {
      'actor/tbpo_drop_fraction': f(dropPos + dropNeg),
      'actor/tbpo_drop_fraction_pos': f(dropPos),
      'actor/tbpo_drop_fraction_neg': f(dropNeg),
      'actor/tbpo_pos_below_low_fraction': f(belowLow),
      'actor/tbpo_mismatch_capped_fraction': f(capped),
      'actor/tbpo_seq_ratio_mean': f(sSum),
      'actor/tbpo_mismatch_weight_mean': f(wSum),
    },
  };
};
