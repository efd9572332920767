// Ratio-threshold rejection: MIS, veRL's k1/k2/k3 statistics (geo-rs, rs-k*, `rollout_rs`), the veto and the outlier veto.
// Not reweighting (weights.ts) and not the other stacks' masks on advantages, Δp or moments (masks.ts).

import type { MetricRecord } from '../types.js';
import { LOG_RATIO_BOUND, maskedMean } from '../types.js';
import type { CorrectionFn, CorrectionInput, CorrectionLevel, RejectionLevel } from './stage.js';
import { maskMetrics, ones, rowKeepMask, seqRatios, seqRejectedFraction, tokenFraction, tokenRatios } from './stage.js';
import { rejectionMetrics } from './verl-metrics.js';
import type { CapParams } from './weights.js';

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
/** Two-sided ratio band of `outlier-veto`. */
export interface OutlierVetoParams {
  /** @defaultValue 1e-4 */
  readonly lo: number;
  /** @defaultValue 100 */
  readonly hi: number;
}

function misStage(level: CorrectionLevel): CorrectionFn<CapParams> {
  return (input, params) => {
    const rho = level === 'token' ? tokenRatios(input) : seqRatios(input);
    const keep = rho.map((r) => (r <= params.C ? 1 : 0));
    return {
      value: { factor: rho, keep, rectifiesAdvantage: false },
      metrics: {
        mean: maskedMean(
          rho.map((r, k) => r * keep[k]!),
          input.responseMask,
        ),
        masked_fraction: tokenFraction(input.responseMask, (k) => keep[k] === 0),
        seq_masked_fraction: seqRejectedFraction(keep, input.responseMask, input.shape),
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
      if (input.responseMask[k] !== 1) continue;
      const lr = Math.min(LOG_RATIO_BOUND, Math.max(-LOG_RATIO_BOUND, input.logpOld[k]! - input.logpRollout[k]!));
      const s = tokenStat(kind, lr);
      out[k] = s;
      sum += s;
      n += 1;
      max = Math.max(max, s);
    }
    if (level === 'token') continue;
    const v = level === 'seq-sum' ? sum : level === 'seq-mean' ? (n > 0 ? sum / n : 0) : n > 0 ? max : 0;
    for (let t = 0; t < T; t++) if (input.responseMask[i * T + t] === 1) out[i * T + t] = v;
  }
  return out;
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
  for (let k = 0; k < stat.length; k++) if (input.responseMask[k] === 1 && !inBand(stat[k]!)) keep[k] = 0;
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
    for (let k = 0; k < stat.length; k++) if (input.responseMask[k] === 1 && !(stat[k]! <= params.hi)) keep[k] = 0;
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
      if (input.responseMask[k] === 1 && input.logpOld[k]! - input.logpRollout[k]! < logV) vetoed = true;
    }
    if (vetoed) keep.fill(0, i * T, i * T + T);
  }
  return {
    value: { factor: ones(B * T), keep, rectifiesAdvantage: false },
    metrics: {
      masked_fraction: tokenFraction(input.responseMask, (k) => keep[k] === 0),
      seq_masked_fraction: seqRejectedFraction(keep, input.responseMask, input.shape),
      catastrophic_token_fraction: tokenFraction(
        input.responseMask,
        (k) => input.logpOld[k]! - input.logpRollout[k]! < logV,
      ),
    },
  };
};

/**
 * Two-sided outlier-token veto (SkyRL `outlier_token_is_threshold_low/high`): reject row i if any
 * valid token has ρ_t < lo or ρ_t > hi (ρ_t = exp(clamp(δ_t, ±20))).
 */
export const outlierVeto: CorrectionFn<OutlierVetoParams> = (input, params) => {
  const rho = tokenRatios(input);
  const { T } = input.shape;
  const out = (k: number): boolean => rho[k]! < params.lo || rho[k]! > params.hi;
  const keep = rowKeepMask((i) => {
    for (let t = 0; t < T; t++) if (input.responseMask[i * T + t] === 1 && out(i * T + t)) return false;
    return true;
  }, input.shape);
  return {
    value: { factor: ones(rho.length), keep, rectifiesAdvantage: false },
    metrics: {
      ...maskMetrics(input, keep),
      low_token_fraction: tokenFraction(input.responseMask, (k) => rho[k]! < params.lo),
      high_token_fraction: tokenFraction(input.responseMask, (k) => rho[k]! > params.hi),
    },
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

const VERL_RS_LEVELS: Record<string, RejectionLevel> = {
  token: 'token',
  seq_sum: 'seq-sum',
  seq_mean: 'seq-mean',
  seq_max: 'seq-max',
};

/**
 * Parses veRL's `rollout_rs` (comma-separated options `token_k1` … `seq_max_k3`, duplicates dropped) and
 * `rollout_rs_threshold` (one threshold shared by every option or one per option; k1: `"lower_upper"` or
 * `upper` with lower = 1/upper; k2/k3: one positive upper bound), as veRL 1dda039
 * `_parse_rollout_rs_thresholds` and `compute_rollout_rejection_mask` (rollout_corr_helper.py l.77–90,
 * l.132–194, l.235–262). Throws an Error naming the offending value.
 */
export function parseVerlRs(rs: string, threshold: string | number): VerlRsOption[] {
  const options: string[] = [];
  for (const o of rs
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== ''))
    if (!options.includes(o)) options.push(o);
  if (options.length === 0) throw new Error('rollout_rs must contain at least one option');
  const specs =
    typeof threshold === 'number'
      ? [String(threshold)]
      : threshold
          .split(',')
          .map((x) => x.trim())
          .filter((x) => x !== '');
  if (specs.length !== 1 && specs.length !== options.length)
    throw new Error(`rollout_rs_threshold: expected one threshold or ${options.length}, got ${specs.length}`);
  const num = (x: string, o: string): number => {
    const v = Number(x);
    if (x === '' || !Number.isFinite(v) || v <= 0)
      throw new Error(`rollout_rs_threshold: thresholds of '${o}' must be positive numbers, got '${x}'`);
    return v;
  };
  return options.map((option, j) => {
    const m = /^(token|seq_sum|seq_mean|seq_max)_(k[123])$/.exec(option);
    if (m === null || option === 'seq_max_k1')
      throw new Error(
        `rollout_rs: unknown option '${option}' (token_k1…k3, seq_sum_k1…k3, seq_mean_k1…k3, seq_max_k2, seq_max_k3)`,
      );
    const spec = specs.length === 1 ? specs[0]! : specs[j]!;
    const kind = m[2] as 'k1' | 'k2' | 'k3';
    const level = VERL_RS_LEVELS[m[1]!]!;
    if (kind === 'k1') {
      const [a, b] = spec.includes('_')
        ? [spec.slice(0, spec.indexOf('_')), spec.slice(spec.indexOf('_') + 1)]
        : [null, spec];
      const upper = num(b, option);
      const lower = a === null ? 1 / upper : num(a, option);
      if (lower > upper) throw new Error(`rollout_rs_threshold: '${option}' needs lower <= upper, got '${spec}'`);
      return { option, kind, level, lower, upper };
    }
    if (spec.includes('_'))
      throw new Error(`rollout_rs_threshold: '${option}' takes one upper bound without '_', got '${spec}'`);
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
      if (input.responseMask[k] === 1 && !inBand(stat[k]!)) {
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
    for (const q of ['seq_mean', 'seq_std', 'seq_max', 'seq_min', 'seq_max_deviation', 'seq_fraction_high'])
      stack[`${pre}_${q}`] = m[q]!;
    if (m['seq_fraction_low'] !== undefined) stack[`${pre}_seq_fraction_low`] = m['seq_fraction_low'];
    stack[`${pre}_masked_fraction`] = m['masked_fraction']!;
    stack[`${pre}_seq_masked_fraction`] = m['seq_masked_fraction']!;
  }
  stack['rollout_rs_masked_fraction'] = tokenFraction(input.responseMask, (k) => keep[k] === 0);
  let rejectedRows = 0;
  for (let i = 0; i < B; i++) {
    for (let t = 0; t < T; t++) {
      if (input.responseMask[i * T + t] === 1 && keep[i * T + t] === 0) {
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
