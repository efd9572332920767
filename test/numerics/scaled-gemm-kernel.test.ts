// The one-call WebAssembly kernel of the fp32 and int32 models (scaled-gemm-kernel.ts) against gemmReference with
// Object.is: the fused scale step on double-rounding cases, every quantizer preset on edge data, int32 wrapping.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import {
  type QuantSpec,
  type QuantizedTensor,
  gemm,
  quantPreset,
  quantPresets,
  quantize,
} from '../../src/numerics/index.js';
import { gemmReference } from '../../src/numerics/gemm-reference.js';
import { fma32, nextFloat32Up } from '../../src/numerics/scales.js';
import { scaledGemmKernelAvailable } from '../../src/numerics/kernels/scaled-gemm-kernel.js';

const fr = Math.fround;
const FLT_MAX = fr(3.4028234663852886e38);

/** Indices where two outputs differ under Object.is (empty: bit-identical up to NaN payloads). */
function differences(x: Float32Array, y: Float32Array): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.max(x.length, y.length); i++) if (!Object.is(x[i], y[i])) out.push(i);
  return out;
}

/** A float32-valued scaled tensor built by hand: element values (fp32 codes) with 1×`group` scales. */
function handTensor(values: number[], scales: number[], rows: number, cols: number, group: number): QuantizedTensor {
  const spec: QuantSpec = { format: 'fp32', granularity: { kind: 'group', size: group }, scale: { kind: 'amax' } };
  const codes = new Uint32Array(Float32Array.from(values).buffer);
  return {
    spec,
    shape: [rows, cols],
    codes,
    scales: Float32Array.from(scales),
    scaleShape: [rows, Math.ceil(cols / group)],
  };
}

/** Edge elements: signed zeros, subnormals, the float32 extremes, Inf and NaN. */
const EDGE = [
  -0,
  0,
  2 ** -149,
  -(2 ** -130),
  2 ** -126,
  FLT_MAX,
  -FLT_MAX,
  65504,
  448,
  -448,
  Infinity,
  -Infinity,
  Number.NaN,
  1.5,
  -2.5,
  0.5,
];

function edgeMatrix(rows: number, cols: number, seed: string, edgeEvery: number): Float32Array {
  const rng = createRng(seed).fork('edge');
  return Float32Array.from({ length: rows * cols }, (_, i) =>
    i % edgeEvery === 3 ? EDGE[(i >> 2) % EDGE.length]! : fr(rng.normal() * (i % 11 === 0 ? 300 : 1)),
  );
}

describe('scaled GEMM kernel (fp32 / int32 models in one WebAssembly call)', () => {
  it('runs here (WebAssembly SIMD)', () => {
    expect(scaledGemmKernelAvailable('fp32')).toBe(true);
    expect(scaledGemmKernelAvailable('int32')).toBe(true);
  });

  it('the fine-scale step equals fma32 on double-rounding cases (product on a float32 midpoint, a tiny addend)', () => {
    // Output (i, j) over k = 2 with groups of 1: segment 0 gives acc = fma32(1, c, 0) = c, segment 1 gives
    // fma32(fl(s·1), q·1, c). Eight columns make one SIMD tile; rows hold the cases.
    const cases: [number, number, number][] = [
      [1 + 2 ** -12, 1 + 2 ** -12, -1],
      [1 + 2 ** -12, 1 + 2 ** -12, 2 ** -60],
      [1 + 2 ** -12, 1 + 2 ** -12, -(2 ** -60)],
      [1 + 2 ** -12, 1 - 2 ** -12, 2 ** -149],
      [-(1 + 2 ** -12), 1 + 2 ** -12, 2 ** -90],
      [FLT_MAX, 2, -FLT_MAX],
      [FLT_MAX, 1 + 2 ** -23, 0],
      [2 ** -75, 2 ** -75, -0],
      [2 ** -70, -(2 ** -79), 2 ** -149],
      [0, Infinity, 1],
      [Number.NaN, 1, 1],
      [1, Infinity, -Infinity],
      [-0, 1, -0],
    ];
    const rng = createRng('fma-cases').fork('x');
    for (let r = 0; r < 120; r++) {
      // s·q = 1 + (i + j)·2^-12 + ij·2^-24: a float32 midpoint when ij is odd; c a tiny value of either sign.
      const i = 2 * rng.int(1024) + 1;
      const j = 2 * rng.int(1024) + 1;
      const tiny = fr((rng.uniform() - 0.5) * 2 ** -(40 + rng.int(100)));
      cases.push([fr(1 + i * 2 ** -12), fr(1 + j * 2 ** -12), tiny]);
      cases.push([fr(1 + i * 2 ** -12), fr(1 + j * 2 ** -12), -1]);
      cases.push([fr(rng.normal()), fr(rng.normal()), nextFloat32Up(fr(rng.normal() * 2 ** -20))]);
    }
    const m = cases.length;
    const n = 9; // one full 8-column panel plus a ragged one
    const aValues: number[] = [];
    const aScales: number[] = [];
    for (const [s, q, c] of cases) {
      aValues.push(c, q);
      aScales.push(1, s);
    }
    const a = handTensor(aValues, aScales, m, 2, 1);
    const b = handTensor(new Array<number>(2 * n).fill(1), new Array<number>(2 * n).fill(1), n, 2, 1);
    const fast = gemm(new Float32Array(m * n), a, b, m, n, 2);
    const ref = gemmReference(new Float32Array(m * n), a, b, m, n, 2);
    expect(differences(fast, ref)).toEqual([]);
    cases.forEach(([s, q, c], row) =>
      expect(
        Object.is(fast[row * n + 4], fma32(fr(s), fr(q), fma32(1, fr(c), 0))),
        `case ${row}: ${s}, ${q}, ${c}`,
      ).toBe(true),
    );
  });

  const shapes: [number, number, number][] = [
    [1, 1, 1],
    [1, 9, 40],
    [7, 1, 33],
    [16, 96, 32],
    [5, 13, 50],
    [3, 8, 16],
    [4, 17, 64],
    [2, 3, 0],
    [0, 4, 8],
    [4, 0, 8],
  ];
  const presetNames = Object.keys(quantPresets) as (keyof typeof quantPresets)[];
  const specOf = (name: keyof typeof quantPresets): QuantSpec => {
    try {
      return quantPreset(name, { block: 16 });
    } catch {
      return quantPreset(name);
    }
  };

  it.each(presetNames)(
    'every shape and accumulator equals gemmReference with preset %s on edge data (A quantized in the call, B given and not)',
    (name) => {
      const spec = specOf(name);
      let compared = 0;
      for (const [m, n, k] of shapes) {
        const a = edgeMatrix(m, k, `a-${name}-${m}-${n}-${k}`, 13);
        const b = edgeMatrix(n, k, `b-${name}-${m}-${n}-${k}`, 17);
        for (const accumulator of ['fp32', 'int32'] as const) {
          for (const given of [false, true]) {
            const opts = { aQuant: spec, bQuant: spec, accumulator };
            let ref: Float32Array;
            const bq = given ? quantize(spec, b, [n, k]) : b;
            try {
              ref = gemmReference(new Float32Array(m * n), a, bq, m, n, k, opts);
            } catch (error) {
              // int32 refuses float operands: so must the fast path.
              expect(() => gemm(new Float32Array(m * n), a, bq, m, n, k, opts)).toThrow((error as Error).message);
              continue;
            }
            const fast = gemm(new Float32Array(m * n), a, bq, m, n, k, opts);
            expect(differences(fast, ref), `${accumulator} m=${m} n=${n} k=${k} given=${given}`).toEqual([]);
            compared++;
          }
        }
      }
      expect(compared).toBeGreaterThan(0);
    },
  );

  it('bf16-rounded operands and weight-only (W4A16) operands with outFormat equal gemmReference', () => {
    const [m, n, k] = [6, 19, 48];
    const a = edgeMatrix(m, k, 'wa', 7);
    const w = edgeMatrix(n, k, 'ww', 9).map((x) => (Number.isFinite(x) ? x : 1));
    const qw = quantize(quantPreset('gptq-w4g128', { block: 16 }), w, [n, k]);
    for (const opts of [{ aQuant: 'bf16', bQuant: 'bf16' }, { aQuant: 'bf16', outFormat: 'bf16' }, {}] as const) {
      const b = 'bQuant' in opts ? w : qw;
      expect(
        differences(
          gemm(new Float32Array(m * n), a, b, m, n, k, opts),
          gemmReference(new Float32Array(m * n), a, b, m, n, k, opts),
        ),
      ).toEqual([]);
    }
  });

  it('int32: wrapping sums, extreme codes and zero points, and values too large for the i32 kernel equal the reference', () => {
    const int8: QuantSpec = { format: 'int8', granularity: { kind: 'tensor' }, scale: { kind: 'none' } };
    const [m, n, k] = [3, 10, 70_000]; // 128·128·70 000 > 2^31: the sums wrap
    const a = new Float32Array(m * k).map((_, i) => (i % 3 === 0 ? -128 : 127));
    const b = new Float32Array(n * k).map((_, i) => (i % 5 === 0 ? -128 : 127));
    const opts = { aQuant: int8, bQuant: int8, accumulator: 'int32' } as const;
    expect(
      differences(
        gemm(new Float32Array(m * n), a, b, m, n, k, opts),
        gemmReference(new Float32Array(m * n), a, b, m, n, k, opts),
      ),
    ).toEqual([]);
    // Static int8 scales with a zero point of 2^27: values (code − zp) beyond the kernel's 2^26 bound, the reference loops.
    const zp: QuantSpec = {
      format: 'int8',
      granularity: { kind: 'tensor' },
      scale: { kind: 'static', scale: 0.5, zeroPoint: 2 ** 27 },
    };
    const x = edgeMatrix(4, 24, 'zx', 5).map((v) => (Number.isFinite(v) ? v : 0));
    const y = edgeMatrix(9, 24, 'zy', 5).map((v) => (Number.isFinite(v) ? v : 0));
    const zopts = { aQuant: zp, bQuant: quantPreset('int8-row'), accumulator: 'int32' } as const;
    expect(
      differences(
        gemm(new Float32Array(36), x, y, 4, 9, 24, zopts),
        gemmReference(new Float32Array(36), x, y, 4, 9, 24, zopts),
      ),
    ).toEqual([]);
    // Zero points just below 2^25 on both sides: the i32 kernel, whose products (≈ 2^50) wrap modulo 2^32 as `| 0` does.
    const near: QuantSpec = {
      format: 'uint8',
      granularity: { kind: 'tensor' },
      scale: { kind: 'static', scale: 0.25, zeroPoint: -(2 ** 25) + 7 },
    };
    const nopts = {
      aQuant: near,
      bQuant: { ...near, scale: { kind: 'static', scale: 2, zeroPoint: 2 ** 25 - 3 } },
      accumulator: 'int32',
    } as const;
    expect(
      differences(
        gemm(new Float32Array(36), x, y, 4, 9, 24, nopts),
        gemmReference(new Float32Array(36), x, y, 4, 9, 24, nopts),
      ),
    ).toEqual([]);
  });
});
