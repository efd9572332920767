// Tests of the mismatch diagnostics on hand-computed values.
// Not a source of expected numbers: every expected value is derived in the test itself.

import { describe, expect, it } from 'vitest';
import { mismatchDiagnostics } from '../../src/rl/index.js';
import { weightStats } from '../../src/rl/diagnostics.js';
import { flat } from './helpers.js';

describe('mismatch diagnostics: hand-computed values', () => {
  // valid tokens: (old, roll) = (−1, −1.5), (−2, −1.9) in row 0; (−0.5, −0.5) in row 1; one padded token
  const input = {
    shape: { B: 2, T: 2 },
    logpOld: flat([
      [-1, -2],
      [-0.5, -9],
    ]),
    logpRollout: flat([
      [-1.5, -1.9],
      [-0.5, -1],
    ]),
    responseMask: flat([
      [1, 1],
      [1, 0],
    ]),
  };
  const m = mismatchDiagnostics(input).metrics;
  const lr = [0.5, -0.1, 0];
  const E = Math.exp;

  it('KL k1 / k3, |δ|, |Δp|, χ²', () => {
    expect(m['rollout_corr/kl']).toBeCloseTo(-(0.5 - 0.1) / 3, 15);
    expect(m['rollout_corr/k3_kl']).toBeCloseTo(lr.reduce((a, x) => a + E(x) - x - 1, 0) / 3, 15);
    expect(m['rollout_corr/logp_abs_diff_mean']).toBeCloseTo(0.6 / 3, 15);
    expect(m['rollout_corr/logp_abs_diff_max']).toBeCloseTo(0.5, 15);
    expect(m['rollout_corr/prob_abs_diff_mean']).toBeCloseTo(
      (Math.abs(E(-1) - E(-1.5)) + Math.abs(E(-2) - E(-1.9))) / 3,
      15,
    );
    expect(m['rollout_corr/chi2_token']).toBeCloseTo((E(1) + E(-0.2) + 1) / 3 - 1, 14);
    expect(m['rollout_corr/chi2_seq']).toBeCloseTo((E(0.8) + 1) / 2 - 1, 14);
  });

  it('perplexities and their differences', () => {
    expect(m['rollout_corr/training_log_ppl']).toBeCloseTo((1.5 + 0.5) / 2, 15);
    expect(m['rollout_corr/training_ppl']).toBeCloseTo((E(1.5) + E(0.5)) / 2, 14);
    expect(m['rollout_corr/rollout_log_ppl']).toBeCloseTo((1.7 + 0.5) / 2, 15);
    expect(m['rollout_corr/rollout_ppl']).toBeCloseTo((E(1.7) + E(0.5)) / 2, 14);
    expect(m['rollout_corr/log_ppl_diff']).toBeCloseTo(-0.2 / 2, 14);
    expect(m['rollout_corr/log_ppl_diff_min']).toBeCloseTo(-0.2, 14);
    expect(m['rollout_corr/ppl_ratio']).toBeCloseTo((E(-0.2) + 1) / 2, 14);
  });

  it('weights: mean, population std, ESS ratio = 1/mean((w/mean w)²), CV', () => {
    const s = weightStats(Float64Array.of(1, 2, 3, 99), Float64Array.of(1, 1, 1, 0));
    expect(s['rollout_corr/weights_mean']).toBe(2);
    expect(s['rollout_corr/weights_std']).toBeCloseTo(Math.sqrt(2 / 3), 15);
    expect(s['rollout_corr/weights_ess_ratio']).toBeCloseTo(1 / ((0.25 + 1 + 2.25) / 3), 15);
    expect(s['rollout_corr/weights_cv']).toBeCloseTo(Math.sqrt(2 / 3) / 2, 15);
    // ESS ratio = 1 / (1 + CV²) with the population CV
    expect(s['rollout_corr/weights_ess_ratio']).toBeCloseTo(1 / (1 + (Math.sqrt(2 / 3) / 2) ** 2), 14);
  });
});
