// A plan side's execution paths as data: the rollout engine's scheduler (continuous batching, chunked
// prefill, the batch-invariant switch) and tensor-parallel row-parallel linears with their all-reduce
// order. Not the scheduler loop (ar/scheduler.ts) and not the GEMM kernels (numerics.ts).

import type { BlockGemms } from '../nn/block.js';
import type { MlpGemms } from '../nn/mlp.js';
import type { GemmFn, LinearGemms } from '../nn/gemm.js';
import { allocLike, type FloatArray } from '../nn/array.js';
import { round } from '../numerics/round.js';
import type { PolicyNumerics } from './numerics.js';

/**
 * Tensor parallelism of the row-parallel linear layers (attention output `o` and MLP `down`): the
 * reduction axis K is cut into `ranks` contiguous shards, each rank's GEMM sums its shard, and the
 * partial sums are all-reduced in `reduce` order with every partial and every add rounded to `dtype`.
 * Column-parallel layers (q, k, v, up, gate, lm_head) compute every output element whole on one rank,
 * so their numerics do not change.
 */
export interface TensorParallel {
  /** Number of ranks R (1 = no parallelism), 1..8. */
  readonly ranks: number;
  /**
   * `ring`: NCCL-style ring reduce-scatter, output chunk c (of R equal chunks along N) summed starting
   * at rank (c+1) mod R around the ring to rank c; `tree`: a balanced binary tree over ranks 0..R−1;
   * `rank-order`: ranks 0, 1, …, R−1 in order (a one-shot all-reduce).
   * @defaultValue 'ring'
   */
  readonly reduce?: 'ring' | 'tree' | 'rank-order';
  /**
   * Formats of the reduction: `bf16`, partials and every add in BF16 (an NCCL all-reduce of BF16
   * buffers); `fp32`, partials and adds in fp32; `bf16-fp32`, BF16 partials summed in fp32 and the
   * sum rounded to BF16 once (vLLM's custom all-reduce: `packed_reduce` upcasts, adds, downcasts).
   * @defaultValue 'bf16'
   */
  readonly dtype?: 'bf16' | 'fp32' | 'bf16-fp32';
}

/** How a plan side executes beyond its GEMM numerics (docs/engine-paths.md). */
export interface EngineExecution {
  /**
   * Rollout only: continuous batching — at most this many requests run at once; the rest wait in
   * order and join as running ones finish, so a sequence's decode steps run in batches of changing
   * size. @defaultValue unset (every sequence decoded in lockstep in one batch)
   */
  readonly maxBatch?: number;
  /**
   * Rollout only: chunked prefill — each request's prompt is processed N tokens per engine step
   * (1 = token by token, as decode steps), alongside the running requests' decode tokens.
   * @defaultValue unset (the whole prompt in one prefill)
   */
  readonly prefillChunk?: number;
  /**
   * Rollout only: the batch-invariant switch (vLLM `VLLM_BATCH_INVARIANT=1`, SGLang
   * `--enable-deterministic-inference`): every linear layer runs the large-batch kernel whatever the
   * step's token count, so the result no longer depends on the batch or the path. @defaultValue false
   */
  readonly batchInvariant?: boolean;
  /** Tensor-parallel row-parallel linears (either side). @defaultValue unset (one device) */
  readonly tensorParallel?: TensorParallel;
}

const EXECUTION_KEYS = ['maxBatch', 'prefillChunk', 'batchInvariant', 'tensorParallel'] as const;
const TP_KEYS = ['ranks', 'reduce', 'dtype'] as const;

function positiveInt(value: unknown, path: string, max: number): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max)
    throw new Error(`${path}: expected an integer in 1..${max}, got ${JSON.stringify(value)}`);
}

/**
 * Checks an {@link EngineExecution} given as data, naming the first bad field under `path`; the
 * scheduler fields (`maxBatch`, `prefillChunk`, `batchInvariant`) only on the rollout side.
 */
export function checkEngineExecution(value: unknown, path: string, role: 'rollout' | 'trainer'): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Error(`${path}: expected an object, got ${JSON.stringify(value)}`);
  const v = value as Record<string, unknown>;
  for (const key of Object.keys(v)) {
    if (!(EXECUTION_KEYS as readonly string[]).includes(key))
      throw new Error(`${path}: unknown field '${key}' (expected one of ${EXECUTION_KEYS.join(', ')})`);
    if (role === 'trainer' && key !== 'tensorParallel')
      throw new Error(`${path}.${key}: a rollout engine setting, not for the trainer (only tensorParallel is)`);
  }
  if (v['maxBatch'] !== undefined) positiveInt(v['maxBatch'], `${path}.maxBatch`, 4096);
  if (v['prefillChunk'] !== undefined) positiveInt(v['prefillChunk'], `${path}.prefillChunk`, 1024);
  if (v['batchInvariant'] !== undefined && typeof v['batchInvariant'] !== 'boolean')
    throw new Error(`${path}.batchInvariant: expected true or false, got ${JSON.stringify(v['batchInvariant'])}`);
  const tp = v['tensorParallel'];
  if (tp === undefined) return;
  const tpPath = `${path}.tensorParallel`;
  if (typeof tp !== 'object' || tp === null || Array.isArray(tp))
    throw new Error(`${tpPath}: expected an object, got ${JSON.stringify(tp)}`);
  const t = tp as Record<string, unknown>;
  for (const key of Object.keys(t))
    if (!(TP_KEYS as readonly string[]).includes(key))
      throw new Error(`${tpPath}: unknown field '${key}' (expected one of ${TP_KEYS.join(', ')})`);
  positiveInt(t['ranks'], `${tpPath}.ranks`, 8);
  if (t['reduce'] !== undefined && !['ring', 'tree', 'rank-order'].includes(t['reduce'] as string))
    throw new Error(`${tpPath}.reduce: expected "ring", "tree" or "rank-order", got ${JSON.stringify(t['reduce'])}`);
  if (t['dtype'] !== undefined && !['bf16', 'fp32', 'bf16-fp32'].includes(t['dtype'] as string))
    throw new Error(`${tpPath}.dtype: expected "bf16", "fp32" or "bf16-fp32", got ${JSON.stringify(t['dtype'])}`);
}

/**
 * The order in which the R partial sums of output column `j` (of `n`) are added: `ring` starts at
 * rank (c+1) mod R for the column's chunk c = ⌊j·R/n⌋ and ends at rank c; `rank-order` is 0 … R−1;
 * `tree` is handled by {@link reducePartials} itself.
 */
export function ringOrder(j: number, n: number, R: number): number[] {
  const c = Math.floor((j * R) / n);
  return Array.from({ length: R }, (_, i) => (c + 1 + i) % R);
}

/**
 * All-reduce of one output element's partial sums `p` (one per rank) in `reduce` order, rounding every
 * partial and every add with `fr` (bf16 or fp32). `j`, `n`: the element's column and the row width
 * (they pick the ring chunk).
 */
export function reducePartials(
  p: readonly number[],
  reduce: 'ring' | 'tree' | 'rank-order',
  fr: (x: number) => number,
  j: number,
  n: number,
): number {
  const R = p.length;
  if (reduce === 'tree') {
    const tree = (lo: number, len: number): number =>
      len === 1
        ? fr(p[lo]!)
        : fr(tree(lo, Math.ceil(len / 2)) + tree(lo + Math.ceil(len / 2), len - Math.ceil(len / 2)));
    return tree(0, R);
  }
  const order = reduce === 'ring' ? ringOrder(j, n, R) : Array.from({ length: R }, (_, i) => i);
  let acc = fr(p[order[0]!]!);
  for (let i = 1; i < R; i++) acc = fr(acc + fr(p[order[i]!]!));
  return acc;
}

/** The K range [lo, hi) of rank r of R over a reduction of length k (contiguous, the first k mod R shards one longer). */
export function shardRange(k: number, R: number, r: number): [number, number] {
  const base = Math.floor(k / R);
  const extra = k % R;
  const lo = r * base + Math.min(r, extra);
  return [lo, lo + base + (r < extra ? 1 : 0)];
}

function sliceColumns(x: FloatArray, rows: number, k: number, lo: number, hi: number): FloatArray {
  const w = hi - lo;
  const out = allocLike(x, rows * w);
  for (let i = 0; i < rows; i++) out.set(x.subarray(i * k + lo, i * k + hi), i * w);
  return out;
}

/** A row-parallel linear: its forward as R shard GEMMs through `inner.forward`, then the all-reduce. */
function rowParallel(inner: LinearGemms, tp: TensorParallel): LinearGemms {
  const R = tp.ranks;
  const reduce = tp.reduce ?? 'ring';
  const dtype = tp.dtype ?? 'bf16';
  const bf16 = (x: number): number => round('bf16', x, { profile: 'ieee' });
  const fr = dtype === 'bf16' ? bf16 : Math.fround; // every add
  const edge = dtype === 'bf16-fp32' ? bf16 : (x: number): number => x; // the partials in, the sum out
  const shards = new WeakMap<FloatArray, FloatArray[]>(); // weight → its R shards (stable identities for the inner weight caches)
  const forward: GemmFn = (out, a, b, m, n, k) => {
    if (k < R) throw new Error(`tensorParallel: ranks ${R} exceed the reduction length ${k}`);
    let wb = shards.get(b);
    if (wb === undefined) {
      wb = Array.from({ length: R }, (_, r) => sliceColumns(b, n, k, ...shardRange(k, R, r)));
      shards.set(b, wb);
    }
    const partials = wb.map((w, r) => {
      const [lo, hi] = shardRange(k, R, r);
      const o = allocLike(out, m * n);
      inner.forward(o, sliceColumns(a, m, k, lo, hi), w, m, n, hi - lo);
      return o;
    });
    const p = new Array<number>(R);
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        for (let r = 0; r < R; r++) p[r] = edge(partials[r]![i * n + j]!);
        out[i * n + j] = edge(reducePartials(p, reduce, fr, j, n));
      }
    }
  };
  return Object.freeze({ forward, dgrad: inner.dgrad, wgrad: inner.wgrad });
}

/**
 * `inner` with the row-parallel linears of every block (attention `o`, MLP `down`) run under tensor
 * parallelism ({@link TensorParallel}); every other site, the backward GEMMs and the KV hook unchanged.
 * One rank is `inner` itself.
 *
 * @example
 * ```ts
 * const rollout = tensorParallelNumerics(numericsFor(plan.rollout), { ranks: 4, reduce: 'ring', dtype: 'bf16' });
 * ```
 */
export function tensorParallelNumerics(inner: PolicyNumerics, tp: TensorParallel): PolicyNumerics {
  if (tp.ranks === 1) return inner;
  const blocks: BlockGemms[] = [];
  const block = (layer: number): BlockGemms => {
    let g = blocks[layer];
    if (g === undefined) {
      const b = inner.block(layer);
      const mlp: MlpGemms = Object.freeze({ ...b.mlp, down: rowParallel(b.mlp.down, tp) });
      g = Object.freeze({ ...b, o: rowParallel(b.o, tp), mlp });
      blocks[layer] = g;
    }
    return g;
  };
  const label = `${inner.label}; TP ${tp.ranks} ${tp.reduce ?? 'ring'} ${tp.dtype ?? 'bf16'} all-reduce`;
  return Object.freeze({ label, block, lmHead: () => inner.lmHead(), kvHook: (l: number) => inner.kvHook(l) });
}
