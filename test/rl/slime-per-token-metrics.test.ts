// slime's mismatch metrics with --calculate-per-token-loss and an empty sample, hand-computed from slime
// 624b824 loss.py l.1317, l.1377 and cp_utils.py l.96–101: the reducer divides Σ_{i,t} by
// num_tokens = Σ_i clamp_min(n_i, 1), so an empty sample adds one to the denominator and nothing above it.
import { describe, expect, it } from 'vitest';
import { estimateJson } from '../../src/rl/index.js';

const E = Math.exp;

describe('slime metric set under aggregation slime-per-token', () => {
  it('train/tis and train/train_rollout_logprob_abs_diff: Σ over tokens / Σ_i max(n_i, 1)', () => {
    // x = ℓold − ℓroll: row 0 [0.5, −0.1], row 1 [0.2], row 2 empty → denominator 2 + 1 + 1 = 4
    const m = estimateJson({
      logpTheta: [
        [-1, -2],
        [-1, -1],
        [-1, -1],
      ],
      logpOld: [
        [-1, -2],
        [-1, -1],
        [-1, -1],
      ],
      logpRollout: [
        [-1.5, -1.9],
        [-1.2, -3],
        [-2, -2],
      ],
      mask: [
        [1, 1],
        [1, 0],
        [0, 0],
      ],
      advantages: [1, -1, 0],
      config: { correction: { name: 'none' }, aggregation: 'slime-per-token', diagnostics: { stacks: ['slime'] } },
    }).metrics;
    expect(m['train/tis']).toBeCloseTo((E(0.5) + E(-0.1) + E(0.2)) / 4, 15);
    expect(m['train/train_rollout_logprob_abs_diff']).toBeCloseTo((0.5 + 0.1 + 0.2) / 4, 15);
  });
});
