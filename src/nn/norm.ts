// LayerNorm and RMSNorm over the last axis (forward/backward with mean/rstd caches), llm.c formulas.
// Not a batch norm and not fused with the following linear layer.

import type { FloatArray } from './array.js';

/**
 * LayerNorm forward (llm.c `layernorm_forward`, biased variance):
 * `μ = mean(x)`, `σ² = mean((x−μ)²)`, `r = 1/√(σ²+eps)`, `out = (x−μ)·r·weight + bias`.
 * Sums run over c in increasing order in doubles; `mean` and `rstd` are cached for the backward.
 *
 * @param out - (N, C)
 * @param mean - (N) cache
 * @param rstd - (N) cache
 * @param inp - (N, C)
 * @param weight - (C) gain γ
 * @param bias - (C) shift β, or null
 * @param eps - @defaultValue 1e-5
 */
export function layerNormForward(
  out: FloatArray,
  mean: FloatArray,
  rstd: FloatArray,
  inp: FloatArray,
  weight: FloatArray,
  bias: FloatArray | null,
  N: number,
  C: number,
  eps = 1e-5,
): void {
  for (let i = 0; i < N; i++) {
    const x = i * C; // row (C)
    let s = 0;
    for (let c = 0; c < C; c++) s += inp[x + c]!;
    mean[i] = s / C;
    const m = mean[i]!;
    let v = 0;
    for (let c = 0; c < C; c++) {
      const d = inp[x + c]! - m;
      v += d * d;
    }
    rstd[i] = 1 / Math.sqrt(v / C + eps);
    const r = rstd[i]!;
    for (let c = 0; c < C; c++) {
      const n = (inp[x + c]! - m) * r;
      out[x + c] = n * weight[c]! + (bias ? bias[c]! : 0);
    }
  }
}

/**
 * LayerNorm backward (llm.c `layernorm_backward`), accumulating:
 * with `n = (x−μ)·r` and `dn = weight⊙dout`,
 * `dbias += dout`, `dweight += n⊙dout`, `dinp += r·(dn − mean(dn) − n·mean(dn⊙n))`.
 *
 * @param dinp - (N, C) accumulated
 * @param dweight - (C) accumulated
 * @param dbias - (C) accumulated, or null
 * @param dout - (N, C)
 * @param inp - (N, C)
 * @param weight - (C)
 * @param mean - (N) from the forward
 * @param rstd - (N) from the forward
 */
export function layerNormBackward(
  dinp: FloatArray,
  dweight: FloatArray,
  dbias: FloatArray | null,
  dout: FloatArray,
  inp: FloatArray,
  weight: FloatArray,
  mean: FloatArray,
  rstd: FloatArray,
  N: number,
  C: number,
): void {
  for (let i = 0; i < N; i++) {
    const x = i * C;
    const m = mean[i]!;
    const r = rstd[i]!;
    let dnMean = 0;
    let dnNMean = 0;
    for (let c = 0; c < C; c++) {
      const n = (inp[x + c]! - m) * r;
      const dn = weight[c]! * dout[x + c]!;
      dnMean += dn;
      dnNMean += dn * n;
    }
    dnMean /= C;
    dnNMean /= C;
    for (let c = 0; c < C; c++) {
      const n = (inp[x + c]! - m) * r;
      const dy = dout[x + c]!;
      const dn = weight[c]! * dy;
      if (dbias) dbias[c] = dbias[c]! + dy;
      dweight[c] = dweight[c]! + n * dy;
      dinp[x + c] = dinp[x + c]! + r * (dn - dnMean - n * dnNMean);
    }
  }
}

/**
 * RMSNorm forward: `ms = mean(x²)`, `r = 1/√(ms+eps)`, `out = x·r·weight`
 * (weightless when `weight` is null, as in microgpt). `rstd` is cached.
 *
 * @param out - (N, C)
 * @param rstd - (N) cache
 * @param inp - (N, C)
 * @param weight - (C) gain, or null for none
 * @param eps - @defaultValue 1e-5
 */
export function rmsNormForward(
  out: FloatArray,
  rstd: FloatArray,
  inp: FloatArray,
  weight: FloatArray | null,
  N: number,
  C: number,
  eps = 1e-5,
): void {
  for (let i = 0; i < N; i++) {
    const x = i * C;
    let s = 0;
    for (let c = 0; c < C; c++) s += inp[x + c]! * inp[x + c]!;
    rstd[i] = 1 / Math.sqrt(s / C + eps);
    const r = rstd[i]!;
    for (let c = 0; c < C; c++) out[x + c] = inp[x + c]! * r * (weight ? weight[c]! : 1);
  }
}

/**
 * RMSNorm backward, accumulating: with `n = x·r`, `dn = weight⊙dout`,
 * `dweight += n⊙dout`, `dinp += r·(dn − n·mean(dn⊙n))`.
 *
 * @param dinp - (N, C) accumulated
 * @param dweight - (C) accumulated, or null when the forward had no weight
 * @param dout - (N, C)
 * @param inp - (N, C)
 * @param weight - (C) or null
 * @param rstd - (N) from the forward
 */
export function rmsNormBackward(
  dinp: FloatArray,
  dweight: FloatArray | null,
  dout: FloatArray,
  inp: FloatArray,
  weight: FloatArray | null,
  rstd: FloatArray,
  N: number,
  C: number,
): void {
  for (let i = 0; i < N; i++) {
    const x = i * C;
    const r = rstd[i]!;
    let dnNMean = 0;
    for (let c = 0; c < C; c++) {
      const dn = (weight ? weight[c]! : 1) * dout[x + c]!;
      dnNMean += dn * inp[x + c]! * r;
    }
    dnNMean /= C;
    for (let c = 0; c < C; c++) {
      const n = inp[x + c]! * r;
      const dy = dout[x + c]!;
      const dn = (weight ? weight[c]! : 1) * dy;
      if (dweight) dweight[c] = dweight[c]! + n * dy;
      dinp[x + c] = dinp[x + c]! + r * (dn - n * dnNMean);
    }
  }
}
