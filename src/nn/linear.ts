// Linear layer y = x·Wᵀ + b (forward/backward) with its three GEMMs passed in as LinearGemms.
// Not a quantizer: a precision plan quantizes by substituting the GemmFns, never inside this file.

import { allocLike, transpose, type FloatArray } from './array.js';
import { sequentialLinearGemms, type LinearBackwardRounding, type LinearGemms } from './gemm.js';

/**
 * Linear forward (llm.c `matmul_forward`): `out = inp · weightᵀ (+ bias)`.
 * The GEMM result is stored first, then the bias is added (one more rounding per element).
 * Cache: the backward needs `inp` itself, which the caller keeps.
 *
 * @param out - (N, OC)
 * @param inp - (N, C)
 * @param weight - (OC, C)
 * @param bias - (OC) or null
 * @param gemms - only `forward` is used here
 * @defaultValue gemms = {@link sequentialLinearGemms}
 */
export function linearForward(
  out: FloatArray,
  inp: FloatArray,
  weight: FloatArray,
  bias: FloatArray | null,
  N: number,
  C: number,
  OC: number,
  gemms: LinearGemms = sequentialLinearGemms,
): void {
  gemms.forward(out, inp, weight, N, OC, C); // (N, OC)
  if (bias) {
    for (let i = 0; i < N; i++) {
      const o = i * OC;
      for (let j = 0; j < OC; j++) out[o + j] = out[o + j]! + bias[j]!;
    }
  }
}

/**
 * A linear layer's forward input rounded by a {@link LinearBackwardRounding} and transposed, (C, N):
 * the `b` operand of `wgrad`, made once by {@link roundedInputT} for all the layers that read the same
 * input (q, k and v; MLP up and gate).
 */
export interface RoundedInputT {
  /** The forward input it was made from (N, C). */
  readonly inp: FloatArray;
  /** The rounding it was made with. */
  readonly rounding: LinearBackwardRounding;
  /** (C, N) round(inp)ᵀ. */
  readonly values: Float32Array;
}

/** The {@link LinearBackwardRounding} `linearBackward` may use for `gemms`, or null (then it calls `dgrad` and `wgrad`). */
function backwardRoundingOf(gemms: LinearGemms): LinearBackwardRounding | null {
  const r = gemms.backwardRounding;
  return r !== undefined && r.dgrad === gemms.dgrad && r.wgrad === gemms.wgrad ? r : null;
}

/** Growing float32 scratch arrays of {@link linearBackward}, by slot. */
const scratchArrays: Float32Array[] = [
  new Float32Array(0),
  new Float32Array(0),
  new Float32Array(0),
  new Float32Array(0),
];

/** The first `n` elements of scratch array `slot` (contents undefined). */
function scratch(slot: number, n: number): Float32Array {
  let a = scratchArrays[slot]!;
  if (a.length < n) scratchArrays[slot] = a = new Float32Array(n);
  return a.length === n ? a : a.subarray(0, n);
}

/** The first `n` elements of `x`, without a new view when that is all of it. */
function head(x: FloatArray, n: number): FloatArray {
  return x.length === n ? x : x.subarray(0, n);
}

/**
 * `round(inp)ᵀ` (C, N) for {@link linearBackward} when `gemms` describes its backward rounding
 * ({@link LinearGemms.backwardRounding}), else null. Pass it to the backward of every layer that read
 * `inp` with GEMMs of the same rounding; each uses it only if its own rounding is that one.
 *
 * @param inp - (N, C) the forward input
 */
export function roundedInputT(inp: FloatArray, N: number, C: number, gemms: LinearGemms): RoundedInputT | null {
  const rounding = backwardRoundingOf(gemms);
  if (rounding === null) return null;
  const rounded = new Float32Array(N * C); // (N, C)
  rounding.round(rounded, head(inp, N * C));
  const values = new Float32Array(C * N); // (C, N)
  transpose(values, rounded, N, C);
  return { inp, rounding, values };
}

/**
 * Linear backward (llm.c `matmul_backward`), accumulating (`+=`) into all three gradients:
 * `dinp += dout · weight` (dgrad), `dweight += doutᵀ · inp` (wgrad, reduction over N in increasing
 * order), `dbias += Σ_n dout[n]`. Each GEMM result lands in a scratch buffer and is then added.
 *
 * When `gemms` describes its operand rounding ({@link LinearGemms.backwardRounding}), `dout` is rounded
 * once for both GEMMs, the weight's rounded transpose comes from the numerics (once per weight
 * version) and the rounded input from `inpT` when given: the same operands, rounded once each.
 *
 * @param dinp - (N, C) accumulated, or null to skip the dgrad GEMM (e.g. for a first layer)
 * @param dweight - (OC, C) accumulated
 * @param dbias - (OC) accumulated, or null
 * @param dout - (N, OC)
 * @param inp - (N, C) the forward input
 * @param weight - (OC, C)
 * @param inpT - {@link roundedInputT} of `inp`, shared with other layers that read it; null: made here if needed
 */
export function linearBackward(
  dinp: FloatArray | null,
  dweight: FloatArray,
  dbias: FloatArray | null,
  dout: FloatArray,
  inp: FloatArray,
  weight: FloatArray,
  N: number,
  C: number,
  OC: number,
  gemms: LinearGemms = sequentialLinearGemms,
  inpT: RoundedInputT | null = null,
): void {
  const rounding = backwardRoundingOf(gemms);
  if (rounding !== null) {
    // Temporaries whose every element is written before it is read: reused scratch (the backward is not re-entrant).
    const doutRounded = scratch(0, N * OC); // (N, OC) round(dout)
    rounding.round(doutRounded, head(dout, N * OC));
    if (dinp) {
      const dx = dout instanceof Float32Array ? scratch(1, N * C) : allocLike(dout, N * C); // (N, C)
      rounding.gemmRounded(dx, doutRounded, rounding.roundedWeightT(weight, OC, C), N, C, OC);
      for (let i = 0; i < N * C; i++) dinp[i] = dinp[i]! + dx[i]!;
    }
    const doutT = scratch(2, OC * N); // (OC, N) round(dout)ᵀ
    transpose(doutT, doutRounded, N, OC);
    const xT =
      inpT !== null && inpT.inp === inp && inpT.rounding === rounding
        ? inpT
        : (roundedInputT(inp, N, C, gemms) as RoundedInputT);
    const dw = dout instanceof Float32Array ? scratch(3, OC * C) : allocLike(dout, OC * C); // (OC, C)
    rounding.gemmRounded(dw, doutT, xT.values, OC, C, N);
    for (let i = 0; i < OC * C; i++) dweight[i] = dweight[i]! + dw[i]!;
  } else {
    if (dinp) {
      const weightT = allocLike(weight, C * OC); // (C, OC)
      transpose(weightT, weight, OC, C);
      const dx = allocLike(dout, N * C); // (N, C)
      gemms.dgrad(dx, dout, weightT, N, C, OC);
      for (let i = 0; i < N * C; i++) dinp[i] = dinp[i]! + dx[i]!;
    }
    const doutT = allocLike(dout, OC * N); // (OC, N)
    transpose(doutT, dout, N, OC);
    const inputT = allocLike(inp, C * N); // (C, N)
    transpose(inputT, inp, N, C);
    const dw = allocLike(dout, OC * C); // (OC, C)
    gemms.wgrad(dw, doutT, inputT, OC, C, N);
    for (let i = 0; i < OC * C; i++) dweight[i] = dweight[i]! + dw[i]!;
  }
  if (dbias) {
    for (let j = 0; j < OC; j++) {
      let s = 0;
      for (let i = 0; i < N; i++) s += dout[i * OC + j]!;
      dbias[j] = dbias[j]! + s;
    }
  }
}
