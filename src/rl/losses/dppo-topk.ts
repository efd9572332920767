// DPPO with the top-k approximation of the policy divergence (arXiv 2602.04879; TRL's experimental
// DPPOTrainer, divergence_type topk_tv / topk_kl): the trust-region mask reads TV or KL between the
// trainer and the rollout engine over the engine's top-k ids plus one tail bucket.
// Not the binary DPPO masks (score-function.ts, verl's form on p_old); needs the batch's `topk` (src/rl/topk.ts).

import { UsageError } from '../../core/errors.js';
import type { Estimate } from '../types.js';
import type { LossFn, PolicyLossInput, PolicyLossValue } from './loss.js';
import { Means, counted, visited } from './loss.js';

/** Parameters of `dppo-topk-tv` / `dppo-topk-kl` (TRL `DPPOConfig`). */
export interface DppoTopkParams {
  /** δ_low: the divergence allowed while p(y) falls below μ(y) (TRL `epsilon`). @defaultValue 0.15 */
  readonly epsLow: number;
  /** δ_high: the divergence allowed while p(y) rises above μ(y) (TRL `epsilon_high`). @defaultValue 0.15 */
  readonly epsHigh: number;
  /** Upper bound of the detached ratio, exp(min(ℓθ − ℓroll, log c)) (TRL `clip_ratio_c`). @defaultValue 20 */
  readonly c: number;
}

/** TRL's floor of the rest bucket (`clamp(min=1e-12)`). */
const REST_FLOOR = 1e-12;

/** Which divergence of TRL `_compute_divergence_mask` the loss reads. */
type Divergence = 'tv' | 'kl';

/**
 * The divergence of one position over the set A' = TopK(μ) ∪ {y} (TRL keeps K slots: a sampled token
 * outside the engine's top-k replaces the K-th slot) and the rest bucket of each side,
 * rest = max(1 − Σ_{A'} e^ℓ, 10⁻¹²): TV = (Σ|p_j − q_j| + |rest_p − rest_q|)/2,
 * KL = Σ q_j·(ℓμ_j − ℓθ_j) + rest_q·(log rest_q − log rest_p).
 */
export function topkDivergence(
  kind: 'tv' | 'kl',
  lp: readonly number[],
  lq: readonly number[],
): { divergence: number; restP: number; restQ: number } {
  let sp = 0;
  let sq = 0;
  let tv = 0;
  let kl = 0;
  for (let j = 0; j < lp.length; j++) {
    const p = Math.exp(lp[j]!);
    const q = Math.exp(lq[j]!);
    sp += p;
    sq += q;
    tv += Math.abs(p - q);
    kl += q * (lq[j]! - lp[j]!);
  }
  const restP = Math.max(1 - sp, REST_FLOOR);
  const restQ = Math.max(1 - sq, REST_FLOOR);
  const divergence =
    kind === 'tv' ? (tv + Math.abs(restP - restQ)) / 2 : kl + restQ * (Math.log(restQ) - Math.log(restP));
  return { divergence, restP, restQ };
}

/**
 * The DPPO top-k loss (TRL trl/experimental/dppo/dppo_trainer.py @23eedc6, `_compute_divergence_mask`
 * l.1307–1331 and `_compute_loss` l.1381–1394; the set A' of l.310–331 and l.393–399): per loss token,
 * D = the top-k divergence between the trainer (ℓθ at the slots, detached) and the engine (ℓμ), the
 * mask keeps a token unless A > 0 with D > epsHigh and p(y) > μ(y), or A ≤ 0 with D > epsLow and
 * p(y) < μ(y) (p = e^ℓθ, μ = e^ℓroll at the sampled token); L = −A·sg[exp(min(ℓθ − ℓroll, log c))]·mask·ℓθ.
 * The gradient −A·ratio·mask goes to ℓθ only (the mask is boolean: none through the top-k ℓθ).
 * Metrics under TRL's names, `actor/dppo_topk/…`: `mask_ratio/overall_mean`, `mask_ratio/positive_adv_mean`,
 * `mask_ratio/negative_adv_mean` (fractions of the counted tokens), `prob_diff/mean`, `prob_diff/max`,
 * `prob_diff/min` (|p(y) − μ(y)|), and `divergence/mean` (D, qrl-sim's).
 */
function dppoTopk(kind: Divergence, name: string): LossFn<DppoTopkParams> {
  return (input: PolicyLossInput, params: DppoTopkParams): Estimate<PolicyLossValue> => {
    const topk = input.topk;
    if (topk === undefined)
      throw new UsageError(
        `topk: required by loss '${name}' (the engine's top-k ids and ℓ, and the trainer's ℓθ at them)`,
      );
    if (topk.tokens === undefined)
      throw new UsageError(`topk.tokens: required by loss '${name}' (the sampled token joins the top-k set)`);
    const { K } = topk;
    const n = input.lossMask.length;
    const tokenLoss = new Float64Array(n);
    const grad = new Float64Array(n);
    const det = input.logpThetaDetached ?? input.logpTheta;
    const detTop = topk.logpThetaDetached ?? topk.logpTheta;
    const logC = Math.log(params.c);
    const m = new Means([
      'actor/dppo_topk/mask_ratio/overall_mean',
      'actor/dppo_topk/mask_ratio/positive_adv_mean',
      'actor/dppo_topk/mask_ratio/negative_adv_mean',
      'actor/dppo_topk/prob_diff/mean',
      'actor/dppo_topk/divergence/mean',
    ]);
    let diffMax = 0;
    let diffMin = 0;
    let any = false;
    const lp: number[] = [];
    const lq: number[] = [];
    for (let k = 0; k < n; k++) {
      if (!visited(input, k)) continue;
      const y = topk.tokens[k]!;
      if (y < 0)
        throw new UsageError(`topk.tokens: loss '${name}' needs the sampled id of every loss token, got -1 at ${k}`);
      lp.length = 0;
      lq.length = 0;
      let inSet = false;
      for (let j = 0; j < K; j++) if (topk.ids[k * K + j] === y) inSet = true;
      // TRL keeps exactly K slots: y outside the engine's top-k takes the K-th slot (dppo_trainer.py l.326–328)
      const last = inSet ? K : K - 1;
      for (let j = 0; j < last; j++) {
        if (topk.ids[k * K + j]! < 0) continue;
        lp.push(detTop[k * K + j]!);
        lq.push(topk.logpRollout[k * K + j]!);
      }
      if (!inSet) {
        lp.push(det[k]!);
        lq.push(input.logpRollout[k]!);
      }
      const { divergence } = topkDivergence(kind, lp, lq);
      const p = Math.exp(det[k]!);
      const q = Math.exp(input.logpRollout[k]!);
      const A = input.advantages[k]!;
      const invalid = A > 0 ? divergence > params.epsHigh && p > q : divergence > params.epsLow && p < q;
      const keep = invalid ? 0 : 1;
      const ratio = Math.exp(Math.min(det[k]! - input.logpRollout[k]!, logC));
      if (input.lossMask[k] === 1 && keep === 1) {
        tokenLoss[k] = -A * ratio * input.logpTheta[k]!;
        grad[k] = input.upstream[k]! * -A * ratio;
      }
      if (counted(input, k)) {
        const diff = Math.abs(p - q);
        m.add({
          'actor/dppo_topk/mask_ratio/overall_mean': 1 - keep,
          'actor/dppo_topk/mask_ratio/positive_adv_mean': keep === 0 && A > 0 ? 1 : 0,
          'actor/dppo_topk/mask_ratio/negative_adv_mean': keep === 0 && A < 0 ? 1 : 0,
          'actor/dppo_topk/prob_diff/mean': diff,
          'actor/dppo_topk/divergence/mean': divergence,
        });
        diffMax = any ? Math.max(diffMax, diff) : diff;
        diffMin = any ? Math.min(diffMin, diff) : diff;
        any = true;
      }
    }
    return {
      value: { tokenLoss, gradLogpTheta: grad, gradTopkLogpTheta: new Float64Array(n * K) },
      metrics: { ...m.result(), 'actor/dppo_topk/prob_diff/max': diffMax, 'actor/dppo_topk/prob_diff/min': diffMin },
    };
  };
}

/** DPPO-TopK-TV (TRL `divergence_type="topk_tv"`): the mask reads the top-k TV; see {@link topkDivergence}. */
export const dppoTopkTv: LossFn<DppoTopkParams> = dppoTopk('tv', 'dppo-topk-tv');

/** DPPO-TopK-KL (TRL `divergence_type="topk_kl"`): the mask reads the top-k KL(μ‖π); see {@link topkDivergence}. */
export const dppoTopkKl: LossFn<DppoTopkParams> = dppoTopk('kl', 'dppo-topk-kl');
