// When the battery may compare generate's ℓroll with the trainer's ℓ: exactly when both are
// log softmax(z/τ)[y] over the same support at the same τ (docs/logprob-semantics.md).
import { describe, expect, it } from 'vitest';
import type { SamplingParams } from '../../src/core/backend-contract.js';
import { logprobSemantics, semanticsDifferences } from '../../src/policies/semantics.js';
import { samplerMismatch } from '../../src/testing/temperature-checks.js';

const s = (temperature: number, topK: number, topP: number, logprob: 'raw' | 'processed'): SamplingParams => ({
  temperature,
  topK,
  topP,
  logprob,
});

describe('samplerMismatch', () => {
  it('names why a sampler’s ℓroll is not the trainer’s quantity, null when it is', () => {
    expect(samplerMismatch(s(1, 0, 1, 'processed'))).toBeNull();
    expect(samplerMismatch(s(0.5, 0, 1, 'processed'))).toBeNull();
    expect(samplerMismatch(s(1, 0, 1, 'raw'))).toBeNull();
    expect(samplerMismatch(s(0.5, 0, 1, 'raw'))).toMatch(/raw ℓroll .*τ 0\.5/);
    expect(samplerMismatch(s(1, 4, 1, 'processed'))).toMatch(/kept set \(top-k 4, top-p 1\)/);
    expect(samplerMismatch(s(1, 0, 0.9, 'processed'))).toMatch(/top-p 0\.9/);
    expect(samplerMismatch(s(0.5, 0, 1, 'processed'), 'after-log-softmax')).toMatch(/after the log-softmax/);
    expect(samplerMismatch(s(1, 0, 1, 'processed'), 'after-log-softmax')).toBeNull();
    // a raw ℓroll is full-support: a cut does not matter to it, only τ
    expect(samplerMismatch(s(1, 4, 0.9, 'raw'))).toBeNull();
  });

  it('agrees with semanticsDifferences on identical GEMM sides, case by case', () => {
    for (const temperature of [1, 0.5])
      for (const [topK, topP] of [
        [0, 1],
        [4, 1],
        [0, 0.9],
      ] as const)
        for (const logprob of ['raw', 'processed'] as const)
          for (const temperatureAt of [undefined, 'after-log-softmax'] as const) {
            const gemm = { kind: 'rounding', operands: 'bf16' } as const;
            const rollout = logprobSemantics({ gemm, logprob }, 'rollout', { temperature, topK, topP });
            const trainer = logprobSemantics({ gemm, ...(temperatureAt ? { temperatureAt } : {}) }, 'trainer', {
              temperature,
              topK,
              topP,
            });
            const same = semanticsDifferences(rollout, trainer).length === 0;
            const label = JSON.stringify({ temperature, topK, topP, logprob, temperatureAt });
            expect(samplerMismatch(s(temperature, topK, topP, logprob), temperatureAt) === null, label).toBe(same);
          }
  });
});
