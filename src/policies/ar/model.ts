// The causal toy transformer: token batches (B, T) → logits (B, T, V) with caches, the backward from
// dlogits into the parameter gradients, and the KV-cache prefill/decode step. Not a sampler or a loss.

import { allocLike, type FloatArray } from '../../nn/array.js';
import { blockDecodeForward, createBlockKvCache, type BlockKvCache } from '../../nn/block-decode.js';
import { blockWeights, type BlockConfig } from '../../nn/block.js';
import { createParamStore, type ParamLayout } from '../../nn/params.js';
import { embeddingForward } from '../../nn/embedding.js';
import { outlierChannels } from '../../nn/outliers.js';
import { layerNormForward, rmsNormForward } from '../../nn/norm.js';
import { linearForward } from '../../nn/linear.js';
import { stackBackward, stackForward, type StackCache, type StackConfig, type StackWeights } from '../../nn/stack.js';
import type { PolicyNumerics } from '../numerics.js';
import { arBlockConfig, arParamSpecs, validateArConfig, type ArConfig } from './config.js';

/** Parameters and gradients laid out by one {@link ParamLayout} (a `ParamStore` is one; the gradient checks use float64 buffers). */
export interface ParamBuffers {
  /** Names, offsets, shapes. */
  readonly layout: ParamLayout;
  /** (size) weights. */
  readonly data: FloatArray;
  /** (size) gradients, same layout. */
  readonly grads: FloatArray;
}

/** Named views of the policy's tensors (weights or gradients): the {@link StackWeights} of the nn core. */
export type ArWeights = StackWeights;

function arWeights(cfg: ArConfig, layout: ParamLayout, buffer: FloatArray): ArWeights {
  const get = (name: string): FloatArray | null => (layout.has(name) ? layout.view(buffer, name) : null);
  const req = (name: string): FloatArray => {
    const v = get(name);
    if (!v) throw new Error(`ar policy: missing parameter ${JSON.stringify(name)}`);
    return v;
  };
  const wte = req('wte');
  return {
    wte,
    wpe: get('wpe'),
    blocks: Array.from({ length: cfg.layers }, (_, l) => blockWeights(`h${l}`, get)),
    lnf: req('lnf.weight'),
    lnfBias: get('lnf.bias'),
    lmHead: cfg.tiedEmbeddings ? wte : req('lmHead'),
  };
}

/**
 * The autoregressive toy policy: a config and its parameters. The weight views are made once, so
 * their identities are stable (a {@link PolicyNumerics} may cache rounded weights by identity).
 *
 * @example
 * ```ts
 * const policy = createArPolicy(arConfig({ vocabSize: 13, maxLen: 15 }), 42);
 * ```
 */
export class ArPolicy {
  /** Hyper-parameters. */
  readonly config: ArConfig;
  /** The block configuration shared by all blocks. */
  readonly blockConfig: BlockConfig;
  /** Weights and gradients. */
  readonly params: ParamBuffers;
  /** Views of the weights. */
  readonly weights: ArWeights;
  /** Views of the gradients (same structure). */
  readonly gradients: ArWeights;

  /** Wraps parameter buffers laid out by {@link arParamSpecs}`(config)`. */
  constructor(config: ArConfig, params: ParamBuffers) {
    validateArConfig(config);
    const expected = arParamSpecs(config);
    const names = params.layout.entries.map((e) => e.name);
    if (
      names.length !== expected.length ||
      expected.some((s, i) => s.name !== names[i] || s.shape.join() !== params.layout.entries[i]!.shape.join())
    ) {
      throw new Error(
        `ar policy: params layout does not match the config (expected ${expected.map((s) => `${s.name}[${s.shape.join('x')}]`).join(', ')})`,
      );
    }
    this.config = config;
    this.blockConfig = arBlockConfig(config);
    this.params = params;
    this.weights = arWeights(config, params.layout, params.data);
    this.gradients = arWeights(config, params.layout, params.grads);
  }
}

/**
 * A policy with a fresh `ParamStore` (FP32 master weights) initialized from `seed`. With
 * `config.outliers` > 0, the gains of the outlier channels ({@link outlierChannels}) in every norm
 * that feeds a linear layer (each block's two norms and the final norm) start at
 * `config.outlierMagnitude` (default 20) instead of 1, so those channels of every GEMM input are
 * ≈ that many times the others (docs/policies.md, "Outlier channels").
 */
export function createArPolicy(config: ArConfig, seed: number | string): ArPolicy {
  const policy = new ArPolicy(config, createParamStore(arParamSpecs(config), seed));
  if (config.outliers) {
    const gain = Math.fround(config.outlierMagnitude ?? 20);
    const w = policy.weights;
    const gains = [...w.blocks.flatMap((b) => [b.ln1, b.ln2]), w.lnf];
    for (const c of outlierChannels(config.C, config.outliers)) for (const g of gains) g[c] = gain;
  }
  return policy;
}

/** What {@link arForward} keeps for {@link arBackward}: the stack's caches (logits (B, T, V): row (b, t) predicts token t + 1). */
export type ArForwardCache = StackCache;

function stackConfig(policy: ArPolicy): StackConfig {
  return {
    C: policy.config.C,
    vocabSize: policy.config.vocabSize,
    norm: policy.config.norm,
    block: policy.blockConfig,
  };
}

function finalNormForward(
  cfg: ArConfig,
  out: FloatArray,
  mean: FloatArray,
  rstd: FloatArray,
  inp: FloatArray,
  w: ArWeights,
  N: number,
): void {
  if (cfg.norm === 'layernorm') layerNormForward(out, mean, rstd, inp, w.lnf, w.lnfBias, N, cfg.C);
  else rmsNormForward(out, rstd, inp, w.lnf, N, cfg.C);
}

function checkTokens(policy: ArPolicy, B: number, T: number): void {
  if (!Number.isInteger(B) || B < 1) throw new Error(`ar forward: B must be a positive integer, got ${B}`);
  if (!Number.isInteger(T) || T < 1 || T > policy.config.maxLen)
    throw new Error(`ar forward: T must be an integer in [1, maxLen=${policy.config.maxLen}], got ${T}`);
}

/**
 * Full-sequence forward: embedding (+ learned positions), the blocks, the final norm and the LM head,
 * every GEMM through `numerics`.
 *
 * @param tokens - (B, T) token ids
 * @param replay - MoE only: per layer, (B, T, k) experts to replay (a row of −1: the own top-k), or null
 * @returns the caches, with the logits (B, T, V) (and, with MoE, each block's routing used)
 */
export function arForward(
  policy: ArPolicy,
  tokens: ArrayLike<number>,
  B: number,
  T: number,
  numerics: PolicyNumerics,
  replay: readonly Int32Array[] | null = null,
): ArForwardCache {
  checkTokens(policy, B, T);
  return stackForward(policy.weights, stackConfig(policy), tokens, B, T, numerics, replay);
}

/**
 * Backward of {@link arForward} from `dlogits` (B, T, V), accumulating into `policy.params.grads`
 * (zero them first). With tied embeddings the LM head's gradient lands in `wte` as well.
 */
export function arBackward(
  policy: ArPolicy,
  cache: ArForwardCache,
  dlogits: FloatArray,
  numerics: PolicyNumerics,
): void {
  stackBackward(policy.gradients, policy.weights, stackConfig(policy), cache, dlogits, numerics);
}

/** Per-layer KV caches of a batch being decoded and the number of positions already cached. */
export interface ArDecodeState {
  /** Batch size. */
  readonly B: number;
  /** Capacity (longest sequence). */
  readonly tCap: number;
  /** One (B, tCap, C) K/V cache per block. */
  readonly kv: readonly BlockKvCache[];
  /** Positions cached so far (the next token's position). */
  t: number;
}

/** Empty KV caches for B sequences of at most `tCap` ≤ maxLen tokens. */
export function createDecodeState(policy: ArPolicy, B: number, tCap: number): ArDecodeState {
  checkTokens(policy, B, tCap);
  const like = policy.params.data;
  const kv = Array.from({ length: policy.config.layers }, () => createBlockKvCache(like, B, tCap, policy.config.C));
  return { B, tCap, kv, t: 0 };
}

/** Final norm and LM head of B single rows: (B, C) → logits (B, V). */
function headRows(policy: ArPolicy, h: FloatArray, B: number, numerics: PolicyNumerics): FloatArray {
  const { C, vocabSize: V } = policy.config;
  const like = policy.params.data;
  const xf = allocLike(like, B * C); // (B, C)
  finalNormForward(policy.config, xf, allocLike(like, B), allocLike(like, B), h, policy.weights, B);
  const logits = allocLike(like, B * V); // (B, V)
  linearForward(logits, xf, policy.weights.lmHead, null, B, C, V, numerics.lmHead());
  return logits;
}

/**
 * Prefill: a full forward over the prompts (B, P) — the batched prompt pass of an inference engine —
 * whose roped keys and values become rows [0, P) of the KV caches (each row then passes the
 * numerics' `kvHook`). Returns the logits (B, V) of the last prompt position.
 */
export function arPrefill(
  policy: ArPolicy,
  state: ArDecodeState,
  prompts: ArrayLike<number>,
  P: number,
  numerics: PolicyNumerics,
  routingOut?: readonly Int32Array[],
): FloatArray {
  if (state.t !== 0) throw new Error(`arPrefill: state.t must be 0 (empty caches), got ${state.t}`);
  if (!Number.isInteger(P) || P < 1 || P > state.tCap)
    throw new Error(`arPrefill: P must be an integer in [1, ${state.tCap}], got ${P}`);
  const { B, tCap } = state;
  const { C, vocabSize: V } = policy.config;
  const cache = arForward(policy, prompts, B, P, numerics);
  for (let l = 0; l < policy.config.layers; l++) {
    const kv = state.kv[l]!;
    const bc = cache.blocks[l]!;
    for (let b = 0; b < B; b++) {
      kv.k.set(bc.attention.k.subarray(b * P * C, (b + 1) * P * C), b * tCap * C);
      kv.v.set(bc.v.subarray(b * P * C, (b + 1) * P * C), b * tCap * C);
    }
    const hook = numerics.kvHook(l);
    if (hook) for (let t = 0; t < P; t++) hook(kv.k, kv.v, t, B, tCap, C);
    const routing = bc.moe?.routing;
    const out = routingOut?.[l];
    if (routing && out) {
      const k = routing.length / (B * P);
      for (let b = 0; b < B; b++) out.set(routing.subarray(b * P * k, (b + 1) * P * k), b * tCap * k); // (B, P, k) → rows [0, P) of (B, tCap, k)
    }
  }
  state.t = P;
  const logits = allocLike(policy.params.data, B * V); // (B, V)
  for (let b = 0; b < B; b++) logits.set(cache.logits.subarray((b * P + P - 1) * V, (b * P + P) * V), b * V);
  return logits;
}

/**
 * One incremental decode step: the tokens (B) at position `state.t` go through every block over the
 * KV caches (`blockDecodeForward`, with the numerics' `kvHook`), the final norm and the LM head.
 * Returns the logits (B, V) predicting position `state.t + 1`, and advances `state.t`.
 *
 * @param routingOut - MoE only: one (B, tCap, k) array per layer; row `state.t` receives the experts chosen at this position
 */
export function arDecodeStep(
  policy: ArPolicy,
  state: ArDecodeState,
  tokens: ArrayLike<number>,
  numerics: PolicyNumerics,
  routingOut?: readonly Int32Array[],
): FloatArray {
  const { B, tCap } = state;
  const t = state.t;
  if (t >= tCap) throw new Error(`arDecodeStep: the caches are full (tCap=${tCap})`);
  const cfg = policy.config;
  const w = policy.weights;
  const { C, vocabSize: V } = cfg;
  const like = policy.params.data;
  let h = allocLike(like, B * C); // (B, C)
  embeddingForward(h, tokens, w.wte, w.wpe ? w.wpe.subarray(t * C, (t + 1) * C) : null, B, 1, C, V);
  const k = policy.blockConfig.moe?.topK ?? 0;
  const step = routingOut && k > 0 ? new Int32Array(B * k) : undefined; // (B, k)
  for (let l = 0; l < cfg.layers; l++) {
    const out = allocLike(like, B * C); // (B, C)
    blockDecodeForward(
      out,
      state.kv[l]!,
      h,
      w.blocks[l]!,
      t,
      B,
      policy.blockConfig,
      numerics.block(l),
      numerics.kvHook(l) ?? undefined,
      step,
    );
    if (step && routingOut)
      for (let b = 0; b < B; b++) routingOut[l]!.set(step.subarray(b * k, (b + 1) * k), (b * tCap + t) * k);
    h = out;
  }
  state.t = t + 1;
  return headRows(policy, h, B, numerics);
}
