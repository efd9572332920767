// Fixed-partition, synchronous fork-join fp32 GEMM over node:worker_threads (SharedArrayBuffer + Atomics).
// Not a scheduler or a pool for runs (sweeps have their own); every output element is one sequential sum.

import { MessageChannel, Worker, isMainThread } from 'node:worker_threads';

/**
 * Rows of `out` per task. The m rows are cut into tasks of this many rows; task t goes to thread
 * t mod threads. Each output element is computed by the same sequential float32 loop whichever thread
 * runs it, so the result does not depend on the thread count.
 */
export const GEMM_ROWS_PER_TASK = 16;

/**
 * Smallest m·n·k for which {@link threadedGemmF32} uses its workers; below it the calling thread does
 * everything (copying the operands into shared memory and waking the workers costs more than it saves).
 */
export const GEMM_THREAD_MIN_WORK = 1 << 21;

// The worker: waits on ctrl[0] (generation), computes its tasks, adds to ctrl[1] (done count).
// ctrl: [generation, done, m, n, k, threads used, rows per task]; the operands and out live in one shared Float32Array.
const WORKER_SOURCE = `
const { workerData, receiveMessageOnPort } = require('node:worker_threads');
const { port, ctrlBuffer, id } = workerData;
const ctrl = new Int32Array(ctrlBuffer);
const fr = Math.fround;
let data = null;
let gen = 0;
for (;;) {
  Atomics.wait(ctrl, 0, gen);
  gen = Atomics.load(ctrl, 0);
  if (gen < 0) break;
  for (let msg = receiveMessageOnPort(port); msg !== undefined; msg = receiveMessageOnPort(port)) data = new Float32Array(msg.message);
  const m = ctrl[2], n = ctrl[3], k = ctrl[4], threads = ctrl[5], rowsPerTask = ctrl[6];
  const a = 0, b = m * k, o = b + n * k;
  for (let t = id; id < threads && t * rowsPerTask < m; t += threads) {
    const i1 = Math.min(m, (t + 1) * rowsPerTask);
    for (let i = t * rowsPerTask; i < i1; i++) {
      for (let j = 0; j < n; j++) {
        let acc = 0;
        for (let p = 0; p < k; p++) acc = fr(acc + fr(data[a + i * k + p] * data[b + j * k + p]));
        data[o + i * n + j] = acc;
      }
    }
  }
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
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { port: port2, ctrlBuffer, id: w + 1 }, transferList: [port2] });
    worker.unref();
    port1.unref();
    workers.push(worker);
    ports.push(port1);
  }
  pool = { workers, ports, ctrl: new Int32Array(ctrlBuffer), shared: null };
  return pool;
}

/** Stops the GEMM worker threads (they are unref'd, so a process exits without this). */
export function disposeGemmThreads(): void {
  if (pool === null) return;
  Atomics.store(pool.ctrl, 0, -1);
  Atomics.notify(pool.ctrl, 0);
  for (const w of pool.workers) void w.terminate();
  pool = null;
}

/** The sequential float32 loop of one task range of rows (the caller's share). */
function rowsF32(data: Float32Array, m: number, n: number, k: number, id: number, threads: number, rowsPerTask: number): void {
  const fr = Math.fround;
  const b = m * k;
  const o = b + n * k;
  for (let t = id; t * rowsPerTask < m; t += threads) {
    const i1 = Math.min(m, (t + 1) * rowsPerTask);
    for (let i = t * rowsPerTask; i < i1; i++) {
      for (let j = 0; j < n; j++) {
        let acc = 0;
        for (let p = 0; p < k; p++) acc = fr(acc + fr((data[i * k + p] as number) * (data[b + j * k + p] as number)));
        data[o + i * n + j] = acc;
      }
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
    const data = new Float32Array(words);
    data.set(a.subarray(0, m * k));
    data.set(b.subarray(0, n * k), m * k);
    rowsF32(data, m, n, k, 0, 1, GEMM_ROWS_PER_TASK);
    out.set(data.subarray(m * k + n * k));
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
  rowsF32(data, m, n, k, 0, used, GEMM_ROWS_PER_TASK);
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
