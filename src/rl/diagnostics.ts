// Mismatch diagnostics between rollout engine and trainer (KL, |Δp|, χ², perplexities, weight ESS/CV).
// Not used by any loss: these are logged numbers only, computed from detached inputs.

import type { Estimate, MetricRecord, BatchShape } from './types.js';
import { LOG_RATIO_BOUND, acceptRenamed } from './types.js';

/** Inputs of {@link mismatchDiagnostics} (all `(B, T)` flat). */
export interface DiagnosticsInput {
  /** EstimateBatch shape. */
  readonly shape: BatchShape;
  /** ℓold. */
  readonly logpOld: Float64Array;
  /** ℓroll. */
  readonly logpRollout: Float64Array;
  /** Response mask: the generated tokens of each row, over which every diagnostic averages. */
  readonly responseMask: Float64Array;
  /** Applied correction weights (0 where rejected); weight statistics are skipped when absent. */
  readonly weights?: Float64Array | undefined;
  /** Loss mask: the response tokens the correction chain kept (`CorrectionResult.lossMask`). @defaultValue responseMask */
  readonly lossMask?: Float64Array | undefined;
  /** Per-token entropy of πθ, if the caller has logits; logged as `actor/entropy`. */
  readonly entropy?: Float64Array | undefined;
  /**
   * Rows with no valid token in the per-sequence diagnostics (`*_ppl`, `log_ppl_*`, `ppl_ratio`,
   * `chi2_seq`): `'skip'` leaves them out (qrl-sim); `'verl'` averages over all B rows, an empty row
   * having mean log-prob 0 (ppl 1, log-ppl diff 0, sequence ratio 1), as verl's `masked_mean(…, axis=-1)`
   * gives 0/(0 + 1e-8) = 0 (rollout_corr_helper.py l.946–1008). @defaultValue 'skip'
   */
  readonly emptyRows?: EmptyRows | undefined;
}

/** How per-sequence diagnostics treat rows with no valid token (see {@link DiagnosticsInput.emptyRows}). */
export type EmptyRows = 'skip' | 'verl';

function clampLog(x: number): number {
  return Math.min(LOG_RATIO_BOUND, Math.max(-LOG_RATIO_BOUND, x));
}

/**
 * Mismatch diagnostics (names follow verl's `rollout_corr/*` where they exist; formulas in docs/estimators.md):
 * `kl` = mean(ℓroll − ℓold), `k3_kl` = mean(e^lr − lr − 1) with lr = ℓold − ℓroll,
 * `logp_abs_diff_mean|max` = |lr|, `prob_abs_diff_mean` = mean|e^ℓold − e^ℓroll|,
 * `chi2_token` = mean(e^(2 lr)) − 1, `chi2_seq` = mean_i e^(2 Σ_t lr) − 1 (log-ratios clamped ±20),
 * `training_ppl`, `training_log_ppl`, `rollout_ppl`, `rollout_log_ppl`, `log_ppl_diff`,
 * `log_ppl_abs_diff`, `log_ppl_diff_max|min`, `ppl_ratio`, and (qrl-sim's own names) statistics of the
 * applied chain weights over the loss mask: `weights_mean|std|max|min`, `weights_ess_ratio` =
 * 1/mean((w/mean w)²), `weights_cv`. verl's `rollout_is_*` are reported by the IS stage (correction.ts).
 * An input with the former field names `mask` / `effectiveMask` is still accepted.
 */
export function mismatchDiagnostics(given: DiagnosticsInput): Estimate<null> {
  const input = acceptRenamed(given, { mask: 'responseMask', effectiveMask: 'lossMask' });
  const { B, T } = input.shape;
  const { responseMask, logpOld, logpRollout } = input;
  let n = 0;
  let kl = 0;
  let k3 = 0;
  let absMean = 0;
  let absMax = 0;
  let probAbs = 0;
  let chi2 = 0;
  let seqs = 0;
  let chi2Seq = 0;
  let trainPpl = 0;
  let trainLogPpl = 0;
  let rollPpl = 0;
  let rollLogPpl = 0;
  let diff = 0;
  let absDiff = 0;
  let diffMax = -Infinity;
  let diffMin = Infinity;
  let pplRatio = 0;
  for (let i = 0; i < B; i++) {
    let c = 0;
    let so = 0;
    let sr = 0;
    let slr = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (responseMask[k] !== 1) continue;
      const o = logpOld[k]!;
      const r = logpRollout[k]!;
      const lr = o - r;
      n += 1;
      c += 1;
      so += o;
      sr += r;
      slr += lr;
      kl += r - o;
      k3 += Math.exp(lr) - lr - 1;
      absMean += Math.abs(lr);
      absMax = Math.max(absMax, Math.abs(lr));
      probAbs += Math.abs(Math.exp(o) - Math.exp(r));
      chi2 += Math.exp(2 * clampLog(lr));
    }
    if (c === 0 && input.emptyRows !== 'verl') continue;
    seqs += 1;
    chi2Seq += Math.exp(2 * clampLog(slr));
    const mo = c > 0 ? so / c : 0;
    const mr = c > 0 ? sr / c : 0;
    trainLogPpl += -mo;
    trainPpl += Math.exp(-mo);
    rollLogPpl += -mr;
    rollPpl += Math.exp(-mr);
    const d = mr - mo;
    diff += d;
    absDiff += Math.abs(d);
    diffMax = Math.max(diffMax, d);
    diffMin = Math.min(diffMin, d);
    pplRatio += Math.exp(d);
  }
  const tm = (x: number): number => (n > 0 ? x / n : 0);
  const sm = (x: number): number => (seqs > 0 ? x / seqs : 0);
  const metrics: MetricRecord = {
    'rollout_corr/kl': tm(kl),
    'rollout_corr/k3_kl': tm(k3),
    'rollout_corr/logp_abs_diff_mean': tm(absMean),
    'rollout_corr/logp_abs_diff_max': absMax,
    'rollout_corr/prob_abs_diff_mean': tm(probAbs),
    'rollout_corr/chi2_token': n > 0 ? tm(chi2) - 1 : 0,
    'rollout_corr/chi2_seq': seqs > 0 ? sm(chi2Seq) - 1 : 0,
    'rollout_corr/training_ppl': sm(trainPpl),
    'rollout_corr/training_log_ppl': sm(trainLogPpl),
    'rollout_corr/rollout_ppl': sm(rollPpl),
    'rollout_corr/rollout_log_ppl': sm(rollLogPpl),
    'rollout_corr/log_ppl_diff': sm(diff),
    'rollout_corr/log_ppl_abs_diff': sm(absDiff),
    'rollout_corr/log_ppl_diff_max': seqs > 0 ? diffMax : 0,
    'rollout_corr/log_ppl_diff_min': seqs > 0 ? diffMin : 0,
    'rollout_corr/ppl_ratio': sm(pplRatio),
  };
  Object.assign(metrics, stackMismatchMetrics(input));
  if (input.weights !== undefined) Object.assign(metrics, weightStats(input.weights, input.lossMask ?? responseMask));
  if (input.entropy !== undefined) {
    let s = 0;
    for (let k = 0; k < responseMask.length; k++) if (responseMask[k] === 1) s += input.entropy[k]!;
    metrics['actor/entropy'] = tm(s);
  }
  return { value: null, metrics };
}

/** k3 form used by NeMo-RL and prime-rl: e^x − x − 1. */
function k3Of(x: number): number {
  return Math.exp(x) - x - 1;
}

/**
 * Mismatch metrics other stacks log, token means over the response mask (no clamps, as the stacks):
 * NeMo-RL (`ClippedPGLossFn`, nemo_rl/algorithms/loss_functions.py, k3 KL type): `token_mult_prob_error`
 * = mean e^|ℓold − ℓroll|, `gen_kl_error` = mean k3(ℓold − ℓroll) (KL(P_gen‖P_train)), `policy_kl_error`
 * = mean k3(ℓroll − ℓold), `js_divergence_error` = mean ½k3(ℓold − ℓm) + ½k3(ℓroll − ℓm) with
 * ℓm = log(½e^ℓold + ½e^ℓroll); prime-rl (trainer/rl/loss.py l.100–106, 152–153) `masked_mismatch_kl` /
 * `unmasked_mismatch_kl` = mean k3(ℓold − ℓroll) over the tokens the correction rejected / kept.
 */
function stackMismatchMetrics(input: DiagnosticsInput): MetricRecord {
  const { responseMask, logpOld, logpRollout } = input;
  const lossMask = input.lossMask ?? responseMask;
  let n = 0;
  let mult = 0;
  let gen = 0;
  let pol = 0;
  let js = 0;
  let nKept = 0;
  let kept = 0;
  let nDrop = 0;
  let drop = 0;
  for (let k = 0; k < responseMask.length; k++) {
    if (responseMask[k] !== 1) continue;
    const o = logpOld[k]!;
    const r = logpRollout[k]!;
    const lm = Math.log(0.5 * Math.exp(o) + 0.5 * Math.exp(r));
    n += 1;
    mult += Math.exp(Math.abs(o - r));
    gen += k3Of(o - r);
    pol += k3Of(r - o);
    js += 0.5 * k3Of(o - lm) + 0.5 * k3Of(r - lm);
    if (lossMask[k] === 1) {
      nKept += 1;
      kept += k3Of(o - r);
    } else {
      nDrop += 1;
      drop += k3Of(o - r);
    }
  }
  const tm = (x: number, c: number): number => (c > 0 ? x / c : 0);
  return {
    'rollout_corr/token_mult_prob_error': tm(mult, n),
    'rollout_corr/gen_kl_error': tm(gen, n),
    'rollout_corr/policy_kl_error': tm(pol, n),
    'rollout_corr/js_divergence_error': tm(js, n),
    'rollout_corr/masked_mismatch_kl': tm(drop, nDrop),
    'rollout_corr/unmasked_mismatch_kl': tm(kept, nKept),
  };
}

/**
 * Statistics of applied weights over the loss mask (qrl-sim's names): mean, population std, max, min,
 * ESS ratio 1/mean((w/mean w)²), CV. Not verl's `rollout_is_*` (those are raw-stage statistics).
 */
export function weightStats(weights: Float64Array, lossMask: Float64Array): MetricRecord {
  let n = 0;
  let s = 0;
  let max = -Infinity;
  let min = Infinity;
  for (let k = 0; k < lossMask.length; k++) {
    if (lossMask[k] !== 1) continue;
    n += 1;
    s += weights[k]!;
    max = Math.max(max, weights[k]!);
    min = Math.min(min, weights[k]!);
  }
  const mean = n > 0 ? s / n : 0;
  let q = 0;
  let r2 = 0;
  for (let k = 0; k < lossMask.length; k++) {
    if (lossMask[k] !== 1) continue;
    q += (weights[k]! - mean) ** 2;
    if (mean > 0) r2 += (weights[k]! / mean) ** 2;
  }
  const std = n > 0 ? Math.sqrt(q / n) : 0;
  return {
    'rollout_corr/weights_mean': mean,
    'rollout_corr/weights_std': std,
    'rollout_corr/weights_max': n > 0 ? max : 0,
    'rollout_corr/weights_min': n > 0 ? min : 0,
    'rollout_corr/weights_ess_ratio': n > 0 && mean > 0 ? 1 / (r2 / n) : 0,
    'rollout_corr/weights_cv': mean > 0 ? std / mean : 0,
  };
}
