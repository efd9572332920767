// Linear layer y = x·Wᵀ + b (forward/backward) with its three GEMMs passed in as LinearGemms.
// Not a quantizer: a precision plan quantizes by substituting the GemmFns, never inside this file.

import { allocLike, transpose, type FloatArray } from './array.js';
import { sequentialLinearGemms, type LinearGemms } from './gemm.js';

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
 * Linear backward (llm.c `matmul_backward`), accumulating (`+=`) into all three gradients:
 * `dinp += dout · weight` (dgrad), `dweight += doutᵀ · inp` (wgrad, reduction over N in increasing
 * order), `dbias += Σ_n dout[n]`. Each GEMM result lands in a scratch buffer and is then added.
 *
 * @param dinp - (N, C) accumulated, or null to skip the dgrad GEMM (e.g. for a first layer)
 * @param dweight - (OC, C) accumulated
 * @param dbias - (OC) accumulated, or null
 * @param dout - (N, OC)
 * @param inp - (N, C) the forward input
 * @param weight - (OC, C)
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
): void {
  if (dinp) {
    const weightT = allocLike(weight, C * OC); // (C, OC)
    transpose(weightT, weight, OC, C);
    const dx = allocLike(dout, N * C); // (N, C)
    gemms.dgrad(dx, dout, weightT, N, C, OC);
    for (let i = 0; i < N * C; i++) dinp[i] = dinp[i]! + dx[i]!;
  }
  const doutT = allocLike(dout, OC * N); // (OC, N)
  transpose(doutT, dout, N, OC);
  const inpT = allocLike(inp, C * N); // (C, N)
  transpose(inpT, inp, N, C);
  const dw = allocLike(dout, OC * C); // (OC, C)
  gemms.wgrad(dw, doutT, inpT, OC, C, N);
  for (let i = 0; i < OC * C; i++) dweight[i] = dweight[i]! + dw[i]!;
  if (dbias) {
    for (let j = 0; j < OC; j++) {
      let s = 0;
      for (let i = 0; i < N; i++) s += dout[i * OC + j]!;
      dbias[j] = dbias[j]! + s;
    }
  }
}
