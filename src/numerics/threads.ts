// Fixed-partition, synchronous fork-join fp32 GEMM over node:worker_threads (SharedArrayBuffer + Atomics).
// Not a scheduler or a pool for runs (sweeps have their own); every output element is one sequential sum.

import { MessageChannel, Worker, isMainThread } from 'node:worker_threads';
import { fp32KernelModule, newFp32Kernel, type WasmKernel } from './fp32-kernel.js';

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
// Rows are gathered in task order; whole groups of 4 rows × 8 columns go through the SIMD kernel (A rows copied
// into its memory, B packed into 8-column panels panel[kk][c] = B(8p + c, kk)), the rest through the scalar loop.
// Memory (bytes): [A rows: r4·k·4][B panels: n8·k·4][out: r4·n8·4]. Every output is one sequential float32 sum.
//
// The worker: waits on ctrl[0] (generation), computes its tasks, adds to ctrl[1] (done count).
// ctrl: [generation, done, m, n, k, threads used, rows per task, workers with the SIMD kernel]; the operands and out live in one shared Float32Array.
const WORKER_SOURCE = `
const { workerData, receiveMessageOnPort } = require('node:worker_threads');
const { port, ctrlBuffer, id, module } = workerData;
const ctrl = new Int32Array(ctrlBuffer);
const fr = Math.fround;
let wasm = null;
if (module !== null) {
  try {
    const inst = new WebAssembly.Instance(module);
    wasm = { memory: inst.exports.mem, tile: inst.exports.tile };
  } catch { wasm = null; }
}
if (wasm !== null) Atomics.add(ctrl, 7, 1);
function threadRows(A, B, O, m, n, k, id, threads, rowsPerTask) {
  const rows = [];
  for (let t = id; t * rowsPerTask < m; t += threads) {
    for (let i = t * rowsPerTask, i1 = Math.min(m, (t + 1) * rowsPerTask); i < i1; i++) rows.push(i);
  }
  const r4 = wasm === null ? 0 : rows.length - (rows.length % 4);
  const n8 = wasm === null ? 0 : n - (n % 8);
  if (r4 > 0 && n8 > 0) {
    const aBytes = r4 * k * 4, outOffset = aBytes + n8 * k * 4, need = outOffset + r4 * n8 * 4;
    const have = wasm.memory.buffer.byteLength;
    if (need > have) wasm.memory.grow(Math.ceil((need - have) / 65536));
    const mem = new Float32Array(wasm.memory.buffer);
    for (let r = 0; r < r4; r++) mem.set(A.subarray(rows[r] * k, rows[r] * k + k), r * k);
    const bBase = aBytes / 4;
    for (let p = 0; p < n8 / 8; p++) {
      for (let c = 0; c < 8; c++) {
        const row = (p * 8 + c) * k, base = bBase + p * k * 8 + c;
        for (let kk = 0; kk < k; kk++) mem[base + kk * 8] = B[row + kk];
      }
    }
    for (let p = 0; p < n8 / 8; p++) {
      const bp = aBytes + p * k * 32;
      for (let r = 0; r < r4; r += 4) wasm.tile(r * k * 4, k * 4, bp, bp + k * 32, outOffset + (r * n8 + p * 8) * 4, n8 * 4);
    }
    const outBase = outOffset / 4;
    for (let r = 0; r < r4; r++) O.set(mem.subarray(outBase + r * n8, outBase + r * n8 + n8), rows[r] * n);
  }
  for (let r = 0; r < rows.length; r++) {
    const i = rows[r];
    for (let j = r < r4 ? n8 : 0; j < n; j++) {
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
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { port: port2, ctrlBuffer, id: w + 1, module: fp32KernelModule() }, transferList: [port2] });
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

/**
 * Operands their owner promised never to write again (a weight rounded once per numerics object, i.e.
 * per weight version: a sync or an optimizer step builds a new numerics object and a new array). The
 * caller's thread keeps their packed 8-column panels and copies them into the kernel's memory instead
 * of packing b on every call (a decode step then packs only its activations).
 */
const immutableOperands = new WeakSet<Float32Array>();
/** Packed panels (n8 / 8, k, 8) of immutable b operands, by array. */
const packedPanels = new WeakMap<Float32Array, { readonly n8: number; readonly k: number; readonly panels: Float32Array }>();

/**
 * Declares that `b` will not be written again, so {@link threadedGemmF32} may keep its packed panels
 * (by array identity) for later calls. Only for arrays nobody mutates: a weight copy rounded once per
 * weight version. @internal
 */
export function markGemmOperandImmutable(b: Float32Array): void {
  immutableOperands.add(b);
}

function panelsOf(B: Float32Array, n8: number, k: number): Float32Array {
  const known = packedPanels.get(B);
  if (known !== undefined && known.n8 === n8 && known.k === k) return known.panels;
  const panels = new Float32Array(n8 * k);
  for (let p = 0; p < n8 / 8; p++) {
    for (let c = 0; c < 8; c++) {
      const row = (p * 8 + c) * k;
      const base = p * k * 8 + c;
      for (let kk = 0; kk < k; kk++) panels[base + kk * 8] = B[row + kk] as number;
    }
  }
  packedPanels.set(B, { n8, k, panels });
  return panels;
}

/**
 * The caller's share: the rows of tasks id, id + threads, … of out (m×n) = A (m×k) · B (n×k)ᵀ, through the SIMD
 * kernel where WebAssembly SIMD is available and the sequential float32 loop elsewhere (same bits); the
 * worker's `threadRows` in WORKER_SOURCE is the same algorithm.
 */
function threadRows(A: Float32Array, B: Float32Array, O: Float32Array, m: number, n: number, k: number, id: number, threads: number, rowsPerTask: number, immutableB: Float32Array | null = null): void {
  if (callerKernel === undefined) callerKernel = newFp32Kernel();
  const wasm = callerKernel;
  const rows: number[] = [];
  for (let t = id; t * rowsPerTask < m; t += threads) {
    for (let i = t * rowsPerTask, i1 = Math.min(m, (t + 1) * rowsPerTask); i < i1; i++) rows.push(i);
  }
  const r4 = wasm === null ? 0 : rows.length - (rows.length % 4);
  const n8 = wasm === null ? 0 : n - (n % 8);
  if (wasm !== null && r4 > 0 && n8 > 0) {
    // memory (bytes): [A rows (r4, k)][B panels (n8 / 8, k, 8)][out (r4, n8)]
    const aBytes = r4 * k * 4;
    const outOffset = aBytes + n8 * k * 4;
    const need = outOffset + r4 * n8 * 4;
    const have = wasm.memory.buffer.byteLength;
    if (need > have) wasm.memory.grow(Math.ceil((need - have) / 65536));
    const mem = new Float32Array(wasm.memory.buffer);
    for (let r = 0; r < r4; r++) mem.set(A.subarray((rows[r] as number) * k, (rows[r] as number) * k + k), r * k);
    const bBase = aBytes / 4;
    if (immutableB !== null) mem.set(panelsOf(immutableB, n8, k), bBase);
    else {
      for (let p = 0; p < n8 / 8; p++) {
        for (let c = 0; c < 8; c++) {
          const row = (p * 8 + c) * k;
          const base = bBase + p * k * 8 + c;
          for (let kk = 0; kk < k; kk++) mem[base + kk * 8] = B[row + kk] as number;
        }
      }
    }
    for (let p = 0; p < n8 / 8; p++) {
      const bp = aBytes + p * k * 32;
      for (let r = 0; r < r4; r += 4) wasm.tile(r * k * 4, k * 4, bp, bp + k * 32, outOffset + (r * n8 + p * 8) * 4, n8 * 4);
    }
    const outBase = outOffset / 4;
    for (let r = 0; r < r4; r++) O.set(mem.subarray(outBase + r * n8, outBase + r * n8 + n8), (rows[r] as number) * n);
  }
  const fr = Math.fround;
  for (let r = 0; r < rows.length; r++) {
    const i = rows[r] as number;
    for (let j = r < r4 ? n8 : 0; j < n; j++) {
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
export function threadedGemmF32(out: Float32Array, a: Float32Array, b: Float32Array, m: number, n: number, k: number, threads: number): Float32Array {
  if (!Number.isInteger(threads) || threads < 1) throw new Error(`threads: expected a positive integer, got ${threads}`);
  if (a.length < m * k || b.length < n * k || out.length < m * n) throw new Error(`threadedGemmF32: operands shorter than m×k = ${m * k}, n×k = ${n * k}, out m×n = ${m * n}`);
  const used = m * n * k < GEMM_THREAD_MIN_WORK ? 1 : Math.min(threads, Math.ceil(m / GEMM_ROWS_PER_TASK));
  const words = m * k + n * k + m * n;
  if (used === 1) {
    const immutableB = b.length === n * k && immutableOperands.has(b) ? b : null;
    threadRows(a.subarray(0, m * k), b.subarray(0, n * k), out.subarray(0, m * n), m, n, k, 0, 1, GEMM_ROWS_PER_TASK, immutableB);
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
  ctrl[2] = m; ctrl[3] = n; ctrl[4] = k; ctrl[5] = used; ctrl[6] = GEMM_ROWS_PER_TASK;
  Atomics.store(ctrl, 1, 0);
  Atomics.add(ctrl, 0, 1);
  Atomics.notify(ctrl, 0);
  threadRows(data.subarray(0, m * k), data.subarray(m * k, m * k + n * k), data.subarray(m * k + n * k, words), m, n, k, 0, used, GEMM_ROWS_PER_TASK);
  const waiting = p.workers.length;
  const deadline = performance.now() + 600_000;
  for (let done = Atomics.load(ctrl, 1); done < waiting; done = Atomics.load(ctrl, 1)) {
    Atomics.wait(ctrl, 1, done, 1000);
    if (performance.now() > deadline) {
      disposeGemmThreads();
      throw new Error(`threadedGemmF32: ${waiting - Atomics.load(ctrl, 1)} of ${waiting} GEMM worker threads did not finish`);
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
  if (!Number.isInteger(v) || v < 1) throw new Error(`QRL_THREADS: expected a positive integer, got ${JSON.stringify(raw)}`);
  return v;
}
