// gemmBatched (src/numerics/gemm-batched.ts) against one gemm call per pair, Object.is on edge data: NaN, ±Inf,
// −0, all-zero pairs, values at and beyond E4M3's max, float32 subnormals, ties of the E4M3 grid, k = 1 and K not a
// multiple of the chunk, every accumulator model the plans can name, split-K, an output format, and specs outside
// the fast path (which run gemm per pair).

import { describe, expect, it } from 'vitest';
import {
  createBatchedOperandMemo,
  gemm,
  gemmBatched,
  quantPreset,
  type GemmOptions,
  type QuantSpec,
} from '../../src/numerics/index.js';
import { createRng } from '../../src/core/rng.js';

/** `count` pairs of operands, each pair's data drawn from one of several edge families. */
function edgeOperand(count: number, rows: number, k: number, seed: number): Float32Array {
  const rng = createRng(seed);
  const x = new Float32Array(count * rows * k);
  const len = rows * k;
  for (let p = 0; p < count; p++) {
    const family = (p + seed) % 9;
    for (let i = 0; i < len; i++) {
      const g = (rng.uniform() - 0.5) * 4;
      let v: number;
      switch (family) {
        case 0:
          v = 0;
          break; // all-zero pair: 1/s = Inf, codes +448, scale 0
        case 1:
          v = i % 2 === 0 ? -0 : 0;
          break; // ±0 only
        case 2:
          v = i === len >> 1 ? Number.NaN : g;
          break; // one NaN
        case 3:
          v = i === 0 ? Number.POSITIVE_INFINITY : i === 1 && len > 2 ? Number.NEGATIVE_INFINITY : g;
          break;
        case 4:
          v = i % 3 === 0 ? 448 : i % 3 === 1 ? -448 : g * 1e3;
          break; // at and beyond E4M3's max
        case 5:
          v = g * 1e-40;
          break; // float32 subnormals
        case 6:
          v = (Math.round(g * 8) + 0.5) / 8;
          break; // ties of a coarse grid
        case 7:
          v = g * 2 ** (Math.round(rng.uniform() * 40) - 20);
          break; // wide exponent range (hopper alignment)
        default:
          v = g;
          break;
      }
      x[p * len + i] = v;
    }
  }
  return x;
}

function perPair(
  a: Float32Array,
  b: Float32Array,
  count: number,
  m: number,
  n: number,
  k: number,
  opts: GemmOptions,
): Float32Array {
  const out = new Float32Array(count * m * n);
  for (let p = 0; p < count; p++) {
    gemm(
      out.subarray(p * m * n, (p + 1) * m * n),
      a.slice(p * m * k, (p + 1) * m * k),
      b.slice(p * n * k, (p + 1) * n * k),
      m,
      n,
      k,
      opts,
    );
  }
  return out;
}

function expectSame(got: Float32Array, want: Float32Array, label: string): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++)
    if (!Object.is(got[i], want[i])) expect(got[i], `${label} at ${i}`).toBe(want[i]);
}

const tensor = quantPreset('vllm-fp8-tensor', {});
const specs: Record<string, QuantSpec> = {
  'vllm-fp8-tensor': tensor,
  'e5m2 tensor, divide': { ...tensor, format: 'e5m2', scaling: 'divide' },
  'amax NaN propagates': { ...tensor, amaxNan: 'propagate' },
  'no clamp (NaN codes reach the accumulator)': { ...tensor, clamp: 'none', profile: 'ieee' },
  'e5m2, no clamp (±Inf codes reach the accumulator)': { ...tensor, format: 'e5m2', clamp: 'none', profile: 'ieee' },
  'round toward zero': { ...tensor, mode: 'rtz' },
};
const models: Record<string, GemmOptions> = {
  'hopper-fp8 chunk 16, promoted every chunk (full-fp8)': { accumulator: 'hopper-fp8', chunk: 16, promoteEvery: 1 },
  'hopper-fp8 defaults (chunk 32, every 4)': { accumulator: 'hopper-fp8' },
  'hopper-fp8 never promoted': { accumulator: 'hopper-fp8', chunk: 8, promoteEvery: 0 },
  fp32: {},
  pairwise: { accumulator: 'pairwise' },
  fp64: { accumulator: 'fp64' },
  'fp32 split-K 2, bf16 out': { splitK: 2, outFormat: 'bf16' },
  'hopper-fp8 split-K 3': { accumulator: 'hopper-fp8', chunk: 16, promoteEvery: 1, splitK: 3 },
};
// (count, m, n, k): decode QKᵀ (1 × tLen × hs) and PV (1 × hs × tLen) at several lengths, and general shapes.
const shapes: [number, number, number, number][] = [
  [18, 1, 1, 8],
  [18, 1, 5, 8],
  [18, 1, 33, 8],
  [18, 1, 8, 1],
  [18, 1, 8, 15],
  [18, 1, 8, 16],
  [18, 1, 8, 17],
  [18, 1, 8, 41],
  [9, 3, 5, 7],
  [9, 2, 6, 40],
];

describe('gemmBatched', () => {
  it('equals one gemm per pair, Object.is, for per-tensor quantizers under every accumulator model', () => {
    let seed = 1;
    for (const [specName, spec] of Object.entries(specs)) {
      for (const [modelName, model] of Object.entries(models)) {
        for (const [count, m, n, k] of shapes) {
          const a = edgeOperand(count, m, k, seed++);
          const b = edgeOperand(count, n, k, seed++);
          const opts: GemmOptions = { ...model, aQuant: spec, bQuant: spec };
          const got = gemmBatched(new Float32Array(count * m * n), a, b, count, m, n, k, opts);
          expectSame(got, perPair(a, b, count, m, n, k, opts), `${specName}, ${modelName}, ${count}×${m}×${n}×${k}`);
        }
      }
    }
  });

  it('takes one gemm per pair for other operands (per-token scales, rounding formats, reference) with the same bits', () => {
    const cases: GemmOptions[] = [
      {
        aQuant: quantPreset('vllm-fp8-token', {}),
        bQuant: tensor,
        accumulator: 'hopper-fp8',
        chunk: 16,
        promoteEvery: 1,
      },
      { aQuant: 'bf16', bQuant: 'bf16' },
      { aQuant: tensor, bQuant: tensor, reference: true },
    ];
    let seed = 500;
    for (const opts of cases) {
      for (const [count, m, n, k] of shapes.slice(0, 6)) {
        const a = edgeOperand(count, m, k, seed++);
        const b = edgeOperand(count, n, k, seed++);
        const got = gemmBatched(new Float32Array(count * m * n), a, b, count, m, n, k, opts);
        expectSame(got, perPair(a, b, count, m, n, k, opts), `${JSON.stringify(opts.aQuant)}, ${count}×${m}×${n}×${k}`);
      }
    }
  });

  it('with a memo of B, equals one gemm per pair over decode-like sequences (rows or columns appended, rewrites, amax growth, NaN, reshapes)', () => {
    const count = 9,
      hs = 5,
      cap = 21;
    for (const [specName, spec] of Object.entries(specs)) {
      for (const model of [models['hopper-fp8 chunk 16, promoted every chunk (full-fp8)']!, models.fp32!]) {
        const opts: GemmOptions = { ...model, aQuant: spec, bQuant: spec };
        const kMemo = createBatchedOperandMemo();
        const vMemo = createBatchedOperandMemo();
        // Caches (count, cap, hs) as a decode step keeps them; each step appends row t of every pair.
        const keys = edgeOperand(count, cap, hs, 900);
        const vals = edgeOperand(count, cap, hs, 901);
        for (let step = 0; step < 2 * cap; step++) {
          const tLen = step < cap ? step + 1 : 1 + ((step * 7) % cap); // grows, then jumps around (a later rollout)
          if (step % 5 === 3) keys[(2 * cap + 0) * hs + 1] = Math.fround(keys[(2 * cap + 0) * hs + 1]! * 3 + 1); // rewrite an old row
          if (step % 7 === 4) vals[(4 * cap + 1) * hs] = 1e6; // amax growth in one pair
          if (step === 9) keys[(5 * cap + 2) * hs + 3] = Number.NaN;
          const K = new Float32Array(count * tLen * hs); // (count, tLen, hs)
          const VT = new Float32Array(count * hs * tLen); // (count, hs, tLen)
          for (let p = 0; p < count; p++) {
            for (let t = 0; t < tLen; t++) {
              for (let d = 0; d < hs; d++) {
                K[(p * tLen + t) * hs + d] = keys[(p * cap + t) * hs + d]!;
                VT[(p * hs + d) * tLen + t] = vals[(p * cap + t) * hs + d]!;
              }
            }
          }
          const q = edgeOperand(count, 1, hs, 1000 + step);
          const P = edgeOperand(count, 1, tLen, 2000 + step);
          const label = `${specName}, ${model.accumulator ?? 'fp32'}, step ${step}, tLen ${tLen}`;
          expectSame(
            gemmBatched(new Float32Array(count * tLen), q, K, count, 1, tLen, hs, opts, kMemo),
            perPair(q, K, count, 1, tLen, hs, opts),
            `${label}: QKᵀ`,
          );
          expectSame(
            gemmBatched(new Float32Array(count * hs), P, VT, count, 1, hs, tLen, opts, vMemo),
            perPair(P, VT, count, 1, hs, tLen, opts),
            `${label}: PV`,
          );
        }
        // Another batch size through the same memos.
        const a = edgeOperand(4, 2, 6, 77);
        const b = edgeOperand(4, 3, 6, 78);
        expectSame(
          gemmBatched(new Float32Array(24), a, b, 4, 2, 3, 6, opts, kMemo),
          perPair(a, b, 4, 2, 3, 6, opts),
          `${specName}: count 4`,
        );
      }
    }
  });

  it('handles zero-size batches and shapes, and names every size on a mismatch', () => {
    const opts: GemmOptions = { aQuant: tensor, bQuant: tensor, accumulator: 'hopper-fp8', chunk: 16, promoteEvery: 1 };
    expect(gemmBatched(new Float32Array(0), new Float32Array(0), new Float32Array(0), 0, 1, 4, 8, opts).length).toBe(0);
    const a = edgeOperand(3, 1, 0, 7);
    const got = gemmBatched(new Float32Array(3 * 4), a, new Float32Array(0), 3, 1, 4, 0, opts);
    expectSame(got, perPair(a, new Float32Array(0), 3, 1, 4, 0, opts), 'k = 0');
    expect(() =>
      gemmBatched(new Float32Array(5), new Float32Array(16), new Float32Array(64), 2, 1, 4, 8, opts),
    ).toThrow(/count = 2, m = 1, n = 4, k = 8.*out has 5 elements \(need 8\)/);
  });

  it('rejects an int32 accumulator on float codes as gemm does', () => {
    const opts: GemmOptions = { aQuant: tensor, bQuant: tensor, accumulator: 'int32' };
    const a = edgeOperand(2, 1, 8, 3);
    const b = edgeOperand(2, 4, 8, 4);
    expect(() => perPair(a, b, 2, 1, 4, 8, opts)).toThrow(/int32/);
    expect(() => gemmBatched(new Float32Array(8), a, b, 2, 1, 4, 8, opts)).toThrow(/int32/);
  });
});
