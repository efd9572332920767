// When the battery may compare generate's ℓroll with the trainer's ℓ: exactly when both are
// log softmax(z/τ)[y] over the same support at the same τ (docs/logprob-semantics.md).
import { describe, expect, it } from 'vitest';
import type { SamplingParams } from '../../src/core/backend-contract.js';
import { logprobSemantics, semanticsDifferences } from '../../src/policies/semantics.js';
import { samplerMismatch, supportReplayed } from '../../src/testing/temperature-checks.js';

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
    // a raw ℓroll is full-support: a cut does not matter to it, only τ — unless the trainer replays the cut
    expect(samplerMismatch(s(1, 4, 0.9, 'raw'))).toBeNull();
    expect(samplerMismatch(s(1, 4, 0.9, 'raw'), undefined, true)).toMatch(/replayed kept set/);
    // a replayed cut makes a processed ℓroll the trainer's quantity at any τ
    expect(samplerMismatch(s(1, 4, 1, 'processed'), undefined, true)).toBeNull();
    expect(samplerMismatch(s(0.5, 0, 0.9, 'processed'), undefined, true)).toBeNull();
    expect(samplerMismatch(s(0.5, 4, 1, 'processed'), 'after-log-softmax', true)).toMatch(/after the log-softmax/);
    // nothing cut: supportReplay changes nothing
    expect(samplerMismatch(s(0.5, 0, 1, 'raw'), undefined, true)).toMatch(/raw ℓroll .*τ 0\.5/);
    expect(samplerMismatch(s(1, 0, 1, 'raw'), undefined, true)).toBeNull();
  });

  it('supportReplayed: the config asks for supportReplay and the record carries a support', () => {
    const config = (supportReplay: boolean) =>
      ({ policy: { sampler: { temperature: 1, topK: 4, topP: 1, logprob: 'processed', supportReplay } } }) as never;
    const batch = (record: object) => ({ record }) as never;
    expect(supportReplayed(config(true), batch({ kind: 'ar', support: new Uint8Array(4) }))).toBe(true);
    expect(supportReplayed(config(true), batch({ kind: 'ar' }))).toBe(false);
    expect(supportReplayed(config(true), batch({ kind: 'diffusion', support: null }))).toBe(false);
    expect(supportReplayed(config(false), batch({ kind: 'ar', support: new Uint8Array(4) }))).toBe(false);
    expect(supportReplayed(undefined, batch({ kind: 'ar', support: new Uint8Array(4) }))).toBe(false);
  });

  it('agrees with semanticsDifferences on identical GEMM sides, case by case', () => {
    for (const temperature of [1, 0.5])
      for (const [topK, topP] of [
        [0, 1],
        [4, 1],
        [0, 0.9],
      ] as const)
        for (const logprob of ['raw', 'processed'] as const)
          for (const temperatureAt of [undefined, 'after-log-softmax'] as const)
            for (const supportReplay of [false, true]) {
              const gemm = { kind: 'rounding', operands: 'bf16' } as const;
              const sampler = { temperature, topK, topP, supportReplay };
              const rollout = logprobSemantics({ gemm, logprob }, 'rollout', sampler);
              const trainer = logprobSemantics(
                { gemm, ...(temperatureAt ? { temperatureAt } : {}) },
                'trainer',
                sampler,
              );
              const same = semanticsDifferences(rollout, trainer).length === 0;
              const label = JSON.stringify({ ...sampler, logprob, temperatureAt });
              const got = samplerMismatch(s(temperature, topK, topP, logprob), temperatureAt, supportReplay);
              expect(got === null, label).toBe(same);
            }
  });
});
