// The `gemm` golden suite: every accumulator model on operands chosen so that the models give
// different results (cancellation, wide dynamic range, long K). Not a performance benchmark.

import { type AccumulatorModel, gemm } from '../../numerics/gemm.js';
import { quantPreset } from '../../numerics/presets.js';
import { type QuantizedTensor, dequantize, quantize, quantizedValues } from '../../numerics/quantize.js';
import { createRng, type Rng } from '../../core/rng.js';
import { tensor } from '../write.js';
import type { GoldenCase, GoldenSuite, GoldenTensor } from '../types.js';
import { rngStreams } from '../../core/rng-streams.js';

const M = 4;
const N = 4;
const K = 256;

/** Operands with alternating huge and tiny terms: where summation order and width matter. */
function operand(rng: Rng, rows: number, k: number): Float32Array {
  const x = new Float32Array(rows * k);
  for (let i = 0; i < x.length; i++) {
    const big = rng.int(8) === 0;
    x[i] = Math.fround(rng.normal() * (big ? 64 : 1 / 16) + (i % 2 === 0 ? 1 : -1));
  }
  return x;
}

interface GemmVariant {
  readonly name: string;
  readonly accumulator: AccumulatorModel;
  readonly quant?:
    | 'bf16'
    | 'e4m3fn'
    | 'int8-row'
    | 'e4m3fn-tensor'
    | 'e4m3fn-tensor-dequantized'
    | 'e4m3fn-tensor-alpha';
  readonly promoteEvery?: number;
  readonly note: string;
}

const variants: readonly GemmVariant[] = [
  { name: 'fp32', accumulator: 'fp32', note: 'float32 products, sequential float32 adds in increasing k' },
  {
    name: 'fp32.bf16-operands',
    accumulator: 'fp32',
    quant: 'bf16',
    note: 'operands rounded to bf16 (RNE), fp32 sequential',
  },
  {
    name: 'fp32-fma',
    accumulator: 'fp32-fma',
    note: 'fused multiply-adds into one float32 accumulator in increasing k (MKL AVX-512 small-kernel order)',
  },
  {
    name: 'fp32-fma-x2',
    accumulator: 'fp32-fma-x2',
    note: 'fused multiply-adds into two float32 accumulators (even and odd k), added at the end (MKL AVX2 order)',
  },
  { name: 'pairwise', accumulator: 'pairwise', note: 'float32 products summed as a balanced binary tree' },
  { name: 'fp64', accumulator: 'fp64', note: 'products summed in double, rounded to float32 once' },
  {
    name: 'int32',
    accumulator: 'int32',
    quant: 'int8-row',
    note: 'int8-row quantized operands, exact int32 sum, scales in the epilogue',
  },
  {
    name: 'hopper-fp8.promote4',
    accumulator: 'hopper-fp8',
    quant: 'e4m3fn',
    promoteEvery: 4,
    note: 'e4m3 operands, Hopper wgmma chunks of 32 truncated to 13 fractional bits, promoted to fp32 every 4 chunks',
  },
  {
    name: 'pairwise.bf16-operands',
    accumulator: 'pairwise',
    quant: 'bf16',
    note: 'operands rounded to bf16 (RNE), pairwise',
  },
  {
    name: 'fp64.bf16-operands',
    accumulator: 'fp64',
    quant: 'bf16',
    note: 'operands rounded to bf16 (RNE), summed in double',
  },
  {
    name: 'fp32.e4m3fn-operands',
    accumulator: 'fp32',
    quant: 'e4m3fn',
    note: 'operands rounded to e4m3fn (RNE, no scale), fp32 sequential',
  },
  {
    name: 'pairwise.e4m3fn-operands',
    accumulator: 'pairwise',
    quant: 'e4m3fn',
    note: 'operands rounded to e4m3fn (RNE, no scale), pairwise',
  },
  {
    name: 'fp64.e4m3fn-operands',
    accumulator: 'fp64',
    quant: 'e4m3fn',
    note: 'operands rounded to e4m3fn (RNE, no scale), summed in double',
  },
  {
    name: 'fp32.e4m3fn-tensor-scaled',
    accumulator: 'fp32',
    quant: 'e4m3fn-tensor',
    note: 'operands quantized by vllm-fp8-tensor (per-tensor scale), fp32 sequential, scales in the epilogue',
  },
  {
    name: 'fp64.e4m3fn-tensor-scaled',
    accumulator: 'fp64',
    quant: 'e4m3fn-tensor',
    note: 'operands quantized by vllm-fp8-tensor (per-tensor scale), summed in double, scales in the epilogue',
  },
  {
    name: 'fp32.e4m3fn-tensor-dequantized',
    accumulator: 'fp32',
    quant: 'e4m3fn-tensor-dequantized',
    note: 'operands quantized by vllm-fp8-tensor and dequantized (code·scale in float32) before the GEMM, fp32 sequential',
  },
  {
    name: 'fp32-fma.e4m3fn-tensor-dequantized',
    accumulator: 'fp32-fma',
    quant: 'e4m3fn-tensor-dequantized',
    note: 'as fp32.e4m3fn-tensor-dequantized, summed by fp32-fma',
  },
  {
    name: 'fp32-fma-x2.e4m3fn-tensor-dequantized',
    accumulator: 'fp32-fma-x2',
    quant: 'e4m3fn-tensor-dequantized',
    note: 'as fp32.e4m3fn-tensor-dequantized, summed by fp32-fma-x2',
  },
  {
    name: 'hopper-fp8.e4m3fn-tensor-scaled',
    accumulator: 'hopper-fp8',
    quant: 'e4m3fn-tensor',
    promoteEvery: 4,
    note: 'operands quantized by vllm-fp8-tensor (per-tensor scale), hopper-fp8 promoted every 4 chunks, scales in the epilogue',
  },
  {
    name: 'hopper-fp8.e4m3fn-tensor-alpha',
    accumulator: 'hopper-fp8',
    quant: 'e4m3fn-tensor-alpha',
    promoteEvery: 4,
    note: 'as e4m3fn-tensor-scaled, with the scales applied as cuBLASLt applies per-tensor scales (torch._scaled_mm on CUDA): fl(fl(sa·sb)·acc), one product of the scales, not sa·fl(sb·acc)',
  },
  {
    name: 'hopper-fp8.no-promotion',
    accumulator: 'hopper-fp8',
    quant: 'e4m3fn',
    promoteEvery: 0,
    note: 'as promote4 but never promoted: the whole K stays in the truncating accumulator',
  },
];

function gemmCase(v: GemmVariant, seed: number): GoldenCase {
  const rng = createRng(seed).fork(rngStreams.golden.gemm);
  const a = operand(rng, M, K);
  const b = operand(rng, N, K);
  const out = new Float32Array(M * N);
  const promote = v.promoteEvery !== undefined ? { promoteEvery: v.promoteEvery } : {};
  let scaled: { qa: QuantizedTensor; qb: QuantizedTensor } | null = null;
  if (v.quant === 'e4m3fn-tensor' || v.quant === 'e4m3fn-tensor-dequantized' || v.quant === 'e4m3fn-tensor-alpha') {
    // quantized here, so that the file can hold the codes and scales the GEMM used
    const spec = quantPreset('vllm-fp8-tensor');
    scaled = { qa: quantize(spec, a, [M, K]), qb: quantize(spec, b, [N, K]) };
    if (v.quant === 'e4m3fn-tensor')
      gemm(out, scaled.qa, scaled.qb, M, N, K, { accumulator: v.accumulator, ...promote });
    else if (v.quant === 'e4m3fn-tensor-alpha') {
      // the element values (exact in e4m3fn) accumulated unscaled, then one multiply by fl(sa·sb)
      gemm(out, quantizedValues(scaled.qa), quantizedValues(scaled.qb), M, N, K, {
        accumulator: v.accumulator,
        aQuant: 'e4m3fn',
        bQuant: 'e4m3fn',
        ...promote,
      });
      const alpha = Math.fround((scaled.qa.scales[0] as number) * (scaled.qb.scales[0] as number));
      for (let o = 0; o < out.length; o++) out[o] = Math.fround(alpha * (out[o] as number));
    } else gemm(out, dequantize(scaled.qa), dequantize(scaled.qb), M, N, K, { accumulator: v.accumulator });
  } else {
    const quant = v.quant === 'int8-row' ? quantPreset('int8-row') : v.quant;
    gemm(out, a, b, M, N, K, {
      accumulator: v.accumulator,
      ...(quant !== undefined ? { aQuant: quant, bQuant: quant } : {}),
      ...promote,
    });
  }
  const quantTensors: Record<string, GoldenTensor> =
    scaled === null
      ? {}
      : {
          aCodes: tensor('input', Uint8Array.from(scaled.qa.codes), 'bitwise', [M, K], 'F8_E4M3'),
          aScale: tensor('input', Float32Array.from(scaled.qa.scales), 'bitwise', [1]),
          bCodes: tensor('input', Uint8Array.from(scaled.qb.codes), 'bitwise', [N, K], 'F8_E4M3'),
          bScale: tensor('input', Float32Array.from(scaled.qb.scales), 'bitwise', [1]),
        };
  return {
    name: v.name,
    description: `out = A·Bᵀ (${M}×${K} · ${N}×${K}): ${v.note}`,
    params: {
      accumulator: v.accumulator,
      operandQuant: v.quant ?? 'none',
      ...(v.promoteEvery !== undefined ? { promoteEvery: v.promoteEvery, chunk: 32, fractionBits: 13 } : {}),
      m: M,
      n: N,
      k: K,
    },
    tensors: {
      a: tensor('input', a, 'bitwise', [M, K]),
      b: tensor('input', b, 'bitwise', [N, K]),
      ...quantTensors,
      out: tensor('expected', out, { ulp: 0 }, [M, N]),
    },
  };
}

/** Every accumulator model on the same operands (so the files show where they differ). */
export const gemmSuite: GoldenSuite = {
  name: 'gemm',
  description:
    'A·Bᵀ under every accumulator model (fp32, fp32-fma, fp32-fma-x2, pairwise, fp64, int32, hopper-fp8 with/without promotion) on the same operands: fp32, bf16, e4m3fn and per-tensor scaled e4m3fn',
  cases(seed) {
    return variants.map((v) => gemmCase(v, seed));
  },
};
