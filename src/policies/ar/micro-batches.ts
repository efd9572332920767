// The trainer's recompute split into micro-batches (TRL / verl `micro_batch_size`): one forward per chunk of
// sequences, so a kernel whose choice or scale follows the GEMM's rows sees the chunk, not the whole batch; the
// backward runs chunk by chunk and accumulates into the gradients. Not padding (sequences share one length here).

import type { PolicyNumerics } from '../numerics.js';
import { backwardLogprobs, computeLogprobs, type TrainerLogprobOptions, type TrainerLogprobs } from './logprobs.js';
import type { ArPolicy } from './model.js';

/** The batch a micro-batched recompute scores: (B, P + L) tokens and the (B, L) response mask. */
export interface RecomputeBatch {
  /** (B, P + L) prompt then response tokens. */
  readonly tokens: ArrayLike<number>;
  /** Sequences. */
  readonly B: number;
  /** Prompt length. */
  readonly P: number;
  /** (B, L) 1 for response tokens to score. */
  readonly responseMask: ArrayLike<number>;
}

/** Options of {@link chunkedLogprobs}: the trainer's options and the micro-batch size. */
export interface ChunkedLogprobOptions extends TrainerLogprobOptions {
  /**
   * Sequences per forward (a plan's `trainer.microBatch`); the last chunk may be shorter.
   * @defaultValue absent (one forward of the whole batch)
   */
  readonly microBatch?: number | undefined;
}

/** The trainer log-probs of a batch recomputed in chunks, gathered back to (B, L), and each chunk's pass. */
export interface ChunkedLogprobs {
  /** (B, L) ℓ, 0 where the mask is 0. */
  readonly logp: Float64Array;
  /** (B, L) entropy (a metric). */
  readonly entropy: Float64Array;
  /** (B, L) Σ_v π(v)², when asked. */
  readonly probSqSum?: Float64Array | undefined;
  /** (B, L, K) ℓ at the engine's top-k ids, when `topk` was given. */
  readonly topkLogp?: Float64Array | undefined;
  /** The top-k ids scored, when `topk` was given. */
  readonly topk?: { readonly K: number; readonly ids: Int32Array } | undefined;
  /** One pass per chunk of `microBatch` sequences, in batch order (one pass without chunking). */
  readonly chunks: readonly TrainerLogprobs[];
}

/** Rows [b0, b0 + n) of a (B, ·) row-major array of `width` entries per row. */
function rowsOf<A extends Int32Array | Float64Array | Uint8Array>(a: A, b0: number, n: number, width: number): A {
  return a.subarray(b0 * width, (b0 + n) * width) as A;
}

/**
 * (B, L) trainer log-probs of B sequences recomputed `opts.microBatch` sequences at a time, each chunk one
 * forward of microBatch·T rows ({@link computeLogprobs} with the chunk's rows of every per-sequence
 * option: mask, support, routing replay, top-k ids). Without `microBatch`, or with `microBatch` ≥ B, this
 * is one {@link computeLogprobs} of the whole batch, its arrays returned as they are.
 *
 * @example
 * ```ts
 * const c = chunkedLogprobs(policy, r.tokens, r.B, r.promptLength, r.responseMask, { numerics, microBatch: 8 });
 * ```
 */
export function chunkedLogprobs(
  policy: ArPolicy,
  tokens: ArrayLike<number>,
  B: number,
  P: number,
  responseMask: ArrayLike<number>,
  opts: ChunkedLogprobOptions,
): ChunkedLogprobs {
  const { microBatch, ...trainer } = opts;
  if (microBatch !== undefined && (!Number.isInteger(microBatch) || microBatch < 1))
    throw new Error(`microBatch: expected a positive integer, got ${microBatch}`);
  if (microBatch === undefined || microBatch >= B) {
    const lp = computeLogprobs(policy, tokens, B, P, responseMask, trainer);
    return { ...gathered(lp), chunks: [lp] };
  }
  const T = tokens.length / B;
  const L = T - P;
  const V = policy.config.vocabSize;
  const tok = Int32Array.from(tokens); // (B, T)
  const mask = Float64Array.from(responseMask); // (B, L)
  const chunks: TrainerLogprobs[] = [];
  for (let b0 = 0; b0 < B; b0 += microBatch) {
    const n = Math.min(microBatch, B - b0);
    const k = trainer.routing?.[0] === undefined ? 0 : trainer.routing[0].length / (B * T);
    const K = trainer.topk?.K ?? 0;
    chunks.push(
      computeLogprobs(policy, rowsOf(tok, b0, n, T), n, P, rowsOf(mask, b0, n, L), {
        ...trainer,
        support: trainer.support === undefined ? undefined : rowsOf(trainer.support, b0, n, L * V),
        routing: trainer.routing?.map((r) => rowsOf(r, b0, n, T * k)),
        topk: trainer.topk === undefined ? undefined : { K, ids: rowsOf(trainer.topk.ids, b0, n, L * K) },
      }),
    );
  }
  const cat = (pick: (lp: TrainerLogprobs) => Float64Array | undefined): Float64Array | undefined => {
    if (pick(chunks[0]!) === undefined) return undefined;
    const out = new Float64Array(chunks.reduce((s, c) => s + pick(c)!.length, 0));
    let at = 0;
    for (const c of chunks) {
      out.set(pick(c)!, at);
      at += pick(c)!.length;
    }
    return out;
  };
  return {
    logp: cat((c) => c.logp)!,
    entropy: cat((c) => c.entropy)!,
    probSqSum: cat((c) => c.probSqSum),
    ...(trainer.topk !== undefined ? { topk: trainer.topk, topkLogp: cat((c) => c.topkLogp) } : {}),
    chunks,
  };
}

/** The whole-batch fields of one pass. */
function gathered(lp: TrainerLogprobs): Omit<ChunkedLogprobs, 'chunks'> {
  return {
    logp: lp.logp,
    entropy: lp.entropy,
    probSqSum: lp.probSqSum,
    ...(lp.topk !== undefined ? { topk: lp.topk, topkLogp: lp.topkLogp } : {}),
  };
}

/**
 * Accumulates into `policy.params.grads` the gradient of Σ dLdLogp·ℓ over a chunked pass: one
 * {@link backwardLogprobs} per chunk with its rows of the coefficients (gradient accumulation over
 * micro-batches; with one chunk, exactly the whole-batch backward).
 *
 * @param dLdLogp - (B, L) dL/dℓ per token
 * @param dLdTopk - (B, L, K) dL/dℓ at the top-k ids, when the pass scored them
 */
export function backwardChunked(
  policy: ArPolicy,
  c: ChunkedLogprobs,
  dLdLogp: ArrayLike<number>,
  dLdTopk?: ArrayLike<number>,
): void {
  if (c.chunks.length === 1) {
    backwardLogprobs(policy, c.chunks[0]!, dLdLogp, dLdTopk);
    return;
  }
  if (dLdLogp.length !== c.logp.length)
    throw new Error(`backwardLogprobs: dLdLogp must have B·L = ${c.logp.length} entries, got ${dLdLogp.length}`);
  const g = Float64Array.from(dLdLogp);
  const gk = dLdTopk === undefined ? undefined : Float64Array.from(dLdTopk);
  let at = 0;
  let atK = 0;
  for (const lp of c.chunks) {
    const n = lp.B * lp.responseLength;
    const nK = n * (lp.topk?.K ?? 0);
    backwardLogprobs(policy, lp, g.subarray(at, at + n), gk?.subarray(atK, atK + nK));
    at += n;
    atK += nK;
  }
}

/** Per layer, the (B, P + L, k) experts the chunked pass used (its chunks' routing, in batch order). */
export function chunkedRouting(c: ChunkedLogprobs): Int32Array[] {
  const blocks = c.chunks[0]!.cache.blocks;
  return blocks.map((_, l) => {
    const parts = c.chunks.map((lp) => lp.cache.blocks[l]!.moe!.routing);
    const out = new Int32Array(parts.reduce((s, p) => s + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  });
}

/**
 * (B, L) trainer log-probs of B sequences recomputed `microBatch` sequences at a time ({@link chunkedLogprobs}
 * with only the numerics); with `microBatch` ≥ B this is {@link computeLogprobs} bit for bit.
 */
export function microBatchedLogprobs(
  policy: ArPolicy,
  batch: RecomputeBatch,
  numerics: PolicyNumerics,
  microBatch: number,
): Float64Array {
  if (!Number.isInteger(microBatch) || microBatch < 1)
    throw new Error(`microBatch: expected a positive integer, got ${microBatch}`);
  return chunkedLogprobs(policy, batch.tokens, batch.B, batch.P, batch.responseMask, { numerics, microBatch }).logp;
}

/**
 * The share of scored tokens whose ratio exp(ℓa − ℓb) lies outside [lo, hi], and the mean ratio (TRL #6789
 * reports the share outside [0.9, 1.1] between micro-batch chunk 1 and 8).
 */
export function ratioOutside(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  mask: ArrayLike<number>,
  lo = 0.9,
  hi = 1.1,
): { readonly share: number; readonly meanRatio: number; readonly tokens: number } {
  let n = 0;
  let out = 0;
  let sum = 0;
  for (let i = 0; i < a.length; i++) {
    if (!mask[i]) continue;
    const r = Math.exp((a[i] as number) - (b[i] as number));
    n++;
    sum += r;
    if (r < lo || r > hi) out++;
  }
  return { share: n === 0 ? 0 : out / n, meanRatio: n === 0 ? 1 : sum / n, tokens: n };
}
