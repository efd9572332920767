// parameterChangeCounts against prime-rl's own test vectors (its unit test
// test_parameter_changes_distinguish_updates_and_nonfinite_values for mismatch.py at e1502f0, transcribed) and a real update.

import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/core/errors.js';
import { parameterChangeCounts } from '../../src/rl/parameter-changes.js';

function nextUp(x: number): number {
  const f = new Float32Array([x]);
  const i = new Int32Array(f.buffer);
  i[0] = x >= 0 ? i[0]! + 1 : i[0]! - 1;
  return f[0]!;
}

describe('parameterChangeCounts (prime-rl parameter_change_counts)', () => {
  it("prime-rl's vectors: [1, 0, −0.5, NaN, ∞] unchanged → [0, 2]; one ulp and a signed zero → [2, 2]", () => {
    const before = new Float32Array([1, 0, -0.5, NaN, Infinity]);
    const after = Float32Array.from(before);
    expect(parameterChangeCounts(before, after)).toEqual({ changed: 0, nonfinite: 2 });
    after[0] = nextUp(1);
    after[1] = -0;
    expect(parameterChangeCounts(before, after)).toEqual({ changed: 2, nonfinite: 2 });
  });

  it('counts a pair non-finite on either side, never as changed', () => {
    const before = new Float32Array([1, 2, 3]);
    const after = new Float32Array([NaN, 2, -Infinity]);
    expect(parameterChangeCounts(before, after)).toEqual({ changed: 0, nonfinite: 2 });
  });

  it('an update below half an ulp changes no float32 weight; a larger one changes each', () => {
    const w = new Float32Array([1, 2, 4, 8]);
    const tiny = w.map((x) => Math.fround(x + x * 2 ** -26));
    expect(parameterChangeCounts(w, tiny).changed).toBe(0);
    const step = w.map((x) => Math.fround(x - 1e-3 * x));
    expect(parameterChangeCounts(w, step).changed).toBe(4);
  });

  it('refuses snapshots of different shapes, naming the field', () => {
    expect(() => parameterChangeCounts(new Float32Array(3), new Float32Array(1))).toThrow(UsageError);
    expect(() => parameterChangeCounts(new Float32Array(3), new Float32Array(1))).toThrow(/identical shapes/);
  });
});
