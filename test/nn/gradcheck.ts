// Test helpers: seeded random float64 arrays and central finite-difference gradient checks.
// Not a test file itself; imported by the layer tests.

import { expect } from 'vitest';
import { createRng, type Rng } from '../../src/core/rng.js';

/** A Float64Array of n standard-normal draws scaled by `scale`. */
export function randn(rng: Rng, n: number, scale = 1): Float64Array {
  const a = new Float64Array(n);
  for (let i = 0; i < n; i++) a[i] = scale * rng.normal();
  return a;
}

/** A seeded stream for one property run. */
export function rngFor(seed: number, name: string): Rng {
  return createRng(seed).fork(name);
}

/** Σ out·R, the scalar probe whose gradient with respect to `out` is R. */
export function dotProbe(out: ArrayLike<number>, r: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < out.length; i++) s += out[i]! * r[i]!;
  return s;
}

/**
 * Central differences: for each element x[i], (L(x+h) − L(x−h))/2h must match analytic[i] within
 * |a − n| ≤ rtol·max(|a|, |n|) + atol.
 */
export function expectGradClose(
  name: string,
  x: Float64Array,
  analytic: ArrayLike<number>,
  loss: () => number,
  { h = 1e-5, rtol = 1e-6, atol = 1e-8 }: { h?: number; rtol?: number; atol?: number } = {},
): void {
  expect(analytic.length, `${name} gradient length`).toBe(x.length);
  for (let i = 0; i < x.length; i++) {
    const x0 = x[i]!;
    x[i] = x0 + h;
    const lp = loss();
    x[i] = x0 - h;
    const lm = loss();
    x[i] = x0;
    const num = (lp - lm) / (2 * h);
    const a = analytic[i]!;
    const tol = rtol * Math.max(Math.abs(a), Math.abs(num)) + atol;
    if (!(Math.abs(a - num) <= tol)) {
      expect.fail(`${name}[${i}]: analytic ${a} vs numeric ${num} (|diff| ${Math.abs(a - num)} > ${tol})`);
    }
  }
}
