// The trainer's recompute split into micro-batches (TRL / verl `micro_batch_size`): one forward per chunk of
// sequences, each chunk padded to the call's slots, the call's longest or its own longest response, so a kernel
// whose choice or scale follows the GEMM's rows sees the chunk, not the whole batch; the backward runs chunk by
// chunk and accumulates into the gradients. Not sequence packing (verl's no-padding micro-batches).

import type { PolicyNumerics } from '../numerics.js';
import { trainerPaddings, type TrainerPadding } from '../plan-schema.js';
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
  /**
   * What each chunk's sequences are padded to (a plan's `trainer.padding`, {@link TrainerPadding}); a chunk
   * trimmed to P + L_chunk columns computes no position after them, and its ℓ are scattered back to (B, L).
   * @defaultValue 'max-length' (every chunk has the call's P + L columns)
   */
  readonly padding?: TrainerPadding | undefined;
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
  /**
   * One pass per chunk of `microBatch` sequences, in batch order (one pass without chunking); a chunk's
   * `responseLength` is its padded L_chunk ≤ L.
   */
  readonly chunks: readonly TrainerLogprobs[];
}

/** Rows [b0, b0 + n) of a (B, ·) row-major array of `width` entries per row. */
function rowsOf<A extends Int32Array | Float64Array | Uint8Array>(a: A, b0: number, n: number, width: number): A {
  return a.subarray(b0 * width, (b0 + n) * width) as A;
}

/**
 * The response length of each row of a (B, L) response mask: its last slot with mask ≠ 0, plus one
 * (0 for a row with no scored slot). The rollout's responses are scored up to and including EOS, so
 * this is {@link Rollout.lengths}.
 */
export function responseLengths(responseMask: ArrayLike<number>, B: number): Int32Array {
  const L = responseMask.length / B;
  const lengths = new Int32Array(B); // (B)
  for (let b = 0; b < B; b++)
    for (let k = L - 1; k >= 0; k--)
      if (responseMask[b * L + k]) {
        lengths[b] = k + 1;
        break;
      }
  return lengths;
}

/**
 * The response columns L_chunk of each chunk [b0, b0 + n) under `padding`: L (`max-length`), the longest
 * response of the call (`longest-in-batch`) or of the chunk (`longest-in-micro-batch`), at least 1.
 */
function chunkWidths(
  lengths: Int32Array,
  L: number,
  starts: readonly number[],
  size: number,
  padding: TrainerPadding,
): number[] {
  const longest = (b0: number, b1: number): number => Math.max(1, ...lengths.subarray(b0, b1));
  const B = lengths.length;
  if (padding === 'max-length') return starts.map(() => L);
  if (padding === 'longest-in-batch') return starts.map(() => longest(0, B));
  return starts.map((b0) => longest(b0, Math.min(b0 + size, B)));
}

/** Rows [b0, b0 + n) and their first `w` of `width` columns, each column `inner` entries, of a (B, width, inner) array. */
function blockOf<A extends Int32Array | Float64Array | Uint8Array>(
  a: A,
  b0: number,
  n: number,
  width: number,
  w: number,
  inner: number,
): A {
  if (w === width) return rowsOf(a, b0, n, width * inner);
  const out = new (a.constructor as new (length: number) => A)(n * w * inner); // (n, w, inner)
  for (let b = 0; b < n; b++)
    out.set(a.subarray((b0 + b) * width * inner, ((b0 + b) * width + w) * inner), b * w * inner);
  return out;
}

/**
 * (B, L) trainer log-probs of B sequences recomputed `opts.microBatch` sequences at a time, each chunk one
 * forward of n·(P + L_chunk) rows ({@link computeLogprobs} with the chunk's rows and columns of every
 * per-sequence option: mask, support, routing replay, top-k ids), L_chunk set by `opts.padding`. A trimmed
 * chunk computes no position after P + L_chunk; its slots past L_chunk (mask 0 there) are 0 in the
 * gathered (B, L) arrays. Without `microBatch`, or with `microBatch` ≥ B, and with L_chunk = L, this is one
 * {@link computeLogprobs} of the whole batch, its arrays returned as they are.
 *
 * @example
 * ```ts
 * const c = chunkedLogprobs(policy, r.tokens, r.B, r.promptLength, r.responseMask, {
 *   numerics,
 *   microBatch: 8,
 *   padding: 'longest-in-micro-batch',
 * });
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
  const { microBatch, padding = 'max-length', ...trainer } = opts;
  if (microBatch !== undefined && (!Number.isInteger(microBatch) || microBatch < 1))
    throw new Error(`microBatch: expected a positive integer, got ${microBatch}`);
  if (!trainerPaddings.includes(padding))
    throw new Error(`padding: expected one of ${trainerPaddings.join(', ')}, got ${JSON.stringify(padding)}`);
  const T = tokens.length / B;
  const L = T - P;
  const size = microBatch === undefined || microBatch >= B ? B : microBatch;
  const starts = Array.from({ length: Math.ceil(B / size) }, (_, i) => i * size);
  const widths = chunkWidths(responseLengths(responseMask, B), L, starts, size, padding);
  if (starts.length === 1 && widths[0] === L) {
    const lp = computeLogprobs(policy, tokens, B, P, responseMask, trainer);
    return { ...gathered(lp), chunks: [lp] };
  }
  const V = policy.config.vocabSize;
  const tok = Int32Array.from(tokens); // (B, T)
  const mask = Float64Array.from(responseMask); // (B, L)
  const k = trainer.routing?.[0] === undefined ? 0 : trainer.routing[0].length / (B * T);
  const K = trainer.topk?.K ?? 0;
  const chunks = starts.map((b0, i) => {
    const n = Math.min(size, B - b0);
    const w = widths[i]!; // L_chunk
    return computeLogprobs(policy, blockOf(tok, b0, n, T, P + w, 1), n, P, blockOf(mask, b0, n, L, w, 1), {
      ...trainer,
      support: trainer.support === undefined ? undefined : blockOf(trainer.support, b0, n, L, w, V),
      routing: trainer.routing?.map((r) => blockOf(r, b0, n, T, P + w, k)),
      topk: trainer.topk === undefined ? undefined : { K, ids: blockOf(trainer.topk.ids, b0, n, L, w, K) },
    });
  });
  /** (B, L, inner) from each chunk's (n, L_chunk, inner), 0 past L_chunk. */
  const cat = (pick: (lp: TrainerLogprobs) => Float64Array | undefined, inner: number): Float64Array | undefined => {
    if (pick(chunks[0]!) === undefined) return undefined;
    const out = new Float64Array(B * L * inner); // (B, L, inner)
    chunks.forEach((c, i) => {
      const part = pick(c)!; // (n, L_chunk, inner)
      const w = c.responseLength;
      for (let b = 0; b < c.B; b++)
        out.set(part.subarray(b * w * inner, (b + 1) * w * inner), (starts[i]! + b) * L * inner);
    });
    return out;
  };
  return {
    logp: cat((c) => c.logp, 1)!,
    entropy: cat((c) => c.entropy, 1)!,
    probSqSum: cat((c) => c.probSqSum, 1),
    ...(trainer.topk !== undefined ? { topk: trainer.topk, topkLogp: cat((c) => c.topkLogp, K) } : {}),
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
  const B = c.chunks.reduce((s, lp) => s + lp.B, 0);
  const L = c.logp.length / B;
  if (c.chunks.length === 1 && c.chunks[0]!.responseLength === L) {
    backwardLogprobs(policy, c.chunks[0]!, dLdLogp, dLdTopk);
    return;
  }
  if (dLdLogp.length !== c.logp.length)
    throw new Error(`backwardLogprobs: dLdLogp must have B·L = ${c.logp.length} entries, got ${dLdLogp.length}`);
  const g = Float64Array.from(dLdLogp); // (B, L)
  const gk = dLdTopk === undefined ? undefined : Float64Array.from(dLdTopk); // (B, L, K)
  let b0 = 0;
  for (const lp of c.chunks) {
    const w = lp.responseLength; // L_chunk
    const K = lp.topk?.K ?? 0;
    backwardLogprobs(
      policy,
      lp,
      blockOf(g, b0, lp.B, L, w, 1),
      gk === undefined ? undefined : blockOf(gk, b0, lp.B, L, w, K),
    );
    b0 += lp.B;
  }
}

/**
 * Per layer, the (B, P + L, k) experts the chunked pass used (its chunks' routing, in batch order); −1 at
 * the positions a trimmed chunk did not compute (past P + L_chunk), as the rollout marks positions it never ran.
 */
export function chunkedRouting(c: ChunkedLogprobs): Int32Array[] {
  const B = c.chunks.reduce((s, lp) => s + lp.B, 0);
  const T = c.chunks[0]!.promptLength + c.logp.length / B;
  return c.chunks[0]!.cache.blocks.map((_, l) => {
    const parts = c.chunks.map((lp) => lp.cache.blocks[l]!.moe!.routing); // (n, P + L_chunk, k) each
    const k = parts[0]!.length / (c.chunks[0]!.B * (c.chunks[0]!.promptLength + c.chunks[0]!.responseLength));
    const out = new Int32Array(B * T * k).fill(-1); // (B, P + L, k)
    let b0 = 0;
    c.chunks.forEach((lp, i) => {
      const Tc = lp.promptLength + lp.responseLength;
      for (let b = 0; b < lp.B; b++) out.set(parts[i]!.subarray(b * Tc * k, (b + 1) * Tc * k), (b0 + b) * T * k);
      b0 += lp.B;
    });
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
