// Tests of input validation: documented defaults and one-line errors naming the field.
// Not a source of expected numbers: every expected value is derived in the test itself.

import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/core/errors.js';
import { parseEstimateInput, resolveConfig } from '../../src/rl/index.js';

const good = () => ({
  logpTheta: [
    [-1, -2],
    [-1, 0],
  ],
  logpOld: [
    [-1, -2],
    [-1, 0],
  ],
  logpRollout: [
    [-1.1, -2],
    [-1, 0],
  ],
  mask: [
    [1, 1],
    [1, 0],
  ],
  rewards: [1, 0],
  config: {},
});

function message(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error('expected a UsageError');
}

describe('config schema', () => {
  it('fills the documented defaults', () => {
    const c = resolveConfig({
      correction: [{ name: 'ais' }, { name: 'icepop' }, { name: 'geo-rs' }],
      loss: { name: 'tbpo' },
    });
    expect(c.correction).toEqual([
      { name: 'ais', C: 5, delta: 0.02, gamma: 1.2, betaVar: 1, eps: 1e-6 },
      { name: 'icepop', lo: 0.5, hi: 5, level: 'token', denominator: 'original' },
      { name: 'geo-rs', lo: 0.999, hi: 1.001, level: 'seq-mean', verlBand: false, denominator: 'kept' },
    ]);
    expect(c.loss).toEqual({
      name: 'tbpo',
      epsPosLow: 3e-4,
      epsPosHigh: 4e-4,
      epsNegLow: 3e-4,
      epsNegHigh: 7e-4,
      C: 2,
      mode: 'drop',
    });
    expect(c.aggregation).toEqual({ name: 'seq-mean-token-mean' });
    expect(resolveConfig({}).loss).toEqual({ name: 'ppo-clip', epsLow: 0.2, epsHigh: 0.2, dualClip: null });
    expect(resolveConfig({}).aggregation).toEqual({ name: 'token-mean' });
    expect(resolveConfig({ loss: { name: 'gspo' } }).loss).toEqual({ name: 'gspo', epsLow: 3e-4, epsHigh: 4e-4 });
    expect(resolveConfig({ kl: { name: 'k3' } }).kl).toEqual({
      name: 'k3',
      coef: 0.001,
      mask: 'denominator',
      biasCorrection: 'none',
    });
  });

  it('names the offending field', () => {
    expect(message(() => resolveConfig({ correction: { name: 'tis', C: -1 } }))).toBe(
      'config.correction.C: must be > 0, got -1',
    );
    expect(message(() => resolveConfig({ correction: [{ name: 'tis' }, { name: 'nope' }] }))).toMatch(
      /^config\.correction\[1\]\.name: unknown estimator "nope" \(known: none, token-is, tis/,
    );
    expect(message(() => resolveConfig({ loss: { name: 'ppo-clip', dualClip: 1 } }))).toBe(
      'config.loss.dualClip: must be > 1 or null, got 1',
    );
    expect(message(() => resolveConfig({ loss: { name: 'gspo', eps: 1 } }))).toBe('config.loss.eps: unknown field');
    expect(message(() => resolveConfig({ correction: { name: 'ais', C: 0.5 } }))).toBe(
      'config.correction.C: must be >= 1, got 0.5',
    );
    expect(message(() => resolveConfig({ correction: { name: 'icepop', lo: 6 } }))).toBe(
      'config.correction.lo: must be <= hi (5), got 6',
    );
    expect(message(() => resolveConfig({ aggregation: 'mean' }))).toMatch(/^config\.aggregation: unknown value "mean"/);
    expect(message(() => resolveConfig({ correction: { name: 'rs-k1', level: 'seq-max' } }))).toMatch(
      /^config\.correction\.level: unknown value "seq-max"/,
    );
    expect(message(() => resolveConfig({ loss: { name: 'tbpo', mode: 'soft' } }))).toMatch(
      /^config\.loss\.mode: unknown value "soft"/,
    );
  });
});

describe('batch validation', () => {
  it('accepts a good batch and one-group default', () => {
    const { batch } = parseEstimateInput(good());
    expect(batch.shape).toEqual({ B: 2, T: 2 });
    expect(Array.from(batch.logpRollout)).toEqual([-1.1, -2, -1, 0]);
  });

  it('ragged rows, wrong row counts, non-numbers, bad masks', () => {
    expect(message(() => parseEstimateInput({ ...good(), logpOld: [[-1, -2], [-1]] }))).toBe(
      'logpOld[1]: expected 2 entries, got 1',
    );
    expect(message(() => parseEstimateInput({ ...good(), logpTheta: [[-1, -2]] }))).toBe(
      'logpTheta: expected 2 rows, got 1',
    );
    expect(
      message(() =>
        parseEstimateInput({
          ...good(),
          logpRollout: [
            [-1, 'NaN'],
            [-1, 0],
          ],
        }),
      ),
    ).toBe('logpRollout[0][1]: expected a finite number, got "NaN"');
    expect(
      message(() =>
        parseEstimateInput({
          ...good(),
          logpRollout: [
            [-1, null],
            [-1, 0],
          ],
        }),
      ),
    ).toBe('logpRollout[0][1]: expected a finite number, got null');
    expect(
      message(() =>
        parseEstimateInput({
          ...good(),
          mask: [
            [1, 0.5],
            [1, 0],
          ],
        }),
      ),
    ).toBe('mask[0][1]: mask entries must be 0 or 1, got 0.5');
    expect(message(() => parseEstimateInput({ ...good(), rewards: [1] }))).toBe(
      'rewards: expected 2 entries (one per sequence), got 1',
    );
    expect(message(() => parseEstimateInput({ ...good(), advantages: [1, 2] }))).toBe(
      'advantages: give either rewards or advantages, not both',
    );
    expect(message(() => parseEstimateInput({ ...good(), groups: [0, {}] }))).toBe(
      'groups[1]: expected a number or string id, got {}',
    );
    expect(message(() => parseEstimateInput({ ...good(), logpref: [] }))).toMatch(/^logpref: unknown field/);
    expect(message(() => parseEstimateInput({ ...good(), config: { kl: { name: 'k1' } } }))).toBe(
      'logpRef: required when config.kl is set',
    );
  });

  it('advantages per sequence are broadcast, per token kept', () => {
    const { rewards: _r, ...rest } = good();
    const a = parseEstimateInput({ ...rest, advantages: [2, -1] }).batch.advantages!;
    expect(Array.from(a)).toEqual([2, 2, -1, -1]);
    const b = parseEstimateInput({
      ...rest,
      advantages: [
        [1, 2],
        [3, 4],
      ],
    }).batch.advantages!;
    expect(Array.from(b)).toEqual([1, 2, 3, 4]);
  });
});
