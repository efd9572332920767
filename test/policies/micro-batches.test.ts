// The trainer recompute in micro-batches: equal to one forward when a chunk holds every sequence, different
// when the trainer's GEMM follows its rows (split-K for small GEMMs, per-tensor scales), equal again with
// per-token scales; and the ratio share of TRL #6789 on a hand vector.

import { describe, expect, it } from 'vitest';
import { arConfig } from '../../src/policies/ar/config.js';
import { computeLogprobs } from '../../src/policies/ar/logprobs.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { microBatchedLogprobs, ratioOutside } from '../../src/policies/ar/micro-batches.js';
import { quantizedNumerics } from '../../src/policies/quantized.js';
import { roundingNumerics } from '../../src/policies/numerics.js';
import { makeTask } from '../../src/tasks/registry.js';
import { createRng } from '../../src/core/rng.js';

describe('micro-batched trainer recompute', () => {
  const task = makeTask('reverse');
  const L = 4;
  const B = 5;
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + L }), 2);
  const P = task.promptLength;
  const rng = createRng(9);
  const tokens = Int32Array.from({ length: B * (P + L) }, () => Math.floor(rng.uniform() * task.vocabSize));
  const mask = new Float64Array(B * L).fill(1);
  const batch = { tokens, B, P, responseMask: mask };

  it('one chunk of all sequences is computeLogprobs bit for bit; sequential BF16 does not depend on the chunk', () => {
    const n = roundingNumerics({ operands: 'bf16' });
    const whole = computeLogprobs(policy, tokens, B, P, mask, { numerics: n }).logp;
    expect([...microBatchedLogprobs(policy, batch, n, B)]).toEqual([...whole]);
    expect([...microBatchedLogprobs(policy, batch, n, 1)]).toEqual([...whole]);
    expect(() => microBatchedLogprobs(policy, batch, n, 0)).toThrow(/microBatch/);
  });

  it('split-K for small GEMMs and per-tensor activation scales follow the chunk; per-token scales do not', () => {
    const rows = P + L; // one sequence's rows
    const splitK = roundingNumerics({ operands: 'bf16', accumulator: 'split-k', splitK: 16, splitKMaxRows: rows });
    const perTensor = quantizedNumerics({ weights: { preset: 'te-current' }, activations: { preset: 'te-current' } });
    const perToken = quantizedNumerics({ weights: { preset: 'nvfp4' }, activations: { preset: 'nvfp4-row-te' } });
    for (const n of [splitK, perTensor])
      expect([...microBatchedLogprobs(policy, batch, n, 1)]).not.toEqual([
        ...microBatchedLogprobs(policy, batch, n, 4),
      ]);
    expect([...microBatchedLogprobs(policy, batch, perToken, 1)]).toEqual([
      ...microBatchedLogprobs(policy, batch, perToken, 4),
    ]);
  });

  it('ratioOutside: exp(0.2) and exp(−0.2) fall outside [0.9, 1.1], exp(0.05) inside; masked tokens skipped', () => {
    const r = ratioOutside([0.2, -0.2, 0.05, 5], [0, 0, 0, 0], [1, 1, 1, 0]);
    expect(r.tokens).toBe(3);
    expect(r.share).toBeCloseTo(2 / 3, 12);
    expect(r.meanRatio).toBeCloseTo((Math.exp(0.2) + Math.exp(-0.2) + Math.exp(0.05)) / 3, 12);
  });
});
