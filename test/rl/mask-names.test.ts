// Tests of the mask vocabulary of `rl/`: response mask, loss mask, denominator mask, KL mask; the former names still read; the no-ℓold-pass predicate.
// Not a test of any estimator's numbers (correction.test.ts, estimate.test.ts): only that the names route the same arrays.

import { describe, expect, it } from 'vitest';
import {
  applyCorrection,
  estimate,
  mismatchDiagnostics,
  policyObjective,
  resolveConfig,
  stackMetrics,
} from '../../src/rl/index.js';
import type { CorrectionInput, DiagnosticsInput, ObjectiveInput, StackMetricInput } from '../../src/rl/index.js';
import { skipsLogpOldPass } from '../../src/rl/schema.js';
import { UsageError } from '../../src/core/errors.js';
import { fixedBatch } from './helpers.js';

const batch = fixedBatch(7, 4, 5, 0.3);
const { shape, logpOld, logpRollout, logpTheta, logpRef } = batch;
const responseMask = batch.mask;
const advantages = responseMask.map((m, k) => m * ((k % 3) - 1));
const stages = resolveConfig({
  correction: [
    { name: 'tis', C: 1.5 },
    { name: 'icepop', lo: 0.8, hi: 1.2 },
    { name: 'geo-rs', lo: 0.9, hi: 1.1, level: 'token' },
  ],
}).correction;

/** A record under its former field names, as a JavaScript caller of 0.1 wrote it (the type no longer allows it). */
function formerNames<T>(record: object): T {
  return record as T;
}

describe('masks: one name per concept', () => {
  const corr = applyCorrection({ shape, logpOld, logpRollout, responseMask, advantages }, stages).value;

  it('the correction reads the response mask and returns the loss mask and the denominator mask', () => {
    for (let k = 0; k < responseMask.length; k++) {
      if (responseMask[k] !== 1)
        expect([corr.lossMask[k], corr.denominatorMask[k], corr.weights[k]]).toEqual([0, 0, 0]);
      expect(corr.lossMask[k]! <= corr.denominatorMask[k]!).toBe(true);
    }
    expect(corr.lossMask.some((m, k) => m === 0 && responseMask[k] === 1)).toBe(true);
    expect(corr.mask).toBe(corr.lossMask); // the deprecated name is the same array
  });

  it('estimate returns lossMask (and `mask`, the same array; `mask` in the JSON output)', () => {
    const r = estimate(batch, resolveConfig({ correction: [{ name: 'icepop', lo: 0.8, hi: 1.2 }] }));
    expect(r.mask).toBe(r.lossMask);
  });

  it('the former names mask / effectiveMask are still accepted by the four entry points', () => {
    const now = applyCorrection({ shape, logpOld, logpRollout, responseMask, advantages }, stages);
    const before = applyCorrection(
      formerNames<CorrectionInput>({ shape, logpOld, logpRollout, mask: responseMask, advantages }),
      stages,
    );
    expect(before).toEqual(now);

    const diag = { shape, logpOld, logpRollout, weights: corr.weights };
    expect(
      mismatchDiagnostics(formerNames<DiagnosticsInput>({ ...diag, mask: responseMask, effectiveMask: corr.lossMask })),
    ).toEqual(mismatchDiagnostics({ ...diag, responseMask, lossMask: corr.lossMask }));
    const stack = { shape, logpTrain: logpOld, logpRollout, weights: corr.weights, advantages };
    expect(
      stackMetrics(formerNames<StackMetricInput>({ ...stack, mask: responseMask, effectiveMask: corr.lossMask }), [
        'verl',
        'prime-rl',
        'roll',
        'areal',
      ]),
    ).toEqual(stackMetrics({ ...stack, responseMask, lossMask: corr.lossMask }, ['verl', 'prime-rl', 'roll', 'areal']));

    const config = resolveConfig({ kl: { name: 'k3', coef: 0.01, mask: 'numerator' } });
    const objective = {
      shape,
      logpTheta,
      logpOld,
      logpRollout,
      logpRef,
      advantages,
      weights: corr.weights,
      denominatorMask: corr.denominatorMask,
      responseMask,
    };
    expect(policyObjective(formerNames<ObjectiveInput>({ ...objective, mask: corr.lossMask }), config)).toEqual(
      policyObjective({ ...objective, lossMask: corr.lossMask }, config),
    );
  });

  it("kl.mask 'response' runs over the response mask, and without one is refused (no silent fallback to the denominator mask)", () => {
    const config = resolveConfig({ kl: { name: 'k1', coef: 1, mask: 'response' } });
    const objective = {
      shape,
      logpTheta,
      logpOld,
      logpRollout,
      logpRef,
      advantages,
      weights: corr.weights,
      lossMask: corr.lossMask,
      denominatorMask: corr.denominatorMask,
    };
    const r = policyObjective({ ...objective, responseMask }, config);
    expect(responseMask.some((m, k) => m === 1 && corr.denominatorMask[k] === 0)).toBe(true);
    for (let k = 0; k < responseMask.length; k++) {
      if (responseMask[k] === 1 && corr.denominatorMask[k] === 0)
        expect(r.value.tokenLoss[k]).toBe(logpTheta[k]! - logpRef![k]!);
    }
    expect(() => policyObjective(formerNames<ObjectiveInput>(objective), config)).toThrow(UsageError);
    expect(() => policyObjective(formerNames<ObjectiveInput>(objective), config)).toThrow(/responseMask: required/);
  });
});

describe('skipsLogpOldPass: the one test for "no ℓold pass at θ_old"', () => {
  it('is true in bypass mode and with the log-linear proximal policy, false otherwise', () => {
    expect(skipsLogpOldPass(resolveConfig({}))).toBe(false);
    expect(skipsLogpOldPass(resolveConfig({ mode: 'bypass' }))).toBe(true);
    expect(skipsLogpOldPass(resolveConfig({ proxLogp: { method: 'loglinear', versionLag: 2 } }))).toBe(true);
    expect(skipsLogpOldPass(resolveConfig({ proxLogp: null }))).toBe(false);
  });
});
