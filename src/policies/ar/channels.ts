// Per-channel activation magnitudes of the AR policy (residual stream and linear-layer inputs): the probe for outlier channels.
// Not a mismatch metric and not used by training: it only reads one fp32 forward pass.

import { arForward, type ArPolicy } from './model.js';
import { fp32Numerics } from '../numerics.js';
import type { FloatArray } from '../../nn/array.js';

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
 * fp32 forward pass. Outlier channels (see `outlierChannels` and the `outliers` model option) show up as a few channels with mean |x|
 * far above the median, in every layer.
 *
 * @example
 * ```ts
 * const stats = residualChannelStats(policy, tokens, B, T);
 * stats[0].outlierRatio; // ≈ 1 without outlier channels
 * ```
 */
export function residualChannelStats(
  policy: ArPolicy,
  tokens: ArrayLike<number>,
  B: number,
  T: number,
): ChannelStats[] {
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

/** Magnitudes of one linear layer's input (a norm output), with the median channel and the largest channels. */
export interface LinearInputStats {
  /** `h<l>.attn` (norm 1 output: the QKV projection's input), `h<l>.mlp` (norm 2 output: the MLP's input) or `lmHead` (final norm output). */
  readonly name: string;
  /** Mean |x| per channel over every (b, t) row, length C. */
  readonly meanAbs: readonly number[];
  /** Median over the channels of the mean |x|. */
  readonly median: number;
  /** The `k` channels of largest mean |x|, largest first: channel, mean |x|, and mean |x| over the median. */
  readonly top: readonly { readonly channel: number; readonly meanAbs: number; readonly ratio: number }[];
}

function channelMeanAbs(x: FloatArray, N: number, C: number): number[] {
  const meanAbs = new Array<number>(C).fill(0);
  for (let n = 0; n < N; n++) for (let c = 0; c < C; c++) meanAbs[c]! += Math.abs(x[n * C + c]!) / N;
  return meanAbs;
}

/**
 * Per-channel mean |x| at the inputs of the linear layers — each block's two norm outputs and the
 * final norm's — for `tokens` (B, T) from one exact fp32 forward pass: the activations a W8A8 plan
 * quantizes per token, where LLM.int8() locates the outlier features. Reports the median channel and
 * the `k` largest channels with their ratio to the median.
 *
 * @example
 * ```ts
 * const stats = linearInputChannelStats(policy, tokens, B, T, 2);
 * stats[0].top[0].ratio; // ≈ 20 with the presets' outlier channels, ≈ 2–3 without
 * ```
 */
export function linearInputChannelStats(
  policy: ArPolicy,
  tokens: ArrayLike<number>,
  B: number,
  T: number,
  k: number,
): LinearInputStats[] {
  if (!Number.isInteger(k) || k < 1 || k > policy.config.C)
    throw new Error(`linearInputChannelStats: k must be an integer in [1, C=${policy.config.C}], got ${k}`);
  const cache = arForward(policy, tokens, B, T, fp32Numerics());
  const C = policy.config.C;
  const N = B * T;
  const inputs: [string, FloatArray][] = [
    ...cache.blocks.flatMap((b, l): [string, FloatArray][] => [
      [`h${l}.attn`, b.ln1],
      [`h${l}.mlp`, b.ln2],
    ]),
    ['lmHead', cache.xf],
  ];
  return inputs.map(([name, x]) => {
    const meanAbs = channelMeanAbs(x, N, C);
    const sorted = [...meanAbs].sort((p, q) => p - q);
    const median = (sorted[(C - 1) >> 1]! + sorted[C >> 1]!) / 2;
    const top = meanAbs
      .map((m, channel) => ({ channel, meanAbs: m, ratio: median > 0 ? m / median : Infinity }))
      .sort((a, b) => b.meanAbs - a.meanAbs || a.channel - b.channel)
      .slice(0, k);
    return { name, meanAbs, median, top };
  });
}
