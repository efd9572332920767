// Fixed-partition, synchronous fork-join fp32 GEMM over node:worker_threads (SharedArrayBuffer + Atomics).
// Not a scheduler or a pool for runs (sweeps have their own); every output element is one sequential sum.

import { MessageChannel, Worker, isMainThread } from 'node:worker_threads';
import {
  fp32KernelModule,
  fp32KernelRows,
  markGemmOperandImmutable,
  newFp32Kernel,
  FP32_BLOCKING,
  type Fp32Product,
  type WasmKernel,
} from './kernels/fp32-kernel.js';

export { markGemmOperandImmutable };

/**
 * Rows of `out` per task. The m rows are cut into tasks of this many rows; task t goes to thread
 * t mod threads. Each output element is computed by the same sequential float32 loop whichever thread
 * runs it, so the result does not depend on the thread count.
 */
export const GEMM_ROWS_PER_TASK = 16;

/**
 * Smallest m·n·k for which {@link threadedGemmF32} uses its workers; below it the calling thread does
 * everything (copying the operands into shared memory and waking the workers costs more than it saves:
 * with the SIMD kernel a 128³ GEMM takes ≈ 0.2 ms and measured slower on 2 threads, 256³ = 2²⁴ faster).
 */
export const GEMM_THREAD_MIN_WORK = 1 << 24;

// The rows of one thread, in the worker's JS and (as `threadRows` below) the caller's TS: the same algorithm.
// Rows are gathered in task order into the SIMD kernel's memory, B is packed into 8-column panels
// panel[kk][c] = B(8p + c, kk) (columns past n zero), the kernel's `gemm` computes every tile (fp32-kernel.ts), and
// the first n outputs of each row go back; without the kernel, the scalar loop. Every output is one sequential float32 sum.
//
// The worker: waits on ctrl[0] (generation), computes its tasks, adds to ctrl[1] (done count).
// ctrl: [generation, done, m, n, k, threads used, rows per task, workers with the SIMD kernel]; the operands and out live in one shared Float32Array.
const WORKER_SOURCE = `
const { workerData, receiveMessageOnPort } = require('node:worker_threads');
const { port, ctrlBuffer, id, module, blocking } = workerData;
const ctrl = new Int32Array(ctrlBuffer);
const fr = Math.fround;
let wasm = null;
if (module !== null) {
  try {
    const inst = new WebAssembly.Instance(module);
    wasm = { memory: inst.exports.mem, gemm: inst.exports.gemm, packA: inst.exports.packA, packB: inst.exports.packB };
  } catch { wasm = null; }
}
if (wasm !== null) Atomics.add(ctrl, 7, 1);
function threadRows(A, B, O, m, n, k, id, threads, rowsPerTask) {
  const rows = [];
  for (let t = id; t * rowsPerTask < m; t += threads) {
    for (let i = t * rowsPerTask, i1 = Math.min(m, (t + 1) * rowsPerTask); i < i1; i++) rows.push(i);
  }
  if (wasm !== null && rows.length > 0 && n > 0) {
    // fp32-kernel.ts's layout (floats): packed A (r·k·4) at 0, B panels at bAt, outputs at outAt, staging at rawAt
    const r = rows.length, width = Math.ceil(n / 8) * 8, bAt = r * k * 4, outAt = bAt + width * k, rawAt = outAt + r * width;
    const need = (rawAt + Math.max(r, n) * k) * 4, have = wasm.memory.buffer.byteLength;
    if (need > have) wasm.memory.grow(Math.ceil((need - have) / 65536));
    const mem = new Float32Array(wasm.memory.buffer);
    for (let q = 0; q < r; q++) mem.set(A.subarray(rows[q] * k, rows[q] * k + k), rawAt + q * k);
    wasm.packA(rawAt * 4, r, k, 0);
    mem.set(B.subarray(0, n * k), rawAt);
    wasm.packB(rawAt * 4, n, k, bAt * 4);
    wasm.gemm(0, k * 16, 0, bAt * 4, k * 32, k, outAt * 4, width * 4, r, width / 8, blocking.kc, blocking.groupBytes);
    for (let q = 0; q < r; q++) O.set(mem.subarray(outAt + q * width, outAt + q * width + n), rows[q] * n);
    return;
  }
  for (const i of rows) {
    for (let j = 0; j < n; j++) {
      let acc = 0;
      for (let p = 0; p < k; p++) acc = fr(acc + fr(A[i * k + p] * B[j * k + p]));
      O[i * n + j] = acc;
    }
  }
}
let data = null;
let gen = 0;
for (;;) {
  Atomics.wait(ctrl, 0, gen);
  gen = Atomics.load(ctrl, 0);
  if (gen < 0) break;
  for (let msg = receiveMessageOnPort(port); msg !== undefined; msg = receiveMessageOnPort(port)) data = new Float32Array(msg.message);
  const m = ctrl[2], n = ctrl[3], k = ctrl[4], threads = ctrl[5], rowsPerTask = ctrl[6];
  if (id < threads) threadRows(data.subarray(0, m * k), data.subarray(m * k, m * k + n * k), data.subarray(m * k + n * k, m * k + n * k + m * n), m, n, k, id, threads, rowsPerTask);
  Atomics.add(ctrl, 1, 1);
  Atomics.notify(ctrl, 1);
}
`;

interface Pool {
  readonly workers: Worker[];
  readonly ports: MessageChannel['port1'][];
  readonly ctrl: Int32Array;
  shared: SharedArrayBuffer | null;
}

let pool: Pool | null = null;
/** The caller thread's own instance of the SIMD kernel (its own memory), or null without WebAssembly SIMD. */
let callerKernel: WasmKernel | null | undefined;

/** The pool of `extraThreads` workers (rebuilt only when the requested thread count changes). */
function poolOf(extraThreads: number): Pool {
  if (pool !== null && pool.workers.length === extraThreads) return pool;
  disposeGemmThreads();
  const ctrlBuffer = new SharedArrayBuffer(8 * 4);
  const workers: Worker[] = [];
  const ports: MessageChannel['port1'][] = [];
  for (let w = 0; w < extraThreads; w++) {
    const { port1, port2 } = new MessageChannel();
    // Thread 0 is the caller; worker w runs the tasks of thread w + 1.
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { port: port2, ctrlBuffer, id: w + 1, module: fp32KernelModule(), blocking: FP32_BLOCKING },
      transferList: [port2],
    });
    worker.unref();
    port1.unref();
    workers.push(worker);
    ports.push(port1);
  }
  pool = { workers, ports, ctrl: new Int32Array(ctrlBuffer), shared: null };
  return pool;
}

/**
 * How many threads of the current GEMM pool run the WebAssembly SIMD kernel (the caller counts when it
 * has the kernel; a worker counts once it has instantiated it, i.e. after its first GEMM). For tests and reports.
 * @internal
 */
export function gemmThreadsWithSimd(): number {
  if (callerKernel === undefined) callerKernel = newFp32Kernel();
  return (callerKernel === null ? 0 : 1) + (pool === null ? 0 : Atomics.load(pool.ctrl, 7));
}

/** Stops the GEMM worker threads (they are unref'd, so a process exits without this). */
export function disposeGemmThreads(): void {
  if (pool === null) return;
  Atomics.store(pool.ctrl, 0, -1);
  Atomics.notify(pool.ctrl, 0);
  for (const w of pool.workers) void w.terminate();
  pool = null;
}

/** One thread's share of a product: tasks id, id + threads, … of `rowsPerTask` rows each. */
interface ThreadShare {
  readonly id: number;
  readonly threads: number;
  readonly rowsPerTask: number;
}

/**
 * The caller's share: the rows of tasks id, id + threads, … of out (m×n) = A (m×k) · B (n×k)ᵀ, through the SIMD
 * kernel where WebAssembly SIMD is available and the sequential float32 loop elsewhere (same bits); the
 * worker's `threadRows` in WORKER_SOURCE is the same algorithm. B's panels come from {@link writeFp32Panels}
 * (kept for an operand marked immutable).
 */
function threadRows(product: Fp32Product, share: ThreadShare): void {
  const { A, B, out: O, m, n, k } = product;
  const { id, threads, rowsPerTask } = share;
  if (callerKernel === undefined) callerKernel = newFp32Kernel();
  const wasm = callerKernel;
  const rows: number[] = [];
  for (let t = id; t * rowsPerTask < m; t += threads) {
    for (let i = t * rowsPerTask, i1 = Math.min(m, (t + 1) * rowsPerTask); i < i1; i++) rows.push(i);
  }
  if (wasm !== null && rows.length > 0 && n > 0) {
    fp32KernelRows(wasm, product, threads === 1 ? null : rows);
    return;
  }
  const fr = Math.fround;
  for (const i of rows) {
    for (let j = 0; j < n; j++) {
      let acc = 0;
      for (let p = 0; p < k; p++) acc = fr(acc + fr((A[i * k + p] as number) * (B[j * k + p] as number)));
      O[i * n + j] = acc;
    }
  }
}

/**
 * out (m×n) = a (m×k) · b (n×k)ᵀ with the exact sequential float32 semantics of the `fp32` model
 * (every product and add rounded, each output summed from +0 over increasing k), split over `threads`
 * threads (the caller plus `threads − 1` workers) by the fixed row partition of
 * {@link GEMM_ROWS_PER_TASK}: byte-identical for any thread count. Below {@link GEMM_THREAD_MIN_WORK}
 * or with `threads` = 1 it runs on the calling thread alone. Synchronous: the caller blocks
 * (Atomics.wait) until every worker has finished.
 *
 * @example
 * ```ts
 * threadedGemmF32(out, a, b, 512, 512, 512, 2); // same bits as threads = 1
 * ```
 */
export function threadedGemmF32(
  out: Float32Array,
  a: Float32Array,
  b: Float32Array,
  m: number,
  n: number,
  k: number,
  threads: number,
): Float32Array {
  if (!Number.isInteger(threads) || threads < 1)
    throw new Error(`threads: expected a positive integer, got ${threads}`);
  if (a.length < m * k || b.length < n * k || out.length < m * n)
    throw new Error(`threadedGemmF32: operands shorter than m×k = ${m * k}, n×k = ${n * k}, out m×n = ${m * n}`);
  const used = m * n * k < GEMM_THREAD_MIN_WORK ? 1 : Math.min(threads, Math.ceil(m / GEMM_ROWS_PER_TASK));
  const words = m * k + n * k + m * n;
  if (used === 1) {
    // b itself where it is exactly (n, k): the identity a marked operand's kept panels are found by.
    threadRows(
      { A: a, B: b.length === n * k ? b : b.subarray(0, n * k), out, m, n, k },
      { id: 0, threads: 1, rowsPerTask: GEMM_ROWS_PER_TASK },
    );
    return out;
  }
  const p = poolOf(threads - 1);
  if (p.shared === null || p.shared.byteLength < words * 4) {
    p.shared = new SharedArrayBuffer(Math.max(words * 4, 2 * (p.shared?.byteLength ?? 0)));
    for (const port of p.ports) port.postMessage(p.shared);
  }
  const data = new Float32Array(p.shared);
  data.set(a.subarray(0, m * k));
  data.set(b.subarray(0, n * k), m * k);
  const ctrl = p.ctrl;
  ctrl[2] = m;
  ctrl[3] = n;
  ctrl[4] = k;
  ctrl[5] = used;
  ctrl[6] = GEMM_ROWS_PER_TASK;
  Atomics.store(ctrl, 1, 0);
  Atomics.add(ctrl, 0, 1);
  Atomics.notify(ctrl, 0);
  threadRows(
    {
      A: data.subarray(0, m * k),
      B: data.subarray(m * k, m * k + n * k),
      out: data.subarray(m * k + n * k, words),
      m,
      n,
      k,
    },
    { id: 0, threads: used, rowsPerTask: GEMM_ROWS_PER_TASK },
  );
  const waiting = p.workers.length;
  const deadline = performance.now() + 600_000;
  for (let done = Atomics.load(ctrl, 1); done < waiting; done = Atomics.load(ctrl, 1)) {
    Atomics.wait(ctrl, 1, done, 1000);
    if (performance.now() > deadline) {
      disposeGemmThreads();
      throw new Error(
        `threadedGemmF32: ${waiting - Atomics.load(ctrl, 1)} of ${waiting} GEMM worker threads did not finish`,
      );
    }
  }
  out.set(data.subarray(m * k + n * k, words));
  return out;
}

/**
 * Threads of one run's large GEMMs: `QRL_THREADS` (a positive integer), default 1. Only the main thread
 * splits GEMMs: inside a worker thread (a sweep runs one run per worker) this is 1 whatever the
 * variable says, so pools never nest and a sweep never oversubscribes the cores.
 */
export function gemmThreadsFromEnv(env: NodeJS.ProcessEnv = process.env, mainThread: boolean = isMainThread): number {
  if (!mainThread) return 1;
  const raw = env.QRL_THREADS;
  if (raw === undefined || raw === '') return 1;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < 1)
    throw new Error(`QRL_THREADS: expected a positive integer, got ${JSON.stringify(raw)}`);
  return v;
}
