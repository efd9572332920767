// Rollout correction: detached per-token weights and rejection masks from (logpOld, logpRollout, mask).
// Not the policy loss (see losses.ts): weights here never depend on logpTheta and carry no gradient.

import type { Estimate, MetricRecord, BatchShape } from './types.js';
import { LOG_RATIO_BOUND, boundedExp, rowCounts } from './types.js';

/**
 * Where a rejected token goes: `'kept'` — it leaves the numerator and the denominator of the
 * aggregated loss (verl rollout rejection: the modified `response_mask` is the loss mask);
 * `'original'` — it leaves only the numerator, the denominator still counts it
 * (TRL / NeMo-RL / OpenRLHF / slime masks, verl IcePop zero weights).
 */
export type Denominator = 'kept' | 'original';

/** Inputs shared by every correction estimator (all `(B, T)` flat unless noted). */
export interface CorrectionInput {
  /** EstimateBatch shape. */
  readonly shape: BatchShape;
  /** ℓold: trainer log-probs at θ_old, `(B, T)`. */
  readonly logpOld: Float64Array;
  /** ℓroll: rollout-engine log-probs, `(B, T)`. */
  readonly logpRollout: Float64Array;
  /** Response mask m ∈ {0, 1}, `(B, T)`. */
  readonly mask: Float64Array;
  /** Per-token advantages before any rectification, `(B, T)` (used by `ais` and `opsm`). */
  readonly advantages: Float64Array;
  /**
   * ℓθ detached, `(B, T)`: read only by the stages that compare the old policy with the current one
   * (`opsm` with `form: "slime"`; see {@link correctionNeedsTheta}).
   */
  readonly logpTheta?: Float64Array | undefined;
}

/** What one correction stage returns. */
export interface CorrectionStep {
  /** Multiplicative weight factor per token, `(B, T)` (1 where the stage does not reweight). */
  readonly factor: Float64Array;
  /** Keep mask of this stage, `(B, T)`: 0 = rejected, 1 = kept. */
  readonly keep: Float64Array;
  /** True when the factor is an advantage rectification (AIS): it is also folded into the reported advantages. */
  readonly rectifiesAdvantage: boolean;
  /**
   * verl's `rollout_corr/rollout_is_*` metrics (names without the `rollout_corr/` prefix) when the stage
   * is one of verl's `rollout_is` modes (`tis`, `seq-tis`, `icepop`); the first such stage of a chain
   * reports them globally, as verl has one IS stage.
   */
  readonly verlIsMetrics?: MetricRecord | undefined;
  /** Metrics under a stack's own names, reported as `rollout_corr/<name>` without the stage key. */
  readonly stackMetrics?: MetricRecord | undefined;
}

/**
 * One correction estimator: `(input, params, weightsSoFar) → { factor, keep }` plus metrics
 * (metric names without the `rollout_corr/<stage>/` prefix that {@link applyCorrection} adds).
 * `weightsSoFar` is the product of the factors of the previous stages (used by `batch-norm`).
 */
export type CorrectionFn<P = never> = (
  input: CorrectionInput,
  params: P,
  weightsSoFar: Float64Array,
) => Estimate<CorrectionStep>;

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
}
/**
 * Which two policies `opsm` compares: `deepseek` — the row KL mean_t(ℓroll − ℓold) of the rollout
 * against the old policy, dropping rows with mean advantage < 0 (DeepSeek-V3.2, TRL); `slime` — slime
 * without `--use-rollout-logprobs`: the row KL mean_t(ℓold − ℓθ) of the old policy against the current
 * one (ℓθ detached), dropping the tokens with A_t < 0 of such rows (slime `compute_opsm_mask`).
 */
export type OpsmForm = 'deepseek' | 'slime';
/** `opsm` threshold (DeepSeek-V3.2 off-policy sequence masking). */
export interface OpsmParams {
  /** Drop a sequence with mean advantage < 0 when its row KL > delta. @defaultValue 1e-4 (slime `--opsm-delta`) */
  readonly delta: number;
  /** Which policies the row KL compares. @defaultValue 'deepseek' */
  readonly form?: OpsmForm | undefined;
}
/** Two-sided ratio band of `outlier-veto`. */
export interface OutlierVetoParams {
  /** @defaultValue 1e-4 */
  readonly lo: number;
  /** @defaultValue 100 */
  readonly hi: number;
}
/** `dp-filter` band on Δp = e^ℓold − e^ℓroll. */
export interface DpFilterParams {
  /** @defaultValue -0.2 */
  readonly lo: number;
  /** @defaultValue 0.2 */
  readonly hi: number;
  /** @defaultValue 'token' */
  readonly level: DpFilterLevel;
}
/**
 * Level of `dp-filter`: `token` (each token on its own Δp), `sequence` (a row passes iff every valid
 * token passes), or ROLL's aggregated levels `roll-geometric` / `roll-sequence` (the masked mean /
 * masked sum of Δp over the row's valid tokens, broadcast to the row).
 */
export type DpFilterLevel = CorrectionLevel | 'roll-geometric' | 'roll-sequence';
/** `m2po` second-moment budget. */
export interface M2poParams {
  /** Largest allowed mean of δ² over the kept tokens. @defaultValue 0.04 */
  readonly tau: number;
}
/** Token or sequence level. */
export type CorrectionLevel = 'token' | 'sequence';
/** IcePop band. */
export interface IcepopParams {
  /** @defaultValue 0.5 (verl `decoupled_token_icepop` preset) */
  readonly lo: number;
  /** @defaultValue 5 */
  readonly hi: number;
  /** @defaultValue 'token' */
  readonly level: CorrectionLevel;
}
/** Aggregation level of a verl rejection statistic. */
export type RejectionLevel = 'token' | 'seq-sum' | 'seq-mean' | 'seq-max';
/** `rs-k1` and `geo-rs`: ratio band [lo, hi]. */
export interface RejectionK1Params {
  /** CorrectionLevel of the statistic. @defaultValue 'seq-sum' (rs-k1), 'seq-mean' (geo-rs) */
  readonly level: Exclude<RejectionLevel, 'seq-max'>;
  /** Lower ratio bound. @defaultValue 0.5 (rs-k1), 0.999 (geo-rs) */
  readonly lo: number;
  /** Upper ratio bound. @defaultValue 2 (rs-k1), 1.001 (geo-rs) */
  readonly hi: number;
  /**
   * Reproduce verl's as-coded band ρ ∈ [1/hi, 1/lo] instead of the documented [lo, hi].
   * @defaultValue false
   */
  readonly verlBand: boolean;
}
/** `rs-k2` / `rs-k3`: upper threshold on the statistic. */
export interface RejectionKParams {
  /** @defaultValue 'seq-mean' (verl `decoupled_k3_rs` preset) */
  readonly level: RejectionLevel;
  /** @defaultValue 0.01 */
  readonly hi: number;
}
/** `veto` threshold. */
export interface VetoParams {
  /** Reject a sequence if any valid token has ρ_t < v. @defaultValue 1e-4 */
  readonly v: number;
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

/** One resolved correction stage (name + all parameters, defaults filled in). */
export type CorrectionSpec =
  | { readonly name: 'none' }
  | { readonly name: 'token-is' }
  | ({ readonly name: 'tis' } & CapParams)
  | ({ readonly name: 'seq-tis' } & CapParams)
  | ({ readonly name: 'icepop'; readonly denominator: Denominator } & IcepopParams)
  | ({ readonly name: 'mis-token'; readonly denominator: Denominator } & CapParams)
  | ({ readonly name: 'mis-seq'; readonly denominator: Denominator } & CapParams)
  | ({ readonly name: 'geo-rs'; readonly denominator: Denominator } & RejectionK1Params)
  | ({ readonly name: 'rs-k1'; readonly denominator: Denominator } & RejectionK1Params)
  | ({ readonly name: 'rs-k2'; readonly denominator: Denominator } & RejectionKParams)
  | ({ readonly name: 'rs-k3'; readonly denominator: Denominator } & RejectionKParams)
  | ({ readonly name: 'veto'; readonly denominator: Denominator } & VetoParams)
  | ({ readonly name: 'batch-norm' } & BatchNormParams)
  | ({ readonly name: 'ais' } & AisParams)
  | ({ readonly name: 'opsm'; readonly denominator: Denominator } & OpsmParams)
  | ({ readonly name: 'outlier-veto'; readonly denominator: Denominator } & OutlierVetoParams)
  | ({ readonly name: 'dp-filter'; readonly denominator: Denominator } & DpFilterParams)
  | ({ readonly name: 'm2po'; readonly denominator: Denominator } & M2poParams)
  | ({ readonly name: 'rollout_rs'; readonly denominator: Denominator } & VerlRsParams)
  | ({ readonly name: 'rejection_sampling'; readonly denominator: Denominator } & ArealRsParams)
  | ({ readonly name: 'seq_logprob_error_threshold'; readonly denominator: Denominator } & SeqLogprobErrorParams);

// ---------------------------------------------------------------------------------------------
// helpers

function ones(n: number): Float64Array {
  return new Float64Array(n).fill(1);
}

/** Per-row Σ_t m·δ_t with δ = ℓold − ℓroll, `(B)`. */
function rowLogRatioSums(input: CorrectionInput): Float64Array {
  const { B, T } = input.shape;
  const s = new Float64Array(B);
  for (let i = 0; i < B; i++) {
    let acc = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.mask[k] === 1) acc += input.logpOld[k]! - input.logpRollout[k]!;
    }
    s[i] = acc;
  }
  return s;
}

/** Broadcasts a per-row value to every position of its row, `(B, T)`; callers ignore padded positions. */
function broadcastRows(perRow: Float64Array, shape: BatchShape): Float64Array {
  const { B, T } = shape;
  const out = new Float64Array(B * T);
  for (let i = 0; i < B; i++) out.fill(perRow[i]!, i * T, i * T + T);
  return out;
}

/** Fraction of valid tokens where `pred` holds. */
function tokenFraction(mask: Float64Array, pred: (k: number) => boolean): number {
  let n = 0;
  let c = 0;
  for (let k = 0; k < mask.length; k++) {
    if (mask[k] !== 1) continue;
    n += 1;
    if (pred(k)) c += 1;
  }
  return n > 0 ? c / n : 0;
}

function validMean(x: Float64Array, mask: Float64Array): number {
  let n = 0;
  let s = 0;
  for (let k = 0; k < mask.length; k++) {
    if (mask[k] !== 1) continue;
    n += 1;
    s += x[k]!;
  }
  return n > 0 ? s / n : 0;
}

function validMax(x: Float64Array, mask: Float64Array): number {
  let m = -Infinity;
  for (let k = 0; k < mask.length; k++) if (mask[k] === 1) m = Math.max(m, x[k]!);
  return m === -Infinity ? 0 : m;
}

function validMin(x: Float64Array, mask: Float64Array): number {
  let m = Infinity;
  for (let k = 0; k < mask.length; k++) if (mask[k] === 1) m = Math.min(m, x[k]!);
  return m === Infinity ? 0 : m;
}

/** Fraction of rows (with ≥ 1 valid token) having a valid token with keep = 0. */
function seqRejectedFraction(keep: Float64Array, mask: Float64Array, shape: BatchShape): number {
  const { B, T } = shape;
  let rows = 0;
  let rej = 0;
  for (let i = 0; i < B; i++) {
    let valid = false;
    let rejected = false;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (mask[k] !== 1) continue;
      valid = true;
      if (keep[k] === 0) rejected = true;
    }
    if (valid) rows += 1;
    if (rejected) rej += 1;
  }
  return rows > 0 ? rej / rows : 0;
}

function tokenRatios(input: CorrectionInput): Float64Array {
  const rho = new Float64Array(input.mask.length).fill(1);
  for (let k = 0; k < rho.length; k++) {
    if (input.mask[k] === 1) rho[k] = boundedExp(input.logpOld[k]! - input.logpRollout[k]!);
  }
  return rho;
}

function seqRatios(input: CorrectionInput): Float64Array {
  return broadcastRows(rowLogRatioSums(input).map(boundedExp), input.shape);
}

function zeroMaskedFactor(f: Float64Array, mask: Float64Array): Float64Array {
  for (let k = 0; k < f.length; k++) if (mask[k] !== 1) f[k] = 1;
  return f;
}

/**
 * verl's IS-weight metrics (verl-project 1dda039 `compute_is_metrics`, rollout_corr_helper.py l.660–783),
 * over the **original** mask and all B rows, from this stage's own weights `applied` (0 where IcePop
 * rejects), its raw ratios and its band [lower, upper] (TIS: lower = 1/C):
 * token level — `rollout_is_mean|max|min` of `applied`, `ratio_fraction_high|low` of the raw ratio;
 * sequence level — `max|min` = exp of the max/min row log-ratio sum (max clamped at 20, min not),
 * `ratio_fraction_high|low` over all B rows of the row log-ratio sum against log upper/lower;
 * both — `std` and `eff_sample_size` of clamp(applied, 0, upper) (l.741–759), `seq_mean|std|max|min|
 * max_deviation` of the per-row mean of `applied` (all B rows; an empty row counts 0), and
 * `seq_fraction_high|low` of the per-row mean of the raw ratio.
 */
function verlIsMetrics(input: CorrectionInput, level: CorrectionLevel, raw: Float64Array, applied: Float64Array, upper: number, lower: number): MetricRecord {
  const { B, T } = input.shape;
  const { mask } = input;
  const m: MetricRecord = {};
  const meanOver = (x: Float64Array): number => validMean(x, mask);
  m['rollout_is_mean'] = meanOver(applied);
  if (level === 'sequence') {
    const sums = rowLogRatioSums(input);
    let mx = -Infinity;
    let mn = Infinity;
    for (const v of sums) {
      mx = Math.max(mx, v);
      mn = Math.min(mn, v);
    }
    m['rollout_is_max'] = Math.exp(Math.min(mx, LOG_RATIO_BOUND));
    m['rollout_is_min'] = Math.exp(mn);
    const logU = Math.log(upper);
    const logL = Math.log(lower);
    m['rollout_is_ratio_fraction_high'] = B > 0 ? Array.from(sums).filter((v) => v > logU).length / B : 0;
    m['rollout_is_ratio_fraction_low'] = B > 0 ? Array.from(sums).filter((v) => v < logL).length / B : 0;
  } else {
    m['rollout_is_ratio_fraction_high'] = tokenFraction(mask, (k) => raw[k]! > upper);
    m['rollout_is_ratio_fraction_low'] = tokenFraction(mask, (k) => raw[k]! < lower);
    m['rollout_is_max'] = validMax(applied, mask);
    m['rollout_is_min'] = validMin(applied, mask);
  }
  const clamped = applied.map((w) => Math.min(upper, Math.max(0, w)));
  let count = 0;
  for (let k = 0; k < mask.length; k++) if (mask[k] === 1) count += 1;
  const cm = meanOver(clamped);
  m['rollout_is_std'] = count > 1 ? Math.sqrt(Math.max(0, meanOver(clamped.map((w) => w * w)) - cm * cm)) : 0;
  m['rollout_is_eff_sample_size'] = count > 0 ? 1 / meanOver(clamped.map((w) => (w / (cm + 1e-8)) ** 2)) : 0;
  const seq = new Float64Array(B);
  const rawSeq = new Float64Array(B);
  const n = rowCounts(mask, input.shape);
  for (let i = 0; i < B; i++) {
    let a = 0;
    let r = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (mask[k] !== 1) continue;
      a += applied[k]!;
      r += raw[k]!;
    }
    seq[i] = n[i]! > 0 ? a / n[i]! : 0;
    rawSeq[i] = n[i]! > 0 ? r / n[i]! : 0;
  }
  const sm = B > 0 ? seq.reduce((x, y) => x + y, 0) / B : 0;
  m['rollout_is_seq_mean'] = sm;
  m['rollout_is_seq_std'] = B > 1 ? Math.sqrt(seq.reduce((x, v) => x + (v - sm) ** 2, 0) / (B - 1)) : 0;
  m['rollout_is_seq_max'] = B > 0 ? Math.max(...seq) : 0;
  m['rollout_is_seq_min'] = B > 0 ? Math.min(...seq) : 0;
  m['rollout_is_seq_max_deviation'] = B > 0 ? Math.max(...seq.map((v) => Math.abs(v - 1))) : 0;
  m['rollout_is_seq_fraction_high'] = B > 0 ? rawSeq.filter((v) => v > upper).length / B : 0;
  m['rollout_is_seq_fraction_low'] = B > 0 ? rawSeq.filter((v) => v < lower).length / B : 0;
  return m;
}

// ---------------------------------------------------------------------------------------------
// estimators

/** No correction: w ≡ 1. */
export const noCorrection: CorrectionFn<Record<string, never>> = (input) => {
  const n = input.mask.length;
  return { value: { factor: ones(n), keep: ones(n), rectifiesAdvantage: false }, metrics: {} };
};

/** Untruncated token IS: w_t = exp(clamp(ℓold − ℓroll, ±20)). */
export const tokenIs: CorrectionFn<Record<string, never>> = (input) => {
  const rho = tokenRatios(input);
  return {
    value: { factor: rho, keep: ones(rho.length), rectifiesAdvantage: false },
    metrics: { mean: validMean(rho, input.mask), max: validMax(rho, input.mask), min: validMin(rho, input.mask) },
  };
};

/** Truncated importance weights min(ρ, C) from per-token ratios (token or broadcast sequence ρ). */
function truncatedIs(input: CorrectionInput, rho: Float64Array, C: number, level: CorrectionLevel, lo = 0): Estimate<CorrectionStep> {
  const f = rho.map((r) => Math.min(C, Math.max(lo, r)));
  const verl = verlIsMetrics(input, level, rho, f, C, 1 / C);
  return {
    value: { factor: zeroMaskedFactor(f, input.mask), keep: ones(f.length), rectifiesAdvantage: false, verlIsMetrics: verl },
    metrics: {
      mean: validMean(f, input.mask),
      raw_mean: validMean(rho, input.mask),
      truncated_fraction: tokenFraction(input.mask, (k) => rho[k]! > C),
      ...(lo > 0 ? { truncated_low_fraction: tokenFraction(input.mask, (k) => rho[k]! < lo) } : {}),
    },
  };
}

/**
 * Truncated IS (FlashRL / verl token TIS): w_t = min(ρ_t, C), ρ_t = exp(clamp(ℓold − ℓroll, ±20));
 * with `lo` > 0 the two-sided clamp(ρ_t, lo, C) of TRL / slime / NeMo-RL.
 * @example tis(input, { C: 2 }, w).value.factor // min(ρ, 2) per token
 */
export const tis: CorrectionFn<CapParams> = (input, params) => truncatedIs(input, tokenRatios(input), params.C, 'token', params.lo);

/** Sequence TIS (verl `rollout_is=sequence`): w_i = min(exp(clamp(Σ_t δ_t, ±20)), C), broadcast. */
export const seqTis: CorrectionFn<CapParams> = (input, params) => truncatedIs(input, seqRatios(input), params.C, 'sequence', params.lo);

/**
 * IcePop: w = ρ · 1[lo ≤ ρ ≤ hi], token (ρ_t) or sequence (ρ_i = exp(clamp(Σ δ, ±20))).
 * The zero part is a keep mask whose denominator semantics is the stage's `denominator`.
 */
export const icepop: CorrectionFn<IcepopParams> = (input, params) => {
  const rho = params.level === 'token' ? tokenRatios(input) : seqRatios(input);
  const keep = rho.map((r) => (r >= params.lo && r <= params.hi ? 1 : 0));
  const applied = rho.map((r, k) => r * keep[k]!);
  return {
    value: { factor: rho, keep, rectifiesAdvantage: false, verlIsMetrics: { ...verlIsMetrics(input, params.level, rho, applied, params.hi, params.lo), rollout_is_oob_ratio: tokenFraction(input.mask, (k) => keep[k] === 0) } },
    metrics: {
      mean: validMean(applied, input.mask),
      oob_fraction: tokenFraction(input.mask, (k) => keep[k] === 0),
      low_fraction: tokenFraction(input.mask, (k) => rho[k]! < params.lo),
      high_fraction: tokenFraction(input.mask, (k) => rho[k]! > params.hi),
    },
  };
};

function misStage(level: CorrectionLevel): CorrectionFn<CapParams> {
  return (input, params) => {
    const rho = level === 'token' ? tokenRatios(input) : seqRatios(input);
    const keep = rho.map((r) => (r <= params.C ? 1 : 0));
    return {
      value: { factor: rho, keep, rectifiesAdvantage: false },
      metrics: {
        mean: validMean(rho.map((r, k) => r * keep[k]!), input.mask),
        masked_fraction: tokenFraction(input.mask, (k) => keep[k] === 0),
        seq_masked_fraction: seqRejectedFraction(keep, input.mask, input.shape),
      },
    };
  };
}

/** Token MIS: w_t = ρ_t · 1[ρ_t ≤ C] (reject instead of truncate). */
export const misToken: CorrectionFn<CapParams> = misStage('token');
/** Sequence MIS: w_i = ρ_i · 1[ρ_i ≤ C], ρ_i = exp(clamp(Σ_t δ_t, ±20)). */
export const misSeq: CorrectionFn<CapParams> = misStage('sequence');

type KStat = 'k1' | 'k2' | 'k3';

/** Per-token verl rejection statistic on lr = clamp(ℓold − ℓroll, ±20). */
function tokenStat(kind: KStat, lr: number): number {
  if (kind === 'k1') return -lr;
  if (kind === 'k2') return 0.5 * lr * lr;
  return Math.exp(lr) - 1 - lr;
}

/** Statistic aggregated to the level, broadcast to tokens `(B, T)` (0 on padding). */
function levelStat(input: CorrectionInput, kind: KStat, level: RejectionLevel): Float64Array {
  const { B, T } = input.shape;
  const out = new Float64Array(B * T);
  for (let i = 0; i < B; i++) {
    let sum = 0;
    let n = 0;
    let max = -Infinity;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.mask[k] !== 1) continue;
      const lr = Math.min(LOG_RATIO_BOUND, Math.max(-LOG_RATIO_BOUND, input.logpOld[k]! - input.logpRollout[k]!));
      const s = tokenStat(kind, lr);
      out[k] = s;
      sum += s;
      n += 1;
      max = Math.max(max, s);
    }
    if (level === 'token') continue;
    const v = level === 'seq-sum' ? sum : level === 'seq-mean' ? (n > 0 ? sum / n : 0) : n > 0 ? max : 0;
    for (let t = 0; t < T; t++) if (input.mask[i * T + t] === 1) out[i * T + t] = v;
  }
  return out;
}

/**
 * How a rejection stage reads its statistic for the band metrics: `band(s)` is the value compared with
 * [lower, upper] (k1: the signed log-ratio of the band in use; k2/k3: the statistic), `lower` is null
 * for one-sided statistics.
 */
interface BandReading {
  readonly band: (s: number) => number;
  readonly lower: number | null;
  readonly upper: number;
}

/**
 * Metrics of a rejection stage. `fraction_high`/`fraction_low` follow verl's `compute_rs_metrics`
 * (rollout_corr_helper.py l.468–482): at a sequence level they count non-empty **sequences**, at token
 * level valid tokens; `token_fraction_high`/`token_fraction_low` always count tokens (qrl-sim's own).
 * `std` (l.484–496) is the population std over valid tokens of the band value clamped to [lower or 0, upper];
 * `seq_*` (l.498–517) are over the per-sequence values of non-empty rows (token level: row means).
 */
function rejectionMetrics(stat: Float64Array, keep: Float64Array, input: CorrectionInput, level: RejectionLevel, reading: BandReading): MetricRecord {
  const { B, T } = input.shape;
  const { band, lower, upper } = reading;
  const high = (s: number): boolean => band(s) > upper;
  const low = (s: number): boolean => lower !== null && band(s) < lower;
  const seqValues: number[] = [];
  for (let i = 0; i < B; i++) {
    let n = 0;
    let sum = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.mask[k] !== 1) continue;
      n += 1;
      sum += stat[k]!;
    }
    if (n > 0) seqValues.push(level === 'token' ? sum / n : stat[i * T + firstValid(input.mask, i, T)]!);
  }
  const seqFraction = (pred: (s: number) => boolean): number => (seqValues.length > 0 ? seqValues.filter(pred).length / seqValues.length : 0);
  const lo = lower ?? 0;
  const clamped = stat.map((s) => Math.min(upper, Math.max(lo, band(s))));
  let count = 0;
  for (let k = 0; k < input.mask.length; k++) if (input.mask[k] === 1) count += 1;
  const cm = validMean(clamped, input.mask);
  const std = count > 1 ? Math.sqrt(Math.max(0, validMean(clamped.map((x) => x * x), input.mask) - cm * cm)) : 0;
  const seqMean = seqValues.length > 0 ? seqValues.reduce((a, b) => a + b, 0) / seqValues.length : 0;
  const seqStd = seqValues.length > 1 ? Math.sqrt(seqValues.reduce((a, v) => a + (v - seqMean) ** 2, 0) / (seqValues.length - 1)) : 0;
  const m: MetricRecord = {
    stat_mean: validMean(stat, input.mask),
    stat_max: validMax(stat, input.mask),
    stat_min: validMin(stat, input.mask),
    std,
    masked_fraction: tokenFraction(input.mask, (k) => keep[k] === 0),
    seq_masked_fraction: seqRejectedFraction(keep, input.mask, input.shape),
    fraction_high: level === 'token' ? tokenFraction(input.mask, (k) => high(stat[k]!)) : seqFraction(high),
    token_fraction_high: tokenFraction(input.mask, (k) => high(stat[k]!)),
    seq_mean: seqMean,
    seq_std: seqStd,
    seq_max: seqValues.length > 0 ? Math.max(...seqValues) : 0,
    seq_min: seqValues.length > 0 ? Math.min(...seqValues) : 0,
    seq_max_deviation: seqValues.length > 0 ? Math.max(...seqValues.map(Math.abs)) : 0,
    seq_fraction_high: seqFraction(high),
  };
  if (lower !== null) {
    m['fraction_low'] = level === 'token' ? tokenFraction(input.mask, (k) => low(stat[k]!)) : seqFraction(low);
    m['token_fraction_low'] = tokenFraction(input.mask, (k) => low(stat[k]!));
    m['seq_fraction_low'] = seqFraction(low);
  }
  return m;
}

/** Index (within the row) of the first valid token of row i; the row must have one. */
function firstValid(mask: Float64Array, i: number, T: number): number {
  for (let t = 0; t < T; t++) if (mask[i * T + t] === 1) return t;
  return 0;
}

/**
 * verl k1 rejection (statistic k1 = −log ρ at the level). Documented band (default): keep iff
 * log lo ≤ −k1 ≤ log hi, i.e. lo ≤ ρ_level ≤ hi. `verlBand: true` reproduces verl's code
 * (`rollout_corr_helper.py`): log lo ≤ k1 ≤ log hi, i.e. 1/hi ≤ ρ_level ≤ 1/lo.
 */
export const rsK1: CorrectionFn<RejectionK1Params> = (input, params) => {
  const stat = levelStat(input, 'k1', params.level);
  const a = Math.log(params.lo);
  const b = Math.log(params.hi);
  const inBand = params.verlBand ? (s: number) => a <= s && s <= b : (s: number) => a <= -s && -s <= b;
  const keep = new Float64Array(stat.length).fill(1);
  for (let k = 0; k < stat.length; k++) if (input.mask[k] === 1 && !inBand(stat[k]!)) keep[k] = 0;
  const band = params.verlBand ? (s: number) => s : (s: number) => -s;
  return {
    value: { factor: ones(stat.length), keep, rectifiesAdvantage: false },
    metrics: rejectionMetrics(stat, keep, input, params.level, { band, lower: a, upper: b }),
  };
};

/** Geo-RS: {@link rsK1} at level `seq-mean`, keep iff lo ≤ exp(mean_t δ_t) ≤ hi (defaults 0.999, 1.001). */
export const geoRs: CorrectionFn<RejectionK1Params> = rsK1;

function rsUpper(kind: 'k2' | 'k3'): CorrectionFn<RejectionKParams> {
  return (input, params) => {
    const stat = levelStat(input, kind, params.level);
    const keep = new Float64Array(stat.length).fill(1);
    for (let k = 0; k < stat.length; k++) if (input.mask[k] === 1 && !(stat[k]! <= params.hi)) keep[k] = 0;
    return {
      value: { factor: ones(stat.length), keep, rectifiesAdvantage: false },
      metrics: rejectionMetrics(stat, keep, input, params.level, { band: (s) => s, lower: null, upper: params.hi }),
    };
  };
}

/** verl k2 rejection: stat = ½ lr² at the level, keep iff stat ≤ hi. */
export const rsK2: CorrectionFn<RejectionKParams> = rsUpper('k2');
/** verl k3 rejection: stat = e^lr − 1 − lr at the level, keep iff stat ≤ hi. */
export const rsK3: CorrectionFn<RejectionKParams> = rsUpper('k3');

/** Veto: reject a whole sequence if any valid token has ρ_t < v (verl legacy / slime MIS). */
export const veto: CorrectionFn<VetoParams> = (input, params) => {
  const { B, T } = input.shape;
  const logV = Math.log(params.v);
  const keep = ones(B * T);
  for (let i = 0; i < B; i++) {
    let vetoed = false;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.mask[k] === 1 && input.logpOld[k]! - input.logpRollout[k]! < logV) vetoed = true;
    }
    if (vetoed) keep.fill(0, i * T, i * T + T);
  }
  return {
    value: { factor: ones(B * T), keep, rectifiesAdvantage: false },
    metrics: {
      masked_fraction: tokenFraction(input.mask, (k) => keep[k] === 0),
      seq_masked_fraction: seqRejectedFraction(keep, input.mask, input.shape),
      catastrophic_token_fraction: tokenFraction(input.mask, (k) => input.logpOld[k]! - input.logpRollout[k]! < logV),
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
    mu = validMean(weightsSoFar, input.mask);
  } else {
    const { B, T } = input.shape;
    const n = rowCounts(input.mask, input.shape);
    let s = 0;
    let rows = 0;
    for (let i = 0; i < B; i++) {
      if (n[i]! === 0) {
        // slime divides the sum of the per-sample masked means by the sample count (mis.py l.283–287)
        if (params.level === 'slime-sequence') rows += 1;
        continue;
      }
      let r = 0;
      for (let t = 0; t < T; t++) if (input.mask[i * T + t] === 1) r += weightsSoFar[i * T + t]!;
      s += r / n[i]!;
      rows += 1;
    }
    mu = rows > 0 ? s / rows : 0;
  }
  const factor = mu > 1e-8 ? 1 / mu : 1;
  const n = input.mask.length;
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
  const { mask } = input;
  const rho = tokenRatios(input);
  const wbar = rho.map((r) => Math.min(r, params.C));
  const mean = validMean(wbar, mask);
  const cv = mean > 0 ? sampleStd(wbar, mask) / mean : 0;
  const alphaEss = 1 / Math.sqrt(1 + cv * cv);
  const absDiff = input.logpOld.map((o, k) => Math.abs(o - input.logpRollout[k]!));
  const dbar = validMean(absDiff, mask);
  const alphaMis = Math.min(1, dbar / params.delta);
  const aw = input.advantages.map((a, k) => a * wbar[k]!);
  const deltaSigma = sampleStd(aw, mask) / (sampleStd(input.advantages, mask) + params.eps);
  const alphaVar = Math.max(0, (deltaSigma - params.gamma) / params.gamma);
  const reliability = Math.min(1, Math.max(0, alphaEss - params.betaVar * alphaVar));
  const alpha = reliability * alphaMis;
  const factor = wbar.map((w, k) => (mask[k] === 1 ? 1 + alpha * (w - 1) : 1));
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
      truncated_fraction: tokenFraction(mask, (k) => rho[k]! > params.C),
      weight_mean: validMean(factor, mask),
    },
  };
};


/** Per-row keep mask broadcast to tokens (`rowKeep[i]` = 1 keeps row i). */
function rowKeepMask(rowKeep: (i: number) => boolean, shape: BatchShape): Float64Array {
  const { B, T } = shape;
  const keep = ones(B * T);
  for (let i = 0; i < B; i++) if (!rowKeep(i)) keep.fill(0, i * T, i * T + T);
  return keep;
}

/** Metrics shared by the mask-only stages. */
function maskMetrics(input: CorrectionInput, keep: Float64Array): MetricRecord {
  return {
    masked_fraction: tokenFraction(input.mask, (k) => keep[k] === 0),
    seq_masked_fraction: seqRejectedFraction(keep, input.mask, input.shape),
  };
}

/**
 * OPSM, DeepSeek-V3.2's off-policy sequence masking (arXiv 2512.02556; TRL `get_off_policy_mask`,
 * grpo_trainer.py l.2920–2938; slime `--use-opsm`): drop row i iff its mean advantage is < 0 and
 * mean_t(ℓroll − ℓold) > delta. With `mode: "bypass"` the stage sees ℓθ (detached) as ℓold, which is
 * TRL's form (`sampling_per_token_logps − per_token_logps`) and slime's with `--use-rollout-logprobs`.
 * `form: "slime"` is slime without `--use-rollout-logprobs` (slime 624b824 `compute_opsm_mask`,
 * slime/utils/ppo_utils.py l.79–89, fed with ℓθ and the trainer's ℓold by loss.py l.965, l.1011–1017):
 * row KL mean_t(ℓold − ℓθ) over max(n_i, 1) tokens, and token t of such a row is dropped iff A_t < 0.
 */
export const opsm: CorrectionFn<OpsmParams> = (input, params) => {
  const { B, T } = input.shape;
  const slime = params.form === 'slime';
  if (slime && input.logpTheta === undefined) throw new Error('opsm: form "slime" needs logpTheta (ℓθ detached) in the correction input');
  const n = rowCounts(input.mask, input.shape);
  const kl = new Float64Array(B);
  const adv = new Float64Array(B);
  for (let i = 0; i < B; i++) {
    let s = 0;
    let a = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.mask[k] !== 1) continue;
      s += slime ? input.logpOld[k]! - input.logpTheta![k]! : input.logpRollout[k]! - input.logpOld[k]!;
      a += input.advantages[k]!;
    }
    kl[i] = s / Math.max(n[i]!, 1);
    adv[i] = a / Math.max(n[i]!, 1);
  }
  const keep = slime
    ? input.advantages.map((a, k) => (a < 0 && kl[Math.floor(k / T)]! > params.delta ? 0 : 1))
    : rowKeepMask((i) => adv[i]! >= 0 || kl[i]! <= params.delta, input.shape);
  return {
    value: { factor: ones(B * T), keep, rectifiesAdvantage: false },
    metrics: { ...maskMetrics(input, keep), seq_kl_mean: validMean(broadcastRows(kl, input.shape), input.mask) },
  };
};

/** True when a stage of the chain reads ℓθ ({@link CorrectionInput.logpTheta}): it must then run per mini-batch. */
export function correctionNeedsTheta(specs: readonly CorrectionSpec[]): boolean {
  return specs.some((s) => s.name === 'opsm' && s.form === 'slime');
}

/**
 * Two-sided outlier-token veto (SkyRL `outlier_token_is_threshold_low/high`): reject row i if any
 * valid token has ρ_t < lo or ρ_t > hi (ρ_t = exp(clamp(δ_t, ±20))).
 */
export const outlierVeto: CorrectionFn<OutlierVetoParams> = (input, params) => {
  const rho = tokenRatios(input);
  const { T } = input.shape;
  const out = (k: number): boolean => rho[k]! < params.lo || rho[k]! > params.hi;
  const keep = rowKeepMask((i) => {
    for (let t = 0; t < T; t++) if (input.mask[i * T + t] === 1 && out(i * T + t)) return false;
    return true;
  }, input.shape);
  return {
    value: { factor: ones(rho.length), keep, rectifiesAdvantage: false },
    metrics: {
      ...maskMetrics(input, keep),
      low_token_fraction: tokenFraction(input.mask, (k) => rho[k]! < params.lo),
      high_token_fraction: tokenFraction(input.mask, (k) => rho[k]! > params.hi),
    },
  };
};

/**
 * ROLL's row aggregates of Δp (`roll/utils/train_infer_corrections.py` l.25 and l.30, commit 8eb27cc):
 * the masked mean and masked sum over the row's n valid tokens, 0 for an empty row (`masked_mean` /
 * `masked_sum` in `roll/utils/functionals.py` l.285–297).
 */
const rollDpAggregates = {
  'roll-geometric': (sum: number, n: number): number => (n > 0 ? sum / n : 0),
  'roll-sequence': (sum: number): number => sum,
} as const satisfies Record<Exclude<DpFilterLevel, CorrectionLevel>, (sum: number, n: number) => number>;

/**
 * Δp filter (ROLL `train_infer_corrections.py` `diff_low/high`): with Δp_t = e^ℓold − e^ℓroll, keep
 * a token iff lo ≤ Δp_t ≤ hi (`token`), a row iff all its tokens pass (`sequence`), or a row iff
 * lo ≤ agg_i ≤ hi for ROLL's row aggregate agg_i = mean (`roll-geometric`) or sum (`roll-sequence`)
 * of Δp over its valid tokens.
 */
export const dpFilter: CorrectionFn<DpFilterParams> = (input, params) => {
  const dp = input.logpOld.map((o, k) => Math.exp(o) - Math.exp(input.logpRollout[k]!));
  const inBand = (x: number): boolean => x >= params.lo && x <= params.hi;
  const pass = (k: number): boolean => inBand(dp[k]!);
  const { T } = input.shape;
  const level = params.level;
  const keep =
    level === 'token'
      ? dp.map((_, k) => (input.mask[k] !== 1 || pass(k) ? 1 : 0))
      : level === 'sequence'
        ? rowKeepMask((i) => {
            for (let t = 0; t < T; t++) if (input.mask[i * T + t] === 1 && !pass(i * T + t)) return false;
            return true;
          }, input.shape)
        : rowKeepMask((i) => {
            let sum = 0;
            let n = 0;
            for (let t = 0; t < T; t++) {
              if (input.mask[i * T + t] !== 1) continue;
              sum += dp[i * T + t]!;
              n += 1;
            }
            return inBand(rollDpAggregates[level](sum, n));
          }, input.shape);
  return {
    value: { factor: ones(dp.length), keep, rectifiesAdvantage: false },
    metrics: { ...maskMetrics(input, keep), dp_mean: validMean(dp, input.mask), dp_abs_max: validMax(dp.map(Math.abs), input.mask) },
  };
};

/**
 * M2PO second-moment mask (arXiv 2510.01161; AReaL `actor.m2_threshold`, `_get_m2po_loss_mask` in
 * areal/trainer/ppo/actor.py l.813–850): while the mean of δ_t² over the kept valid tokens is not below
 * tau, reject the kept token with the largest δ_t² (ties: the earliest), keeping at least one token.
 */
export const m2po: CorrectionFn<M2poParams> = (input, params) => {
  const sq = input.logpOld.map((o, k) => (o - input.logpRollout[k]!) ** 2);
  const order: number[] = [];
  for (let k = 0; k < sq.length; k++) if (input.mask[k] === 1) order.push(k);
  order.sort((a, b) => sq[b]! - sq[a]! || a - b);
  let sum = 0;
  for (const k of order) sum += sq[k]!;
  let kept = order.length;
  const keep = ones(sq.length);
  const m2Before = kept > 0 ? sum / kept : 0;
  for (const k of order) {
    if (kept <= 1 || sum / kept < params.tau) break;
    keep[k] = 0;
    sum -= sq[k]!;
    kept -= 1;
  }
  return {
    value: { factor: ones(sq.length), keep, rectifiesAdvantage: false },
    metrics: { ...maskMetrics(input, keep), m2_before: m2Before, m2_after: kept > 0 ? Math.max(0, sum) / kept : 0 },
  };
};

/** One parsed veRL `rollout_rs` option: statistic, level and band. */
export interface VerlRsOption {
  /** veRL's option name, e.g. `seq_mean_k3`. */
  readonly option: string;
  /** Statistic. */
  readonly kind: 'k1' | 'k2' | 'k3';
  /** Aggregation level. */
  readonly level: RejectionLevel;
  /** Lower ratio bound (k1 only; the band is log lower ≤ k1 ≤ log upper, veRL's code), else null. */
  readonly lower: number | null;
  /** Upper bound (k1: a ratio; k2/k3: the statistic). */
  readonly upper: number;
}

const VERL_RS_LEVELS: Record<string, RejectionLevel> = { token: 'token', seq_sum: 'seq-sum', seq_mean: 'seq-mean', seq_max: 'seq-max' };

/**
 * Parses veRL's `rollout_rs` (comma-separated options `token_k1` … `seq_max_k3`, duplicates dropped) and
 * `rollout_rs_threshold` (one threshold shared by every option or one per option; k1: `"lower_upper"` or
 * `upper` with lower = 1/upper; k2/k3: one positive upper bound), as veRL 1dda039
 * `_parse_rollout_rs_thresholds` and `compute_rollout_rejection_mask` (rollout_corr_helper.py l.77–90,
 * l.132–194, l.235–262). Throws an Error naming the offending value.
 */
export function parseVerlRs(rs: string, threshold: string | number): VerlRsOption[] {
  const options: string[] = [];
  for (const o of rs.split(',').map((x) => x.trim()).filter((x) => x !== '')) if (!options.includes(o)) options.push(o);
  if (options.length === 0) throw new Error('rollout_rs must contain at least one option');
  const specs = typeof threshold === 'number' ? [String(threshold)] : threshold.split(',').map((x) => x.trim()).filter((x) => x !== '');
  if (specs.length !== 1 && specs.length !== options.length) throw new Error(`rollout_rs_threshold: expected one threshold or ${options.length}, got ${specs.length}`);
  const num = (x: string, o: string): number => {
    const v = Number(x);
    if (x === '' || !Number.isFinite(v) || v <= 0) throw new Error(`rollout_rs_threshold: thresholds of '${o}' must be positive numbers, got '${x}'`);
    return v;
  };
  return options.map((option, j) => {
    const m = /^(token|seq_sum|seq_mean|seq_max)_(k[123])$/.exec(option);
    if (m === null || option === 'seq_max_k1') throw new Error(`rollout_rs: unknown option '${option}' (token_k1…k3, seq_sum_k1…k3, seq_mean_k1…k3, seq_max_k2, seq_max_k3)`);
    const spec = specs.length === 1 ? specs[0]! : specs[j]!;
    const kind = m[2] as 'k1' | 'k2' | 'k3';
    const level = VERL_RS_LEVELS[m[1]!]!;
    if (kind === 'k1') {
      const [a, b] = spec.includes('_') ? [spec.slice(0, spec.indexOf('_')), spec.slice(spec.indexOf('_') + 1)] : [null, spec];
      const upper = num(b, option);
      const lower = a === null ? 1 / upper : num(a, option);
      if (lower > upper) throw new Error(`rollout_rs_threshold: '${option}' needs lower <= upper, got '${spec}'`);
      return { option, kind, level, lower, upper };
    }
    if (spec.includes('_')) throw new Error(`rollout_rs_threshold: '${option}' takes one upper bound without '_', got '${spec}'`);
    return { option, kind, level, lower: null, upper: num(spec, option) };
  });
}

/** veRL `rollout_rs` parameters, as veRL spells them. */
export interface VerlRsParams {
  /** Comma-separated options, e.g. `"token_k1,seq_max_k3"`. */
  readonly rollout_rs: string;
  /** Thresholds, e.g. `"0.5_2.0,0.01"` or `0.01`. */
  readonly rollout_rs_threshold: string | number;
}

/**
 * veRL's trust-region rejection sampling (`algorithm.rollout_correction.rollout_rs`, veRL 1dda039
 * `compute_rollout_rejection_mask`, rollout_corr_helper.py l.197–413): every option keeps a token or a row
 * by its statistic (k1 with veRL's coded band, as `rs-k1` with `verlBand: true`; k2/k3 ≤ upper), the
 * options' keep masks multiply. Metrics under veRL's names `rollout_rs_<option>_*` (compute_rs_metrics,
 * l.416–519) and `rollout_rs_masked_fraction` / `rollout_rs_seq_masked_fraction` (l.402–406; the latter over
 * all B rows, as veRL).
 */
export const verlRolloutRs: CorrectionFn<VerlRsParams> = (input, params) => {
  const { B, T } = input.shape;
  const keep = ones(B * T);
  const stack: MetricRecord = {};
  for (const o of parseVerlRs(params.rollout_rs, params.rollout_rs_threshold)) {
    const stat = levelStat(input, o.kind, o.level);
    const a = o.lower === null ? null : Math.log(o.lower);
    const b = o.lower === null ? o.upper : Math.log(o.upper);
    const inBand = (x: number): boolean => (a === null ? x <= b : a <= x && x <= b);
    const own = ones(B * T);
    for (let k = 0; k < stat.length; k++) {
      if (input.mask[k] === 1 && !inBand(stat[k]!)) {
        own[k] = 0;
        keep[k] = 0;
      }
    }
    const m = rejectionMetrics(stat, own, input, o.level, { band: (x) => x, lower: a, upper: b });
    const pre = `rollout_rs_${o.option}`;
    stack[`${pre}_mean`] = m['stat_mean']!;
    stack[`${pre}_max`] = m['stat_max']!;
    stack[`${pre}_min`] = m['stat_min']!;
    stack[`${pre}_fraction_high`] = m['fraction_high']!;
    stack[`${pre}_fraction_low`] = m['fraction_low'] ?? 0;
    stack[`${pre}_std`] = m['std']!;
    for (const q of ['seq_mean', 'seq_std', 'seq_max', 'seq_min', 'seq_max_deviation', 'seq_fraction_high']) stack[`${pre}_${q}`] = m[q]!;
    if (m['seq_fraction_low'] !== undefined) stack[`${pre}_seq_fraction_low`] = m['seq_fraction_low'];
    stack[`${pre}_masked_fraction`] = m['masked_fraction']!;
    stack[`${pre}_seq_masked_fraction`] = m['seq_masked_fraction']!;
  }
  stack['rollout_rs_masked_fraction'] = tokenFraction(input.mask, (k) => keep[k] === 0);
  let rejectedRows = 0;
  for (let i = 0; i < B; i++) {
    for (let t = 0; t < T; t++) {
      if (input.mask[i * T + t] === 1 && keep[i * T + t] === 0) {
        rejectedRows += 1;
        break;
      }
    }
  }
  stack['rollout_rs_seq_masked_fraction'] = B > 0 ? rejectedRows / B : 0;
  return {
    value: { factor: ones(B * T), keep, rectifiesAdvantage: false, stackMetrics: stack },
    metrics: maskMetrics(input, keep),
  };
};

/** AReaL `actor.rejection_sampling` parameters, as AReaL spells them (areal/api/cli_args.py l.1505–1600). */
export interface ArealRsParams {
  /** @defaultValue 'token' */
  readonly level: CorrectionLevel;
  /** @defaultValue 'mask' */
  readonly action: 'mask' | 'clamp';
  /** @defaultValue 'ratio' */
  readonly metric: 'ratio' | 'kl_k1' | 'kl_k2' | 'kl_k3' | 'binary_kl';
  /** Sequence aggregation (level `sequence` only). @defaultValue 'mean' */
  readonly agg: 'sum' | 'mean' | 'max';
  /** @defaultValue 5 */
  readonly upper: number;
  /** @defaultValue null (none; 0 for `action: clamp`) */
  readonly lower: number | null;
}

/** Bernoulli KL(P‖Q) from log-probs with p, q clamped to [1e-8, 1 − 1e-8] (AReaL compute_binary_kl_divergence). */
function binaryKl(logP: number, logQ: number): number {
  const eps = 1e-8;
  const p = Math.min(1 - eps, Math.max(eps, Math.exp(logP)));
  const q = Math.min(1 - eps, Math.max(eps, Math.exp(logQ)));
  return p * Math.log(p / q) + (1 - p) * Math.log((1 - p) / (1 - q));
}

/**
 * AReaL's rejection sampling (`apply_rejection_sampling`, areal/utils/functional/functional.py l.190–433 at
 * AReaL cbff54d, 2-D padded path): with lr = ℓold − ℓroll (non-finite → 0) the metric is `ratio` e^lr,
 * `kl_k1` lr, `kl_k2` ½lr², `kl_k3` e^(−lr) − 1 + lr (AReaL's KLEstimator sign, areal/utils/data.py
 * l.1677–1694; not veRL's k3), or `binary_kl` max(KL(p_old‖p_roll), KL(p_roll‖p_old)) of Bernoullis (KPop,
 * l.248–258, l.440–449). Sequence level aggregates per row (ratio in log space: exp(sum|mean|max lr);
 * others arithmetic; counts clamped at 1; an empty row aggregates to 0) and the ratio metric's weight becomes
 * the row's geometric mean exp(mean lr). The weight is the behaviour importance weight e^lr (unclamped);
 * `mask` keeps lower ≤ metric ≤ upper, `clamp` (ratio only) clamps the weight into [lower ?? 0, upper] on the
 * out-of-bounds tokens / rows.
 */
export const arealRejectionSampling: CorrectionFn<ArealRsParams> = (input, params) => {
  const { B, T } = input.shape;
  const n = B * T;
  const lr = new Float64Array(n);
  for (let k = 0; k < n; k++) {
    const d = input.logpOld[k]! - input.logpRollout[k]!;
    lr[k] = Number.isFinite(d) ? d : 0;
  }
  const metricOf = (k: number): number => {
    const x = lr[k]!;
    switch (params.metric) {
      case 'ratio':
        return Math.exp(x);
      case 'kl_k1':
        return x;
      case 'kl_k2':
        return (x * x) / 2;
      case 'kl_k3':
        return Math.exp(-x) - 1 + x;
      case 'binary_kl':
        return Math.max(binaryKl(input.logpOld[k]!, input.logpRollout[k]!), binaryKl(input.logpRollout[k]!, input.logpOld[k]!));
    }
  };
  const inBounds = (v: number): boolean => (params.lower !== null ? v >= params.lower && v <= params.upper : v <= params.upper);
  const weight = new Float64Array(n);
  for (let k = 0; k < n; k++) weight[k] = Math.exp(lr[k]!);
  const original = Float64Array.from(weight);
  const keep = ones(n);
  const ratio = params.metric === 'ratio';
  const lo = params.lower ?? 0;
  if (params.level === 'token') {
    for (let k = 0; k < n; k++) {
      if (input.mask[k] !== 1) continue;
      if (params.action === 'mask') keep[k] = inBounds(metricOf(k)) ? 1 : 0;
      else weight[k] = Math.min(params.upper, Math.max(lo, weight[k]!));
    }
  } else {
    for (let i = 0; i < B; i++) {
      let sum = 0;
      let c = 0;
      let max = -Infinity;
      let lsum = 0;
      for (let t = 0; t < T; t++) {
        const k = i * T + t;
        if (input.mask[k] !== 1) continue;
        const v = ratio ? lr[k]! : metricOf(k);
        sum += v;
        lsum += lr[k]!;
        max = Math.max(max, v);
        c += 1;
      }
      if (ratio) {
        const g = Math.exp(lsum / Math.max(c, 1));
        for (let t = 0; t < T; t++) weight[i * T + t] = g;
        for (let t = 0; t < T; t++) original[i * T + t] = g;
      }
      const agg = params.agg === 'sum' ? sum : params.agg === 'mean' ? sum / Math.max(c, 1) : c === 0 ? 0 : max;
      const ok = inBounds(ratio ? Math.exp(agg) : agg);
      if (ok) continue;
      for (let t = 0; t < T; t++) {
        const k = i * T + t;
        if (input.mask[k] !== 1) continue;
        if (params.action === 'mask') keep[k] = 0;
        else weight[k] = Math.min(params.upper, Math.max(lo, weight[k]!));
      }
    }
  }
  let valid = 0;
  let changed = 0;
  for (let k = 0; k < n; k++) {
    if (input.mask[k] !== 1) continue;
    valid += 1;
    if (params.action === 'mask' ? keep[k] === 0 : original[k] !== weight[k]) changed += 1;
  }
  return {
    value: { factor: zeroMaskedFactor(weight, input.mask), keep, rectifiesAdvantage: false },
    metrics: { ...maskMetrics(input, keep), filtered_fraction: changed / Math.max(valid, 1) },
  };
};

/** NeMo-RL's sequence gate on the multiplicative probability error. */
export interface SeqLogprobErrorParams {
  /** Keep a row iff mean_t e^|ℓold − ℓroll| ≤ threshold. @defaultValue 2 (NeMo-RL Nemotron 3 Nano recipe; the config default is null = off) */
  readonly threshold: number;
}

/**
 * NeMo-RL `grpo.seq_logprob_error_threshold` (`compute_and_apply_seq_logprob_error_masking`,
 * nemo_rl/algorithms/grpo.py l.2513–2630 at 7ea279a): per row the multiplicative probability error
 * e_i = Σ_t m·e^|ℓold − ℓroll| / n_i (the per-row `token_mult_prob_error`); a row is kept iff e_i ≤ threshold
 * (its `sample_mask` is zeroed otherwise). Metrics under NeMo-RL's names: `max|mean|min_seq_mult_prob_error`
 * (non-empty rows), the same `_after_mask` over the kept non-empty rows (0 when none), `num_masked_seqs`.
 */
export const seqLogprobError: CorrectionFn<SeqLogprobErrorParams> = (input, params) => {
  const { B, T } = input.shape;
  const err: number[] = [];
  const kept: number[] = [];
  let masked = 0;
  const keep = rowKeepMask((i) => {
    let s = 0;
    let n = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (input.mask[k] !== 1) continue;
      s += Math.exp(Math.abs(input.logpOld[k]! - input.logpRollout[k]!));
      n += 1;
    }
    const e = n > 0 ? s / n : 0;
    const ok = e <= params.threshold;
    if (n > 0) {
      err.push(e);
      if (ok) kept.push(e);
    }
    if (!ok) masked += 1;
    return ok;
  }, input.shape);
  const stats = (xs: number[], suffix: string): MetricRecord => ({
    [`max_seq_mult_prob_error${suffix}`]: xs.length > 0 ? Math.max(...xs) : 0,
    [`mean_seq_mult_prob_error${suffix}`]: xs.length > 0 ? xs.reduce((a, b) => a + b, 0) / xs.length : 0,
    [`min_seq_mult_prob_error${suffix}`]: xs.length > 0 ? Math.min(...xs) : 0,
  });
  return {
    value: { factor: ones(B * T), keep, rectifiesAdvantage: false },
    metrics: { ...maskMetrics(input, keep), ...stats(err, ''), ...stats(kept, '_after_mask'), num_masked_seqs: masked },
  };
};

/** Every correction estimator by its config name (composition: see {@link applyCorrection}). */
export const corrections = {
  none: noCorrection,
  'token-is': tokenIs,
  tis,
  'seq-tis': seqTis,
  icepop,
  'mis-token': misToken,
  'mis-seq': misSeq,
  'geo-rs': geoRs,
  'rs-k1': rsK1,
  'rs-k2': rsK2,
  'rs-k3': rsK3,
  veto,
  'batch-norm': batchNorm,
  ais,
  opsm,
  'outlier-veto': outlierVeto,
  'dp-filter': dpFilter,
  m2po,
  rollout_rs: verlRolloutRs,
  rejection_sampling: arealRejectionSampling,
  seq_logprob_error_threshold: seqLogprobError,
} as const satisfies Record<string, CorrectionFn>;

/** Config name of a correction estimator. */
export type CorrectionName = keyof typeof corrections;

/** Result of a (possibly composed) correction. */
export interface CorrectionResult {
  /** Detached weights `(B, T)`: product of the stages' factors; 0 wherever `mask` is 0. */
  readonly weights: Float64Array;
  /** Effective loss mask `(B, T)` (numerator): original mask AND every stage's keep mask. */
  readonly mask: Float64Array;
  /** Denominator mask `(B, T)`: original mask AND the keep masks of stages with `denominator: 'kept'`. */
  readonly denominatorMask: Float64Array;
  /** Per-token advantages after rectification (AIS), `(B, T)`; equal to the input where no stage rectifies. */
  readonly advantages: Float64Array;
}

/** Metric key of a stage: its name, plus the level for the rs family. */
function stageKey(spec: CorrectionSpec): string {
  if (spec.name === 'rs-k1' || spec.name === 'rs-k2' || spec.name === 'rs-k3') return `${spec.name}-${spec.level}`;
  return spec.name;
}

/**
 * Applies correction stages in order: factors multiply, keep masks AND together; each stage's
 * statistics are computed over the original mask (as verl computes IS and RS independently).
 * MetricRecord: `rollout_corr/<stage>/<name>` per stage plus `rollout_corr/masked_fraction`,
 * `rollout_corr/seq_masked_fraction`, `rollout_corr/denominator_masked_fraction`.
 * @example applyCorrection(input, [{ name: 'tis', C: 2 }, { name: 'geo-rs', lo: 0.999, hi: 1.001, level: 'seq-mean', verlBand: false, denominator: 'kept' }])
 */
export function applyCorrection(input: CorrectionInput, specs: readonly CorrectionSpec[]): Estimate<CorrectionResult> {
  const n = input.mask.length;
  const weights = Float64Array.from(input.mask);
  const mask = Float64Array.from(input.mask);
  const denominatorMask = Float64Array.from(input.mask);
  const scale = ones(n);
  const metrics: MetricRecord = {};
  const used = new Map<string, number>();
  let rectified = false;
  let verlIsReported = false;
  for (const spec of specs) {
    const fn = corrections[spec.name] as CorrectionFn<CorrectionSpec>;
    const step = fn(input, spec, weights);
    const removesFromDenominator = 'denominator' in spec && spec.denominator === 'kept';
    for (let k = 0; k < n; k++) {
      if (input.mask[k] !== 1) continue;
      weights[k] = weights[k]! * step.value.factor[k]!;
      if (step.value.rectifiesAdvantage) scale[k] = scale[k]! * step.value.factor[k]!;
      if (step.value.keep[k] === 0) {
        mask[k] = 0;
        if (removesFromDenominator) denominatorMask[k] = 0;
      }
    }
    rectified ||= step.value.rectifiesAdvantage;
    if (step.value.verlIsMetrics !== undefined && !verlIsReported) {
      verlIsReported = true;
      for (const [name, v] of Object.entries(step.value.verlIsMetrics)) metrics[`rollout_corr/${name}`] = v;
    }
    if (step.value.stackMetrics !== undefined) for (const [name, v] of Object.entries(step.value.stackMetrics)) metrics[`rollout_corr/${name}`] = v;
    let key = stageKey(spec);
    const seen = used.get(key) ?? 0;
    used.set(key, seen + 1);
    if (seen > 0) key = `${key}#${seen + 1}`;
    for (const [name, v] of Object.entries(step.metrics)) metrics[`rollout_corr/${key}/${name}`] = v;
  }
  for (let k = 0; k < n; k++) if (mask[k] !== 1) weights[k] = 0;
  const adv = rectified ? input.advantages.map((a, k) => (input.mask[k] === 1 ? a * scale[k]! : 0)) : input.advantages.map((a, k) => (input.mask[k] === 1 ? a : 0));
  metrics['rollout_corr/masked_fraction'] = tokenFraction(input.mask, (k) => mask[k] === 0);
  metrics['rollout_corr/seq_masked_fraction'] = seqRejectedFraction(mask, input.mask, input.shape);
  metrics['rollout_corr/denominator_masked_fraction'] = tokenFraction(input.mask, (k) => denominatorMask[k] === 0);
  return { value: { weights, mask, denominatorMask, advantages: adv }, metrics };
}
