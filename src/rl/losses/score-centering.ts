// Score centering (arXiv 2609.20807): a detached-coefficient term over the sampler's top-k ids that
// subtracts the sampler-expected (weighted) score from every token's update, in prime-rl's two forms and
// vime's IS-weighted one.
// Not a policy loss of its own: policyObjective adds it to any loss (`config.scoreCentering`).

import type { ScoreCenteringWeight } from '../topk-schema.js';
import type { MetricRecord } from '../types.js';
import type { TopkBatch } from '../topk.js';

/** Parameters of the score-centering term (`config.scoreCentering`). */
export interface ScoreCenteringParams {
  /**
   * `proportional-tail`: prime-rl score_centering.py `score_correction` (ipo_eps None) at 349283d, the
   * sampler's head q over the top-k ids and a tail modelled as ρ·p; `ipo`: prime-rl loss.py
   * `IPOLoss.score_centering_loss` (stored version after the class refactor), exact over the sampling
   * support with IPO's capped ratio inside its |Δp| trust region; `vime`: vime score_centering.py
   * `score_centering_correction` at 2b83ea2 (arXiv 2609.20807 eq. 14), the proportional tail with the
   * run's token IS rule applied to the head and to the tail. @defaultValue 'proportional-tail'
   */
  readonly form: 'proportional-tail' | 'ipo' | 'vime';
  /** `ipo`: the trust region |p − q| ≤ ε of a support id (prime-rl `IPOLossConfig.eps`). @defaultValue 0.3 */
  readonly eps: number;
  /** `ipo`: the cap of the weight p/q (prime-rl `max_importance_ratio`). @defaultValue 1e4 */
  readonly maxRatio: number;
  /** `vime`: the IS rule w (resolveConfig takes it from the correction chain when absent). */
  readonly weight?: ScoreCenteringWeight | undefined;
}

/** w(r) of a `vime` IS rule (vime `importance_weights`: TIS clamps, IcePop zeroes outside its band). */
function weightOf(rule: ScoreCenteringWeight): (r: number) => number {
  if (rule.rule === 'one') return () => 1;
  if (rule.rule === 'clamp') return (r) => Math.min(rule.hi, Math.max(rule.lo, r));
  return (r) => (r >= rule.lo && r <= rule.hi ? r : 0);
}

/** What {@link scoreCenteringTerm} adds: per-token values and gradients. */
export interface ScoreCenteringValue {
  /** Per-token term A·Σ_j sg[coef_j]·ℓθ_j `(B, T)`, 0 outside the loss mask. */
  readonly tokenTerm: Float64Array;
  /** d(Σ_k c_k·term_k)/dℓθ at the top-k ids `(B, T, K)`: c_k·A_k·coef_j. */
  readonly gradTopk: Float64Array;
}

/** Tail-mass floor of prime-rl's ρ (score_centering.py: `clamp_min(1e-6)`). */
const TAIL_FLOOR = 1e-6;

/**
 * The score-centering term of every loss token k (lossMask 1), coefficients detached (evaluated at
 * `topk.logpThetaDetached ?? topk.logpTheta`), over the valid slots j (id ≥ 0), with p = e^ℓθ and
 * q = e^ℓμ at the slot's id:
 * - `proportional-tail`: ρ = max(1 − Σ_j q_j, 10⁻⁶) / max(1 − Σ_j p_j, 10⁻⁶), coef_j = q_j − ρ·p_j;
 * - `ipo`: coef_j = q_j·min(e^(ℓθ_j − ℓμ_j), maxRatio) if |p_j − q_j| ≤ ε, else 0;
 * - `vime`: ρ as above, α = ρ·w(1/ρ), coef_j = q_j·w(p_j/q_j) − α·p_j with w the IS rule `weight` (w ≡ 1
 *   gives `proportional-tail` exactly). The head ratio is the detached ℓθ against ℓμ, as vime's bypass
 *   trainer has it; in decoupled mode the sampled token's own correction weight reads ℓold instead.
 *
 * term_k = A_k·Σ_j coef_j·ℓθ_j; its gradient is c_k·A_k·coef_j with c the aggregation coefficients.
 * Metrics (means over the loss tokens): `actor/score_centering/correction` (Σ_j |coef_j|),
 * `actor/score_centering/sampler_head_mass` (Σ q), `actor/score_centering/trainer_head_mass` (Σ p),
 * `actor/score_centering/tail_ratio` (ρ; not `ipo`), `actor/score_centering/term`
 * (Σ_j coef_j·ℓθ_j).
 */
export function scoreCenteringTerm(
  topk: TopkBatch,
  advantages: Float64Array,
  lossMask: Float64Array,
  c: Float64Array,
  params: ScoreCenteringParams,
): { value: ScoreCenteringValue; metrics: MetricRecord } {
  const { K } = topk;
  const n = lossMask.length;
  const det = topk.logpThetaDetached ?? topk.logpTheta;
  const tokenTerm = new Float64Array(n);
  const gradTopk = new Float64Array(n * K);
  const coef = new Float64Array(K);
  const w = params.form === 'vime' ? weightOf(params.weight ?? { rule: 'one' }) : undefined;
  const sums = { correction: 0, sampler: 0, trainer: 0, tail: 0, term: 0 };
  let count = 0;
  for (let k = 0; k < n; k++) {
    if (lossMask[k] !== 1) continue;
    let qMass = 0;
    let pMass = 0;
    for (let j = 0; j < K; j++) {
      if (topk.ids[k * K + j]! < 0) continue;
      qMass += Math.exp(topk.logpRollout[k * K + j]!);
      pMass += Math.exp(det[k * K + j]!);
    }
    const rho = Math.max(1 - qMass, TAIL_FLOOR) / Math.max(1 - pMass, TAIL_FLOOR);
    const alpha = w === undefined ? rho : rho * w(1 / rho);
    let abs = 0;
    let s = 0;
    for (let j = 0; j < K; j++) {
      coef[j] = 0;
      if (topk.ids[k * K + j]! < 0) continue;
      const lq = topk.logpRollout[k * K + j]!;
      const lp = det[k * K + j]!;
      const q = Math.exp(lq);
      const p = Math.exp(lp);
      if (params.form === 'proportional-tail') coef[j] = q - rho * p;
      else if (w !== undefined) coef[j] = q * w(Math.exp(lp - lq)) - alpha * p;
      else coef[j] = Math.abs(p - q) <= params.eps ? q * Math.exp(Math.min(lp - lq, Math.log(params.maxRatio))) : 0;
      abs += Math.abs(coef[j]!);
      s += coef[j]! * topk.logpTheta[k * K + j]!;
    }
    const A = advantages[k]!;
    tokenTerm[k] = A * s;
    for (let j = 0; j < K; j++) if (coef[j] !== 0) gradTopk[k * K + j] = c[k]! * A * coef[j]!;
    count++;
    sums.correction += abs;
    sums.sampler += qMass;
    sums.trainer += pMass;
    sums.tail += rho;
    sums.term += s;
  }
  const m = (x: number): number => (count > 0 ? x / count : 0);
  const metrics: MetricRecord = {
    'actor/score_centering/correction': m(sums.correction),
    'actor/score_centering/sampler_head_mass': m(sums.sampler),
    'actor/score_centering/trainer_head_mass': m(sums.trainer),
    'actor/score_centering/term': m(sums.term),
  };
  if (params.form !== 'ipo') metrics['actor/score_centering/tail_ratio'] = m(sums.tail);
  return { value: { tokenTerm, gradTopk }, metrics };
}
