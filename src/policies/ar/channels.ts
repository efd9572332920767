// Per-channel activation magnitudes of the AR policy's residual stream: the probe for outlier channels.
// Not a mismatch metric and not used by training: it only reads one fp32 forward pass.

import { arForward, type ArPolicy } from './model.js';
import { fp32Numerics } from '../numerics.js';

/** Magnitudes of one residual-stream tensor (the input of block l, or the last block's output). */
export interface ChannelStats {
  /** 0 … layers − 1: input of block l; `layers`: output of the last block. */
  readonly layer: number;
  /** Mean |x| per channel over every (b, t) row, length C. */
  readonly meanAbs: readonly number[];
  /** Max |x| per channel over every row, length C. */
  readonly maxAbs: readonly number[];
  /** Largest mean |x| over the median mean |x| of the channels (≫ 1 with outlier channels). */
  readonly outlierRatio: number;
}

/**
 * Per-channel |activation| statistics of the residual stream for `tokens` (B, T), from one exact
 * fp32 forward pass. Outlier channels (see `outlierOffset`) show up as a few channels with mean |x|
 * far above the median, in every layer.
 *
 * @example
 * ```ts
 * const stats = residualChannelStats(policy, tokens, B, T);
 * stats[0].outlierRatio; // ≈ 1 without outlier channels
 * ```
 */
export function residualChannelStats(policy: ArPolicy, tokens: ArrayLike<number>, B: number, T: number): ChannelStats[] {
  const cache = arForward(policy, tokens, B, T, fp32Numerics());
  const C = policy.config.C;
  const N = B * T;
  return cache.x.map((x, layer) => {
    const meanAbs = new Array<number>(C).fill(0);
    const maxAbs = new Array<number>(C).fill(0);
    for (let n = 0; n < N; n++) {
      for (let c = 0; c < C; c++) {
        const a = Math.abs(x[n * C + c]!);
        meanAbs[c]! += a / N;
        if (a > maxAbs[c]!) maxAbs[c] = a;
      }
    }
    const sorted = [...meanAbs].sort((p, q) => p - q);
    const median = (sorted[(C - 1) >> 1]! + sorted[C >> 1]!) / 2;
    return { layer, meanAbs, maxAbs, outlierRatio: median > 0 ? sorted[C - 1]! / median : Infinity };
  });
}
