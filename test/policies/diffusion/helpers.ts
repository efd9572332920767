// Test helpers of the diffusion policy: a small model, float64 random weights, and a test-only FP8 (e4m3fn, per-tensor amax) PolicyNumerics.
// Not a precision plan: the real quantized plans arrive through the same PolicyNumerics interface.

import { fakeQuant } from '../../../src/numerics/index.js';
import { gemmSequential, type BlockGemms, type GemmFn, type LinearGemms } from '../../../src/nn/index.js';
import type { PolicyNumerics } from '../../../src/policies/numerics.js';
import { createDiffusionModel, type DiffusionModel } from '../../../src/policies/diffusion/model.js';
import { createRng } from '../../../src/core/rng.js';

/** Rounds a copy of `x[0 … n)` to e4m3fn after per-tensor amax scaling: s = amax/448, fq(x/s)·s. */
export function quantizeE4m3(x: ArrayLike<number>, n: number): Float32Array {
  let amax = 0;
  for (let i = 0; i < n; i++) amax = Math.max(amax, Math.abs(x[i]!));
  const y = new Float32Array(n);
  if (amax === 0 || !Number.isFinite(amax)) {
    for (let i = 0; i < n; i++) y[i] = x[i]!;
    return y;
  }
  const s = amax / 448;
  for (let i = 0; i < n; i++) y[i] = x[i]! / s;
  fakeQuant('e4m3fn', y, { profile: 'satfinite' }, y);
  for (let i = 0; i < n; i++) y[i] = y[i]! * s;
  return y;
}

/** GEMM with both operands fake-quantized to e4m3fn (per-tensor amax), then the exact sequential product. */
export const e4m3Gemm: GemmFn = (out, a, b, m, n, k) => {
  gemmSequential(out, quantizeE4m3(a, m * k), quantizeE4m3(b, n * k), m, n, k);
};

const e4m3Linear: LinearGemms = Object.freeze({ forward: e4m3Gemm, dgrad: gemmSequential, wgrad: gemmSequential });
const e4m3Block: BlockGemms = Object.freeze({
  q: e4m3Linear,
  k: e4m3Linear,
  v: e4m3Linear,
  o: e4m3Linear,
  mlp: { up: e4m3Linear, gate: e4m3Linear, down: e4m3Linear },
  attention: {
    qk: gemmSequential,
    pv: gemmSequential,
    dScores: gemmSequential,
    dValues: gemmSequential,
    dQuery: gemmSequential,
    dKey: gemmSequential,
  },
});

/** Test-only rollout numerics: W8A8 e4m3fn with per-tensor dynamic scales on the block projections; lm_head exact. */
export function e4m3TestNumerics(): PolicyNumerics {
  return { label: 'test-e4m3-tensor', block: () => e4m3Block, lmHead: () => e4m3Linear, kvHook: () => null };
}

/** A small diffusion model for fast tests. */
export function smallModel(
  vocabSize: number,
  overrides: { C?: number; H?: number; hidden?: number; layers?: number; maxLen?: number } = {},
): DiffusionModel {
  return createDiffusionModel({ vocabSize, C: 16, H: 2, hidden: 32, layers: 2, maxLen: 48, ...overrides });
}

/** Float64 weights for `model`, every entry normal(0, std) from `seed` (large enough for non-trivial logits). */
export function randomParams64(model: DiffusionModel, seed: number, std = 0.5): Float64Array {
  const rng = createRng(seed).fork('params64');
  const p = new Float64Array(model.layout.size);
  for (let i = 0; i < p.length; i++) p[i] = std * rng.normal();
  return p;
}

/** Float32 weights for `model`, every entry normal(0, std) from `seed`. */
export function randomParams32(model: DiffusionModel, seed: number, std = 0.3): Float32Array {
  return Float32Array.from(randomParams64(model, seed, std));
}
