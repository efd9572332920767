// KL-to-reference estimators (k1, k2, k3 with verl's clamps, straight-through k1+/k3+) and their gradients.
// Not the mismatch KL between rollout and trainer (that is a diagnostic, see diagnostics.ts).

import type { Estimate, BatchShape } from './types.js';

/** Inputs of a KL estimator (all `(B, T)` flat). */
export interface KlInput {
  /** EstimateBatch shape. */
  readonly shape: BatchShape;
  /** ℓθ (carries gradient). */
  readonly logpTheta: Float64Array;
  /** ℓref of the reference policy. */
  readonly logpRef: Float64Array;
  /**
   * KL mask: the tokens that carry the KL term (the denominator, loss or response mask, as
   * `kl.mask` of the config chooses; see `policyObjective`).
   */
  readonly klMask: Float64Array;
  /** d(total loss)/d(token KL) per token (aggregation coefficient × KL coefficient). */
  readonly upstream: Float64Array;
  /** Point at which stop-gradient terms are evaluated (straight-through variants). @defaultValue logpTheta */
  readonly logpThetaDetached?: Float64Array | undefined;
}

/** Per-token KL values and the gradient of Σ upstream·KL with respect to ℓθ. */
export interface KlValue {
  /** Per-token KL estimate, `(B, T)`, 0 outside `klMask`. */
  readonly tokenKl: Float64Array;
  /** d(Σ upstream·tokenKl)/dℓθ, `(B, T)`. */
  readonly gradLogpTheta: Float64Array;
}

/** A KL estimator (d = ℓθ − ℓref). */
export type KlFn<P = never> = (input: KlInput, params: P) => Estimate<KlValue>;

type Pointwise = (d: number) => { value: number; grad: number };

const k1Point: Pointwise = (d) => ({ value: d, grad: 1 });
const k2Point: Pointwise = (d) => ({ value: 0.5 * d * d, grad: d });
/** verl `low_var_kl`: u = clamp(−d, ±20); clamp(e^u − u − 1, −10, 10). */
const k3Point: Pointwise = (d) => {
  const raw = -d;
  const u = Math.min(20, Math.max(-20, raw));
  const v = Math.exp(u) - u - 1;
  const value = Math.min(10, Math.max(-10, v));
  const inside = raw === u && v === value;
  return { value, grad: inside ? 1 - Math.exp(u) : 0 };
};

function pointwise(f: Pointwise, straightThrough: boolean): KlFn<Record<string, never>> {
  return (input) => {
    const n = input.klMask.length;
    const tokenKl = new Float64Array(n);
    const grad = new Float64Array(n);
    const det = input.logpThetaDetached ?? input.logpTheta;
    let sum = 0;
    let count = 0;
    for (let k = 0; k < n; k++) {
      if (input.klMask[k] !== 1) continue;
      const d = input.logpTheta[k]! - input.logpRef[k]!;
      if (straightThrough) {
        // value of the base estimator, gradient of k2: base(sg) + ½d² − sg(½d²)
        const dd = det[k]! - input.logpRef[k]!;
        tokenKl[k] = f(dd).value + (0.5 * d * d - 0.5 * dd * dd);
        grad[k] = input.upstream[k]! * d;
      } else {
        const p = f(d);
        tokenKl[k] = p.value;
        grad[k] = input.upstream[k]! * p.grad;
      }
      sum += tokenKl[k]!;
      count += 1;
    }
    return { value: { tokenKl, gradLogpTheta: grad }, metrics: { 'actor/kl_mean': count > 0 ? sum / count : 0 } };
  };
}

/** k1 = d (unbiased, high variance; verl `kl`). */
export const k1: KlFn<Record<string, never>> = pointwise(k1Point, false);
/** k2 = ½d² (verl `mse`). */
export const k2: KlFn<Record<string, never>> = pointwise(k2Point, false);
/** k3 = e^(−d) − 1 + d with verl's clamps (verl `low_var_kl`; Schulman's k3). */
export const k3: KlFn<Record<string, never>> = pointwise(k3Point, false);
/** Straight-through k1: value of k1, gradient of k2 (verl `k1+`). */
export const k1StraightThrough: KlFn<Record<string, never>> = pointwise(k1Point, true);
/** Straight-through k3: value of k3 (clamped), gradient of k2 (verl `k3+` / `low_var_kl+`). */
export const k3StraightThrough: KlFn<Record<string, never>> = pointwise(k3Point, true);

/** Every KL estimator by its config name. */
export const kl = {
  k1,
  k2,
  k3,
  'k1+': k1StraightThrough,
  'k3+': k3StraightThrough,
} as const satisfies Record<string, KlFn>;

/** Config name of a KL estimator. */
export type KlName = keyof typeof kl;
