// Quantizer and quantized-GEMM benchmark: `quantize` of several presets at a decode-step size and a prefill size, and
// `gemm` with operands quantized inside the call (FP8 hopper-fp8, INT8 int32). Figures only; nothing asserted.
import { gemm, quantPreset, quantize, type QuantSpec } from '../src/numerics/index.js';
import { createRng } from '../src/core/rng.js';
import type { BenchLine } from './cast.js';

/** Times `fn` for at least `minMs` milliseconds after a warm-up; returns µs per call (median of `rounds` rounds). */
function timeUs(fn: () => void, minMs: number, rounds = 5): number {
  for (let i = 0; i < 20; i++) fn();
  const per: number[] = [];
  for (let r = 0; r < rounds; r++) {
    let reps = 0;
    const start = process.hrtime.bigint();
    let elapsed = 0;
    while (elapsed < minMs / rounds || reps < 2) {
      fn();
      reps++;
      elapsed = Number(process.hrtime.bigint() - start) / 1e6;
    }
    per.push((elapsed * 1000) / reps);
  }
  per.sort((x, y) => x - y);
  return per[Math.floor(rounds / 2)] as number;
}

/**
 * µs per `quantize` call of representative presets at (1, 256) and (64, 256), and µs per quantized GEMM
 * (64×64×256: FP8 1×128 groups with hopper-fp8, INT8 per row with int32).
 *
 * @example
 * ```ts
 * const lines = benchQuantize();
 * ```
 */
export function benchQuantize(minMs = 300): BenchLine[] {
  const rng = createRng('bench-quantize');
  const specs: [string, QuantSpec][] = [
    ['vllm-fp8-token', quantPreset('vllm-fp8-token')],
    ['deepseek-fp8-group', quantPreset('deepseek-fp8-group')],
    ['vllm-fp8-tensor', quantPreset('vllm-fp8-tensor')],
    ['int8-row', quantPreset('int8-row')],
    ['vllm-int8-token-azp', quantPreset('vllm-int8-token-azp')],
    ['mxfp8', quantPreset('mxfp8')],
    ['nvfp4', quantPreset('nvfp4')],
  ];
  const lines: BenchLine[] = [];
  for (const rows of [1, 64]) {
    const cols = 256;
    const x = Float32Array.from({ length: rows * cols }, () => rng.normal());
    const figures: Record<string, number> = {};
    for (const [name, spec] of specs) figures[name] = timeUs(() => quantize(spec, x, [rows, cols]), minMs);
    lines.push({ name: `quantize (${rows}, ${cols}), µs per call (median of 5)`, figures });
  }
  const m = 64;
  const n = 64;
  const k = 256;
  const a = Float32Array.from({ length: m * k }, () => rng.normal());
  const b = Float32Array.from({ length: n * k }, () => rng.normal());
  const out = new Float32Array(m * n);
  const fp8 = quantPreset('deepseek-fp8-group');
  const int8 = quantPreset('int8-row');
  const fp8W = quantize(fp8, b, [n, k]);
  lines.push({
    name: `quantized gemm ${m}×${n}×${k}, µs per call (median of 5)`,
    figures: {
      'fp8-group hopper-fp8': timeUs(
        () => gemm(out, a, b, m, n, k, { aQuant: fp8, bQuant: fp8, accumulator: 'hopper-fp8', chunk: 128 }),
        minMs,
      ),
      'fp8-group hopper-fp8 (B given)': timeUs(
        () => gemm(out, a, fp8W, m, n, k, { aQuant: fp8, accumulator: 'hopper-fp8', chunk: 128 }),
        minMs,
      ),
      'int8-row int32': timeUs(
        () => gemm(out, a, b, m, n, k, { aQuant: int8, bQuant: int8, accumulator: 'int32' }),
        minMs,
      ),
      'fp8-group fp32': timeUs(() => gemm(out, a, b, m, n, k, { aQuant: fp8, bQuant: fp8 }), minMs),
    },
  });
  return lines;
}
