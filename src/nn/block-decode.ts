// Single-position forward of a transformer block over a per-layer K/V cache, for token-by-token
// rollouts. Not differentiable (forward only) and not a cache manager (the caller owns the buffers).

import { allocLike, type FloatArray } from './array.js';
import type { AttentionOptions } from './attention.js';
import { attentionDecodeAppend, attentionDecodeForward } from './attention-decode.js';
import { sequentialBlockGemms, type BlockConfig, type BlockGemms, type BlockWeights } from './block.js';
import { linearForward } from './linear.js';
import { mlpForward, createMlpCache } from './mlp.js';
import { createMoeCache, moeForward, sequentialMoeGemms } from './moe.js';
import { layerNormForward, rmsNormForward } from './norm.js';
import { residualForward } from './residual.js';

/**
 * Called after the decode step wrote row `t` of the K and V caches (B, tCap, C) and before attention
 * reads them; it may round that row in place (e.g. an FP8 KV cache).
 */
export type KvCacheHook = (
  kCache: FloatArray,
  vCache: FloatArray,
  t: number,
  B: number,
  tCap: number,
  C: number,
) => void;

/** The K/V cache of one block: (B, tCap, C) roped keys and values. */
export interface BlockKvCache {
  /** (B, tCap, C) keys after RoPE. */
  readonly k: FloatArray;
  /** (B, tCap, C) values. */
  readonly v: FloatArray;
  /** Capacity tCap (maximum sequence length). */
  readonly tCap: number;
}

/** Allocates an empty {@link BlockKvCache} of the element type of `like`. */
export function createBlockKvCache(like: FloatArray, B: number, tCap: number, C: number): BlockKvCache {
  return { k: allocLike(like, B * tCap * C), v: allocLike(like, B * tCap * C), tCap };
}

/**
 * Block forward for the single position `tPast` of each of B sequences: the same layers, GEMM sites
 * and rounding points as {@link blockForward}, with attention over the cached rows [0, tPast] after
 * appending this position's key and value. With sequential GEMMs the output equals row `tPast` of
 * the full causal {@link blockForward} bit for bit.
 *
 * @param out - (B, C)
 * @param kv - the block's cache; row tPast is written
 * @param inp - (B, C) the residual stream at position tPast
 * @param tPast - number of tokens already cached
 * @param kvHook - optional rounding of the freshly written cache row
 * @param routingOut - MoE only: receives the (B, k) experts chosen at this position
 * @param replay - MoE only: (B, k) experts to use instead of the router's top-k, or null
 */
export function blockDecodeForward(
  out: FloatArray,
  kv: BlockKvCache,
  inp: FloatArray,
  w: BlockWeights,
  tPast: number,
  B: number,
  cfg: BlockConfig,
  gemms: BlockGemms = sequentialBlockGemms,
  kvHook?: KvCacheHook,
  routingOut?: Int32Array,
  replay: Int32Array | null = null,
): void {
  if (!cfg.causal) throw new Error('blockDecodeForward: cfg.causal must be true for incremental decoding, got false');
  const { C, H } = cfg;
  const eps = cfg.eps ?? 1e-5;
  const a = (n: number): FloatArray => allocLike(inp, n);
  const stat = a(B); // (B) mean, unused by RMSNorm
  const rstd = a(B); // (B)
  const norm = (o: FloatArray, x: FloatArray, g: FloatArray, b: FloatArray | null): void => {
    if (cfg.norm === 'layernorm') layerNormForward(o, stat, rstd, x, g, b, B, C, eps);
    else rmsNormForward(o, rstd, x, g, B, C, eps);
  };
  const opts: AttentionOptions = {
    causal: true,
    rope: cfg.rope,
    ropeBase: cfg.ropeBase ?? 10000,
    gemms: gemms.attention,
  };
  const ln1 = a(B * C); // (B, C)
  norm(ln1, inp, w.ln1, w.ln1Bias);
  const q = a(B * C); // (B, C)
  const k = a(B * C); // (B, C)
  const v = a(B * C); // (B, C)
  linearForward(q, ln1, w.wq, w.bq, B, C, C, gemms.q);
  linearForward(k, ln1, w.wk, w.bk, B, C, C, gemms.k);
  linearForward(v, ln1, w.wv, w.bv, B, C, C, gemms.v);
  attentionDecodeAppend(kv.k, kv.v, k, v, tPast, B, kv.tCap, C, H, opts);
  kvHook?.(kv.k, kv.v, tPast, B, kv.tCap, C);
  const att = a(B * C); // (B, C)
  attentionDecodeForward(att, null, q, kv.k, kv.v, tPast + 1, B, kv.tCap, C, H, opts);
  const proj = a(B * C); // (B, C)
  linearForward(proj, att, w.wo, w.bo, B, C, C, gemms.o);
  const x1 = a(B * C); // (B, C)
  residualForward(x1, inp, proj, B * C);
  const ln2 = a(B * C); // (B, C)
  norm(ln2, x1, w.ln2, w.ln2Bias);
  const m = a(B * C); // (B, C)
  if (cfg.moe) {
    if (!w.moe) throw new Error('blockDecodeForward: cfg.moe is set but the weights have no moe part');
    const mc = { experts: cfg.moe.experts, topK: cfg.moe.topK, kind: cfg.mlp };
    const cache = createMoeCache(inp, B, mc);
    moeForward(
      m,
      cache,
      ln2,
      w.moe,
      B,
      C,
      cfg.hidden,
      mc,
      { router: gemms.router ?? sequentialMoeGemms.router, expert: gemms.mlp },
      replay,
    );
    routingOut?.set(cache.routing);
  } else {
    if (!w.mlp) throw new Error('blockDecodeForward: cfg.moe is null but the weights have no mlp part');
    if (replay !== null) throw new Error('blockDecodeForward: a routing replay needs cfg.moe, got null');
    mlpForward(m, createMlpCache(inp, B, cfg.hidden, cfg.mlp), ln2, w.mlp, B, C, cfg.hidden, cfg.mlp, gemms.mlp);
  }
  residualForward(out, x1, m, B * C);
}
