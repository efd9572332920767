// AdamW over a ParamStore (decay on 2-D weights only, bias correction) and global-norm clipping.
// Not a learning-rate schedule: the caller passes the step's lr.

import type { FloatArray } from './array.js';
import type { ParamStore } from './params.js';

/** AdamW hyper-parameters. */
export interface AdamWConfig {
  /** Learning rate (may be overridden per step). */
  readonly lr: number;
  /** @defaultValue 0.9 */
  readonly beta1?: number;
  /** @defaultValue 0.999 */
  readonly beta2?: number;
  /** @defaultValue 1e-8 */
  readonly eps?: number;
  /** Decoupled weight decay, applied only to 2-D weights. @defaultValue 0 */
  readonly weightDecay?: number;
}

/** JSON-safe optimizer state for checkpoints. */
export interface AdamWState {
  /** Number of updates taken. */
  readonly step: number;
  /** First moments (float32 values). */
  readonly m: number[];
  /** Second moments (float32 values). */
  readonly v: number[];
}

/**
 * AdamW (Loshchilov & Hutter; update order of llm.c `gpt2_update`), per element in doubles:
 * `m = β1·m + (1−β1)·g`, `v = β2·v + (1−β2)·g²`, `m̂ = m/(1−β1^t)`, `v̂ = v/(1−β2^t)`,
 * `θ −= lr·(m̂/(√v̂ + ε) + wd·θ)` with `wd = 0` for tensors that are not 2-D. m, v and θ are
 * stored as float32.
 *
 * @example
 * ```ts
 * const opt = new AdamW(store, { lr: 1e-3, weightDecay: 0.1 });
 * store.zeroGrad(); // … backward fills store.grads …
 * clipGradNorm(store.grads, 1.0);
 * opt.step();
 * ```
 */
export class AdamW {
  /** The hyper-parameters with defaults filled in. */
  readonly config: Required<AdamWConfig>;
  /** (size) first moments. */
  readonly m: Float32Array;
  /** (size) second moments. */
  readonly v: Float32Array;
  private readonly decay: Uint8Array; // (size) 1 where weight decay applies
  private readonly store: ParamStore;
  private t = 0;

  /** An optimizer for `store` with zero moments. */
  constructor(store: ParamStore, config: AdamWConfig, state?: AdamWState) {
    const c = { beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, ...config };
    for (const [k, val] of Object.entries(c)) {
      if (!Number.isFinite(val)) throw new Error(`adamw: ${k} must be finite, got ${val}`);
    }
    if (c.beta1 < 0 || c.beta1 >= 1) throw new Error(`adamw: beta1 must be in [0, 1), got ${c.beta1}`);
    if (c.beta2 < 0 || c.beta2 >= 1) throw new Error(`adamw: beta2 must be in [0, 1), got ${c.beta2}`);
    this.config = c;
    this.store = store;
    const n = store.layout.size;
    this.m = new Float32Array(n);
    this.v = new Float32Array(n);
    this.decay = new Uint8Array(n);
    for (const name of store.weights2d()) {
      const e = store.layout.entry(name);
      this.decay.fill(1, e.offset, e.offset + e.size);
    }
    if (state) {
      if (state.m.length !== n || state.v.length !== n)
        throw new Error(`adamw: state.m/state.v length must be ${n}, got ${state.m.length}/${state.v.length}`);
      if (!Number.isInteger(state.step) || state.step < 0)
        throw new Error(`adamw: state.step must be a non-negative integer, got ${state.step}`);
      this.m.set(state.m);
      this.v.set(state.v);
      this.t = state.step;
    }
  }

  /** Number of updates taken so far. */
  get stepCount(): number {
    return this.t;
  }

  /** One update of `store.data` from `store.grads`; `lr` overrides the configured rate. */
  step(lr: number = this.config.lr): void {
    if (!Number.isFinite(lr)) throw new Error(`adamw.step: lr must be finite, got ${lr}`);
    const { beta1, beta2, eps, weightDecay } = this.config;
    this.t += 1;
    const bc1 = 1 - Math.pow(beta1, this.t);
    const bc2 = 1 - Math.pow(beta2, this.t);
    const { data, grads } = this.store;
    for (let i = 0; i < data.length; i++) {
      const g = grads[i]!;
      this.m[i] = beta1 * this.m[i]! + (1 - beta1) * g;
      this.v[i] = beta2 * this.v[i]! + (1 - beta2) * g * g;
      const mHat = this.m[i]! / bc1;
      const vHat = this.v[i]! / bc2;
      const wd = this.decay[i] ? weightDecay : 0;
      data[i] = data[i]! - lr * (mHat / (Math.sqrt(vHat) + eps) + wd * data[i]!);
    }
  }

  /** JSON-safe snapshot (restore with `new AdamW(store, config, state)`). */
  state(): AdamWState {
    return { step: this.t, m: Array.from(this.m), v: Array.from(this.v) };
  }
}

/**
 * Global-norm gradient clipping (PyTorch `clip_grad_norm_`): `‖g‖₂` is summed in doubles in
 * increasing index; if `maxNorm/(‖g‖₂ + 1e-6) < 1` every gradient is multiplied by that factor.
 * Returns the norm before clipping.
 *
 * @param grads - (size) gradients, scaled in place
 * @example
 * ```ts
 * const norm = clipGradNorm(store.grads, 1.0);
 * ```
 */
export function clipGradNorm(grads: FloatArray, maxNorm: number): number {
  if (!(maxNorm > 0)) throw new Error(`clipGradNorm: maxNorm must be > 0, got ${maxNorm}`);
  let s = 0;
  for (let i = 0; i < grads.length; i++) s += grads[i]! * grads[i]!;
  const norm = Math.sqrt(s);
  const coef = maxNorm / (norm + 1e-6);
  if (coef < 1) for (let i = 0; i < grads.length; i++) grads[i] = grads[i]! * coef;
  return norm;
}
