// Elementwise activations with their backward: GELU (tanh approximation, GPT-2) and SwiGLU.
// Not the MLP itself (mlp.ts wires the linears around these).

import type { FloatArray } from './array.js';

const GELU_SCALE = Math.sqrt(2 / Math.PI); // √(2/π)

/**
 * GELU forward, tanh approximation (GPT-2; llm.c `gelu_forward`):
 * `out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
 *
 * @param out - (n)
 * @param inp - (n)
 */
export function geluForward(out: FloatArray, inp: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) {
    const x = inp[i]!;
    const u = GELU_SCALE * (x + 0.044715 * x * x * x);
    out[i] = 0.5 * x * (1 + Math.tanh(u));
  }
}

/**
 * GELU backward (llm.c `gelu_backward`), accumulating:
 * `dinp += dout·(0.5·(1+tanh u) + 0.5·x·sech²u·√(2/π)·(1 + 3·0.044715·x²))`.
 *
 * @param dinp - (n) accumulated
 * @param inp - (n) the forward input (the cache)
 * @param dout - (n)
 */
export function geluBackward(dinp: FloatArray, inp: FloatArray, dout: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) {
    const x = inp[i]!;
    const u = GELU_SCALE * (x + 0.044715 * x * x * x);
    const th = Math.tanh(u);
    const sech2 = 1 - th * th;
    const g = 0.5 * (1 + th) + 0.5 * x * sech2 * GELU_SCALE * (1 + 3 * 0.044715 * x * x);
    dinp[i] = dinp[i]! + g * dout[i]!;
  }
}

function sigmoid(z: number): number {
  // Stable on both tails: never evaluates exp of a large positive number.
  if (z >= 0) return 1 / (1 + Math.exp(-z));
  const e = Math.exp(z);
  return e / (1 + e);
}

/**
 * SwiGLU forward (LLaMA `down(silu(gate(x)) ⊙ up(x))`; llm.c `swiglu.cuh`):
 * `out = up ⊙ silu(gate)` with `silu(z) = z·σ(z)`.
 *
 * @param out - (n)
 * @param up - (n) the linear branch
 * @param gate - (n) the gated branch
 */
export function swigluForward(out: FloatArray, up: FloatArray, gate: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) {
    const g = gate[i]!;
    out[i] = up[i]! * (g * sigmoid(g));
  }
}

/**
 * SwiGLU backward, accumulating: `dup += dout·silu(gate)`,
 * `dgate += dout·up·σ(gate)·(1 + gate·(1 − σ(gate)))`.
 *
 * @param dup - (n) accumulated
 * @param dgate - (n) accumulated
 * @param dout - (n)
 * @param up - (n) forward input
 * @param gate - (n) forward input
 */
export function swigluBackward(
  dup: FloatArray,
  dgate: FloatArray,
  dout: FloatArray,
  up: FloatArray,
  gate: FloatArray,
  n: number,
): void {
  for (let i = 0; i < n; i++) {
    const g = gate[i]!;
    const s = sigmoid(g);
    const dy = dout[i]!;
    dup[i] = dup[i]! + dy * g * s;
    dgate[i] = dgate[i]! + dy * up[i]! * s * (1 + g * (1 - s));
  }
}
