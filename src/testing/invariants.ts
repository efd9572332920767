// Invariant suites for estimator implementations as fast-check properties: ρ ≡ 1 ⇒ identity,
// weight bounds, permutation equivariance, masked garbage changes nothing. Not generators (arbitraries.ts).

import fc from 'fast-check';
import { batchArb, estimatorConfigArb, type BatchJson } from './arbitraries.js';

/** The part of an `estimate` result the invariants read (the JSON of `qrl-sim estimate`). */
export interface EstimateOutput {
  readonly loss: number;
  readonly weights: number[][];
  readonly gradLogpTheta: number[][];
}

/** An implementation under test: the `estimate` JSON contract (sync or async). */
export type EstimateFn = (
  input: BatchJson & { config: Record<string, unknown> },
) => EstimateOutput | Promise<EstimateOutput>;

const close = (a: number, b: number): boolean => Math.abs(a - b) <= 1e-9 + 1e-7 * Math.abs(b);

/** Corrections whose weight is exactly 1 when ρ ≡ 1 (truncation, masking and rejection families). */
export const RHO_ONE_IDENTITY = [
  'tis',
  'seq-tis',
  'icepop',
  'mis-token',
  'mis-seq',
  'geo-rs',
  'rs-k1',
  'rs-k2',
  'rs-k3',
  'veto',
  'token-is',
  'batch-norm',
] as const;

/**
 * The invariant properties for `estimate`. Each is a fast-check async property; run them with
 * `fc.assert(p, { numRuns })` in your own test. `config` fixes the configuration (default: any).
 */
export function estimatorInvariants(
  estimate: EstimateFn,
  config?: Record<string, unknown>,
): Record<string, fc.IAsyncPropertyWithHooks<[BatchJson, Record<string, unknown>]>> {
  const configArb = config !== undefined ? fc.constant(config) : estimatorConfigArb();
  const withKl = (b: BatchJson, c: Record<string, unknown>): BatchJson & { config: Record<string, unknown> } => {
    const input: BatchJson & { config: Record<string, unknown> } = { ...b, config: c };
    if (c.kl === null || c.kl === undefined) delete input.logpRef;
    return input;
  };
  return {
    /** ρ ≡ 1 (ℓold = ℓroll) ⇒ a truncation/rejection correction changes nothing: same loss as `none`. */
    rhoOneIsIdentity: fc.asyncProperty(batchArb(), configArb, async (b, c) => {
      const name = (c.correction as { name: string }).name;
      fc.pre((RHO_ONE_IDENTITY as readonly string[]).includes(name));
      const same = { ...b, logpOld: b.logpRollout.map((r) => [...r]) };
      const a = await estimate(withKl(same, c));
      const n = await estimate(withKl(same, { ...c, correction: { name: 'none' } }));
      return close(a.loss, n.loss);
    }),
    /** Weights are ≥ 0, 0 on padding, and ≤ C for tis / seq-tis. */
    weightBounds: fc.asyncProperty(batchArb(), configArb, async (b, c) => {
      const out = await estimate(withKl(b, c));
      const corr = c.correction as { name: string; C?: number };
      const cap = corr.name === 'tis' || corr.name === 'seq-tis' ? (corr.C ?? 2) : Infinity;
      return out.weights.every((row, i) =>
        row.every((w, t) => w >= 0 && w <= cap * (1 + 1e-12) && ((b.mask[i] as number[])[t] === 1 || w === 0)),
      );
    }),
    /** Reversing the order of the sequences leaves the loss unchanged and reverses the gradient rows. */
    permutationEquivariance: fc.asyncProperty(batchArb(), configArb, async (b, c) => {
      const rev = <V>(x: V[] | undefined): V[] | undefined => (x === undefined ? undefined : [...x].reverse());
      const flipped = {
        ...b,
        logpTheta: rev(b.logpTheta)!,
        logpOld: rev(b.logpOld)!,
        logpRollout: rev(b.logpRollout)!,
        mask: rev(b.mask)!,
        rewards: rev(b.rewards)!,
        groups: rev(b.groups)!,
        ...(b.logpRef ? { logpRef: rev(b.logpRef)! } : {}),
      };
      const a = await estimate(withKl(b, c));
      const f = await estimate(withKl(flipped, c));
      const B = b.mask.length;
      return (
        close(f.loss, a.loss) &&
        a.gradLogpTheta.every((row, i) => row.every((g, t) => close((f.gradLogpTheta[B - 1 - i] as number[])[t]!, g)))
      );
    }),
    /** Changing every log-prob on padded positions changes neither the loss nor the gradient. */
    maskedGarbageIsIgnored: fc.asyncProperty(batchArb(), configArb, async (b, c) => {
      const junk = (g: number[][]): number[][] =>
        g.map((row, i) => row.map((v, t) => ((b.mask[i] as number[])[t] === 1 ? v : v - 3.25)));
      const dirty = {
        ...b,
        logpTheta: junk(b.logpTheta),
        logpOld: junk(b.logpOld),
        logpRollout: junk(b.logpRollout),
        ...(b.logpRef ? { logpRef: junk(b.logpRef) } : {}),
      };
      const a = await estimate(withKl(b, c));
      const d = await estimate(withKl(dirty, c));
      return (
        close(d.loss, a.loss) &&
        a.gradLogpTheta.every((row, i) => row.every((g, t) => close((d.gradLogpTheta[i] as number[])[t]!, g)))
      );
    }),
  };
}
