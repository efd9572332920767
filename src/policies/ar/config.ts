// Configuration of the autoregressive toy policy (sizes, norm, MLP, positions, tying) and its parameter
// declarations. Not the forward pass (model.ts) and not the sampler (sampler.ts).

import { blockParamSpecs, type BlockConfig, type BlockMoeConfig } from '../../nn/block.js';
import { GPT2_INIT, type ParamSpec } from '../../nn/params.js';
import type { MlpKind } from '../../nn/mlp.js';

/** Hyper-parameters of the causal toy transformer. */
export interface ArConfig {
  /** Vocabulary size V (the task's; ids 0–4 are PAD, BOS, EOS, SEP, MASK). */
  readonly vocabSize: number;
  /** Longest sequence (prompt + response) the policy accepts; sizes the learned position table. */
  readonly maxLen: number;
  /** Model width C. @defaultValue 32 */
  readonly C: number;
  /** Attention heads H (divides C). @defaultValue 4 */
  readonly H: number;
  /** Number of transformer blocks. @defaultValue 2 */
  readonly layers: number;
  /** MLP hidden width. @defaultValue 64 */
  readonly hidden: number;
  /** Normalization (blocks and the final norm). @defaultValue 'rmsnorm' */
  readonly norm: 'layernorm' | 'rmsnorm';
  /** MLP kind. @defaultValue 'swiglu' */
  readonly mlp: MlpKind;
  /** Biases in the linear layers (and LayerNorm shifts). @defaultValue false */
  readonly bias: boolean;
  /**
   * Rotary positions in attention, or a learned (maxLen, C) position table. Learned is the default:
   * with left-padded prompts every response starts at the same position, and on `reverse` it
   * reaches exact-match 1.0 after 300 supervised steps where RoPE reaches ≈ 0.3.
   * @defaultValue 'learned'
   */
  readonly positions: 'rope' | 'learned';
  /** The LM head reuses the token embedding (GPT-2) or has its own (V, C) matrix. @defaultValue false */
  readonly tiedEmbeddings: boolean;
  /**
   * Mixture-of-experts feed-forward in every block (E experts of width `hidden`, top-k routing,
   * load-balancing weight α; docs/moe.md). Absent or null: the dense MLP.
   */
  readonly moe?: BlockMoeConfig | null;
  /**
   * Number of outlier channels: channels (`outlierChannels` in nn/outliers.ts) whose gain in every
   * norm that feeds a linear layer is initialized to `outlierMagnitude` instead of 1, so they are
   * ≈ that many times the other channels at every GEMM input (LLM.int8()). Trainable like any gain.
   * Absent or 0 = none (the toy default; the `small` and `medium` presets set 2).
   */
  readonly outliers?: number;
  /** Initial norm gain of each outlier channel (absent = 20, LLM.int8()'s "up to 20×"; used only with `outliers` > 0). */
  readonly outlierMagnitude?: number;
}

/**
 * The toy defaults (RMSNorm, SwiGLU, learned positions, no biases, untied head; C 32, 4 heads,
 * 2 layers, hidden 64 — ≈ 21k parameters plus 32·maxLen positions at V = 13), with `overrides` applied and validated.
 *
 * @example
 * ```ts
 * const cfg = arConfig({ vocabSize: 13, maxLen: 15 });
 * ```
 */
export function arConfig(overrides: Partial<ArConfig> & Pick<ArConfig, 'vocabSize' | 'maxLen'>): ArConfig {
  const cfg: ArConfig = {
    C: 32,
    H: 4,
    layers: 2,
    hidden: 64,
    norm: 'rmsnorm',
    mlp: 'swiglu',
    bias: false,
    positions: 'learned',
    tiedEmbeddings: false,
    ...overrides,
  };
  validateArConfig(cfg);
  return Object.freeze(cfg);
}

/** Throws an error naming the first invalid field of `cfg`. */
export function validateArConfig(cfg: ArConfig): void {
  const posInt = (name: keyof ArConfig): void => {
    const v = cfg[name];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1)
      throw new Error(`ar config: ${name} must be a positive integer, got ${JSON.stringify(v)}`);
  };
  for (const k of ['vocabSize', 'maxLen', 'C', 'H', 'layers', 'hidden'] as const) posInt(k);
  if (cfg.vocabSize < 5) throw new Error(`ar config: vocabSize must be ≥ 5 (the special tokens), got ${cfg.vocabSize}`);
  if (cfg.C % cfg.H !== 0) throw new Error(`ar config: H must divide C, got C=${cfg.C}, H=${cfg.H}`);
  if (cfg.positions === 'rope' && (cfg.C / cfg.H) % 2 !== 0)
    throw new Error(`ar config: rope needs an even head size C/H, got ${cfg.C / cfg.H}`);
  if (cfg.norm !== 'layernorm' && cfg.norm !== 'rmsnorm')
    throw new Error(`ar config: norm must be layernorm or rmsnorm, got ${JSON.stringify(cfg.norm)}`);
  if (cfg.mlp !== 'gelu' && cfg.mlp !== 'swiglu')
    throw new Error(`ar config: mlp must be gelu or swiglu, got ${JSON.stringify(cfg.mlp)}`);
  if (cfg.positions !== 'rope' && cfg.positions !== 'learned')
    throw new Error(`ar config: positions must be rope or learned, got ${JSON.stringify(cfg.positions)}`);
  if (typeof cfg.bias !== 'boolean')
    throw new Error(`ar config: bias must be a boolean, got ${JSON.stringify(cfg.bias)}`);
  if (cfg.moe !== undefined && cfg.moe !== null) {
    const m = cfg.moe;
    if (!Number.isInteger(m.experts) || m.experts < 1)
      throw new Error(`ar config: moe.experts must be a positive integer, got ${JSON.stringify(m.experts)}`);
    if (!Number.isInteger(m.topK) || m.topK < 1 || m.topK > m.experts)
      throw new Error(
        `ar config: moe.topK must be an integer in [1, moe.experts = ${m.experts}], got ${JSON.stringify(m.topK)}`,
      );
    if (typeof m.auxCoeff !== 'number' || !Number.isFinite(m.auxCoeff) || m.auxCoeff < 0)
      throw new Error(`ar config: moe.auxCoeff must be a finite number ≥ 0, got ${JSON.stringify(m.auxCoeff)}`);
  }
  if (cfg.outliers !== undefined && (!Number.isInteger(cfg.outliers) || cfg.outliers < 0 || cfg.outliers > cfg.C)) {
    throw new Error(`ar config: outliers must be an integer in [0, C=${cfg.C}], got ${JSON.stringify(cfg.outliers)}`);
  }
  if (
    cfg.outlierMagnitude !== undefined &&
    (typeof cfg.outlierMagnitude !== 'number' || !Number.isFinite(cfg.outlierMagnitude) || cfg.outlierMagnitude <= 0)
  ) {
    throw new Error(
      `ar config: outlierMagnitude must be a positive finite number, got ${JSON.stringify(cfg.outlierMagnitude)}`,
    );
  }
  if (typeof cfg.tiedEmbeddings !== 'boolean')
    throw new Error(`ar config: tiedEmbeddings must be a boolean, got ${JSON.stringify(cfg.tiedEmbeddings)}`);
}

/** The {@link BlockConfig} shared by every block of the policy (causal). */
export function arBlockConfig(cfg: ArConfig): BlockConfig {
  return {
    C: cfg.C,
    H: cfg.H,
    hidden: cfg.hidden,
    norm: cfg.norm,
    mlp: cfg.mlp,
    bias: cfg.bias,
    causal: true,
    rope: cfg.positions === 'rope',
    ...(cfg.moe ? { moe: cfg.moe } : {}),
  };
}

/**
 * Parameter declarations, in buffer order: `wte` (V, C), `wpe` (maxLen, C) if learned positions,
 * blocks `h0` … `h{L−1}`, the final norm `lnf.weight` (and `lnf.bias` for LayerNorm with biases),
 * and `lmHead` (V, C) unless tied. GPT-2 initialization (nanoGPT `_init_weights`).
 */
export function arParamSpecs(cfg: ArConfig): ParamSpec[] {
  const { vocabSize: V, C } = cfg;
  const w = { kind: 'normal', std: GPT2_INIT.std } as const;
  const specs: ParamSpec[] = [{ name: 'wte', shape: [V, C], init: w }];
  if (cfg.positions === 'learned') specs.push({ name: 'wpe', shape: [cfg.maxLen, C], init: w });
  const bc = arBlockConfig(cfg);
  for (let l = 0; l < cfg.layers; l++) specs.push(...blockParamSpecs(`h${l}`, bc, cfg.layers));
  specs.push({ name: 'lnf.weight', shape: [C], init: { kind: 'constant', value: 1 } });
  if (cfg.norm === 'layernorm' && cfg.bias)
    specs.push({ name: 'lnf.bias', shape: [C], init: { kind: 'constant', value: 0 } });
  if (!cfg.tiedEmbeddings) specs.push({ name: 'lmHead', shape: [V, C], init: w });
  return specs;
}
