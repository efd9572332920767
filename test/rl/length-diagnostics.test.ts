// Tests of the long-response diagnostics (position/length buckets, sequence log-ratio, error tokens,
// repetition) on hand-built batches. Not a source of expected numbers: each is derived in the test.

import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/index.js';
import { LENGTH_BUCKET_EDGES, lengthDiagnostics } from '../../src/rl/index.js';
import { lengthBucketOf, lengthMetrics } from '../../src/rl/length-diagnostics.js';

const k3 = (d: number): number => Math.exp(d) - d - 1;

describe('lengthDiagnostics', () => {
  it('buckets edges [0, 8), [8, 32), [32, 128), [128, ∞)', () => {
    expect([...LENGTH_BUCKET_EDGES]).toEqual([0, 8, 32, 128]);
    expect([0, 7, 8, 31, 32, 127, 128, 10_000].map(lengthBucketOf)).toEqual([0, 0, 1, 1, 2, 2, 3, 3]);
  });

  // Row 0: 10 valid tokens, δ = 0.1 at positions 0–7 and −5 at positions 8, 9 (ratio e^−5 < 1e-2).
  // Row 1: 3 valid tokens, δ = 0.2 each; the rest padded (δ garbage under mask 0).
  const T = 12;
  const old = new Float64Array(2 * T);
  const roll = new Float64Array(2 * T);
  const mask = new Float64Array(2 * T);
  for (let t = 0; t < 10; t++) {
    mask[t] = 1;
    old[t] = t < 8 ? -1 : -6;
    roll[t] = t < 8 ? -1.1 : -1;
  }
  for (let t = 0; t < T; t++) {
    roll[T + t] = -1.2;
    old[T + t] = t < 3 ? -1 : 50;
    mask[T + t] = t < 3 ? 1 : 0;
  }
  // Responses: row 0 = 1 2 3 4 1 2 3 4 1 2 (4-grams 7, repeats: 1234 at j=4, 2341? no) ; row 1 = 5 5 5.
  const responses = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 0, 0, 5, 5, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0];
  const d = lengthDiagnostics({ shape: { B: 2, T }, logpOld: old, logpRollout: roll, mask, responses });

  it('per position and per position bucket', () => {
    expect(d.positions).toHaveLength(T);
    expect(d.positions[0]!.tokens).toBe(2);
    expect(d.positions[0]!.k3).toBeCloseTo((k3(0.1) + k3(0.2)) / 2, 14);
    expect(d.positions[0]!.meanAbsDelta).toBeCloseTo(0.15, 14);
    expect(d.positions[9]!).toEqual({ tokens: 1, k3: k3(-5), meanAbsDelta: 5 });
    expect(d.positions[11]!.tokens).toBe(0);
    const [p0, p1, p2] = d.byPosition;
    expect(p0!.tokens).toBe(11);
    expect(p0!.sequences).toBe(2);
    expect(p0!.k3).toBeCloseTo((8 * k3(0.1) + 3 * k3(0.2)) / 11, 14);
    expect(p1!).toMatchObject({ lo: 8, hi: 32, tokens: 2, sequences: 1 });
    expect(p1!.k3).toBeCloseTo(k3(-5), 14);
    expect(p2!.tokens).toBe(0);
    expect(d.byPosition[3]!.hi).toBe(Infinity);
  });

  it('per response-length bucket: a sequence’s tokens go where its length falls', () => {
    expect(d.byLength[0]!).toMatchObject({ tokens: 3, sequences: 1 });
    expect(d.byLength[0]!.k3).toBeCloseTo(k3(0.2), 14);
    expect(d.byLength[1]!).toMatchObject({ tokens: 10, sequences: 1 });
    expect(d.byLength[1]!.meanAbsDelta).toBeCloseTo((0.8 + 10) / 10, 14);
  });

  it('sequence log-ratio, error tokens, repetition', () => {
    expect(d.sequences).toBe(2);
    const s0 = 0.8 - 10;
    const s1 = 0.6;
    expect(d.seqLogRatioMean).toBeCloseTo((s0 + s1) / 2, 13);
    expect(d.seqLogRatioAbsMean).toBeCloseTo((Math.abs(s0) + s1) / 2, 13);
    expect(d.seqLogRatioAbsMax).toBeCloseTo(Math.abs(s0), 13);
    expect(d.errorTokenFrac).toBeCloseTo(2 / 13, 15);
    // Row 0's 4-grams: 1234 2341 3412 4123 1234* 2341* 3412* → 3 repeats of 7; row 1 has none (3 tokens).
    expect(d.repetitionRate).toBeCloseTo(3 / 7, 15);
  });

  it('metrics: keys only for buckets with tokens; no repetition key without responses', () => {
    const m = lengthMetrics({ shape: { B: 2, T }, logpOld: old, logpRollout: roll, mask });
    expect(Object.keys(m).sort()).toEqual([
      'mismatch/error_token_frac',
      'mismatch/len_0_8/k3',
      'mismatch/len_8_32/k3',
      'mismatch/pos_0_8/abs_delta',
      'mismatch/pos_0_8/k3',
      'mismatch/pos_8_32/abs_delta',
      'mismatch/pos_8_32/k3',
      'mismatch/seq_log_ratio_abs_max',
      'mismatch/seq_log_ratio_abs_mean',
    ]);
    expect(m['mismatch/pos_8_32/k3']).toBe(d.byPosition[1]!.k3);
    expect(
      Number.isNaN(lengthDiagnostics({ shape: { B: 2, T }, logpOld: old, logpRollout: roll, mask }).repetitionRate),
    ).toBe(true);
  });

  it('identical engines: every mismatch figure is 0', () => {
    const z = lengthDiagnostics({ shape: { B: 2, T }, logpOld: roll, logpRollout: roll, mask });
    expect(z.byPosition.every((b) => b.k3 === 0 && b.meanAbsDelta === 0)).toBe(true);
    expect([z.seqLogRatioAbsMax, z.errorTokenFrac]).toEqual([0, 0]);
  });

  it('names the array whose length is wrong', () => {
    expect(() => lengthDiagnostics({ shape: { B: 2, T }, logpOld: old, logpRollout: roll, mask: [1] })).toThrow(
      UsageError,
    );
    expect(() =>
      lengthDiagnostics({ shape: { B: 2, T }, logpOld: old, logpRollout: roll, mask, responses: [1] }),
    ).toThrow(/responses must have B·T = 24 entries, got 1/);
  });
});
