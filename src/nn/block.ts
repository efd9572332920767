// Pre-norm transformer block x += attn(norm1(x)); x += mlp(norm2(x)) as one forward/backward pair.
// Not a whole model: embeddings, the final norm and the LM head belong to the policies.

import { allocLike, type FloatArray } from './array.js';
import { sequentialLinearGemms, type LinearGemms } from './gemm.js';
import { linearBackward, linearForward, roundedInputT } from './linear.js';
import { layerNormBackward, layerNormForward, rmsNormBackward, rmsNormForward } from './norm.js';
import {
  attentionBackward,
  attentionForward,
  createAttentionCache,
  sequentialAttentionGemms,
  type AttentionCache,
  type AttentionGemms,
  type AttentionOptions,
} from './attention.js';
import {
  createMlpCache,
  mlpBackward,
  mlpForward,
  sequentialMlpGemms,
  type MlpCache,
  type MlpGemms,
  type MlpKind,
  type MlpWeights,
} from './mlp.js';
import {
  createMoeCache,
  moeAuxLoss,
  moeBackward,
  moeForward,
  sequentialMoeGemms,
  type MoeCache,
  type MoeWeights,
} from './moe.js';
import { residualBackward, residualForward } from './residual.js';
import { GPT2_INIT, type ParamSpec } from './params.js';

/** Hyper-parameters of a {@link blockForward} block. */
export interface BlockConfig {
  /** Model width C. */
  readonly C: number;
  /** Number of heads H (divides C). */
  readonly H: number;
  /** MLP hidden width Hd (GPT-2: 4C). */
  readonly hidden: number;
  /** Normalization before attention and MLP. */
  readonly norm: 'layernorm' | 'rmsnorm';
  /** MLP nonlinearity. */
  readonly mlp: MlpKind;
  /** Whether the linear layers (and LayerNorm) have biases. */
  readonly bias: boolean;
  /** Causal (AR) or bidirectional (masked diffusion) attention. */
  readonly causal: boolean;
  /** Rotary position embedding in attention. */
  readonly rope: boolean;
  /** RoPE base. @defaultValue 10000 */
  readonly ropeBase?: number;
  /** Norm epsilon. @defaultValue 1e-5 */
  readonly eps?: number;
  /**
   * Mixture-of-experts feed-forward in place of the dense MLP: E experts of width `hidden` (kind
   * `mlp`), top-k routing, load-balancing coefficient α (see moe.ts). Null or absent: dense MLP.
   */
  readonly moe?: BlockMoeConfig | null;
}

/** The MoE option of a block. */
export interface BlockMoeConfig {
  /** Number of experts E (≥ 1). */
  readonly experts: number;
  /** Experts per token k (1 ≤ k ≤ E). */
  readonly topK: number;
  /** Weight α of the Switch load-balancing loss in the objective (0: none). */
  readonly auxCoeff: number;
}

/** Weights (or gradients, same shapes) of one block; null where the config has no such tensor. */
export interface BlockWeights {
  /** (C) norm1 gain. */
  readonly ln1: FloatArray;
  /** (C) norm1 shift (LayerNorm with bias only). */
  readonly ln1Bias: FloatArray | null;
  /** (C, C) query projection. */
  readonly wq: FloatArray;
  /** (C) or null. */
  readonly bq: FloatArray | null;
  /** (C, C) key projection. */
  readonly wk: FloatArray;
  /** (C) or null. */
  readonly bk: FloatArray | null;
  /** (C, C) value projection. */
  readonly wv: FloatArray;
  /** (C) or null. */
  readonly bv: FloatArray | null;
  /** (C, C) attention output projection (a residual projection). */
  readonly wo: FloatArray;
  /** (C) or null. */
  readonly bo: FloatArray | null;
  /** (C) norm2 gain. */
  readonly ln2: FloatArray;
  /** (C) norm2 shift or null. */
  readonly ln2Bias: FloatArray | null;
  /** The MLP weights (null with an MoE feed-forward). */
  readonly mlp: MlpWeights | null;
  /** The MoE weights (absent or null with a dense MLP). */
  readonly moe?: MoeWeights | null;
}

/** The GEMM sites of a block (q, k, v, o projections, MLP, attention QKᵀ/PV). */
export interface BlockGemms {
  /** Query projection. */
  readonly q: LinearGemms;
  /** Key projection. */
  readonly k: LinearGemms;
  /** Value projection. */
  readonly v: LinearGemms;
  /** Output projection. */
  readonly o: LinearGemms;
  /** MLP projections. */
  readonly mlp: MlpGemms;
  /** Attention products. */
  readonly attention: AttentionGemms;
  /** MoE router (experts use `mlp`). @defaultValue sequential */
  readonly router?: LinearGemms;
}

/** The default {@link BlockGemms}: sequential everywhere. */
export const sequentialBlockGemms: BlockGemms = Object.freeze({
  q: sequentialLinearGemms,
  k: sequentialLinearGemms,
  v: sequentialLinearGemms,
  o: sequentialLinearGemms,
  mlp: sequentialMlpGemms,
  attention: sequentialAttentionGemms,
});

/**
 * Parameter declarations of one block named `${prefix}.…`, GPT-2 initialized: matrices normal(0, 0.02),
 * residual projections (`attn.wo`, `mlp.down`) normal(0, 0.02/√(2·nLayer)), norm gains 1, biases 0.
 *
 * @example
 * ```ts
 * const specs = blockParamSpecs('h0', { C: 32, H: 4, hidden: 128, norm: 'layernorm', mlp: 'gelu', bias: true, causal: true, rope: false }, 2);
 * ```
 */
export function blockParamSpecs(prefix: string, cfg: BlockConfig, nLayer: number): ParamSpec[] {
  const { C, hidden: Hd } = cfg;
  const w = { kind: 'normal', std: GPT2_INIT.std } as const;
  const wRes = { kind: 'normal', std: GPT2_INIT.residualStd(nLayer) } as const;
  const one = { kind: 'constant', value: 1 } as const;
  const zero = { kind: 'constant', value: 0 } as const;
  const specs: ParamSpec[] = [];
  const add = (name: string, shape: number[], init: ParamSpec['init']): void => {
    specs.push({ name: `${prefix}.${name}`, shape, init });
  };
  const normBias = cfg.norm === 'layernorm' && cfg.bias;
  add('ln1.weight', [C], one);
  if (normBias) add('ln1.bias', [C], zero);
  for (const p of ['q', 'k', 'v', 'o'] as const) {
    add(`attn.w${p}`, [C, C], p === 'o' ? wRes : w);
    if (cfg.bias) add(`attn.b${p}`, [C], zero);
  }
  add('ln2.weight', [C], one);
  if (normBias) add('ln2.bias', [C], zero);
  const ffn = (p: string): void => {
    add(`${p}.up`, [Hd, C], w);
    if (cfg.bias) add(`${p}.upBias`, [Hd], zero);
    if (cfg.mlp === 'swiglu') {
      add(`${p}.gate`, [Hd, C], w);
      if (cfg.bias) add(`${p}.gateBias`, [Hd], zero);
    }
    add(`${p}.down`, [C, Hd], wRes);
    if (cfg.bias) add(`${p}.downBias`, [C], zero);
  };
  if (cfg.moe) {
    checkBlockMoe(cfg.moe);
    add('moe.router', [cfg.moe.experts, C], w);
    for (let e = 0; e < cfg.moe.experts; e++) ffn(`moe.e${e}`);
  } else {
    ffn('mlp');
  }
  return specs;
}

function checkBlockMoe(m: BlockMoeConfig): void {
  if (!Number.isInteger(m.experts) || m.experts < 1)
    throw new Error(`block: moe.experts must be a positive integer, got ${m.experts}`);
  if (!Number.isInteger(m.topK) || m.topK < 1 || m.topK > m.experts)
    throw new Error(`block: moe.topK must be an integer in [1, ${m.experts}], got ${m.topK}`);
  if (!Number.isFinite(m.auxCoeff) || m.auxCoeff < 0)
    throw new Error(`block: moe.auxCoeff must be a finite number ≥ 0, got ${m.auxCoeff}`);
}

/**
 * The {@link BlockWeights} of block `prefix`, looked up by name with `get` (which returns null for
 * absent names).
 *
 * @example
 * ```ts
 * const w = blockWeights('h0', (n) => store.paramOrNull(n));
 * const g = blockWeights('h0', (n) => store.gradOrNull(n));
 * ```
 */
export function blockWeights(prefix: string, get: (name: string) => FloatArray | null): BlockWeights {
  const req = (name: string): FloatArray => {
    const a = get(`${prefix}.${name}`);
    if (!a) throw new Error(`block: missing parameter ${JSON.stringify(`${prefix}.${name}`)}`);
    return a;
  };
  const opt = (name: string): FloatArray | null => get(`${prefix}.${name}`);
  const ffn = (p: string): MlpWeights => ({
    up: req(`${p}.up`),
    upBias: opt(`${p}.upBias`),
    gate: opt(`${p}.gate`),
    gateBias: opt(`${p}.gateBias`),
    down: req(`${p}.down`),
    downBias: opt(`${p}.downBias`),
  });
  const router = opt('moe.router');
  const experts: MlpWeights[] = [];
  if (router) for (let e = 0; get(`${prefix}.moe.e${e}.up`) !== null; e++) experts.push(ffn(`moe.e${e}`));
  const attentionAndNorms = {
    ln1: req('ln1.weight'),
    ln1Bias: opt('ln1.bias'),
    wq: req('attn.wq'),
    bq: opt('attn.bq'),
    wk: req('attn.wk'),
    bk: opt('attn.bk'),
    wv: req('attn.wv'),
    bv: opt('attn.bv'),
    wo: req('attn.wo'),
    bo: opt('attn.bo'),
    ln2: req('ln2.weight'),
    ln2Bias: opt('ln2.bias'),
  };
  return router
    ? { ...attentionAndNorms, mlp: null, moe: { router, experts } }
    : { ...attentionAndNorms, mlp: ffn('mlp') };
}

/** Activations {@link blockForward} keeps for {@link blockBackward}; every buffer is (B·T, …). */
export interface BlockCache {
  /** (N, C) norm1 output. */
  readonly ln1: FloatArray;
  /** (N) norm1 mean (LayerNorm only). */
  readonly ln1Mean: FloatArray;
  /** (N) norm1 rstd. */
  readonly ln1Rstd: FloatArray;
  /** (N, C) query projection output (before RoPE). */
  readonly q: FloatArray;
  /** (N, C) key projection output. */
  readonly k: FloatArray;
  /** (N, C) value projection output. */
  readonly v: FloatArray;
  /** Attention internals. */
  readonly attention: AttentionCache;
  /** (N, C) attention output, input of the output projection. */
  readonly att: FloatArray;
  /** (N, C) x1 = x + attention branch. */
  readonly x1: FloatArray;
  /** (N, C) norm2 output. */
  readonly ln2: FloatArray;
  /** (N) norm2 mean. */
  readonly ln2Mean: FloatArray;
  /** (N) norm2 rstd. */
  readonly ln2Rstd: FloatArray;
  /** MLP internals (null with MoE). */
  readonly mlp: MlpCache | null;
  /** MoE internals, incl. the (N, k) routing (null with a dense MLP). */
  readonly moe: MoeCache | null;
  /** (N, C) MLP output. */
  readonly mlpOut: FloatArray;
}

/** Allocates a {@link BlockCache} of the element type of `like` for B × T tokens. */
export function createBlockCache(like: FloatArray, B: number, T: number, cfg: BlockConfig): BlockCache {
  const N = B * T;
  const { C } = cfg;
  const a = (n: number): FloatArray => allocLike(like, n);
  return {
    ln1: a(N * C),
    ln1Mean: a(N),
    ln1Rstd: a(N),
    q: a(N * C),
    k: a(N * C),
    v: a(N * C),
    attention: createAttentionCache(like, B, T, C, cfg.H),
    att: a(N * C),
    x1: a(N * C),
    ln2: a(N * C),
    ln2Mean: a(N),
    ln2Rstd: a(N),
    mlp: cfg.moe ? null : createMlpCache(like, N, cfg.hidden, cfg.mlp),
    moe: cfg.moe ? createMoeCache(like, N, { experts: cfg.moe.experts, topK: cfg.moe.topK, kind: cfg.mlp }) : null,
    mlpOut: a(N * C),
  };
}

function attentionOptions(cfg: BlockConfig, gemms: BlockGemms): AttentionOptions {
  return { causal: cfg.causal, rope: cfg.rope, ropeBase: cfg.ropeBase ?? 10000, gemms: gemms.attention };
}

/** The feed-forward of a block: dense MLP or MoE (experts on the MLP sites, router on its own). */
function ffnForward(
  cfg: BlockConfig,
  out: FloatArray,
  cache: BlockCache,
  inp: FloatArray,
  w: BlockWeights,
  N: number,
  gemms: BlockGemms,
  replay: Int32Array | null,
): void {
  if (cfg.moe) {
    if (!w.moe || !cache.moe) throw new Error('block: cfg.moe is set but the weights or cache have no moe part');
    moeForward(
      out,
      cache.moe,
      inp,
      w.moe,
      N,
      cfg.C,
      cfg.hidden,
      { experts: cfg.moe.experts, topK: cfg.moe.topK, kind: cfg.mlp },
      moeGemms(gemms),
      replay,
    );
    return;
  }
  if (replay !== null) throw new Error('block: a routing replay needs cfg.moe, got null');
  if (!w.mlp || !cache.mlp) throw new Error('block: cfg.moe is null but the weights or cache have no mlp part');
  mlpForward(out, cache.mlp, inp, w.mlp, N, cfg.C, cfg.hidden, cfg.mlp, gemms.mlp);
}

function moeGemms(gemms: BlockGemms): typeof sequentialMoeGemms {
  return { router: gemms.router ?? sequentialMoeGemms.router, expert: gemms.mlp };
}

/**
 * The load-balancing term α·L_aux of a block's last forward (0 with a dense MLP or α = 0); its
 * gradient is added by {@link blockBackward}.
 */
export function blockAuxLoss(cache: BlockCache, B: number, T: number, cfg: BlockConfig): number {
  if (!cfg.moe || !cache.moe || cfg.moe.auxCoeff === 0) return 0;
  return (
    cfg.moe.auxCoeff * moeAuxLoss(cache.moe, B * T, { experts: cfg.moe.experts, topK: cfg.moe.topK, kind: cfg.mlp })
  );
}

function normForward(
  cfg: BlockConfig,
  out: FloatArray,
  mean: FloatArray,
  rstd: FloatArray,
  inp: FloatArray,
  w: FloatArray,
  b: FloatArray | null,
  N: number,
): void {
  if (cfg.norm === 'layernorm') layerNormForward(out, mean, rstd, inp, w, b, N, cfg.C, cfg.eps ?? 1e-5);
  else rmsNormForward(out, rstd, inp, w, N, cfg.C, cfg.eps ?? 1e-5);
}

function normBackward(
  cfg: BlockConfig,
  dinp: FloatArray,
  dw: FloatArray,
  db: FloatArray | null,
  dout: FloatArray,
  inp: FloatArray,
  w: FloatArray,
  mean: FloatArray,
  rstd: FloatArray,
  N: number,
): void {
  if (cfg.norm === 'layernorm') layerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd, N, cfg.C);
  else rmsNormBackward(dinp, dw, dout, inp, w, rstd, N, cfg.C);
}

/**
 * Block forward (pre-norm, GPT-2 / LLaMA layout):
 * `x1 = x + attn(norm1(x))·Woᵀ`, `out = x1 + ffn(norm2(x1))`, ffn the MLP or the MoE layer.
 *
 * @param out - (B, T, C)
 * @param cache - filled (with MoE, `cache.moe.routing` holds the (B·T, k) experts used)
 * @param inp - (B, T, C)
 * @param replay - MoE only: (B·T, k) experts to use instead of the router's top-k, or null
 */
export function blockForward(
  out: FloatArray,
  cache: BlockCache,
  inp: FloatArray,
  w: BlockWeights,
  B: number,
  T: number,
  cfg: BlockConfig,
  gemms: BlockGemms = sequentialBlockGemms,
  replay: Int32Array | null = null,
): void {
  const N = B * T;
  const { C, H } = cfg;
  normForward(cfg, cache.ln1, cache.ln1Mean, cache.ln1Rstd, inp, w.ln1, w.ln1Bias, N); // (N, C)
  linearForward(cache.q, cache.ln1, w.wq, w.bq, N, C, C, gemms.q); // (N, C)
  linearForward(cache.k, cache.ln1, w.wk, w.bk, N, C, C, gemms.k); // (N, C)
  linearForward(cache.v, cache.ln1, w.wv, w.bv, N, C, C, gemms.v); // (N, C)
  attentionForward(cache.att, cache.attention, cache.q, cache.k, cache.v, B, T, C, H, attentionOptions(cfg, gemms)); // (N, C)
  const proj = allocLike(inp, N * C); // (N, C) attention branch after Wo
  linearForward(proj, cache.att, w.wo, w.bo, N, C, C, gemms.o);
  residualForward(cache.x1, inp, proj, N * C); // (N, C)
  normForward(cfg, cache.ln2, cache.ln2Mean, cache.ln2Rstd, cache.x1, w.ln2, w.ln2Bias, N); // (N, C)
  ffnForward(cfg, cache.mlpOut, cache, cache.ln2, w, N, gemms, replay); // (N, C)
  residualForward(out, cache.x1, cache.mlpOut, N * C); // (B, T, C)
}

/**
 * Block backward: reverses {@link blockForward}, accumulating into `dinp` and into every gradient
 * buffer of `g` (same structure as the weights). With MoE, the gradient of {@link blockAuxLoss} is
 * included; none flows through the choice of experts.
 *
 * @param dinp - (B, T, C) accumulated
 * @param g - gradients, accumulated
 * @param dout - (B, T, C)
 * @param cache - from the forward
 * @param inp - (B, T, C) forward input
 */
export function blockBackward(
  dinp: FloatArray,
  g: BlockWeights,
  dout: FloatArray,
  cache: BlockCache,
  inp: FloatArray,
  w: BlockWeights,
  B: number,
  T: number,
  cfg: BlockConfig,
  gemms: BlockGemms = sequentialBlockGemms,
): void {
  const N = B * T;
  const { C, H } = cfg;
  const a = (n: number): FloatArray => allocLike(dout, n);
  const dx1 = a(N * C); // (N, C)
  const dmlp = a(N * C); // (N, C)
  residualBackward(dx1, dmlp, dout, N * C);
  const dln2 = a(N * C); // (N, C)
  if (cfg.moe) {
    if (!g.moe || !w.moe || !cache.moe)
      throw new Error('block: cfg.moe is set but the grads, weights or cache have no moe part');
    moeBackward(
      dln2,
      g.moe,
      dmlp,
      cache.moe,
      cache.ln2,
      w.moe,
      N,
      C,
      cfg.hidden,
      { experts: cfg.moe.experts, topK: cfg.moe.topK, kind: cfg.mlp },
      moeGemms(gemms),
      cfg.moe.auxCoeff,
    );
  } else {
    if (!g.mlp || !w.mlp || !cache.mlp)
      throw new Error('block: cfg.moe is null but the grads, weights or cache have no mlp part');
    mlpBackward(dln2, g.mlp, dmlp, cache.mlp, cache.ln2, w.mlp, N, C, cfg.hidden, cfg.mlp, gemms.mlp);
  }
  normBackward(cfg, dx1, g.ln2, g.ln2Bias, dln2, cache.x1, w.ln2, cache.ln2Mean, cache.ln2Rstd, N);
  const dproj = a(N * C); // (N, C)
  residualBackward(dinp, dproj, dx1, N * C);
  const datt = a(N * C); // (N, C)
  linearBackward(datt, g.wo, g.bo, dproj, cache.att, w.wo, N, C, C, gemms.o);
  const dq = a(N * C); // (N, C)
  const dk = a(N * C); // (N, C)
  const dv = a(N * C); // (N, C)
  attentionBackward(dq, dk, dv, datt, cache.attention, cache.v, B, T, C, H, attentionOptions(cfg, gemms));
  const dln1 = a(N * C); // (N, C)
  const ln1T = roundedInputT(cache.ln1, N, C, gemms.q); // (C, N) or null: q, k and v read the same input
  linearBackward(dln1, g.wq, g.bq, dq, cache.ln1, w.wq, N, C, C, gemms.q, ln1T);
  linearBackward(dln1, g.wk, g.bk, dk, cache.ln1, w.wk, N, C, C, gemms.k, ln1T);
  linearBackward(dln1, g.wv, g.bv, dv, cache.ln1, w.wv, N, C, C, gemms.v, ln1T);
  normBackward(cfg, dinp, g.ln1, g.ln1Bias, dln1, inp, w.ln1, cache.ln1Mean, cache.ln1Rstd, N);
}
