// Rotary position embedding (RoFormer, interleaved pairs per head): forward and backward.
// Not applied on its own by the block; attention.ts and attention-decode.ts call it on q and k.

import type { FloatArray } from './array.js';
import { headSize } from './attention-common.js';

/**
 * The signature of {@link ropeForward} and {@link ropeBackward} (llm.c order: output, input, sizes),
 * over (B, T, C) rows with H heads of size C/H (even), row (b, t) at position `pos0 + t`.
 *
 * @param out - (B, T, C): the rotated rows (forward, may alias `inp`) or the accumulated gradient (backward)
 * @param inp - (B, T, C): the rows (forward) or the output gradient (backward)
 * @param base - @defaultValue 10000
 * @param pos0 - position of t = 0 (the decode step passes the number of cached tokens); @defaultValue 0
 */
export type RopeFn = (
  out: FloatArray,
  inp: FloatArray,
  B: number,
  T: number,
  C: number,
  H: number,
  base?: number,
  pos0?: number,
) => void;

/**
 * RoPE forward: rotates each pair (2i, 2i+1) of each head of row (b, t) by the angle
 * `(pos0 + t)·base^(−2i/hs)`, `out = R·inp` ({@link RopeFn}; `out` may alias `inp`).
 *
 * @example
 * ```ts
 * ropeForward(q, q, B, T, C, H); // q rotated in place, positions 0 … T−1
 * ```
 */
export const ropeForward: RopeFn = ropeKernel(1, false);

/**
 * RoPE backward, accumulating: the transpose (inverse) rotation of the gradient `inp` is added to
 * `out`, `out += Rᵀ·inp` ({@link RopeFn}).
 */
export const ropeBackward: RopeFn = ropeKernel(-1, true);

/** The rotation by `sign·angle`, written to `out` or (accumulate) added to it. */
function ropeKernel(sign: 1 | -1, accumulate: boolean): RopeFn {
  return (out, inp, B, T, C, H, base = 10000, pos0 = 0) => {
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
  };
}
