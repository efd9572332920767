// The estimator tables `corrections` and `losses` checked by their mapped types, entry by entry.
// Not a test of what the estimators compute: the `@ts-expect-error` lines fail `npm run lint` if a table type becomes vacuous.

import { describe, expect, it } from 'vitest';
import {
  corrections,
  type CorrectionName,
  type CorrectionSpec,
  type CorrectionTable,
} from '../../src/rl/correction.js';
import { losses, type LossName, type LossTable } from '../../src/rl/losses.js';
import { correctionSpecSchema, lossSpecSchema } from '../../src/rl/schema.js';

/** True iff A and B are the same set of names. */
type SameNames<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

// The tables themselves: every entry accepts its own stage's parameters, and the names are exactly the
// names of the parameter maps.
const correctionTable: CorrectionTable = corrections;
const lossTable: LossTable = losses;
const correctionNamesExact: SameNames<keyof typeof corrections, CorrectionName> = true;
const lossNamesExact: SameNames<keyof typeof losses, LossName> = true;

// A missing entry.
const { tis: _tis, ...correctionsWithoutTis } = corrections;
// @ts-expect-error `tis` is missing
const missingCorrection: CorrectionTable = correctionsWithoutTis;
const { gspo: _gspo, ...lossesWithoutGspo } = losses;
// @ts-expect-error `gspo` is missing
const missingLoss: LossTable = lossesWithoutGspo;

// An entry whose options type is another stage's.
// @ts-expect-error icepop reads a band and a level, which `tis`'s parameters (a cap C) do not carry
const swappedCorrection: CorrectionTable = { ...corrections, tis: corrections.icepop };
// @ts-expect-error the AIS stage reads C, delta, gamma, betaVar, eps; `veto` carries only v
const swappedCorrection2: CorrectionTable = { ...corrections, veto: corrections.ais };
// @ts-expect-error tbpo reads its band and mode, which `ppo-clip`'s parameters do not carry
const swappedLoss: LossTable = { ...losses, 'ppo-clip': losses.tbpo };
// @ts-expect-error vespo reads kPos, lambdaPos, …; `reinforce` has no parameters
const swappedLoss2: LossTable = { ...losses, reinforce: losses.vespo };

// An entry the parameter map does not name.
// @ts-expect-error `bogus` is not a correction name
const extraCorrection = { ...corrections, bogus: corrections.none } satisfies CorrectionTable;
// @ts-expect-error `bogus` is not a loss name
const extraLoss = { ...losses, bogus: losses.reinforce } satisfies LossTable;

// The derived spec: a stage's name fixes its parameters.
// @ts-expect-error `tis` needs its cap C
const specWithoutCap: CorrectionSpec = { name: 'tis' };
// @ts-expect-error a rejecting stage needs its denominator
const specWithoutDenominator: CorrectionSpec = { name: 'veto', v: 1e-4 };
const specOk: CorrectionSpec = { name: 'veto', v: 1e-4, denominator: 'kept' };

describe('estimator tables', () => {
  it('are the typed tables, with the names the schema accepts', () => {
    expect(correctionTable).toBe(corrections);
    expect(lossTable).toBe(losses);
    expect([correctionNamesExact, lossNamesExact]).toEqual([true, true]);
    // the lines above that must not compile still run: spreading a table keeps its functions
    for (const t of [missingCorrection, swappedCorrection, swappedCorrection2, extraCorrection])
      expect(Object.keys(t).length).toBeGreaterThan(19);
    for (const t of [missingLoss, swappedLoss, swappedLoss2, extraLoss])
      expect(Object.keys(t).length).toBeGreaterThan(11);
    expect([specWithoutCap.name, specWithoutDenominator.name]).toEqual(['tis', 'veto']);
    expect(correctionSpecSchema.parse({ name: 'veto' })).toEqual(specOk);
    expect(
      Object.keys(corrections).every(
        (name) => correctionSpecSchema.safeParse({ name }).success || name === 'rollout_rs',
      ),
    ).toBe(true);
    expect(Object.keys(losses).every((name) => lossSpecSchema.safeParse({ name }).success)).toBe(true);
  });
});
