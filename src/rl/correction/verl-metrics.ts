// veRL's rollout-correction metrics replicated: the IS-weight statistics (`rollout_is_*`) and the rejection statistics (`rollout_rs_*`).
// Not a weight or a mask: these read a stage's weights, ratios and keep mask and return logged numbers only.

import type { MetricRecord } from '../types.js';
import { LOG_RATIO_BOUND, maskedMean, rowCounts, rowMaskedSums } from '../types.js';
import type { CorrectionInput, CorrectionLevel, RejectionLevel } from './stage.js';
import { rowLogRatioSums, seqRejectedFraction, tokenFraction, validMax, validMin } from './stage.js';

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
export function verlIsMetrics(
  input: CorrectionInput,
  level: CorrectionLevel,
  raw: Float64Array,
  applied: Float64Array,
  upper: number,
  lower: number,
): MetricRecord {
  const { B } = input.shape;
  const { responseMask } = input;
  const m: MetricRecord = {};
  const meanOver = (x: Float64Array): number => maskedMean(x, responseMask);
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
    m['rollout_is_ratio_fraction_high'] = tokenFraction(responseMask, (k) => raw[k]! > upper);
    m['rollout_is_ratio_fraction_low'] = tokenFraction(responseMask, (k) => raw[k]! < lower);
    m['rollout_is_max'] = validMax(applied, responseMask);
    m['rollout_is_min'] = validMin(applied, responseMask);
  }
  const clamped = applied.map((w) => Math.min(upper, Math.max(0, w)));
  let count = 0;
  for (let k = 0; k < responseMask.length; k++) if (responseMask[k] === 1) count += 1;
  const cm = meanOver(clamped);
  m['rollout_is_std'] = count > 1 ? Math.sqrt(Math.max(0, meanOver(clamped.map((w) => w * w)) - cm * cm)) : 0;
  m['rollout_is_eff_sample_size'] = count > 0 ? 1 / meanOver(clamped.map((w) => (w / (cm + 1e-8)) ** 2)) : 0;
  const n = rowCounts(responseMask, input.shape);
  const seq = rowMaskedSums(responseMask, input.shape, (k) => applied[k]!).sums.map((a, i) =>
    n[i]! > 0 ? a / n[i]! : 0,
  );
  const rawSeq = rowMaskedSums(responseMask, input.shape, (k) => raw[k]!).sums.map((r, i) =>
    n[i]! > 0 ? r / n[i]! : 0,
  );
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

/**
 * How a rejection stage reads its statistic for the band metrics: `band(s)` is the value compared with
 * [lower, upper] (k1: the signed log-ratio of the band in use; k2/k3: the statistic), `lower` is null
 * for one-sided statistics.
 */
export interface BandReading {
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
export function rejectionMetrics(
  stat: Float64Array,
  keep: Float64Array,
  input: CorrectionInput,
  level: RejectionLevel,
  reading: BandReading,
): MetricRecord {
  const { B, T } = input.shape;
  const { band, lower, upper } = reading;
  const high = (s: number): boolean => band(s) > upper;
  const low = (s: number): boolean => lower !== null && band(s) < lower;
  const seqValues: number[] = [];
  const rows = rowMaskedSums(input.responseMask, input.shape, (k) => stat[k]!);
  for (let i = 0; i < B; i++) {
    const n = rows.counts[i]!;
    if (n > 0)
      seqValues.push(level === 'token' ? rows.sums[i]! / n : stat[i * T + firstValid(input.responseMask, i, T)]!);
  }
  const seqFraction = (pred: (s: number) => boolean): number =>
    seqValues.length > 0 ? seqValues.filter(pred).length / seqValues.length : 0;
  const lo = lower ?? 0;
  const clamped = stat.map((s) => Math.min(upper, Math.max(lo, band(s))));
  let count = 0;
  for (let k = 0; k < input.responseMask.length; k++) if (input.responseMask[k] === 1) count += 1;
  const cm = maskedMean(clamped, input.responseMask);
  const std =
    count > 1
      ? Math.sqrt(
          Math.max(
            0,
            maskedMean(
              clamped.map((x) => x * x),
              input.responseMask,
            ) -
              cm * cm,
          ),
        )
      : 0;
  const seqMean = seqValues.length > 0 ? seqValues.reduce((a, b) => a + b, 0) / seqValues.length : 0;
  const seqStd =
    seqValues.length > 1
      ? Math.sqrt(seqValues.reduce((a, v) => a + (v - seqMean) ** 2, 0) / (seqValues.length - 1))
      : 0;
  const m: MetricRecord = {
    stat_mean: maskedMean(stat, input.responseMask),
    stat_max: validMax(stat, input.responseMask),
    stat_min: validMin(stat, input.responseMask),
    std,
    masked_fraction: tokenFraction(input.responseMask, (k) => keep[k] === 0),
    seq_masked_fraction: seqRejectedFraction(keep, input.responseMask, input.shape),
    fraction_high: level === 'token' ? tokenFraction(input.responseMask, (k) => high(stat[k]!)) : seqFraction(high),
    token_fraction_high: tokenFraction(input.responseMask, (k) => high(stat[k]!)),
    seq_mean: seqMean,
    seq_std: seqStd,
    seq_max: seqValues.length > 0 ? Math.max(...seqValues) : 0,
    seq_min: seqValues.length > 0 ? Math.min(...seqValues) : 0,
    seq_max_deviation: seqValues.length > 0 ? Math.max(...seqValues.map(Math.abs)) : 0,
    seq_fraction_high: seqFraction(high),
  };
  if (lower !== null) {
    m['fraction_low'] = level === 'token' ? tokenFraction(input.responseMask, (k) => low(stat[k]!)) : seqFraction(low);
    m['token_fraction_low'] = tokenFraction(input.responseMask, (k) => low(stat[k]!));
    m['seq_fraction_low'] = seqFraction(low);
  }
  return m;
}

/** Index (within the row) of the first valid token of row i; the row must have one. */
export function firstValid(mask: Float64Array, i: number, T: number): number {
  for (let t = 0; t < T; t++) if (mask[i * T + t] === 1) return t;
  return 0;
}
