// GEMM benchmark: qrl-sim's exact `fp32` accumulator model against onnxruntime's MatMul in the same process, one thread.
// Not a test of correctness beyond a sanity check that both compute the same product to float32 rounding.
import { gemm, type AccumulatorModel } from '../src/numerics/index.js';
import { fp32KernelIsSimd } from '../src/numerics/fp32-kernel.js';
import { createRng } from '../src/rng.js';
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
export async function benchGemm(io: BenchIo, sizes: readonly number[] = [64, 256, 512], minMs = 400): Promise<GemmBenchRow[]> {
  io.out(`GEMM fp32 model (exact sequential fp32, ${fp32KernelIsSimd() ? 'WebAssembly SIMD 4×8 tiles' : 'scalar JS'}) vs onnxruntime MatMul, single thread`);
  io.out('   size   qrl-sim GFLOP/s   ort GFLOP/s   qrl/ort   max rel diff');
  const rows: GemmBenchRow[] = [];
  for (const size of sizes) {
    const rng = createRng('bench-gemm').fork(String(size));
    const a = Float32Array.from({ length: size * size }, () => rng.normal()); // (m, k)
    const bt = Float32Array.from({ length: size * size }, () => rng.normal()); // (n, k): qrl-sim layout
    const b = new Float32Array(size * size); // (k, n): ORT layout, the same matrix
    for (let j = 0; j < size; j++) for (let kk = 0; kk < size; kk++) b[kk * size + j] = bt[j * size + kk] as number;
    const out = new Float32Array(size * size);
    const msQrl = timeSync(() => gemm(out, a, bt, size, size, size), minMs);
    const ort = await ortMatMulBench(a, b, size, size, size);
    const ortOut = Float32Array.from(await ort.once());
    let runs = 1;
    let t = await ort.time(runs);
    while (t.totalMs < minMs) {
      runs *= 2;
      t = await ort.time(runs);
    }
    let maxRelDiff = 0;
    for (let i = 0; i < size; i++) {
      for (let j = 0; j < size; j++) {
        let abs = 0;
        for (let kk = 0; kk < size; kk++) abs += Math.abs((a[i * size + kk] as number) * (bt[j * size + kk] as number));
        maxRelDiff = Math.max(maxRelDiff, Math.abs((out[i * size + j] as number) - (ortOut[i * size + j] as number)) / abs);
      }
    }
    const qrlGflops = (2 * size ** 3) / (msQrl * 1e6);
    const row = { size, qrlGflops, ortGflops: t.gflops, ratio: qrlGflops / t.gflops, maxRelDiff };
    rows.push(row);
    io.out(`${String(size).padStart(7)}   ${qrlGflops.toFixed(2).padStart(15)}   ${t.gflops.toFixed(1).padStart(11)}   ${`1/${(1 / row.ratio).toFixed(1)}`.padStart(7)}   ${maxRelDiff.toExponential(1).padStart(12)}`);
  }
  const at256 = rows.find((r) => r.size === 256);
  if (at256) io.out(`target ≥ 1/20 of onnxruntime at 256³: ${at256.ratio >= 1 / 20 ? 'met' : 'NOT met'} (1/${(1 / at256.ratio).toFixed(1)})`);
  // The other accumulator models, for scale (scalar reference loops).
  const s = 64;
  const rng = createRng('bench-gemm').fork('models');
  const a = Float32Array.from({ length: s * s }, () => rng.normal());
  const bt = Float32Array.from({ length: s * s }, () => rng.normal());
  const out = new Float32Array(s * s);
  const models: AccumulatorModel[] = ['fp32', 'pairwise', 'fp64', 'hopper-fp8'];
  io.out(`accumulator models at ${s}³: ${models.map((model) => `${model} ${((2 * s ** 3) / (timeSync(() => gemm(out, a, bt, s, s, s, { accumulator: model, aQuant: 'bf16', bQuant: 'bf16' }), minMs / 4) * 1e6)).toFixed(2)}`).join(', ')} GFLOP/s (bf16 operands)`);
  await disposeOrtBenches();
  return rows;
}
