// Token embedding with optional learned positions: h[b,t] = wte[tok[b,t]] + wpe[t] (forward/backward).
// Not a tokenizer and not rotary positions (RoPE lives in attention.ts).

import { checkLength, type FloatArray } from './array.js';

/**
 * Embedding forward (llm.c `encoder_forward`): `out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]`,
 * or just the token row when `wpe` is null. No cache: the backward needs only `tokens`.
 *
 * @param out - (B, T, C) output
 * @param tokens - (B, T) token ids in [0, V)
 * @param wte - (V, C) token embedding table
 * @param wpe - (maxT, C) learned position table with maxT ≥ T, or null for none
 */
export function embeddingForward(
  out: FloatArray,
  tokens: ArrayLike<number>,
  wte: FloatArray,
  wpe: FloatArray | null,
  B: number,
  T: number,
  C: number,
  V: number,
): void {
  checkLength('embedding tokens', tokens, B * T);
  checkLength('embedding wte', wte, V * C);
  if (wpe) checkLength('embedding wpe', wpe, T * C);
  for (let bt = 0; bt < B * T; bt++) {
    const tok = tokens[bt]!;
    if (!Number.isInteger(tok) || tok < 0 || tok >= V) {
      throw new Error(`embedding: tokens[${bt}] must be an integer in [0, ${V}), got ${tok}`);
    }
    const t = bt % T;
    const o = bt * C; // out row (C)
    const e = tok * C; // wte row (C)
    if (wpe) {
      const p = t * C; // wpe row (C)
      for (let c = 0; c < C; c++) out[o + c] = wte[e + c]! + wpe[p + c]!;
    } else {
      for (let c = 0; c < C; c++) out[o + c] = wte[e + c]!;
    }
  }
}

/**
 * Embedding backward (llm.c `encoder_backward`): `dwte[tok] += dout`, `dwpe[t] += dout`,
 * accumulating over (b, t) in increasing order.
 *
 * @param dwte - (V, C) accumulated
 * @param dwpe - (maxT, C) accumulated, or null
 * @param dout - (B, T, C)
 * @param tokens - (B, T)
 */
export function embeddingBackward(
  dwte: FloatArray,
  dwpe: FloatArray | null,
  dout: FloatArray,
  tokens: ArrayLike<number>,
  B: number,
  T: number,
  C: number,
): void {
  for (let bt = 0; bt < B * T; bt++) {
    const o = bt * C;
    const e = tokens[bt]! * C;
    for (let c = 0; c < C; c++) dwte[e + c] = dwte[e + c]! + dout[o + c]!;
    if (dwpe) {
      const p = (bt % T) * C;
      for (let c = 0; c < C; c++) dwpe[p + c] = dwpe[p + c]! + dout[o + c]!;
    }
  }
}
