// The `gemm` golden suite: every accumulator model on operands chosen so that the models give
// different results (cancellation, wide dynamic range, long K). Not a performance benchmark.

import { type AccumulatorModel, gemm } from '../../numerics/gemm.js';
import { quantPreset } from '../../numerics/presets.js';
import { createRng, type Rng } from '../../rng.js';
import { tensor } from '../write.js';
import type { GoldenCase, GoldenSuite } from '../types.js';

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
  readonly quant?: 'bf16' | 'e4m3fn' | 'int8-row';
  readonly promoteEvery?: number;
  readonly note: string;
}

const variants: readonly GemmVariant[] = [
  { name: 'fp32', accumulator: 'fp32', note: 'float32 products, sequential float32 adds in increasing k' },
  { name: 'fp32.bf16-operands', accumulator: 'fp32', quant: 'bf16', note: 'operands rounded to bf16 (RNE), fp32 sequential' },
  { name: 'pairwise', accumulator: 'pairwise', note: 'float32 products summed as a balanced binary tree' },
  { name: 'fp64', accumulator: 'fp64', note: 'products summed in double, rounded to float32 once' },
  { name: 'int32', accumulator: 'int32', quant: 'int8-row', note: 'int8-row quantized operands, exact int32 sum, scales in the epilogue' },
  { name: 'hopper-fp8.promote4', accumulator: 'hopper-fp8', quant: 'e4m3fn', promoteEvery: 4, note: 'e4m3 operands, Hopper wgmma chunks of 32 truncated to 13 fractional bits, promoted to fp32 every 4 chunks' },
  { name: 'hopper-fp8.no-promotion', accumulator: 'hopper-fp8', quant: 'e4m3fn', promoteEvery: 0, note: 'as promote4 but never promoted: the whole K stays in the truncating accumulator' },
];

function gemmCase(v: GemmVariant, seed: number): GoldenCase {
  const rng = createRng(seed).fork('golden/gemm');
  const a = operand(rng, M, K);
  const b = operand(rng, N, K);
  const out = new Float32Array(M * N);
  const quant = v.quant === 'int8-row' ? quantPreset('int8-row') : v.quant;
  gemm(out, a, b, M, N, K, { accumulator: v.accumulator, ...(quant !== undefined ? { aQuant: quant, bQuant: quant } : {}), ...(v.promoteEvery !== undefined ? { promoteEvery: v.promoteEvery } : {}) });
  return {
    name: v.name,
    description: `out = A·Bᵀ (${M}×${K} · ${N}×${K}): ${v.note}`,
    params: { accumulator: v.accumulator, operandQuant: v.quant ?? 'none', ...(v.promoteEvery !== undefined ? { promoteEvery: v.promoteEvery, chunk: 32, fractionBits: 13 } : {}), m: M, n: N, k: K },
    tensors: {
      a: tensor('input', a, 'bitwise', [M, K]),
      b: tensor('input', b, 'bitwise', [N, K]),
      out: tensor('expected', out, { ulp: 0 }, [M, N]),
    },
  };
}

/** Every accumulator model on the same operands (so the files show where they differ). */
export const gemmSuite: GoldenSuite = {
  name: 'gemm',
  description: 'A·Bᵀ under every accumulator model (fp32, pairwise, fp64, int32, hopper-fp8 with/without promotion) on the same operands',
  cases(seed) {
    return variants.map((v) => gemmCase(v, seed));
  },
};
