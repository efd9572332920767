// A transformer stack as one forward/backward pair: embedding (+ positions), the blocks, the final
// norm and the LM head, every GEMM through the given hooks. Not a policy (no sampling, no loss).

import type { FloatArray } from './array.js';
import { allocLike } from './array.js';
import {
  type BlockCache,
  type BlockConfig,
  type BlockGemms,
  type BlockWeights,
  blockBackward,
  blockForward,
  createBlockCache,
} from './block.js';
import { embeddingBackward, embeddingForward } from './embedding.js';
import type { LinearGemms } from './gemm.js';
import { linearBackward, linearForward } from './linear.js';
import { layerNormBackward, layerNormForward, rmsNormBackward, rmsNormForward } from './norm.js';

/** The tensors of a stack (weights, or their gradients with the same structure). */
export interface StackWeights {
  /** (V, C) token embedding. */
  readonly wte: FloatArray;
  /** (maxLen, C) learned positions, or null (RoPE or none). */
  readonly wpe: FloatArray | null;
  /** One record per block. */
  readonly blocks: readonly BlockWeights[];
  /** (C) final norm gain. */
  readonly lnf: FloatArray;
  /** (C) final LayerNorm shift, or null. */
  readonly lnfBias: FloatArray | null;
  /** (V, C) LM head (the same array as `wte` when tied). */
  readonly lmHead: FloatArray;
}

/** Sizes and kinds of a stack. */
export interface StackConfig {
  /** Model width C. */
  readonly C: number;
  /** Vocabulary size V. */
  readonly vocabSize: number;
  /** Final normalization. */
  readonly norm: 'layernorm' | 'rmsnorm';
  /** The block configuration shared by every block. */
  readonly block: BlockConfig;
}

/** The GEMM hooks of a stack: per block, and for the LM head. */
export interface StackGemms {
  block(layer: number): BlockGemms;
  lmHead(): LinearGemms;
}

/** What {@link stackForward} keeps for {@link stackBackward}. */
export interface StackCache {
  /** Batch size. */
  readonly B: number;
  /** Sequence length. */
  readonly T: number;
  /** (B, T) input tokens. */
  readonly tokens: ArrayLike<number>;
  /** layers + 1 residual streams (B, T, C): x[0] is the embedding, x[l + 1] the output of block l. */
  readonly x: readonly FloatArray[];
  /** Per-block caches. */
  readonly blocks: readonly BlockCache[];
  /** (B·T) final LayerNorm means (unused by RMSNorm). */
  readonly lnfMean: FloatArray;
  /** (B·T) final norm rstd. */
  readonly lnfRstd: FloatArray;
  /** (B, T, C) final norm output, the LM head's input. */
  readonly xf: FloatArray;
  /** (B, T, V) logits. */
  readonly logits: FloatArray;
}

/**
 * Forward over (B, T) tokens to logits (B, T, V). Buffers have the element type of `w.wte`
 * (Float32Array: the simulator; Float64Array: gradient checks).
 *
 * @param replay - MoE only: per block, (B, T, k) experts to use instead of the router's top-k
 * (routing replay; a row of −1 keeps the own top-k), or null/absent for none
 */
export function stackForward(
  w: StackWeights,
  cfg: StackConfig,
  tokens: ArrayLike<number>,
  B: number,
  T: number,
  gemms: StackGemms,
  replay: readonly (Int32Array | null)[] | null = null,
): StackCache {
  if (replay !== null && replay.length !== w.blocks.length)
    throw new Error(`stack: replay must hold one routing per block (${w.blocks.length}), got ${replay.length}`);
  const { C, vocabSize: V } = cfg;
  const N = B * T;
  const like = w.wte;
  const x: FloatArray[] = [allocLike(like, N * C)]; // (B, T, C) each
  embeddingForward(x[0]!, tokens, w.wte, w.wpe, B, T, C, V);
  const blocks: BlockCache[] = [];
  for (let l = 0; l < w.blocks.length; l++) {
    const cache = createBlockCache(like, B, T, cfg.block);
    const out = allocLike(like, N * C); // (B, T, C)
    blockForward(out, cache, x[l]!, w.blocks[l]!, B, T, cfg.block, gemms.block(l), replay?.[l] ?? null);
    blocks.push(cache);
    x.push(out);
  }
  const lnfMean = allocLike(like, N); // (N)
  const lnfRstd = allocLike(like, N); // (N)
  const xf = allocLike(like, N * C); // (B, T, C)
  const last = x[w.blocks.length]!;
  if (cfg.norm === 'layernorm') layerNormForward(xf, lnfMean, lnfRstd, last, w.lnf, w.lnfBias, N, C);
  else rmsNormForward(xf, lnfRstd, last, w.lnf, N, C);
  const logits = allocLike(like, N * V); // (B, T, V)
  linearForward(logits, xf, w.lmHead, null, N, C, V, gemms.lmHead());
  return { B, T, tokens, x, blocks, lnfMean, lnfRstd, xf, logits };
}

/**
 * Backward of {@link stackForward} from `dlogits` (B, T, V), accumulating (`+=`) into `g` (gradient
 * views with the structure of `w`; with a tied head, the head's gradient lands in `g.wte` too).
 */
export function stackBackward(
  g: StackWeights,
  w: StackWeights,
  cfg: StackConfig,
  cache: StackCache,
  dlogits: FloatArray,
  gemms: StackGemms,
): void {
  const { C, vocabSize: V } = cfg;
  const { B, T } = cache;
  const N = B * T;
  const layers = w.blocks.length;
  const like = g.wte;
  const dxf = allocLike(like, N * C); // (B, T, C)
  linearBackward(dxf, g.lmHead, null, dlogits, cache.xf, w.lmHead, N, C, V, gemms.lmHead());
  let dx = allocLike(like, N * C); // (B, T, C) gradient of the last residual stream
  if (cfg.norm === 'layernorm')
    layerNormBackward(dx, g.lnf, g.lnfBias, dxf, cache.x[layers]!, w.lnf, cache.lnfMean, cache.lnfRstd, N, C);
  else rmsNormBackward(dx, g.lnf, dxf, cache.x[layers]!, w.lnf, cache.lnfRstd, N, C);
  for (let l = layers - 1; l >= 0; l--) {
    const dinp = allocLike(like, N * C); // (B, T, C)
    blockBackward(dinp, g.blocks[l]!, dx, cache.blocks[l]!, cache.x[l]!, w.blocks[l]!, B, T, cfg.block, gemms.block(l));
    dx = dinp;
  }
  embeddingBackward(g.wte, g.wpe, dx, cache.tokens, B, T, C);
}
