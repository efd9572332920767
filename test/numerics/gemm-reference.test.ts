// The fast GEMM (gemm.ts: caches, WebAssembly, unrolled kernel) against the plain reference (gemm-reference.ts),
// Object.is on every output: edge data (NaN, ±0, ±Inf, subnormals, overflow), every accumulator model, every path.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import { gemm } from '../../src/numerics/gemm.js';
import {
  type AccumulatorModel,
  type GemmOptions,
  accumulatorModels,
  gemmReference,
} from '../../src/numerics/gemm-reference.js';
import { type QuantSpec, type QuantizedTensor, quantize } from '../../src/numerics/quantize.js';
import { quantPreset } from '../../src/numerics/presets.js';

const FLT_MAX = 3.4028234663852886e38;
/** Values at the edges of float32 and of the FP8/INT8 element formats. */
const EDGES = [
  0,
  -0,
  NaN,
  Infinity,
  -Infinity,
  2 ** -149,
  -(2 ** -140),
  1e-40,
  FLT_MAX,
  -FLT_MAX,
  3e38,
  1,
  -1.5,
  448,
  -464,
  1e-3,
  2 ** 100,
  -(2 ** -100),
];

/** (rows, cols) float32 values: normals with a fraction `edgeRate` of edge values (or large ones when overflow). */
function matrix(rows: number, cols: number, seed: string, edgeRate: number, nonFinite = true): Float32Array {
  const rng = createRng(seed).fork('gemm-reference');
  const pool = nonFinite ? EDGES : EDGES.filter((v) => Number.isFinite(v));
  return Float32Array.from({ length: rows * cols }, () =>
    rng.uniform() < edgeRate ? (pool[rng.int(pool.length)] as number) : Math.fround(rng.normal() * 4),
  );
}

function expectSameBits(fast: Float32Array, ref: Float32Array, what: string): void {
  const bad: string[] = [];
  for (let i = 0; i < ref.length && bad.length < 3; i++)
    if (!Object.is(fast[i], ref[i])) bad.push(`[${i}] fast ${fast[i]} reference ${ref[i]}`);
  expect(bad, what).toEqual([]);
}

/** gemm and gemmReference on the same inputs; both must give the same bits (or the same error). */
function compare(
  a: Float32Array | QuantizedTensor,
  b: Float32Array | QuantizedTensor,
  m: number,
  n: number,
  k: number,
  options: GemmOptions,
  what: string,
): void {
  let refError: unknown = null;
  const ref = new Float32Array(m * n);
  try {
    gemmReference(ref, a, b, m, n, k, options);
  } catch (e) {
    refError = e;
  }
  const fast = new Float32Array(m * n).fill(7);
  if (refError !== null) {
    expect(() => gemm(fast, a, b, m, n, k, options), what).toThrow((refError as Error).message);
    return;
  }
  gemm(fast, a, b, m, n, k, options);
  expectSameBits(fast, ref, what);
  // `reference: true` runs the reference itself.
  expectSameBits(
    gemm(new Float32Array(m * n), a, b, m, n, k, { ...options, reference: true }),
    ref,
    `${what} (reference: true)`,
  );
}

// Shapes: tiny, edges of the 4×8 fp32 tiles and 4-wide hopper kernel, and large enough for the WebAssembly steps.
const shapes: readonly (readonly [number, number, number])[] = [
  [1, 1, 1],
  [3, 5, 7],
  [5, 9, 64],
  [8, 16, 64],
  [4, 8, 128],
];

describe('gemm (fast) equals gemmReference bit for bit', () => {
  it.each(accumulatorModels.filter((m) => m !== 'int32'))(
    '%s on float operands with edge values, rounded to bf16/e4m3fn or not, split K and outFormat',
    (model) => {
      for (const [m, n, k] of shapes) {
        for (const rate of [0, 0.2]) {
          const a = matrix(m, k, `a${model}${m}${n}${k}${rate}`, rate);
          const b = matrix(n, k, `b${model}${m}${n}${k}${rate}`, rate);
          const base: GemmOptions = { accumulator: model, chunk: 16, promoteEvery: 2 };
          compare(a, b, m, n, k, base, `${model} ${m}×${n}×${k} rate ${rate}`);
          compare(
            a,
            b,
            m,
            n,
            k,
            { ...base, aQuant: 'bf16', bQuant: 'e4m3fn', splitK: 3 },
            `${model} bf16×e4m3fn splitK 3`,
          );
          compare(
            a,
            b,
            m,
            n,
            k,
            { ...base, aQuant: 'e5m2', bQuant: 'e5m2', outFormat: 'bf16' },
            `${model} e5m2 out bf16`,
          );
        }
      }
    },
  );

  it('int32 on INT8 operands: small ones (the float32 kernel path), large k (the wrapping loop), zero points, NaN', () => {
    const int8 = quantPreset('int8-row');
    const azp = quantPreset('vllm-int8-token-azp');
    for (const [m, n, k] of [...shapes, [4, 8, 1100] as const]) {
      const a = matrix(m, k, `ia${m}${n}${k}`, 0.1);
      const b = matrix(n, k, `ib${m}${n}${k}`, 0.1);
      compare(a, b, m, n, k, { accumulator: 'int32', aQuant: int8, bQuant: int8 }, `int32 int8-row ${m}×${n}×${k}`);
      compare(
        a,
        b,
        m,
        n,
        k,
        { accumulator: 'int32', aQuant: azp, bQuant: int8, splitK: 2 },
        `int32 azp ${m}×${n}×${k}`,
      );
      compare(
        a,
        b,
        m,
        n,
        k,
        { accumulator: 'int32', aQuant: 'bf16', bQuant: int8 },
        `int32 needs integers ${m}×${n}×${k}`,
      );
    }
  });

  const scaled: readonly [string, QuantSpec, QuantSpec][] = [
    ['fp8 per token', quantPreset('vllm-fp8-token'), quantPreset('vllm-fp8-token')],
    [
      'fp8 1×32 groups × 32×32 blocks',
      quantPreset('deepseek-fp8-group', { block: 32 }),
      quantPreset('deepseek-fp8-block', { block: 32 }),
    ],
    [
      'fp8 1×16 groups, DeepGEMM NaN rules',
      quantPreset('deepgemm-fp8-group', { block: 16 }),
      quantPreset('deepgemm-fp8-group', { block: 16 }),
    ],
    ['fp8 per tensor × 1×64 groups', quantPreset('vllm-fp8-tensor'), quantPreset('deepseek-fp8-group', { block: 64 })],
    ['mxfp8', quantPreset('mxfp8'), quantPreset('mxfp8')],
    ['nvfp4 (global scales)', quantPreset('nvfp4'), quantPreset('nvfp4')],
  ];

  it.each(scaled)(
    'scaled %s: every model but int32, quantized in the call and given quantized (cached), with edge values',
    (_name, qa, qb) => {
      for (const [m, n, k] of [
        [3, 5, 64],
        [8, 16, 64],
        [4, 8, 128],
        [8, 32, 64],
      ] as const) {
        for (const rate of [0, 0.15]) {
          const a = matrix(m, k, `sa${_name}${m}${rate}`, rate);
          const b = matrix(n, k, `sb${_name}${n}${rate}`, rate);
          const bq = quantize(qb, b, [n, k]);
          for (const model of ['fp32', 'pairwise', 'fp64', 'hopper-fp8'] as AccumulatorModel[]) {
            for (const chunk of [16, 32]) {
              const o: GemmOptions = { accumulator: model, chunk, aQuant: qa, bQuant: qb };
              compare(a, b, m, n, k, o, `${_name} ${model} chunk ${chunk} ${m}×${n}×${k} rate ${rate}`);
              compare(a, bq, m, n, k, o, `${_name} ${model} chunk ${chunk} B given`);
              compare(a, bq, m, n, k, o, `${_name} ${model} chunk ${chunk} B given, second call (cached tables)`);
            }
          }
          compare(
            a,
            b,
            m,
            n,
            k,
            { accumulator: 'hopper-fp8', chunk: 16, promoteEvery: 0, splitK: 2, aQuant: qa, bQuant: qb },
            `${_name} hopper never promoted, splitK 2`,
          );
          // Split K: one chunk per segment without the one-call kernel (the WebAssembly chunk step, then the JS accumulation).
          compare(
            a,
            b,
            m,
            n,
            k,
            { accumulator: 'hopper-fp8', chunk: 16, promoteEvery: 1, splitK: 2, aQuant: qa, bQuant: qb },
            `${_name} hopper chunk steps, splitK 2`,
          );
        }
      }
    },
  );

  it('weight-only (one operand scaled): dequantized and rounded to the other operand format, cached per format', () => {
    const w4 = quantPreset('gptq-w4g128', { block: 32 });
    for (const [m, n, k] of [
      [3, 5, 64],
      [8, 16, 64],
    ] as const) {
      const a = matrix(m, k, `wa${m}`, 0.1);
      const wq = quantize(w4, matrix(n, k, `wb${n}`, 0.1, false), [n, k]);
      for (const model of ['fp32', 'pairwise', 'fp64', 'hopper-fp8'] as AccumulatorModel[]) {
        for (const aQuant of [undefined, 'bf16', 'fp16'] as const) {
          compare(
            a,
            wq,
            m,
            n,
            k,
            { accumulator: model, ...(aQuant ? { aQuant } : {}) },
            `w4 ${model} ${aQuant} ${m}×${n}×${k}`,
          );
          compare(
            a,
            wq,
            m,
            n,
            k,
            { accumulator: model, ...(aQuant ? { aQuant } : {}) },
            `w4 ${model} ${aQuant} again (cached)`,
          );
        }
      }
    }
  });
});
