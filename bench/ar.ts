// Timing of the AR toy policy per precision plan and per model size: rollout, trainer forward + backward,
// ratios against the `bf16` plan measured interleaved in the same process. Figures only; nothing is asserted.

import {
  arConfig,
  backwardLogprobs,
  computeLogprobs,
  createArPolicy,
  numericsFor,
  precisionPlans,
  rollout,
  type ArConfig,
} from '../src/policies/index.js';
import { gemm, quantize, quantPreset } from '../src/numerics/index.js';
import { createRng } from '../src/core/rng.js';
import { makeTask } from '../src/tasks/index.js';
import type { BenchLine } from './cast.js';
import { ortMatMulBench } from './ort.js';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

/**
 * A model size to benchmark, as data: the architecture fields of {@link ArConfig} plus the rollout
 * batch and length. After the preset table lands, build these rows from it (name → config).
 */
export interface BenchSize {
  /** Row label. */
  readonly name: string;
  /** Architecture overrides of `arConfig` (C, layers, H, hidden, …). */
  readonly model: Partial<Omit<ArConfig, 'vocabSize' | 'maxLen'>>;
  /** Sequences per rollout (prompts × group size). */
  readonly batch: number;
  /** New tokens per sequence (EOS ignored). */
  readonly length: number;
}

/**
 * The sizes `npm run bench sizes` measures: tiny = today's default; small and medium the likely
 * larger presets (replace with the preset table once it exists).
 */
export const benchSizes: readonly BenchSize[] = Object.freeze([
  { name: 'tiny', model: { C: 32, layers: 2, H: 4, hidden: 64 }, batch: 16, length: 32 },
  { name: 'small', model: { C: 64, layers: 4, H: 4, hidden: 256 }, batch: 16, length: 64 },
  { name: 'medium', model: { C: 128, layers: 4, H: 8, hidden: 512 }, batch: 8, length: 128 },
]);

interface PlanTimes {
  roll: number[];
  fwd: number[];
  bwd: number[];
  /** Process CPU milliseconds (user + system) of the rollout and of the trainer forward + backward: robust to a shared machine. */
  rollCpu: number[];
  trainerCpu: number[];
}

/** Process CPU time in milliseconds (user + system). */
function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * Runs every plan once per repeat, interleaved (so load changes hit all plans alike), after one
 * untimed round of every plan (JIT compilation, WebAssembly instantiation, weight caches); returns the times.
 */
function timePlans(
  size: BenchSize,
  planNames: readonly string[],
  repeats: number,
): { times: Map<string, PlanTimes>; promptLength: number } {
  const task = makeTask('reverse');
  const B = size.batch;
  const L = size.length;
  const policy = createArPolicy(
    arConfig({ ...size.model, vocabSize: task.vocabSize, maxLen: task.promptLength + L }),
    0,
  );
  const prompts = task.trainProblems(B, 0).map((p) => [...p.prompt]);
  const times = new Map<string, PlanTimes>(
    planNames.map((p) => [p, { roll: [], fwd: [], bwd: [], rollCpu: [], trainerCpu: [] }]),
  );
  for (let i = -1; i < repeats; i++) {
    for (const name of planNames) {
      const plan = precisionPlans[name as keyof typeof precisionPlans];
      const t = times.get(name) as PlanTimes;
      const c0 = cpuMs();
      const t0 = performance.now();
      const r = rollout(policy, prompts, {
        maxNewTokens: L,
        numerics: numericsFor(plan.rollout),
        rng: createRng(Math.max(i, 0)),
        eos: null,
      });
      const t1 = performance.now();
      const c1 = cpuMs();
      const lp = computeLogprobs(policy, r.tokens, B, r.promptLength, r.responseMask, {
        numerics: numericsFor(plan.trainer),
      });
      const t2 = performance.now();
      policy.params.grads.fill(0);
      backwardLogprobs(policy, lp, new Float64Array(B * L).fill(1 / (B * L)));
      const t3 = performance.now();
      const c3 = cpuMs();
      if (i < 0) continue; // the warm-up round
      t.roll.push(t1 - t0);
      t.fwd.push(t2 - t1);
      t.bwd.push(t3 - t2);
      t.rollCpu.push(c1 - c0);
      t.trainerCpu.push(c3 - c1);
    }
  }
  return { times, promptLength: task.promptLength };
}

/**
 * Milliseconds per rollout (16 × 32, EOS ignored) and per trainer forward+backward for each plan at the
 * default size, with `rolloutVsBf16` / `stepVsBf16` = plan time / bf16 time (same process, interleaved).
 */
export async function benchAr(
  repeats = 5,
  planNames: readonly string[] = Object.keys(precisionPlans),
): Promise<BenchLine[]> {
  const size = benchSizes[0] as BenchSize;
  const names = planNames.includes('bf16') ? planNames : ['bf16', ...planNames];
  const { times, promptLength } = timePlans(size, names, repeats);
  const base = times.get('bf16') as PlanTimes;
  const baseRoll = median(base.roll);
  const baseStep = baseRoll + median(base.fwd) + median(base.bwd);
  return planNames.map((name) => {
    const t = times.get(name) as PlanTimes;
    const roll = median(t.roll),
      fwd = median(t.fwd),
      bwd = median(t.bwd);
    return {
      name: `ar ${name}: rollout ${size.batch}×${size.length} (prompt ${promptLength}), trainer forward/backward on (${size.batch}, ${promptLength + size.length})`,
      figures: {
        rolloutMs: roll,
        trainerForwardMs: fwd,
        trainerBackwardMs: bwd,
        rolloutVsBf16: roll / baseRoll,
        trainerVsBf16: (fwd + bwd) / (baseStep - baseRoll),
        stepVsBf16: (roll + fwd + bwd) / baseStep,
        // The same ratios in process CPU time: they do not count time spent waiting for a core.
        rolloutCpuVsBf16: median(t.rollCpu) / median(base.rollCpu),
        trainerCpuVsBf16: median(t.trainerCpu) / median(base.trainerCpu),
      },
    };
  });
}

/** GFLOP/s of `fn` computing an (m×k)·(k×n) product, timed for ≥ minMs after one warm-up call. */
function gflops(fn: () => void, m: number, n: number, k: number, minMs: number): number {
  fn();
  let reps = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < minMs || reps < 2) {
    fn();
    reps++;
  }
  return (2 * m * n * k * reps) / ((performance.now() - t0) * 1e6);
}

/**
 * One line per model size: GRPO step compute (rollout + trainer forward + backward) under `bf16` and
 * `fp8-rollout`, rollout tokens/s, and the GFLOP/s of the MLP-up GEMM at that size (rows = the trainer's
 * tokens) for the fp32 kernel and the hopper-fp8 W8A8 path next to onnxruntime MatMul in the same process.
 */
export async function benchSizesLines(
  sizes: readonly BenchSize[] = benchSizes,
  repeats = 3,
  minMs = 200,
): Promise<BenchLine[]> {
  const lines: BenchLine[] = [];
  for (const size of sizes) {
    const { times, promptLength } = timePlans(size, ['bf16', 'fp8-rollout'], repeats);
    const step = (p: string): number => {
      const t = times.get(p) as PlanTimes;
      return median(t.roll) + median(t.fwd) + median(t.bwd);
    };
    const roll = (p: string): number => median((times.get(p) as PlanTimes).roll);
    // The MLP up projection of the trainer: (B·T, C) · (hidden, C)ᵀ.
    const C = size.model.C ?? 32;
    const hidden = size.model.hidden ?? 64;
    const m = size.batch * (promptLength + size.length),
      n = hidden,
      k = C;
    const rng = createRng('bench-sizes').fork(size.name);
    const a = Float32Array.from({ length: m * k }, () => rng.normal());
    const bt = Float32Array.from({ length: n * k }, () => rng.normal()); // (n, k)
    const b = new Float32Array(k * n); // (k, n) for onnxruntime
    for (let j = 0; j < n; j++) for (let kk = 0; kk < k; kk++) b[kk * n + j] = bt[j * k + kk] as number;
    const out = new Float32Array(m * n);
    const fp32 = gflops(() => gemm(out, a, bt, m, n, k), m, n, k, minMs);
    const wq = quantize(quantPreset('deepseek-fp8-block', { block: 16 }), bt, [n, k]);
    const actQ = quantPreset('vllm-fp8-group', { block: 16 });
    const hopper = gflops(
      () => gemm(out, a, wq, m, n, k, { aQuant: actQ, accumulator: 'hopper-fp8', chunk: 16, promoteEvery: 1 }),
      m,
      n,
      k,
      minMs,
    );
    const ort = await ortMatMulBench(a, b, m, k, n);
    let runs = 1;
    let t = await ort.time(runs);
    while (t.totalMs < minMs) {
      runs *= 2;
      t = await ort.time(runs);
    }
    const m0 = size.model;
    lines.push({
      name: `size ${size.name} (C${m0.C} L${m0.layers} H${m0.H} hidden${m0.hidden}; rollout ${size.batch}×${size.length}, prompt ${promptLength}; GEMM ${m}×${k}·${k}×${n})`,
      figures: {
        bf16StepMs: step('bf16'),
        fp8StepMs: step('fp8-rollout'),
        bf16RolloutTokPerS: (size.batch * size.length) / (roll('bf16') / 1000),
        fp8RolloutTokPerS: (size.batch * size.length) / (roll('fp8-rollout') / 1000),
        fp8RolloutVsBf16: roll('fp8-rollout') / roll('bf16'),
        fp32GemmGflops: fp32,
        hopperW8A8Gflops: hopper,
        ortGflops: t.gflops,
      },
    });
  }
  return lines;
}
