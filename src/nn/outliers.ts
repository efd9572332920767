// Outlier channels: their positions, used by the AR policy's norm-gain outliers.
// Not learned and not a normalization: the AR policy sets the gains (policies/ar/model.ts createArPolicy).

/**
 * The outlier channel indices ⌊(i + ½)·C/count⌋, i = 0 … count−1: `count` channels spread over the
 * width. Throws when count is not an integer in [0, C].
 */
export function outlierChannels(C: number, count: number): number[] {
  if (!Number.isInteger(count) || count < 0 || count > C)
    throw new Error(`outliers: count must be an integer in [0, C=${C}], got ${count}`);
  return Array.from({ length: count }, (_, i) => Math.floor(((i + 0.5) * C) / count));
}
