// Rotary position embedding (RoFormer, interleaved pairs per head): forward and backward.
// Not applied on its own by the block; attention.ts and attention-decode.ts call it on q and k.

import type { FloatArray } from './array.js';
import { headSize } from './attention-common.js';

/**
 * RoPE forward: rotates each pair (2i, 2i+1) of each head of row (b, t) by the angle
 * `(pos0 + t)·base^(−2i/hs)`. `out` may alias `inp`.
 *
 * @param out - (B, T, C)
 * @param inp - (B, T, C)
 * @param pos0 - position of t = 0 (the decode step passes the number of cached tokens)
 */
export function ropeForward(
  out: FloatArray,
  inp: FloatArray,
  B: number,
  T: number,
  C: number,
  H: number,
  base = 10000,
  pos0 = 0,
): void {
  ropeApply(out, inp, B, T, C, H, base, pos0, 1, false);
}

/**
 * RoPE backward, accumulating: the transpose (inverse) rotation of `dout` is added to `dinp`.
 *
 * @param dinp - (B, T, C) accumulated
 * @param dout - (B, T, C)
 */
export function ropeBackward(
  dinp: FloatArray,
  dout: FloatArray,
  B: number,
  T: number,
  C: number,
  H: number,
  base = 10000,
  pos0 = 0,
): void {
  ropeApply(dinp, dout, B, T, C, H, base, pos0, -1, true);
}

function ropeApply(
  out: FloatArray,
  inp: FloatArray,
  B: number,
  T: number,
  C: number,
  H: number,
  base: number,
  pos0: number,
  sign: 1 | -1,
  accumulate: boolean,
): void {
  const hs = headSize(C, H, true);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      const pos = pos0 + t;
      for (let h = 0; h < H; h++) {
        const o = (b * T + t) * C + h * hs;
        for (let i = 0; i < hs / 2; i++) {
          const angle = pos * Math.pow(base, (-2 * i) / hs);
          const cos = Math.cos(angle);
          const sin = sign * Math.sin(angle);
          const x0 = inp[o + 2 * i]!;
          const x1 = inp[o + 2 * i + 1]!;
          const y0 = x0 * cos - x1 * sin;
          const y1 = x0 * sin + x1 * cos;
          out[o + 2 * i] = accumulate ? out[o + 2 * i]! + y0 : y0;
          out[o + 2 * i + 1] = accumulate ? out[o + 2 * i + 1]! + y1 : y1;
        }
      }
    }
  }
}
