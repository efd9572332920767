// Feed-forward block: GELU MLP (GPT-2: down(gelu(up x))) or SwiGLU (LLaMA: down(silu(gate x) ⊙ up x)).
// Not the residual or the norm around it (block.ts assembles those).

import { allocLike, type FloatArray } from './array.js';
import { geluBackward, geluForward, swigluBackward, swigluForward } from './activation.js';
import { sequentialLinearGemms, type LinearGemms } from './gemm.js';
import { linearBackward, linearForward, roundedInputT, type RoundedInputT } from './linear.js';

/** Which nonlinearity the MLP uses. */
export type MlpKind = 'gelu' | 'swiglu';

/** Weights of an MLP with model width C and hidden width Hd (biases optional). */
export interface MlpWeights {
  /** (Hd, C) up projection (GPT-2 `c_fc`; LLaMA `up_proj`). */
  readonly up: FloatArray;
  /** (Hd) or null. */
  readonly upBias: FloatArray | null;
  /** (Hd, C) gate projection for SwiGLU; null for GELU. */
  readonly gate: FloatArray | null;
  /** (Hd) or null. */
  readonly gateBias: FloatArray | null;
  /** (C, Hd) down projection (GPT-2 `c_proj`). */
  readonly down: FloatArray;
  /** (C) or null. */
  readonly downBias: FloatArray | null;
}

/** Gradient buffers of an MLP, same shapes as {@link MlpWeights} (null where the weight is null). */
export type MlpGrads = MlpWeights;

/** The GEMM sites of an MLP. */
export interface MlpGemms {
  /** The up projection. */
  readonly up: LinearGemms;
  /** The gate projection (SwiGLU only). */
  readonly gate: LinearGemms;
  /** The down projection. */
  readonly down: LinearGemms;
}

/** The default {@link MlpGemms}: sequential everywhere. */
export const sequentialMlpGemms: MlpGemms = Object.freeze({
  up: sequentialLinearGemms,
  gate: sequentialLinearGemms,
  down: sequentialLinearGemms,
});

/** What {@link mlpForward} keeps for {@link mlpBackward}. */
export interface MlpCache {
  /** (N, Hd) up-projection output (pre-activation for GELU). */
  readonly up: FloatArray;
  /** (N, Hd) gate-projection output (SwiGLU), empty for GELU. */
  readonly gate: FloatArray;
  /** (N, Hd) activation output, the input of the down projection. */
  readonly act: FloatArray;
}

/** Allocates an {@link MlpCache} of the element type of `like`. */
export function createMlpCache(like: FloatArray, N: number, Hd: number, kind: MlpKind): MlpCache {
  return {
    up: allocLike(like, N * Hd),
    gate: allocLike(like, kind === 'swiglu' ? N * Hd : 0),
    act: allocLike(like, N * Hd),
  };
}

function needGate(w: MlpWeights, kind: MlpKind): FloatArray {
  if (kind === 'swiglu' && !w.gate) throw new Error('mlp: kind swiglu needs weights.gate, got null');
  return w.gate as FloatArray;
}

/**
 * MLP forward. GELU: `act = gelu(x·upᵀ + b)`; SwiGLU: `act = (x·upᵀ) ⊙ silu(x·gateᵀ)`;
 * then `out = act·downᵀ (+ b)`.
 *
 * @param out - (N, C)
 * @param cache - filled
 * @param inp - (N, C)
 */
export function mlpForward(
  out: FloatArray,
  cache: MlpCache,
  inp: FloatArray,
  w: MlpWeights,
  N: number,
  C: number,
  Hd: number,
  kind: MlpKind,
  gemms: MlpGemms = sequentialMlpGemms,
): void {
  linearForward(cache.up, inp, w.up, w.upBias, N, C, Hd, gemms.up); // (N, Hd)
  if (kind === 'gelu') {
    geluForward(cache.act, cache.up, N * Hd);
  } else {
    linearForward(cache.gate, inp, needGate(w, kind), w.gateBias, N, C, Hd, gemms.gate); // (N, Hd)
    swigluForward(cache.act, cache.up, cache.gate, N * Hd);
  }
  linearForward(out, cache.act, w.down, w.downBias, N, Hd, C, gemms.down); // (N, C)
}

/**
 * MLP backward, accumulating into `dinp` and every gradient buffer in `g`.
 *
 * @param dinp - (N, C) accumulated
 * @param g - gradients, accumulated
 * @param dout - (N, C)
 * @param cache - from the forward
 * @param inp - (N, C) forward input
 */
export function mlpBackward(
  dinp: FloatArray,
  g: MlpGrads,
  dout: FloatArray,
  cache: MlpCache,
  inp: FloatArray,
  w: MlpWeights,
  N: number,
  C: number,
  Hd: number,
  kind: MlpKind,
  gemms: MlpGemms = sequentialMlpGemms,
): void {
  const dact = allocLike(dout, N * Hd); // (N, Hd)
  linearBackward(dact, g.down, g.downBias, dout, cache.act, w.down, N, Hd, C, gemms.down);
  const dup = allocLike(dout, N * Hd); // (N, Hd)
  let inpT: RoundedInputT | null = null; // (C, N) shared by gate and up, which read the same input
  if (kind === 'gelu') {
    geluBackward(dup, cache.up, dact, N * Hd);
  } else {
    inpT = roundedInputT(inp, N, C, gemms.gate);
    const dgate = allocLike(dout, N * Hd); // (N, Hd)
    swigluBackward(dup, dgate, dact, cache.up, cache.gate, N * Hd);
    if (!g.gate) throw new Error('mlp: kind swiglu needs grads.gate, got null');
    linearBackward(dinp, g.gate, g.gateBias, dgate, inp, needGate(w, kind), N, C, Hd, gemms.gate, inpT);
  }
  linearBackward(dinp, g.up, g.upBias, dup, inp, w.up, N, C, Hd, gemms.up, inpT);
}
