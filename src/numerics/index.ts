// Public surface of the numerics core: formats, cast profiles, the scalar reference and vector casts.
// Not the CLI or the benchmarks; quantizers, presets, GEMM and KV cache live in their own files here.

export * from './formats.js';
export * from './profiles.js';
export * from './round.js';
export * from './vector.js';
export * from './describe.js';
export * from './scales.js';
export * from './quantize.js';
export * from './presets.js';
export * from './gemm.js';
export * from './kvcache.js';
export { fp32KernelIsSimd } from './fp32-kernel.js';
export { hopperKernelIsSimd } from './hopper-kernel.js';
export { GEMM_ROWS_PER_TASK, GEMM_THREAD_MIN_WORK, disposeGemmThreads, gemmThreadsFromEnv, threadedGemmF32 } from './threads.js';
