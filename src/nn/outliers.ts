// Outlier channels: their positions (used by the AR policy's norm-gain outliers) and a fixed residual offset helper.
// Not learned and not a normalization: the AR policy sets the gains (policies/ar/model.ts createArPolicy).

import type { FloatArray } from './array.js';

/**
 * The fixed residual offset (C) of `count` outlier channels of magnitude `magnitude`: channels
 * ⌊(i + ½)·C/count⌋ for i = 0 … count−1 (spread over the width, fixed across layers and tokens),
 * alternating signs +, −, +, …; every other channel 0.
 *
 * The offset models the outlier feature dimensions of LLM.int8() (Dettmers et al. 2022: a few
 * hidden dimensions, the same in every layer, with magnitudes up to ≈ 20× the others) and the
 * massive activations of Sun et al. 2024 (a few fixed channels with near-constant huge values that
 * act as fixed biases). It is a constant input, not a learned mechanism: unlike Sun et al.'s it is
 * present at every token, not only at the start and delimiter tokens.
 */
export function outlierOffset(C: number, count: number, magnitude: number): Float32Array {
  if (!Number.isInteger(count) || count < 0 || count > C) throw new Error(`outliers: count must be an integer in [0, C=${C}], got ${count}`);
  if (!Number.isFinite(magnitude)) throw new Error(`outliers: magnitude must be finite, got ${magnitude}`);
  const offset = new Float32Array(C);
  for (let i = 0; i < count; i++) offset[Math.floor(((i + 0.5) * C) / count)] = i % 2 === 0 ? magnitude : -magnitude;
  return offset;
}

/**
 * The outlier channel indices ⌊(i + ½)·C/count⌋, i = 0 … count−1: `count` channels spread over the
 * width (the channels {@link outlierOffset} sets). Throws when count is not an integer in [0, C].
 */
export function outlierChannels(C: number, count: number): number[] {
  if (!Number.isInteger(count) || count < 0 || count > C) throw new Error(`outliers: count must be an integer in [0, C=${C}], got ${count}`);
  return Array.from({ length: count }, (_, i) => Math.floor(((i + 0.5) * C) / count));
}

/**
 * Adds `offset` (C) to every row of `x` (N, C) in place. Its backward is the identity (the offset
 * is a constant), so the stacks' backward passes need nothing for it.
 */
export function addRowOffset(x: FloatArray, offset: ArrayLike<number>, N: number, C: number): void {
  for (let n = 0; n < N; n++) for (let c = 0; c < C; c++) x[n * C + c] = x[n * C + c]! + offset[c]!;
}
