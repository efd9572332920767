// The threaded fp32 GEMM: byte-identical for 1, 2 and 3 threads and equal to the sequential reference loop.
// Not a timing test (no timing assertions): the speed-up is measured by `npm run bench threads`.
import { afterAll, describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import { disposeGemmThreads, gemm, threadedGemmF32 } from '../../src/numerics/index.js';
import {
  GEMM_THREAD_MIN_WORK,
  gemmThreadsFromEnv,
  gemmThreadsWithSimd,
  markGemmOperandImmutable,
} from '../../src/numerics/threads.js';
import { fp32KernelIsSimd } from '../../src/numerics/kernels/fp32-kernel.js';
import { gemmReference, gemmSequential, setGemmThreads } from '../../src/nn/index.js';

const same = (x: Float32Array, y: Float32Array): boolean =>
  x.length === y.length && x.every((v, i) => Object.is(v, y[i]));

function matrix(len: number, seed: string): Float32Array {
  const rng = createRng(seed).fork('t');
  const edges = [0, -0, 2 ** -149, 3e38, -3e38, Infinity, NaN];
  return Float32Array.from({ length: len }, () =>
    rng.int(50) === 0 ? edges[rng.int(edges.length)]! : Math.fround(rng.normal() * 2 ** (rng.int(20) - 10)),
  );
}

afterAll(() => {
  setGemmThreads(null);
  disposeGemmThreads();
});

describe('threadedGemmF32', () => {
  it.each([
    [37, 64, 7100], // 37 rows: three tasks of 16, 16, 5
    [100, 48, 3500],
    [8, 9, 7], // below the work threshold: caller thread only
  ])('1, 2 and 3 threads give the same bytes as the fp32 model (m=%i n=%i k=%i)', (m, n, k) => {
    const a = matrix(m * k, `a${m}`);
    const b = matrix(n * k, `b${n}`);
    const ref = gemm(new Float32Array(m * n), a, b, m, n, k);
    const outs = [1, 2, 3].map((t) => threadedGemmF32(new Float32Array(m * n), a, b, m, n, k, t));
    for (const o of outs) expect(same(o, ref)).toBe(true);
    if (m * n * k >= GEMM_THREAD_MIN_WORK) expect(m).toBeGreaterThan(16); // the split really happens
  });

  it('an operand marked immutable keeps its packed panels: same bytes on every call and for each shape it is read as', () => {
    const [n, k] = [24, 36];
    const b = matrix(n * k, 'imm-b');
    markGemmOperandImmutable(b);
    for (const m of [4, 16, 9, 16]) {
      const a = matrix(m * k, `imm-a${m}`);
      const ref = gemm(new Float32Array(m * n), a, b, m, n, k);
      expect(same(threadedGemmF32(new Float32Array(m * n), a, b, m, n, k, 1), ref), `m=${m}`).toBe(true);
    }
    // The same array read as (n', k') = (36, 24): panels of that shape, not the cached ones.
    const a = matrix(8 * 24, 'imm-a-t');
    const ref = gemm(new Float32Array(8 * 36), a, b, 8, 36, 24);
    expect(same(threadedGemmF32(new Float32Array(8 * 36), a, b, 8, 36, 24, 1), ref)).toBe(true);
  });

  it('reuses its workers across calls and sizes, and rejects a bad thread count', () => {
    for (const [m, n, k] of [
      [64, 64, 4100],
      [40, 80, 5300],
      [64, 64, 4100],
    ] as const) {
      const a = matrix(m * k, `r${m}${k}`);
      const b = matrix(n * k, `s${n}${k}`);
      expect(
        same(threadedGemmF32(new Float32Array(m * n), a, b, m, n, k, 2), gemm(new Float32Array(m * n), a, b, m, n, k)),
      ).toBe(true);
    }
    expect(() => threadedGemmF32(new Float32Array(1), new Float32Array(1), new Float32Array(1), 1, 1, 1, 0)).toThrow(
      /threads: expected a positive integer, got 0/,
    );
  });

  // Edge operands for the SIMD path of every thread: NaN, ±Inf, −0, subnormals (and products that round to
  // subnormals or overflow), mixed with magnitudes whose sums depend on the order over k (so a kernel that
  // summed in any other order would differ). Shapes leave rows per thread and columns off the 4×8 tile.
  function edgeMatrix(rows: number, k: number, seed: string): Float32Array {
    const rng = createRng(seed).fork('edge');
    const edges = [
      0,
      -0,
      2 ** -149,
      -(2 ** -149),
      2 ** -126 * 0.75,
      2 ** 100,
      -(2 ** 100),
      3e38,
      Infinity,
      -Infinity,
      NaN,
    ];
    const scales = [2 ** -70, 2 ** -64, 1, 2 ** 10, 2 ** -20]; // per row: tiny rows times tiny rows give subnormal outputs
    const out = new Float32Array(rows * k);
    for (let i = 0; i < rows; i++) {
      const scale = scales[rng.int(scales.length)]!;
      for (let p = 0; p < k; p++)
        out[i * k + p] =
          rng.int(3 * k) === 0
            ? edges[rng.int(edges.length)]!
            : Math.fround(rng.normal() * scale * 2 ** (rng.int(16) - 8));
    }
    return out;
  }

  it.each([
    [37, 61, 7500], // tasks 16, 16, 5: 2 threads → caller 21 rows (5 groups of 4 + 1), worker 16; 61 = 7·8 + 5 columns
    [50, 83, 4100], // tasks 16, 16, 16, 2; 83 = 10·8 + 3 columns
    [20, 7, 120000], // n < 8 (the scalar loop inside every thread); the worker of 2 threads has rows 16..19
  ])(
    'the SIMD path in the caller and the workers equals the scalar reference on edge data (m=%i n=%i k=%i)',
    (m, n, k) => {
      expect(m * n * k).toBeGreaterThanOrEqual(GEMM_THREAD_MIN_WORK);
      const a = edgeMatrix(m, k, `ea${m}`);
      const b = edgeMatrix(n, k, `eb${n}`);
      const ref = new Float32Array(m * n);
      gemmReference(ref, a, b, m, n, k);
      // the edges reach the tile outputs: NaN, infinities, subnormals (the scalar-only shape has too few outputs for all three)
      if (n >= 8)
        expect([
          ref.some(Number.isNaN),
          ref.some((v) => Math.abs(v) === Infinity),
          ref.some((v) => v !== 0 && Math.abs(v) < 2 ** -126),
        ]).toEqual([true, true, true]);
      for (const t of [1, 2, 3])
        expect(same(threadedGemmF32(new Float32Array(m * n), a, b, m, n, k, t), ref)).toBe(true);
      expect(gemmThreadsWithSimd()).toBe(fp32KernelIsSimd() ? 3 : 0); // the caller and both workers of the 3-thread pool
    },
  );

  it('QRL_THREADS: unset or empty is 1, a positive integer is taken, anything else is refused', () => {
    expect(gemmThreadsFromEnv({}, true)).toBe(1);
    expect(gemmThreadsFromEnv({ QRL_THREADS: '' }, true)).toBe(1);
    expect(gemmThreadsFromEnv({ QRL_THREADS: '3' }, true)).toBe(3);
    expect(() => gemmThreadsFromEnv({ QRL_THREADS: 'two' }, true)).toThrow(
      /QRL_THREADS: expected a positive integer, got "two"/,
    );
    expect(gemmThreadsFromEnv({ QRL_THREADS: '3' }, false)).toBe(1); // inside a worker thread (a sweep's run): never nested
  });

  it("gemmSequential (the layers' GEMM) with 1, 2 and 3 threads equals the reference loop", () => {
    const [m, n, k] = [70, 40, 6000];
    const a = matrix(m * k, 'na');
    const b = matrix(n * k, 'nb');
    const ref = new Float32Array(m * n);
    gemmReference(ref, a, b, m, n, k);
    for (const t of [1, 2, 3]) {
      setGemmThreads(t);
      const out = new Float32Array(m * n);
      gemmSequential(out, a, b, m, n, k);
      expect(same(out, ref)).toBe(true);
    }
    expect(() => setGemmThreads(1.5)).toThrow(/threads: expected a positive integer, got 1.5/);
  });
});
