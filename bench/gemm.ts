// GEMM benchmark: qrl-sim's exact `fp32` accumulator model against onnxruntime's MatMul in the same process, one thread.
// Not a test of correctness beyond a sanity check that both compute the same product to float32 rounding.
import { vectorUnits } from './machine.js';
import { gemm, type AccumulatorModel } from '../src/numerics/index.js';
import { FP32_TILE_ROWS, fp32KernelIsSimd } from '../src/numerics/kernels/fp32-kernel.js';
import { createRng } from '../src/core/rng.js';
import { disposeOrtBenches, ortMatMulBench } from './ort.js';

/** Where the benchmark prints. */
export interface BenchIo {
  out(text: string): void;
}

/** One row of the GEMM benchmark. */
export interface GemmBenchRow {
  /** m = n = k. */
  size: number;
  /** qrl-sim `fp32` model throughput, GFLOP/s (2·m·n·k per run). */
  qrlGflops: number;
  /** onnxruntime MatMul throughput, GFLOP/s. */
  ortGflops: number;
  /** qrl / ort. */
  ratio: number;
  /** Largest |qrl − ort| / (Σ|a·b| of that output): a sanity check of the product, not an equality. */
  maxRelDiff: number;
}

/**
 * Milliseconds per call of `fn`: the best of 5 batches, each at least `minMs / 5` long, after one warm-up call.
 * The best batch, not the mean, so that other jobs on a shared machine slow both sides of a ratio less.
 */
async function bestOfBatches(fn: () => unknown, minMs: number): Promise<number> {
  await fn();
  let best = Infinity;
  for (let batch = 0; batch < 5; batch++) {
    let reps = 0;
    const start = process.hrtime.bigint();
    let elapsed = 0;
    while (elapsed < minMs / 5 || reps < 2) {
      await fn();
      reps++;
      elapsed = Number(process.hrtime.bigint() - start) / 1e6;
    }
    best = Math.min(best, elapsed / reps);
  }
  return best;
}

/** Times `fn` for at least `minMs` milliseconds after one warm-up call; returns ms per call. */
function timeSync(fn: () => void, minMs: number): number {
  fn();
  let reps = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < minMs || reps < 2) {
    fn();
    reps++;
    elapsed = Number(process.hrtime.bigint() - start) / 1e6;
  }
  return elapsed / reps;
}

/**
 * GFLOP/s of the `fp32` model (exact sequential float32 semantics) at 64³, 256³ and 512³ next to
 * onnxruntime MatMul, plus the other accumulator models at 64³ for scale.
 *
 * @example
 * ```ts
 * const rows = await benchGemm({ out: console.log });
 * ```
 */
export async function benchGemm(
  io: BenchIo,
  sizes: readonly number[] = [64, 256, 512],
  minMs = 400,
): Promise<GemmBenchRow[]> {
  io.out(
    `GEMM fp32 model (exact sequential fp32, ${fp32KernelIsSimd() ? `WebAssembly SIMD ${FP32_TILE_ROWS}×8 tiles` : 'scalar JS'}) vs onnxruntime MatMul (intra- and inter-op threads 1), single thread, best of 5 batches each, interleaved`,
  );
  io.out('   size   qrl-sim GFLOP/s   ort GFLOP/s   qrl/ort   max rel diff');
  const rows: GemmBenchRow[] = [];
  for (const size of sizes) {
    const rng = createRng('bench-gemm').fork(String(size));
    const a = Float32Array.from({ length: size * size }, () => rng.normal()); // (m, k)
    const bt = Float32Array.from({ length: size * size }, () => rng.normal()); // (n, k): qrl-sim layout
    const b = new Float32Array(size * size); // (k, n): ORT layout, the same matrix
    for (let j = 0; j < size; j++) for (let kk = 0; kk < size; kk++) b[kk * size + j] = bt[j * size + kk] as number;
    const out = new Float32Array(size * size);
    const ort = await ortMatMulBench(a, b, size, size, size);
    const ortOut = Float32Array.from(await ort.once());
    // interleaved: qrl-sim, onnxruntime, qrl-sim, onnxruntime (the better of each side's two)
    let msQrl = Infinity;
    let msOrt = Infinity;
    for (let round = 0; round < 2; round++) {
      msQrl = Math.min(msQrl, await bestOfBatches(() => gemm(out, a, bt, size, size, size), minMs / 2));
      msOrt = Math.min(msOrt, await bestOfBatches(() => ort.time(1), minMs / 2));
    }
    let maxRelDiff = 0;
    for (let i = 0; i < size; i++) {
      for (let j = 0; j < size; j++) {
        let abs = 0;
        for (let kk = 0; kk < size; kk++) abs += Math.abs((a[i * size + kk] as number) * (bt[j * size + kk] as number));
        maxRelDiff = Math.max(
          maxRelDiff,
          Math.abs((out[i * size + j] as number) - (ortOut[i * size + j] as number)) / abs,
        );
      }
    }
    const qrlGflops = (2 * size ** 3) / (msQrl * 1e6);
    const ortGflops = (2 * size ** 3) / (msOrt * 1e6);
    const row = { size, qrlGflops, ortGflops, ratio: qrlGflops / ortGflops, maxRelDiff };
    rows.push(row);
    io.out(
      `${String(size).padStart(7)}   ${qrlGflops.toFixed(2).padStart(15)}   ${ortGflops.toFixed(1).padStart(11)}   ${`1/${(1 / row.ratio).toFixed(1)}`.padStart(7)}   ${maxRelDiff.toExponential(1).padStart(12)}`,
    );
  }
  const at256 = rows.find((r) => r.size === 256);
  // onnxruntime picks its MatMul kernels from the CPU (AVX2 vs AVX-512), qrl-sim's WebAssembly SIMD is 128-bit on both:
  // the ratio is a property of the machine as much as of the code, so the line names the vector units.
  if (at256)
    io.out(
      `target ≥ 1/3 of onnxruntime at 256³ (set on AVX2): ${at256.ratio >= 1 / 3 ? 'met' : 'NOT met'} (1/${(1 / at256.ratio).toFixed(1)} on ${vectorUnits()})`,
    );
  // The other accumulator models, for scale (scalar reference loops).
  const s = 64;
  const rng = createRng('bench-gemm').fork('models');
  const a = Float32Array.from({ length: s * s }, () => rng.normal());
  const bt = Float32Array.from({ length: s * s }, () => rng.normal());
  const out = new Float32Array(s * s);
  const models: AccumulatorModel[] = ['fp32', 'pairwise', 'fp64', 'hopper-fp8'];
  io.out(
    `accumulator models at ${s}³: ${models.map((model) => `${model} ${((2 * s ** 3) / (timeSync(() => gemm(out, a, bt, s, s, s, { accumulator: model, aQuant: 'bf16', bQuant: 'bf16' }), minMs / 4) * 1e6)).toFixed(2)}`).join(', ')} GFLOP/s (bf16 operands)`,
  );
  await disposeOrtBenches();
  return rows;
}
