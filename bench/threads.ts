// Thread scaling of the fixed-partition fp32 GEMM and of a trainer forward + backward at the bench sizes:
// 1 thread against 2 (and more if asked), same process. Figures only; the equality is a test, not here.

import {
  backwardLogprobs,
  computeLogprobs,
  arConfig,
  createArPolicy,
  numericsFor,
  precisionPlans,
} from '../src/policies/index.js';
import { setGemmThreads } from '../src/nn/index.js';
import { disposeGemmThreads, threadedGemmF32 } from '../src/numerics/index.js';
import { createRng } from '../src/core/rng.js';
import { makeTask } from '../src/tasks/index.js';
import { benchSizes, type BenchSize } from './ar.js';
import type { BenchLine } from './cast.js';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

/** ms per call of `fn` for each thread count, interleaved over `repeats` rounds after a warm-up. */
function timeThreads(counts: readonly number[], repeats: number, fn: (threads: number) => void): number[] {
  for (const t of counts) fn(t);
  const times = counts.map(() => [] as number[]);
  for (let r = 0; r < repeats; r++) {
    counts.forEach((t, i) => {
      const t0 = performance.now();
      fn(t);
      (times[i] as number[]).push(performance.now() - t0);
    });
  }
  return times.map(median);
}

/**
 * fp32 GEMM GFLOP/s at 128³, 256³, 512³ with 1 and `threads` threads, and the bf16 trainer forward +
 * backward (every linear GEMM through `gemmSequential`) at each bench size with 1 and `threads` threads.
 */
export async function benchThreads(
  threads = 2,
  repeats = 5,
  sizes: readonly BenchSize[] = benchSizes,
): Promise<BenchLine[]> {
  const counts = [1, threads];
  const lines: BenchLine[] = [];
  for (const s of [128, 256, 512]) {
    const rng = createRng('bench-threads').fork(String(s));
    const a = Float32Array.from({ length: s * s }, () => rng.normal());
    const b = Float32Array.from({ length: s * s }, () => rng.normal());
    const out = new Float32Array(s * s);
    const [t1, tN] = timeThreads(counts, repeats, (t) => threadedGemmF32(out, a, b, s, s, s, t)) as [number, number];
    const gf = (ms: number): number => (2 * s ** 3) / (ms * 1e6);
    lines.push({
      name: `threads: fp32 GEMM ${s}³ (sequential float32 per output), 1 vs ${threads} threads`,
      figures: { gflops1: gf(t1), [`gflops${threads}`]: gf(tN), speedup: t1 / tN },
    });
  }
  const task = makeTask('reverse');
  for (const size of sizes) {
    const B = size.batch;
    const T = task.promptLength + size.length;
    const policy = createArPolicy(arConfig({ ...size.model, vocabSize: task.vocabSize, maxLen: T }), 0);
    const rng = createRng('bench-threads-tokens');
    const tokens = Int32Array.from({ length: B * T }, () => 5 + rng.int(task.vocabSize - 5));
    const mask = new Float32Array(B * size.length).fill(1);
    const plan = precisionPlans.bf16;
    const [t1, tN] = timeThreads(counts, Math.max(2, Math.floor(repeats / 2)), (t) => {
      setGemmThreads(t);
      const lp = computeLogprobs(policy, tokens, B, task.promptLength, mask, { numerics: numericsFor(plan.trainer) });
      policy.params.grads.fill(0);
      backwardLogprobs(policy, lp, new Float64Array(B * size.length).fill(1 / (B * size.length)));
    }) as [number, number];
    setGemmThreads(null);
    lines.push({
      name: `threads: size ${size.name} bf16 trainer forward+backward on (${B}, ${T}), 1 vs ${threads} threads`,
      figures: { ms1: t1, [`ms${threads}`]: tN, speedup: t1 / tN },
    });
  }
  disposeGemmThreads();
  return lines;
}
