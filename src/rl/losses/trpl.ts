// TRPL (trust-region policy layer, prime-rl trpl_loss.py @776e97b): πθ projected onto a KL ball around
// the inference policy μ over the union of the engine's top-k ids and the sampled token, η by bisection.
// Not a correction stage: the projection replaces the ratio; needs the batch's `topk` (src/rl/topk.ts).

import { UsageError } from '../../core/errors.js';
import type { Estimate } from '../types.js';
import type { LossFn, PolicyLossValue } from './loss.js';
import { Means, visited, counted } from './loss.js';

/** TRPL parameters (prime-rl `TrplLossConfig`, `trpl_loss_fn` defaults). */
export interface TrplParams {
  /** Weight α of the projection loss KL(π‖sg proj). @defaultValue 1 */
  readonly alpha: number;
  /** Trust-region bound on KL(proj‖μ). @defaultValue 0.05 */
  readonly klBound: number;
  /** Log-prob given to an id outside μ's top-k before renormalisation. @defaultValue -27.6 */
  readonly defaultLogProb: number;
  /** Bisection steps on log η ∈ [−8, 10]. @defaultValue 24 */
  readonly bisectSteps: number;
  /**
   * μ's ℓ of a sampled token outside μ's top-k: `default` (prime-rl trpl_loss.py @776e97b l.154,
   * `_gather_old_at_union` fills every id outside μ's top-k with `defaultLogProb`; l.453 clamps the log
   * ratio at ±20, so its ratio saturates at e^20 even with ℓθ = ℓroll, and `importance_ratio` is about
   * e^20 times the fraction of such tokens), or `rollout` (the engine's reported ℓroll of that token).
   * @defaultValue 'default'
   */
  readonly sampledOld: 'default' | 'rollout';
}

const LOG_ETA_LO = -8;
const LOG_ETA_HI = 10;

/** log(Σ_u e^{a_u} + tail·e^{d}), max-shifted as trpl_loss.py `_tail_logsumexp`. */
function tailLse(a: readonly number[], tail: number, d: number): number {
  let m = d;
  for (const x of a) if (x > m) m = x;
  let s = 0;
  for (const x of a) s += Math.exp(x - m);
  return m + Math.log(s + tail * Math.exp(d - m));
}

/** KL(p‖q) over the union and a tail of `tail` equal entries (trpl_loss.py `_kl_sparse`). */
function klSparse(p: readonly number[], q: readonly number[], pd: number, qd: number, tail: number): number {
  let s = 0;
  for (let u = 0; u < p.length; u++) s += Math.exp(p[u]!) * (p[u]! - q[u]!);
  return s + tail * Math.exp(pd) * (pd - qd);
}

/** The projection softmax((x + η·o)/(η + 1)) on the union and the tail. */
function project(x: readonly number[], o: readonly number[], d: number, od: number, tail: number, eta: number) {
  const inner = x.map((xu, u) => (xu + eta * o[u]!) / (eta + 1));
  const innerD = (d + eta * od) / (eta + 1);
  const lse = tailLse(inner, tail, innerD);
  return { proj: inner.map((v) => v - lse), projD: innerD - lse };
}

/**
 * TRPL per loss token (prime-rl trpl_loss.py @776e97b, `trpl_loss_fn`): the union U = the engine's
 * top-k ids ∪ {y} (tail: V − |U| ids), x_u = ℓθ at u (the top-k slot's ℓθ, else the sampled ℓθ),
 * μ's ℓ at u (−27.6 outside its top-k) renormalised with the tail, the trainer's tail
 * d = log(max(1 − Σ_U e^x, 10⁻²⁰)/max(V − |U|, 1)). When KL(π‖μ) > klBound, η > 0 by bisection on
 * log η (detached) so that KL(proj‖μ) ≈ klBound, else η = 0; proj = softmax((x + η·o)/(η + 1)).
 * L = −A·exp(clamp(proj_y − o_y, ±20)) + α·KL(π‖sg proj). The gradient flows through x (and d) with
 * η held fixed; it goes to `gradTopkLogpTheta` for top-k ids and to `gradLogpTheta` for y outside
 * the top-k. Metrics under prime-rl's names: `actor/trpl/{pg_loss, projection_loss, importance_ratio,
 * initial_kl, final_kl, max_vio, projected_frac, mismatch_kl}`.
 */
export const trpl: LossFn<TrplParams> = (input, params): Estimate<PolicyLossValue> => {
  const topk = input.topk;
  if (topk === undefined)
    throw new UsageError("topk: required by loss 'trpl' (the engine's top-k ids and ℓ, and the trainer's ℓθ at them)");
  if (topk.tokens === undefined)
    throw new UsageError("topk.tokens: required by loss 'trpl' (the sampled token joins the union)");
  const { K, vocabSize: V } = topk;
  const n = input.lossMask.length;
  const tokenLoss = new Float64Array(n);
  const grad = new Float64Array(n);
  const gradTopk = new Float64Array(n * K);
  const detTop = topk.logpThetaDetached ?? topk.logpTheta;
  const detTok = input.logpThetaDetached ?? input.logpTheta;
  const m = new Means(['actor/trpl/pg_loss', 'actor/trpl/projection_loss', 'actor/trpl/importance_ratio']);
  const m2 = new Means(['actor/trpl/initial_kl', 'actor/trpl/final_kl', 'actor/trpl/projected_frac']);
  const m3 = new Means(['actor/trpl/mismatch_kl']);
  let maxVio = 0;
  for (let k = 0; k < n; k++) {
    if (!visited(input, k)) continue;
    const y = topk.tokens[k]!;
    if (y < 0)
      throw new UsageError(`topk.tokens: loss 'trpl' needs the sampled id of every loss token, got -1 at ${k}`);
    // union: the slots in order, then y when it is not among them (slot −1 = y's own ℓθ)
    const slot: number[] = [];
    const x: number[] = [];
    const xd: number[] = [];
    const oRaw: number[] = [];
    let yPos = -1;
    for (let j = 0; j < K; j++) {
      const id = topk.ids[k * K + j]!;
      if (id < 0) continue;
      if (id === y) yPos = slot.length;
      slot.push(j);
      x.push(topk.logpTheta[k * K + j]!);
      xd.push(detTop[k * K + j]!);
      oRaw.push(topk.logpRollout[k * K + j]!);
    }
    if (yPos < 0) {
      yPos = slot.length;
      slot.push(-1);
      x.push(input.logpTheta[k]!);
      xd.push(detTok[k]!);
      oRaw.push(params.sampledOld === 'rollout' ? input.logpRollout[k]! : params.defaultLogProb);
    }
    const U = slot.length;
    const tail = V - U;
    const lseO = tailLse(oRaw, tail, params.defaultLogProb);
    const o = oRaw.map((v) => v - lseO);
    const od = params.defaultLogProb - lseO;
    const tailOf = (xs: readonly number[]) => {
      let mass = 0;
      for (const v of xs) mass += Math.exp(v);
      const raw = 1 - mass;
      const tm = Math.max(raw, 1e-20);
      return { d: Math.log(tm / Math.max(tail, 1)), tm, live: raw > 1e-20 && tail > 0 };
    };
    const cur = tailOf(x);
    const curD = tailOf(xd);
    const initialKl = klSparse(xd, o, curD.d, od, tail);
    let eta = 0;
    if (initialKl > params.klBound) {
      let lo = LOG_ETA_LO;
      let hi = LOG_ETA_HI;
      for (let s = 0; s < params.bisectSteps; s++) {
        const mid = (lo + hi) * 0.5;
        const pr = project(xd, o, curD.d, od, tail, Math.exp(mid));
        if (klSparse(pr.proj, o, pr.projD, od, tail) > params.klBound) lo = mid;
        else hi = mid;
      }
      eta = Math.exp((lo + hi) * 0.5);
    }
    const { proj, projD } = project(x, o, cur.d, od, tail, eta);
    const logRatio = proj[yPos]! - o[yPos]!;
    const clamped = Math.min(20, Math.max(-20, logRatio));
    const R = Math.exp(clamped);
    const A = input.advantages[k]!;
    // KL(π‖sg proj): the projection of the detached point (trpl_loss.py `projected_lp.detach()`)
    const fixed = project(xd, o, curD.d, od, tail, eta);
    const projKl = klSparse(x, fixed.proj, cur.d, fixed.projD, tail);
    if (input.lossMask[k] === 1) {
      tokenLoss[k] = -A * R + params.alpha * projKl;
      const up = input.upstream[k]!;
      const g = 1 / (eta + 1);
      const sD = tail * Math.exp(projD);
      const dTail = tail * Math.exp(cur.d) * (cur.d - fixed.projD + 1); // d projKl / d d
      for (let u = 0; u < U; u++) {
        const ex = Math.exp(x[u]!);
        const dd = cur.live ? -ex / cur.tm : 0; // d d / d x_u
        const dProjY = (u === yPos ? g : 0) - g * Math.exp(proj[u]!) - g * sD * dd;
        const dPg = clamped === logRatio ? -A * R * dProjY : 0;
        const dKl = ex * (x[u]! - fixed.proj[u]! + 1) + dTail * dd;
        const gu = up * (dPg + params.alpha * dKl);
        if (slot[u]! >= 0) gradTopk[k * K + slot[u]!] = gu;
        else grad[k] = gu;
      }
    }
    if (counted(input, k)) {
      m.add({ 'actor/trpl/pg_loss': -A * R, 'actor/trpl/projection_loss': projKl, 'actor/trpl/importance_ratio': R });
      const finalKl = klSparse(proj, o, projD, od, tail);
      m2.add({
        'actor/trpl/initial_kl': initialKl,
        'actor/trpl/final_kl': finalKl,
        'actor/trpl/projected_frac': eta > 0 ? 1 : 0,
      });
      maxVio = Math.max(maxVio, finalKl - params.klBound);
      const lir = detTok[k]! - input.logpRollout[k]!;
      m3.add({ 'actor/trpl/mismatch_kl': Math.exp(lir) - lir - 1 });
    }
  }
  return {
    value: { tokenLoss, gradLogpTheta: grad, gradTopkLogpTheta: gradTopk },
    metrics: { ...m.result(), ...m2.result(), ...m3.result(), 'actor/trpl/max_vio': maxVio },
  };
};
