// Score-function losses L = −c·A·ℓθ with a detached coefficient c: REINFORCE, CISPO, VESPO, TOPR, and the DPPO / IPO masks on Δp.
// Not the ratio surrogates (ratio.ts): no gradient flows through c, so dL/dℓθ = −c·A.

import type { Estimate, NoParams } from '../types.js';
import type { LossFn, PolicyLossInput, PolicyLossValue } from './loss.js';
import { Means, clampLog, clip, counted, scoreFunctionToken, visited } from './loss.js';
import type { ClipParams } from './ratio.js';

/** CISPO parameters: the clip range and SkyRL's anchor. */
export interface CispoParams extends ClipParams {
  /**
   * The behaviour policy of the ratio: `old` r = π_θ/π_old (the CISPO paper), `rollout` r = π_θ/π_roll
   * (SkyRL `cispo.cispo_anchor`). @defaultValue 'old'
   */
  readonly anchor?: 'old' | 'rollout' | undefined;
}

/**
 * CISPO (MiniMax-M1, arXiv 2506.13585; verl `cispo`): L = −sg[clip(r, 1−ε_low, 1+ε_high)]·A·ℓθ.
 * The clipped ratio is detached (evaluated at `logpThetaDetached`), so dL/dℓθ = −clip(r)·A.
 * MetricRecord: `actor/pg_clipfrac` (r ≠ clip(r)), `actor/pg_clipfrac_lower` (0), `actor/ppo_kl`, `actor/ratio_mean`.
 */
export const cispo: LossFn<CispoParams> = (input, params) => {
  const n = input.lossMask.length;
  const tokenLoss = new Float64Array(n);
  const grad = new Float64Array(n);
  const det = input.logpThetaDetached ?? input.logpTheta;
  // SkyRL cispo_anchor "rollout": ratio against the rollout log-probs (ppo_utils.py l.769–782)
  const anchor = params.anchor === 'rollout' ? input.logpRollout : input.logpOld;
  const m = new Means(['actor/pg_clipfrac', 'actor/pg_clipfrac_lower', 'actor/ppo_kl', 'actor/ratio_mean']);
  for (let k = 0; k < n; k++) {
    if (!visited(input, k)) continue;
    const d = clampLog(det[k]! - anchor[k]!);
    const r = Math.exp(d);
    const c = clip(r, 1 - params.epsLow, 1 + params.epsHigh);
    scoreFunctionToken(input, k, c, tokenLoss, grad);
    // verl cispo: ppo_kl of the ±20-clamped log-ratio (core_algos.py l.2070–2072), clipfrac r ≠ clip(r) (l.2086)
    if (counted(input, k))
      m.add({
        'actor/pg_clipfrac': c !== r ? 1 : 0,
        'actor/pg_clipfrac_lower': 0,
        'actor/ppo_kl': -d,
        'actor/ratio_mean': r,
      });
  }
  return { value: { tokenLoss, gradLogpTheta: grad }, metrics: m.result() };
};

/** REINFORCE (verl bypass `reinforce`): L = −A·ℓθ; the correction weight w multiplies it through `upstream`. */
export const reinforce: LossFn<NoParams> = (input) => {
  const n = input.lossMask.length;
  const tokenLoss = new Float64Array(n);
  const grad = new Float64Array(n);
  const m = new Means(['actor/ppo_kl']);
  for (let k = 0; k < n; k++) {
    if (!visited(input, k)) continue;
    scoreFunctionToken(input, k, 1, tokenLoss, grad);
    if (counted(input, k)) m.add({ 'actor/ppo_kl': input.logpOld[k]! - input.logpTheta[k]! });
  }
  return { value: { tokenLoss, gradLogpTheta: grad }, metrics: m.result() };
};

/** VESPO's Gamma-weight parameters (TRL `vespo_k_pos`, `vespo_lambda_pos`, `vespo_k_neg`, `vespo_lambda_neg`). */
export interface VespoParams {
  /** Shape k for A ≥ 0. @defaultValue 2 */
  readonly kPos: number;
  /** Rate λ for A ≥ 0. @defaultValue 3 */
  readonly lambdaPos: number;
  /** Shape k for A < 0. @defaultValue 3 */
  readonly kNeg: number;
  /** Rate λ for A < 0. @defaultValue 2 */
  readonly lambdaNeg: number;
}

/**
 * VESPO (TRL `loss_type="vespo"`, `get_gamma_weights`, grpo_trainer.py l.2943–2991, l.3096–3108): per row,
 * log w = clamp(Σ_t m·clamp(sg[ℓθ] − ℓold, ±20), log 1e-8, 20), w = e^(log w), and the detached Gamma weight
 * φ = exp(λ + k·log w − λ·w) (k, λ by the sign of the row's advantage, A ≥ 0 positive; λ ≥ 1e-4; a
 * non-finite φ is 0). L_t = −φ·A_t·ℓθ_t, so dL/dℓθ = −φ·A.
 */
export const vespo: LossFn<VespoParams> = (input, params) => {
  const { B, T } = input.shape;
  const tokenLoss = new Float64Array(B * T);
  const grad = new Float64Array(B * T);
  const det = input.logpThetaDetached ?? input.logpTheta;
  const lower = Math.log(1e-8);
  const m = new Means(['actor/ppo_kl']);
  let phiSum = 0;
  let phiRows = 0;
  for (let i = 0; i < B; i++) {
    let s = 0;
    let first = -1;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.lossMask[k] !== 1) continue;
      if (first < 0) first = k;
      s += clampLog(det[k]! - input.logpOld[k]!);
    }
    const logW = Math.min(20, Math.max(lower, s));
    const w = Math.exp(logW);
    // TRL's advantages are per row (B, 1): the sign of the row's (first valid) advantage picks k and λ
    const pos = first < 0 || input.advantages[first]! >= 0;
    const kk = pos ? params.kPos : params.kNeg;
    const lam = Math.max(1e-4, pos ? params.lambdaPos : params.lambdaNeg);
    const raw = Math.exp(lam + kk * logW - lam * w);
    const phi = Number.isFinite(raw) ? raw : 0;
    if (first >= 0) {
      phiSum += phi;
      phiRows += 1;
    }
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (!visited(input, k)) continue;
      scoreFunctionToken(input, k, phi, tokenLoss, grad);
      if (counted(input, k)) m.add({ 'actor/ppo_kl': input.logpOld[k]! - input.logpTheta[k]! });
    }
  }
  return {
    value: { tokenLoss, gradLogpTheta: grad },
    metrics: { ...m.result(), 'actor/vespo_phi_seq_mean': phiRows > 0 ? phiSum / phiRows : 0 },
  };
};

/** TOPR weights (ROLL `topr_positive_weight`, `topr_negative_weight`). */
export interface ToprParams {
  /** @defaultValue 1 */
  readonly positiveWeight: number;
  /** @defaultValue 1 */
  readonly negativeWeight: number;
}

/**
 * TOPR, tapered off-policy REINFORCE (arXiv 2503.14286; ROLL `pg_variant: topr`, `_compute_topr_loss`,
 * roll/pipeline/agentic/agentic_actor_pg_worker.py l.260–330): rows with reward > 0 take the SFT-like
 * L = −w⁺·A·ℓθ, the others L = −w⁻·sg[clamp(r, 0, 1)]·A·ℓθ with r = exp(sg[ℓθ] − ℓold) (unclamped, as
 * ROLL). Without rewards (advantages given) a row is positive iff its first valid advantage is > 0.
 */
export const topr: LossFn<ToprParams> = (input, params) => {
  const { B, T } = input.shape;
  const tokenLoss = new Float64Array(B * T);
  const grad = new Float64Array(B * T);
  const det = input.logpThetaDetached ?? input.logpTheta;
  const m = new Means(['actor/ppo_kl', 'actor/topr_negative_clipfrac']);
  let positives = 0;
  for (let i = 0; i < B; i++) {
    let first = -1;
    for (let t = 0; t < T && first < 0; t++) if (input.lossMask[i * T + t] === 1) first = i * T + t;
    const pos = input.rewards !== undefined ? input.rewards[i]! > 0 : first >= 0 && input.advantages[first]! > 0;
    if (pos) positives += 1;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (!visited(input, k)) continue;
      const r = Math.exp(det[k]! - input.logpOld[k]!);
      const coef = pos ? params.positiveWeight : params.negativeWeight * Math.min(1, Math.max(0, r));
      scoreFunctionToken(input, k, coef, tokenLoss, grad);
      if (counted(input, k))
        m.add({
          'actor/ppo_kl': input.logpOld[k]! - input.logpTheta[k]!,
          'actor/topr_negative_clipfrac': !pos && r > 1 ? 1 : 0,
        });
    }
  }
  return {
    value: { tokenLoss, gradLogpTheta: grad },
    metrics: { ...m.result(), 'actor/topr_positive_ratio': B > 0 ? positives / (B + 1e-8) : 0 },
  };
};

/** DPPO / IPO parameters (masks on Δp). */
export interface DppoParams {
  /** Divergence allowed downward (A < 0): Δp ≥ −epsLow (TV) or binary KL ≤ epsLow. @defaultValue 0.2 */
  readonly epsLow: number;
  /** Divergence allowed upward (A > 0). @defaultValue 0.2 */
  readonly epsHigh: number;
  /** Truncation of the detached ratio, min(r, c) (verl `clip_ratio_c`). @defaultValue 20 */
  readonly c: number;
}
/** IPO parameters. */
export interface IpoParams {
  /** Symmetric bound on |Δp| (prime-rl `ipo_threshold`). @defaultValue 0.1 */
  readonly threshold: number;
  /** @defaultValue 20 */
  readonly c: number;
}

type DeltaMask = (p: number, pOld: number, A: number) => boolean;

/**
 * The DPPO family: L = −A·sg[min(r, c)]·ℓθ·valid, valid = keep(p_θ, p_old, A) evaluated at the detached
 * ℓθ; dL/dℓθ = −A·min(r, c)·valid (the same gradient as prime-rl's −A·r·keep while r < c).
 * Metrics as verl (core_algos.py l.1449–1456): `pg_clipfrac` = mean(1 − valid), `pg_clipfrac_lower` =
 * mean(valid·[r > c]), `ppo_kl` of the ±20-clamped log-ratio.
 */
function deltaMaskLoss(input: PolicyLossInput, c: number, valid: DeltaMask): Estimate<PolicyLossValue> {
  const n = input.lossMask.length;
  const tokenLoss = new Float64Array(n);
  const grad = new Float64Array(n);
  const det = input.logpThetaDetached ?? input.logpTheta;
  const m = new Means(['actor/pg_clipfrac', 'actor/pg_clipfrac_lower', 'actor/ppo_kl']);
  for (let k = 0; k < n; k++) {
    if (!visited(input, k)) continue;
    const d = clampLog(det[k]! - input.logpOld[k]!);
    const r = Math.exp(d);
    const A = input.advantages[k]!;
    const ok = valid(Math.exp(det[k]!), Math.exp(input.logpOld[k]!), A) ? 1 : 0;
    const w = Math.min(r, c);
    if (input.lossMask[k] === 1) {
      tokenLoss[k] = ok === 1 ? -A * w * input.logpTheta[k]! : 0;
      grad[k] = ok === 1 ? input.upstream[k]! * -A * w : 0;
    }
    if (counted(input, k))
      m.add({ 'actor/pg_clipfrac': 1 - ok, 'actor/pg_clipfrac_lower': r > c ? ok : 0, 'actor/ppo_kl': -d });
  }
  return { value: { tokenLoss, gradLogpTheta: grad }, metrics: m.result() };
}

/**
 * DPPO-Binary-TV (arXiv 2602.04879; verl `dppo_tv`, core_algos.py l.1379–1457): valid iff
 * p_θ − p_old ≤ epsHigh (A > 0) or p_θ − p_old ≥ −epsLow (A ≤ 0).
 */
export const dppoTv: LossFn<DppoParams> = (input, params) =>
  deltaMaskLoss(input, params.c, (p, q, A) => (A > 0 ? p - q <= params.epsHigh : p - q >= -params.epsLow));

/**
 * DPPO-Binary-KL (verl `dppo_kl`, core_algos.py l.1460–1542): with the binary KL
 * D = q·log(q/p) + (1 − q)·log((1 − q + 1e-8)/(1 − p + 1e-8)), q = p_old, valid iff D ≤ epsHigh or p ≤ q
 * (A > 0), D ≤ epsLow or p ≥ q (A ≤ 0).
 */
export const dppoKl: LossFn<DppoParams> = (input, params) =>
  deltaMaskLoss(input, params.c, (p, q, A) => {
    const D = q * (Math.log(q) - Math.log(p)) + (1 - q) * Math.log((1 - q + 1e-8) / (1 - p + 1e-8));
    return A > 0 ? D <= params.epsHigh || p <= q : D <= params.epsLow || p >= q;
  });

/** IPO (prime-rl `ipo_loss_fn`, loss.py l.164–196): the DPPO form with the symmetric mask |p_θ − p_old| ≤ threshold. */
export const ipo: LossFn<IpoParams> = (input, params) =>
  deltaMaskLoss(input, params.c, (p, q) => Math.abs(p - q) <= params.threshold);
