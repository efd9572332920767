// prime-rl's parameter-snapshot probe: how many FP32 parameter elements an update changed, bit for bit, and
// how many element pairs were not finite. Reads two weight snapshots, not a batch; not a loss.

import { UsageError } from '../core/errors.js';

/** What {@link parameterChangeCounts} counts over two snapshots of the same parameters. */
export interface ParameterChangeCounts {
  /** Elements finite in both snapshots whose float32 bits differ (−0 vs +0 counts; a NaN pair does not). */
  readonly changed: number;
  /** Element pairs of which either side is NaN or ±∞ (counted whether or not their bits differ). */
  readonly nonfinite: number;
}

/**
 * prime-rl's `parameter_change_counts(before, after)` (src/prime_rl/trainer/rl/mismatch.py l.5–14 at
 * e1502f0): over two float32 snapshots of the same shape, `changed` = #{i : both finite and
 * bits(before_i) ≠ bits(after_i)} and `nonfinite` = #{i : before_i or after_i is not finite}. An update
 * too small to move a float32 weight (a learning rate below half an ulp, say) changes no element.
 *
 * @throws UsageError when the snapshots differ in length (prime-rl: "Parameter snapshots must have identical
 *   shapes"); float32 is the only element type (prime-rl raises TypeError for any other).
 */
export function parameterChangeCounts(before: Float32Array, after: Float32Array): ParameterChangeCounts {
  if (before.length !== after.length)
    throw new UsageError(
      `after: parameter snapshots must have identical shapes, got ${before.length} and ${after.length} elements`,
    );
  const a = new Int32Array(before.buffer, before.byteOffset, before.length);
  const b = new Int32Array(after.buffer, after.byteOffset, after.length);
  let changed = 0;
  let nonfinite = 0;
  for (let i = 0; i < a.length; i++) {
    if (!Number.isFinite(before[i]!) || !Number.isFinite(after[i]!)) nonfinite++;
    else if (a[i] !== b[i]) changed++;
  }
  return { changed, nonfinite };
}
