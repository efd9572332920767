// Each stack's mismatch metrics under its own names: hand-computed values from each stack's definition
// (file and line in src/rl/stack-metrics.ts and the generated table of docs/estimators.md).

import { describe, expect, it } from 'vitest';
import {
  estimateJson,
  resolveConfig,
  stackMetrics,
  stackMetricSets,
  stackMetricsTableMarkdown,
} from '../../src/rl/index.js';

const E = Math.exp;

// x = ℓold − ℓroll: row 0 [0.5, −0.1, 0], row 1 [−0.5, 0, pad], row 2 empty
const base = {
  logpTheta: [
    [-1.0, -2.0, -0.5],
    [-1.5, -0.2, -1],
    [-1, -1, -1],
  ],
  logpOld: [
    [-1.0, -2.0, -0.5],
    [-1.5, -0.2, -15],
    [-1, -1, -1],
  ],
  logpRollout: [
    [-1.5, -1.9, -0.5],
    [-1.0, -0.2, -0.1],
    [-2, -2, -2],
  ],
  mask: [
    [1, 1, 1],
    [1, 1, 0],
    [0, 0, 0],
  ],
  advantages: [1, -1, 0],
};
const xs = [0.5, -0.1, 0, -0.5, 0];
const mean = (a: number[]) => a.reduce((p, q) => p + q, 0) / a.length;
const run = (stacks: string[], correction: object = { name: 'none' }) =>
  estimateJson({ ...base, config: { correction, diagnostics: { stacks } } }).metrics;

describe("every stack's mismatch metrics under its own names", () => {
  it('slime: per-sample means summed over samples and divided by the sample count (an empty sample adds 0)', () => {
    const m = run(['slime']);
    expect(m['train/train_rollout_logprob_abs_diff']).toBeCloseTo((mean([0.5, 0.1, 0]) + mean([0.5, 0])) / 3, 15);
    expect(m['train/tis']).toBeCloseTo((mean([E(0.5), E(-0.1), 1]) + mean([E(-0.5), 1])) / 3, 15);
    expect(m['train/tis_clipfrac']).toBe(0);
  });

  it('SkyRL, TRL, OpenRLHF, NeMo-RL: token statistics of the gap', () => {
    const m = run(['skyrl', 'trl', 'openrlhf', 'nemo-rl']);
    const a = xs.map(Math.abs);
    expect(m['policy/rollout_train_logprobs_abs_diff_mean']).toBeCloseTo(0.22, 15);
    const s = Math.sqrt(a.reduce((p, v) => p + (v - 0.22) ** 2, 0) / 4);
    expect(m['policy/rollout_train_logprobs_abs_diff_std']).toBeCloseTo(s, 15);
    expect(m['policy/rollout_train_logprobs_abs_diff_max']).toBe(0.5);
    expect(m['policy/rollout_train_logprobs_abs_diff_min']).toBe(0);
    expect(m['sampling/sampling_logp_difference/mean']).toBeCloseTo(0.22, 15);
    expect(m['sampling/importance_sampling_ratio/mean']).toBe(1);
    expect(m['vllm_kl']).toBeCloseTo(0.02, 15);
    expect(m['token_mult_prob_error']).toBeCloseTo(mean(a.map(E)), 15);
    expect(m['policy_kl_error']).toBeCloseTo(mean(xs.map((x) => E(-x) + x - 1)), 15);
  });

  it('ROLL: per-row ratio and Δp at every granularity, averaged over non-empty rows; segments split at gaps', () => {
    const m = run(['roll']);
    expect(m['actor/train_infer_ratio_sequence_mean']).toBeCloseTo((E(0.4) + E(-0.5)) / 2, 15);
    expect(m['actor/train_infer_ratio_geometric_mean']).toBeCloseTo((E(0.4 / 3) + E(-0.25)) / 2, 15);
    expect(m['actor/train_infer_ratio_token_mean']).toBeCloseTo(
      (mean([E(0.5), E(-0.1), 1]) + mean([E(-0.5), 1])) / 2,
      15,
    );
    const dp0 = [E(-1) - E(-1.5), E(-2) - E(-1.9), 0];
    expect(m['actor/train_infer_diff_sequence_mean']).toBeCloseTo((dp0[0]! + dp0[1]! + (E(-1.5) - E(-1))) / 2, 15);
    const gap = estimateJson({
      logpTheta: [[-1, -1, -1]],
      logpOld: [[-1, -5, -1]],
      logpRollout: [[-1.2, -1, -0.6]],
      mask: [[1, 0, 1]],
      advantages: [1],
      config: { diagnostics: { stacks: ['roll'] } },
    }).metrics;
    expect(gap['actor/train_infer_ratio_segment_mean']).toBeCloseTo((E(0.2) + E(-0.4)) / 2, 15);
    expect(gap['actor/train_infer_ratio_geometric_mean']).toBeCloseTo(E(-0.1), 15);
  });

  it('prime-rl: k3 mismatch KL token statistics and the DPPO-mask split', () => {
    const m = run(['prime-rl']);
    const kl = xs.map((x) => E(x) - x - 1);
    expect(m['mismatch_kl/all/mean']).toBeCloseTo(mean(kl), 15);
    expect(m['mismatch_kl/all/median']).toBeCloseTo([...kl].sort((p, q) => p - q)[2]!, 15);
    // Δp = e^ℓold − e^ℓroll stays within ±0.2 here: nothing is DPPO-masked
    expect(m['is_masked/mean']).toBe(0);
    expect(m['unmasked_mismatch_kl/mean']).toBeCloseTo(mean(kl), 15);
  });

  it("prime-rl's debug mismatch diagnostics: one-ulp roundoff, a signed zero and non-finite pairs (mismatch.py at e1502f0, the cases of its own test)", () => {
    // ℓroll = [−1, −1e-4, 0, −2]; ℓtrain equal but one float32 ulp toward 0 at the second token and −0 at the third
    const f = new Float32Array([-1e-4]);
    const up = new Int32Array(f.buffer);
    up[0] = up[0]! - 1; // −1e-4 one ulp toward zero (nextafter(x, 0) for a negative float32)
    const next = f[0]!;
    const roll = [-1, Math.fround(-1e-4), 0, -2];
    const train = [-1, next, -0, -2];
    const m = estimateJson({
      logpTheta: [train],
      logpOld: [train],
      logpRollout: [roll],
      mask: [[1, 1, 1, 1]],
      advantages: [1],
      config: { diagnostics: { stacks: ['prime-rl-debug'] } },
    }).metrics;
    expect(m['logprob_bit_mismatch/all/mean']).toBe(2 / 4);
    expect(m['logprob_nonfinite/all/mean']).toBe(0);
    const d = next - Math.fround(-1e-4);
    expect(d).toBeGreaterThan(0);
    expect(m['logprob_abs_error/all/max']).toBe(Math.fround(d));
    expect(m['logprob_abs_error/all/mean']).toBe(Math.fround(d) / 4);
    // expm1(d) − d ≈ d²/2 where e^d − d − 1 in float32 would round to 0
    expect(m['mismatch_k3_stable/all/mean']).toBe(Math.fround(Math.expm1(d) - d) / 4);
    expect(Math.fround(Math.expm1(d) - d)).toBeGreaterThan(0);
    expect(m['mismatch_k3_stable/all/mean']! / ((d * d) / 2 / 4)).toBeCloseTo(1, 4);
    // non-finite pairs count as bit mismatches even when their bits agree (mismatch.py l.31); a NaN error propagates as in torch
    const values = Float64Array.from([NaN, -Infinity, -0.5]);
    const nf = stackMetrics(
      { shape: { B: 1, T: 3 }, logpTrain: values, logpRollout: values, responseMask: Float64Array.from([1, 1, 1]) },
      ['prime-rl-debug'],
    );
    expect([nf['logprob_nonfinite/all/mean'], nf['logprob_bit_mismatch/all/mean']]).toEqual([2 / 3, 2 / 3]);
    expect(nf['logprob_abs_error/all/max']).toBeNaN();
    // an empty batch: every key left out (prime-rl logs NaN)
    const empty = estimateJson({
      logpTheta: [[-1]],
      logpOld: [[-1]],
      logpRollout: [[-1]],
      mask: [[0]],
      advantages: [1],
      config: { diagnostics: { stacks: ['prime-rl-debug'] } },
    }).metrics;
    expect(Object.keys(empty).filter((k) => k.startsWith('logprob_') || k.startsWith('mismatch_k3'))).toEqual([]);
  });

  it('AReaL: behave_* over the tokens its rejection sampling keeps, with its weight', () => {
    // AReaL kl_k3 with upper 0.1 rejects x = 0.5 and x = −0.5 (see stacks-2026.test.ts)
    const m = run(['areal'], { name: 'rejection_sampling', metric: 'kl_k3', upper: 0.1 });
    expect(m['ppo_actor/update/behave_imp_weight/avg']).toBeCloseTo((E(-0.1) + 2) / 3, 15);
    expect(m['ppo_actor/update/behave_imp_weight/min']).toBeCloseTo(E(-0.1), 15);
    expect(m['ppo_actor/update/behave_approx_kl/avg']).toBeCloseTo(-0.1 / 3, 15);
    expect(m['ppo_actor/update/behave_filtered_ratio/avg']).toBe(2 / 5);
  });

  it("veRL: its off-policy metrics with veRL's empty-row rule", () => {
    const m = run(['verl']);
    expect(m['rollout_corr/kl']).toBeCloseTo(0.02, 15);
    // three rows, the empty one at log-ppl diff 0
    const d0 = mean([-1.5, -1.9, -0.5]) - mean([-1.0, -2.0, -0.5]);
    const d1 = mean([-1.0, -0.2]) - mean([-1.5, -0.2]);
    expect(m['rollout_corr/log_ppl_diff']).toBeCloseTo((d0 + d1 + 0) / 3, 15);
    const p = [E(-1), E(-2), E(-0.5), E(-1.5), E(-0.2)];
    const q = [E(-1.5), E(-1.9), E(-0.5), E(-1.0), E(-0.2)];
    expect(m['training/rollout_probs_diff_mean']).toBeCloseTo(mean(p.map((v, j) => Math.abs(v - q[j]!))), 15);
    const mp = mean(p);
    const mq = mean(q);
    const cov = p.reduce((a, v, j) => a + (v - mp) * (q[j]! - mq), 0);
    const r = cov / Math.sqrt(p.reduce((a, v) => a + (v - mp) ** 2, 0) * q.reduce((a, v) => a + (v - mq) ** 2, 0));
    expect(m['training/rollout_actor_probs_pearson_corr']).toBeCloseTo(r, 14);
  });

  it('emits exactly the documented names; names are distinct across stacks; bad names are usage errors', () => {
    const all = Object.keys(stackMetricSets);
    const m = run(all, { name: 'tis', C: 2 });
    const seen = new Set<string>();
    for (const [stack, set] of Object.entries(stackMetricSets)) {
      for (const name of Object.keys(set.metrics)) {
        expect(seen.has(name), name).toBe(false);
        seen.add(name);
        expect(m[name], `${stack}: ${name}`).toBeTypeOf('number');
        expect(stackMetricsTableMarkdown()).toContain(`\`${name}\``);
      }
    }
    expect(() => resolveConfig({ diagnostics: { stacks: ['verl', 'megatron'] } })).toThrow(
      /config\.diagnostics\.stacks\[1\]: unknown value "megatron"/,
    );
  });
});
