// Importance-weight corrections: untruncated and truncated IS (token and sequence), IcePop, batch normalisation, AIS.
// Not the rejection families (rejection.ts, masks.ts): these stages reweight; only IcePop also rejects, by its band.

import type { Estimate, NoParams } from '../types.js';
import { maskedMean, rowCounts } from '../types.js';
import type { CorrectionFn, CorrectionInput, CorrectionLevel, CorrectionStep } from './stage.js';
import { factorOneOffResponse, ones, seqRatios, tokenFraction, tokenRatios, validMax, validMin } from './stage.js';
import { verlIsMetrics } from './verl-metrics.js';

/** Truncation cap `C` (`tis`, `seq-tis`, `mis-token`, `mis-seq`). */
export interface CapParams {
  /** @defaultValue 2 (verl `rollout_is_threshold`, FlashRL recipe, MIS paper) */
  readonly C: number;
  /**
   * Lower truncation of `tis` / `seq-tis`: w = clamp(ρ, lo, C) (TRL `token_truncate` /
   * `sequence_truncate` with `vllm_importance_sampling_clip_min`, slime `--tis-clip-low`).
   * @defaultValue 0 (upper cap only, verl)
   */
  readonly lo?: number | undefined;
  /**
   * `tis` only: the policy of the ratio's numerator, `old` ρ = π_old/π_roll, or `current`
   * ρ = sg[πθ]/π_roll (slime PR 2084 `off_policy_is_function`: corrects staleness as well as the
   * mismatch). @defaultValue 'old'
   */
  readonly anchor?: 'old' | 'current' | undefined;
}
/** IcePop band. */
export interface IcepopParams {
  /** @defaultValue 0.5 (verl `decoupled_token_icepop` preset) */
  readonly lo: number;
  /** @defaultValue 5 */
  readonly hi: number;
  /** @defaultValue 'token' */
  readonly level: CorrectionLevel;
}
/** `batch-norm` level. */
export interface BatchNormParams {
  /**
   * `token`, `sequence` (veRL: mean over non-empty rows of the row means), or `slime-sequence` (slime
   * `tis_batch_normalize` at `tis_level: sequence`: mean over all B rows, an empty row's mean 0).
   * @defaultValue 'token'
   */
  readonly level: CorrectionLevel | 'slime-sequence';
}
/** AIS hyper-parameters (AIS paper App. C.4; β_var has no published value). */
export interface AisParams {
  /** Truncation threshold, C ≥ 1. @defaultValue 5 */
  readonly C: number;
  /** Saturation threshold of α_mis. @defaultValue 0.02 */
  readonly delta: number;
  /** Variance tolerance of α_var. @defaultValue 1.2 */
  readonly gamma: number;
  /** Weight of α_var in the reliability gate. @defaultValue 1 (not published; our choice) */
  readonly betaVar: number;
  /** Stabiliser in Δσ. @defaultValue 1e-6 */
  readonly eps: number;
}

/** No correction: w ≡ 1. */
export const noCorrection: CorrectionFn<NoParams> = (input) => {
  const n = input.responseMask.length;
  return { value: { factor: ones(n), keep: ones(n), rectifiesAdvantage: false }, metrics: {} };
};

/** Untruncated token IS: w_t = exp(clamp(ℓold − ℓroll, ±20)). */
export const tokenIs: CorrectionFn<NoParams> = (input) => {
  const rho = tokenRatios(input);
  return {
    value: { factor: rho, keep: ones(rho.length), rectifiesAdvantage: false },
    metrics: {
      mean: maskedMean(rho, input.responseMask),
      max: validMax(rho, input.responseMask),
      min: validMin(rho, input.responseMask),
    },
  };
};

/** Truncated importance weights min(ρ, C) from per-token ratios (token or broadcast sequence ρ). */
function truncatedIs(
  input: CorrectionInput,
  rho: Float64Array,
  C: number,
  level: CorrectionLevel,
  lo = 0,
): Estimate<CorrectionStep> {
  const f = rho.map((r) => Math.min(C, Math.max(lo, r)));
  const verl = verlIsMetrics(input, level, rho, f, C, 1 / C);
  return {
    value: {
      factor: factorOneOffResponse(f, input.responseMask),
      keep: ones(f.length),
      rectifiesAdvantage: false,
      verlIsMetrics: verl,
    },
    metrics: {
      mean: maskedMean(f, input.responseMask),
      raw_mean: maskedMean(rho, input.responseMask),
      truncated_fraction: tokenFraction(input.responseMask, (k) => rho[k]! > C),
      ...(lo > 0 ? { truncated_low_fraction: tokenFraction(input.responseMask, (k) => rho[k]! < lo) } : {}),
    },
  };
}

/**
 * Truncated IS (FlashRL / verl token TIS): w_t = min(ρ_t, C), ρ_t = exp(clamp(ℓold − ℓroll, ±20));
 * with `lo` > 0 the two-sided clamp(ρ_t, lo, C) of TRL / slime / NeMo-RL.
 * @example tis(input, { C: 2 }, w).value.factor // min(ρ, 2) per token
 */
export const tis: CorrectionFn<CapParams> = (input, params) => {
  if (params.anchor !== 'current') return truncatedIs(input, tokenRatios(input), params.C, 'token', params.lo);
  // slime off_policy_is_function: clip(exp(sg ℓθ − ℓroll), lo, C), ℓθ detached
  if (input.logpTheta === undefined) throw new Error("tis: anchor 'current' needs the detached ℓθ (logpTheta)");
  return truncatedIs(input, tokenRatios({ ...input, logpOld: input.logpTheta }), params.C, 'token', params.lo);
};

/** Sequence TIS (verl `rollout_is=sequence`): w_i = min(exp(clamp(Σ_t δ_t, ±20)), C), broadcast. */
export const seqTis: CorrectionFn<CapParams> = (input, params) =>
  truncatedIs(input, seqRatios(input), params.C, 'sequence', params.lo);

/**
 * IcePop: w = ρ · 1[lo ≤ ρ ≤ hi], token (ρ_t) or sequence (ρ_i = exp(clamp(Σ δ, ±20))).
 * The zero part is a keep mask whose denominator semantics is the stage's `denominator`.
 */
export const icepop: CorrectionFn<IcepopParams> = (input, params) => {
  const rho = params.level === 'token' ? tokenRatios(input) : seqRatios(input);
  const keep = rho.map((r) => (r >= params.lo && r <= params.hi ? 1 : 0));
  const applied = rho.map((r, k) => r * keep[k]!);
  return {
    value: {
      factor: rho,
      keep,
      rectifiesAdvantage: false,
      verlIsMetrics: {
        ...verlIsMetrics(input, params.level, rho, applied, params.hi, params.lo),
        rollout_is_oob_ratio: tokenFraction(input.responseMask, (k) => keep[k] === 0),
      },
    },
    metrics: {
      mean: maskedMean(applied, input.responseMask),
      oob_fraction: tokenFraction(input.responseMask, (k) => keep[k] === 0),
      low_fraction: tokenFraction(input.responseMask, (k) => rho[k]! < params.lo),
      high_fraction: tokenFraction(input.responseMask, (k) => rho[k]! > params.hi),
    },
  };
};

/**
 * EstimateBatch normalisation of the weights so far (verl `rollout_is_batch_normalize`): w ← w / μ_w with
 * μ_w the masked token mean (token) or the mean over rows of per-row masked means (sequence);
 * no change if μ_w ≤ 1e-8. Applied after truncation, so normalised weights can exceed C.
 */
export const batchNorm: CorrectionFn<BatchNormParams> = (input, params, weightsSoFar) => {
  let mu: number;
  if (params.level === 'token') {
    mu = maskedMean(weightsSoFar, input.responseMask);
  } else {
    const { B, T } = input.shape;
    const n = rowCounts(input.responseMask, input.shape);
    let s = 0;
    let rows = 0;
    for (let i = 0; i < B; i++) {
      if (n[i]! === 0) {
        // slime divides the sum of the per-sample masked means by the sample count (mis.py l.283–287)
        if (params.level === 'slime-sequence') rows += 1;
        continue;
      }
      let r = 0;
      for (let t = 0; t < T; t++) if (input.responseMask[i * T + t] === 1) r += weightsSoFar[i * T + t]!;
      s += r / n[i]!;
      rows += 1;
    }
    mu = rows > 0 ? s / rows : 0;
  }
  const factor = mu > 1e-8 ? 1 / mu : 1;
  const n = input.responseMask.length;
  return {
    value: { factor: new Float64Array(n).fill(factor), keep: ones(n), rectifiesAdvantage: false },
    metrics: { factor: mu > 1e-8 ? mu : 1 },
  };
};

/** Bessel-corrected std of the valid entries (0 if fewer than 2). */
function sampleStd(x: Float64Array, mask: Float64Array): number {
  let n = 0;
  let s = 0;
  for (let k = 0; k < x.length; k++) {
    if (mask[k] !== 1) continue;
    n += 1;
    s += x[k]!;
  }
  if (n < 2) return 0;
  const m = s / n;
  let q = 0;
  for (let k = 0; k < x.length; k++) if (mask[k] === 1) q += (x[k]! - m) * (x[k]! - m);
  return Math.sqrt(q / (n - 1));
}

/**
 * AIS — Adaptive Importance Sampling (AIS paper §3.1, Eq. 12–18, Algorithm 1), over all valid tokens:
 * w̄ = min(ρ, C); α_ess = (1 + CV(w̄)²)^(−1/2); α_mis = min(1, mean|δ| / delta);
 * α_var = max(0, (Δσ − γ)/γ) with Δσ = std(A·w̄)/(std(A) + eps);
 * α = clip(α_ess − β_var·α_var, 0, 1)·α_mis; rectification weight w̃ = 1 + α(w̄ − 1), Ã = w̃·A.
 * All stds are Bessel-corrected sample stds (0 with < 2 tokens).
 */
export const ais: CorrectionFn<AisParams> = (input, params) => {
  const { responseMask } = input;
  const rho = tokenRatios(input);
  const wbar = rho.map((r) => Math.min(r, params.C));
  const mean = maskedMean(wbar, responseMask);
  const cv = mean > 0 ? sampleStd(wbar, responseMask) / mean : 0;
  const alphaEss = 1 / Math.sqrt(1 + cv * cv);
  const absDiff = input.logpOld.map((o, k) => Math.abs(o - input.logpRollout[k]!));
  const dbar = maskedMean(absDiff, responseMask);
  const alphaMis = Math.min(1, dbar / params.delta);
  const aw = input.advantages.map((a, k) => a * wbar[k]!);
  const deltaSigma = sampleStd(aw, responseMask) / (sampleStd(input.advantages, responseMask) + params.eps);
  const alphaVar = Math.max(0, (deltaSigma - params.gamma) / params.gamma);
  const reliability = Math.min(1, Math.max(0, alphaEss - params.betaVar * alphaVar));
  const alpha = reliability * alphaMis;
  const factor = wbar.map((w, k) => (responseMask[k] === 1 ? 1 + alpha * (w - 1) : 1));
  return {
    value: { factor, keep: ones(factor.length), rectifiesAdvantage: true },
    metrics: {
      alpha,
      alpha_ess: alphaEss,
      alpha_mis: alphaMis,
      alpha_var: alphaVar,
      reliability,
      delta_sigma: deltaSigma,
      cv,
      ess_ratio: 1 / (1 + cv * cv),
      mean_abs_logp_diff: dbar,
      truncated_fraction: tokenFraction(responseMask, (k) => rho[k]! > params.C),
      weight_mean: maskedMean(factor, responseMask),
    },
  };
};
