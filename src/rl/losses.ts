// Policy losses (ppo-clip, gspo, sapo, cispo, reinforce, tbpo): per-token losses and their exact gradient w.r.t. ℓθ.
// Not the correction weights or the aggregation: both arrive folded into `upstream` (dLoss/dTokenLoss).

import type { Estimate, BatchShape } from './types.js';
import { LOG_RATIO_BOUND } from './types.js';

/** Inputs of every policy loss (all `(B, T)` flat). */
export interface PolicyLossInput {
  /** EstimateBatch shape. */
  readonly shape: BatchShape;
  /** ℓθ: current policy log-probs (carries gradient). */
  readonly logpTheta: Float64Array;
  /** ℓold: trainer log-probs at θ_old. */
  readonly logpOld: Float64Array;
  /** ℓroll: rollout-engine log-probs (used by `tbpo`). */
  readonly logpRollout: Float64Array;
  /** Per-token advantages A (before any AIS rectification; AIS enters through `upstream`). */
  readonly advantages: Float64Array;
  /** Effective loss mask (numerator) m ∈ {0, 1}. */
  readonly mask: Float64Array;
  /**
   * d(total loss)/d(tokenLoss) per token: aggregation coefficient × correction weight × mask.
   * The returned gradient is Σ_k upstream_k · d tokenLoss_k / dℓθ.
   */
  readonly upstream: Float64Array;
  /** Point at which stop-gradient terms (`cispo`'s sg[clip(r)]) are evaluated. @defaultValue logpTheta */
  readonly logpThetaDetached?: Float64Array | undefined;
  /** Per-row rewards `(B)`, when the batch has them (`topr` splits rows by reward sign). */
  readonly rewards?: Float64Array | undefined;
  /**
   * Tokens the `actor/*` token metrics average over, a superset of `mask`. verl averages them over the
   * `response_mask` handed to the loss, which is qrl-sim's denominator mask (IcePop-zeroed tokens stay
   * in it). @defaultValue mask
   */
  readonly metricMask?: Float64Array | undefined;
}

/** Per-token policy loss and gradient. */
export interface PolicyLossValue {
  /** Unweighted per-token policy loss, `(B, T)`, 0 on masked tokens (sequence losses broadcast). */
  readonly tokenLoss: Float64Array;
  /** d(Σ upstream·tokenLoss)/dℓθ, `(B, T)`, 0 on masked tokens. */
  readonly gradLogpTheta: Float64Array;
}

/** A policy loss. */
export type LossFn<P = never> = (input: PolicyLossInput, params: P) => Estimate<PolicyLossValue>;

/** PPO clip parameters. */
export interface PpoClipParams {
  /** @defaultValue 0.2 (verl `clip_ratio_low`; DAPO also 0.2) */
  readonly epsLow: number;
  /** @defaultValue 0.2 (verl `clip_ratio_high`; DAPO 0.28) */
  readonly epsHigh: number;
  /** Dual-clip constant c > 1 for A < 0, or null for off. @defaultValue null */
  readonly dualClip: number | null;
}
/** Clip range (GSPO, CISPO). */
export interface ClipParams {
  /** Lower clip offset ε_low. */
  readonly epsLow: number;
  /** Upper clip offset ε_high. */
  readonly epsHigh: number;
}
/** CISPO parameters: the clip range and SkyRL's anchor. */
export interface CispoParams extends ClipParams {
  /**
   * The behaviour policy of the ratio: `old` r = π_θ/π_old (the CISPO paper), `rollout` r = π_θ/π_roll
   * (SkyRL `cispo.cispo_anchor`). @defaultValue 'old'
   */
  readonly anchor?: 'old' | 'rollout' | undefined;
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

function clampLog(x: number): number {
  return Math.min(LOG_RATIO_BOUND, Math.max(-LOG_RATIO_BOUND, x));
}

function clip(x: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, x));
}

/**
 * Running masked means of a fixed set of metric names: every name is reported, 0 when no token was
 * added (verl's `masked_mean` over an all-zero mask is 0/(0 + 1e-8) = 0).
 */
class Means {
  private readonly sums = new Map<string, number>();
  private n = 0;
  constructor(names: readonly string[]) {
    for (const k of names) this.sums.set(k, 0);
  }
  add(values: Record<string, number>): void {
    this.n += 1;
    for (const [k, v] of Object.entries(values)) this.sums.set(k, (this.sums.get(k) ?? 0) + v);
  }
  result(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [k, v] of this.sums) out[k] = this.n > 0 ? v / this.n : 0;
    return out;
  }
}

/** True where a token enters the loss (`mask`) or only the metrics (`metricMask`). */
function visited(input: PolicyLossInput, k: number): boolean {
  return input.mask[k] === 1 || (input.metricMask !== undefined && input.metricMask[k] === 1);
}

/** True where a token's metrics count. */
function counted(input: PolicyLossInput, k: number): boolean {
  return (input.metricMask ?? input.mask)[k] === 1;
}

/**
 * PPO clipped surrogate (verl `vanilla`): L = max(−A·r, −A·clip(r, 1−ε_low, 1+ε_high)),
 * r = exp(clamp(ℓθ − ℓold, ±20)); with dual-clip c and A < 0: L = min(L, −c·A).
 * MetricRecord: `actor/pg_clipfrac`, `actor/pg_clipfrac_lower`, `actor/ppo_kl`, `actor/clip_ratio_low`,
 * `actor/clip_ratio_high`, `actor/ratio_mean`.
 */
export const ppoClip: LossFn<PpoClipParams> = (input, params) => {
  const n = input.mask.length;
  const tokenLoss = new Float64Array(n);
  const grad = new Float64Array(n);
  const m = new Means(['actor/pg_clipfrac', 'actor/pg_clipfrac_lower', 'actor/ppo_kl', 'actor/clip_ratio_low', 'actor/clip_ratio_high', 'actor/ratio_mean']);
  for (let k = 0; k < n; k++) {
    if (!visited(input, k)) continue;
    const raw = input.logpTheta[k]! - input.logpOld[k]!;
    const d = clampLog(raw);
    const r = Math.exp(d);
    const A = input.advantages[k]!;
    const l1 = -A * r;
    const l2 = -A * clip(r, 1 - params.epsLow, 1 + params.epsHigh);
    let loss = Math.max(l1, l2);
    let dLoss = l1 >= l2 && d === raw ? -A * r : 0;
    let lower = 0;
    if (params.dualClip !== null && A < 0) {
      const l3 = -params.dualClip * A;
      if (loss > l3) {
        loss = l3;
        dLoss = 0;
        lower = 1;
      }
    }
    if (input.mask[k] === 1) {
      tokenLoss[k] = loss;
      grad[k] = input.upstream[k]! * dLoss;
    }
    if (counted(input, k)) m.add({
      'actor/pg_clipfrac': l2 > l1 ? 1 : 0,
      'actor/pg_clipfrac_lower': lower,
      'actor/ppo_kl': -d,
      'actor/clip_ratio_low': r < 1 - params.epsLow && A < 0 ? 1 : 0,
      'actor/clip_ratio_high': r > 1 + params.epsHigh && A > 0 ? 1 : 0,
      'actor/ratio_mean': r,
    });
  }
  return { value: { tokenLoss, gradLogpTheta: grad }, metrics: m.result() };
};

/** Per-row geometric-mean log ratio Σ_t m(ℓθ − ℓold)/max(Σ m, 1) and the row count. */
function rowMeanLogRatio(input: PolicyLossInput, i: number): { mean: number; count: number } {
  const { T } = input.shape;
  let s = 0;
  let c = 0;
  for (let t = 0; t < T; t++) {
    const k = i * T + t;
    if (input.mask[k] !== 1) continue;
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
        if (counted(input, k)) m.add({ 'actor/pg_clipfrac': 0, 'actor/ppo_kl': -clampLog(input.logpTheta[k]! - input.logpOld[k]!) });
      }
      continue;
    }
    const logS = Math.min(mean, cap);
    const s = Math.exp(logS);
    seqSum += s;
    seqs += 1;
    let G = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (!visited(input, k)) continue;
      const A = input.advantages[k]!;
      const l1 = -A * s;
      const l2 = -A * clip(s, 1 - params.epsLow, 1 + params.epsHigh);
      if (input.mask[k] === 1) {
        tokenLoss[k] = Math.max(l1, l2);
        if (l1 >= l2) G += input.upstream[k]! * -A;
      }
      // verl gspo (core_algos.py l.1612) averages the unclamped token log-ratio
      if (counted(input, k)) m.add({ 'actor/pg_clipfrac': l2 > l1 ? 1 : 0, 'actor/ppo_kl': -(input.logpTheta[k]! - input.logpOld[k]!) });
    }
    if (logS !== mean) continue;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.mask[k] === 1) grad[k] = (G * s) / count;
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
      if (input.mask[k] !== 1) continue;
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
      const A = input.advantages[k]!;
      if (input.mask[k] === 1) {
        tokenLoss[k] = -phi * A * input.logpTheta[k]!;
        grad[k] = input.upstream[k]! * -phi * A;
      }
      if (counted(input, k)) m.add({ 'actor/ppo_kl': input.logpOld[k]! - input.logpTheta[k]! });
    }
  }
  return { value: { tokenLoss, gradLogpTheta: grad }, metrics: { ...m.result(), 'actor/vespo_phi_seq_mean': phiRows > 0 ? phiSum / phiRows : 0 } };
};

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
        if (counted(input, k)) m.add({ 'actor/pg_clipfrac': c !== lr && A > 0 ? 1 : 0, 'actor/pg_clipfrac_lower': c !== lr && A < 0 ? 1 : 0, 'actor/ppo_kl': -lr });
        if (input.mask[k] !== 1) continue;
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
    let G = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.mask[k] !== 1) continue;
      tokenLoss[k] = -Abar * ratio;
      G += input.upstream[k]!;
    }
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.mask[k] === 1 && live[t] === 1) grad[k] = (G * -Abar * ratio) / (n + 1e-8);
    }
  }
  return { value: { tokenLoss, gradLogpTheta: grad }, metrics: m.result() };
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
    for (let t = 0; t < T && first < 0; t++) if (input.mask[i * T + t] === 1) first = i * T + t;
    const pos = input.rewards !== undefined ? input.rewards[i]! > 0 : first >= 0 && input.advantages[first]! > 0;
    if (pos) positives += 1;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (!visited(input, k)) continue;
      const A = input.advantages[k]!;
      const r = Math.exp(det[k]! - input.logpOld[k]!);
      const coef = pos ? params.positiveWeight : params.negativeWeight * Math.min(1, Math.max(0, r));
      if (input.mask[k] === 1) {
        tokenLoss[k] = -coef * A * input.logpTheta[k]!;
        grad[k] = input.upstream[k]! * -coef * A;
      }
      if (counted(input, k)) m.add({ 'actor/ppo_kl': input.logpOld[k]! - input.logpTheta[k]!, 'actor/topr_negative_clipfrac': !pos && r > 1 ? 1 : 0 });
    }
  }
  return { value: { tokenLoss, gradLogpTheta: grad }, metrics: { ...m.result(), 'actor/topr_positive_ratio': B > 0 ? positives / (B + 1e-8) : 0 } };
};

/**
 * SAPO (arXiv 2511.20347; verl / TRL `sapo`): L = −σ(τ(r − 1))·(4/τ)·A, τ = tauPos if A > 0 else tauNeg,
 * r = exp(clamp(ℓθ − ℓold, ±20)). dL/dℓθ = −4·A·σ(1 − σ)·r.
 */
export const sapo: LossFn<SapoParams> = (input, params) => {
  const n = input.mask.length;
  const tokenLoss = new Float64Array(n);
  const grad = new Float64Array(n);
  const m = new Means(['actor/pg_clipfrac', 'actor/pg_clipfrac_lower', 'actor/ppo_kl', 'actor/ratio_mean', 'actor/sapo_gate_mean']);
  for (let k = 0; k < n; k++) {
    if (!visited(input, k)) continue;
    const raw = input.logpTheta[k]! - input.logpOld[k]!;
    const d = clampLog(raw);
    const r = Math.exp(d);
    const A = input.advantages[k]!;
    const tau = A > 0 ? params.tauPos : params.tauNeg;
    const sig = 1 / (1 + Math.exp(-tau * (r - 1)));
    if (input.mask[k] === 1) {
      tokenLoss[k] = -sig * (4 / tau) * A;
      grad[k] = d === raw ? input.upstream[k]! * -4 * A * sig * (1 - sig) * r : 0;
    }
    // verl sapo reports pg_clipfrac = pg_clipfrac_lower = 0 (core_algos.py l.1692–1693)
    if (counted(input, k)) m.add({ 'actor/pg_clipfrac': 0, 'actor/pg_clipfrac_lower': 0, 'actor/ppo_kl': -d, 'actor/ratio_mean': r, 'actor/sapo_gate_mean': sig * (4 / tau) });
  }
  return { value: { tokenLoss, gradLogpTheta: grad }, metrics: m.result() };
};

/**
 * CISPO (MiniMax-M1, arXiv 2506.13585; verl `cispo`): L = −sg[clip(r, 1−ε_low, 1+ε_high)]·A·ℓθ.
 * The clipped ratio is detached (evaluated at `logpThetaDetached`), so dL/dℓθ = −clip(r)·A.
 * MetricRecord: `actor/pg_clipfrac` (r ≠ clip(r)), `actor/pg_clipfrac_lower` (0), `actor/ppo_kl`, `actor/ratio_mean`.
 */
export const cispo: LossFn<CispoParams> = (input, params) => {
  const n = input.mask.length;
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
    const A = input.advantages[k]!;
    if (input.mask[k] === 1) {
      tokenLoss[k] = -c * A * input.logpTheta[k]!;
      grad[k] = input.upstream[k]! * -c * A;
    }
    // verl cispo: ppo_kl of the ±20-clamped log-ratio (core_algos.py l.2070–2072), clipfrac r ≠ clip(r) (l.2086)
    if (counted(input, k)) m.add({ 'actor/pg_clipfrac': c !== r ? 1 : 0, 'actor/pg_clipfrac_lower': 0, 'actor/ppo_kl': -d, 'actor/ratio_mean': r });
  }
  return { value: { tokenLoss, gradLogpTheta: grad }, metrics: m.result() };
};

/** REINFORCE (verl bypass `reinforce`): L = −A·ℓθ; the correction weight w multiplies it through `upstream`. */
export const reinforce: LossFn<Record<string, never>> = (input) => {
  const n = input.mask.length;
  const tokenLoss = new Float64Array(n);
  const grad = new Float64Array(n);
  const m = new Means(['actor/ppo_kl']);
  for (let k = 0; k < n; k++) {
    if (!visited(input, k)) continue;
    const A = input.advantages[k]!;
    if (input.mask[k] === 1) {
      tokenLoss[k] = -A * input.logpTheta[k]!;
      grad[k] = input.upstream[k]! * -A;
    }
    if (counted(input, k)) m.add({ 'actor/ppo_kl': input.logpOld[k]! - input.logpTheta[k]! });
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
  let seqs = 0;
  let dropPos = 0;
  let dropNeg = 0;
  let belowLow = 0;
  let capped = 0;
  let sSum = 0;
  let wSum = 0;
  for (let i = 0; i < B; i++) {
    let sp = 0;
    let sm = 0;
    let sa = 0;
    let c = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.mask[k] !== 1) continue;
      sp += input.logpTheta[k]! - input.logpOld[k]!;
      sm += input.logpOld[k]! - input.logpRollout[k]!;
      sa += input.advantages[k]!;
      c += 1;
    }
    if (c === 0) continue;
    seqs += 1;
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
      if (A >= 0) dropPos += 1;
      else dropNeg += 1;
    }
    if (A >= 0 && s < 1 - params.epsPosLow) belowLow += 1;
    if (lwc !== lw) capped += 1;
    sSum += s;
    wSum += w;
    const loss = params.mode === 'drop' ? (inBand ? -w * s * A : 0) : -w * clip(s, lo, hi) * A;
    const dLossDs = inBand && lpc === lp ? -w * A : 0;
    let G = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.mask[k] !== 1) continue;
      tokenLoss[k] = loss;
      G += input.upstream[k]!;
    }
    if (dLossDs === 0) continue;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.mask[k] === 1) grad[k] = (G * dLossDs * s) / c;
    }
  }
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
  const n = input.mask.length;
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
    if (input.mask[k] === 1) {
      tokenLoss[k] = ok === 1 ? -A * w * input.logpTheta[k]! : 0;
      grad[k] = ok === 1 ? input.upstream[k]! * -A * w : 0;
    }
    if (counted(input, k)) m.add({ 'actor/pg_clipfrac': 1 - ok, 'actor/pg_clipfrac_lower': r > c ? ok : 0, 'actor/ppo_kl': -d });
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
export const ipo: LossFn<IpoParams> = (input, params) => deltaMaskLoss(input, params.c, (p, q) => Math.abs(p - q) <= params.threshold);

/** Every policy loss by its config name. */
export const losses = {
  'ppo-clip': ppoClip,
  gspo,
  sapo,
  cispo,
  reinforce,
  tbpo,
  'dppo-tv': dppoTv,
  'dppo-kl': dppoKl,
  ipo,
  luspo,
  vespo,
  geo_mean: geoMean,
  topr,
} as const satisfies Record<string, LossFn>;

/** Config name of a policy loss. */
export type LossName = keyof typeof losses;
