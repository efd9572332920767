// The bidirectional toy transformer of the masked-diffusion policy: config, parameters, forward over (B, T) tokens to logits, backward from dlogits.
// Not a sampler and not a log-prob estimator (sampler.ts, estimators.ts); MASK is an ordinary input token here and there is no timestep input.

import { blockParamSpecs, blockWeights, type BlockConfig, type BlockMoeConfig } from '../../nn/block.js';
import { ParamLayout, type ParamSpec } from '../../nn/params.js';
import { stackBackward, stackForward, type StackCache, type StackConfig, type StackWeights } from '../../nn/stack.js';
import type { FloatArray } from '../../nn/array.js';
import type { PolicyNumerics } from '../numerics.js';

/** Hyper-parameters of the diffusion toy transformer. */
export interface DiffusionModelConfig {
  /** Vocabulary size V (the task's; MASK = 4 is one of its ids). */
  readonly vocabSize: number;
  /** Longest sequence (prompt + generation) the learned position table covers. @defaultValue 64 */
  readonly maxLen: number;
  /** Number of transformer blocks. @defaultValue 2 */
  readonly layers: number;
  /** Model width C. @defaultValue 32 */
  readonly C: number;
  /** Attention heads H (divides C). @defaultValue 4 */
  readonly H: number;
  /** MLP hidden width (of every expert with MoE). @defaultValue 4·C = 128 */
  readonly hidden: number;
  /** Mixture-of-experts feed-forward in every block (docs/moe.md); absent or null: dense MLP. */
  readonly moe?: BlockMoeConfig | null;
}

/** Toy defaults of {@link DiffusionModelConfig} (everything but the vocabulary). */
export const diffusionModelDefaults = Object.freeze({ maxLen: 64, layers: 2, C: 32, H: 4, hidden: 128 });

/**
 * A diffusion model: its resolved config, the block config it runs (`causal: false`, LayerNorm,
 * GELU, biases, learned positions) and the parameter layout. Weights live outside (a `ParamStore`
 * or any `FloatArray` with this layout), so the same model runs in float32 and float64.
 */
export interface DiffusionModel {
  /** Resolved hyper-parameters. */
  readonly config: DiffusionModelConfig;
  /** The block configuration (bidirectional attention). */
  readonly block: BlockConfig;
  /** Parameter declarations: `wte`, `wpe`, `h{l}.…`, `lnf.weight`, `lnf.bias`, `lmHead`. */
  readonly specs: readonly ParamSpec[];
  /** Layout of the parameters in one flat buffer. */
  readonly layout: ParamLayout;
}

/**
 * Builds a diffusion model description (no weights). Missing fields take {@link diffusionModelDefaults}.
 *
 * @example
 * ```ts
 * const model = createDiffusionModel({ vocabSize: task.vocabSize });
 * const store = createParamStore(model.specs, 42);
 * ```
 */
export function createDiffusionModel(
  config: Partial<DiffusionModelConfig> & { readonly vocabSize: number },
): DiffusionModel {
  const c: DiffusionModelConfig = { ...diffusionModelDefaults, ...config };
  for (const k of ['vocabSize', 'maxLen', 'layers', 'C', 'H', 'hidden'] as const) {
    if (!Number.isInteger(c[k]) || c[k] < 1)
      throw new Error(`diffusion model: ${k} must be a positive integer, got ${c[k]}`);
  }
  if (c.vocabSize < 5)
    throw new Error(`diffusion model: vocabSize must be ≥ 5 (ids 0–4 are PAD BOS EOS SEP MASK), got ${c.vocabSize}`);
  if (c.C % c.H !== 0) throw new Error(`diffusion model: C (${c.C}) must be divisible by H (${c.H})`);
  const block: BlockConfig = {
    C: c.C,
    H: c.H,
    hidden: c.hidden,
    norm: 'layernorm',
    mlp: 'gelu',
    bias: true,
    causal: false,
    rope: false,
    ...(c.moe ? { moe: c.moe } : {}),
  };
  const std = { kind: 'normal', std: 0.02 } as const;
  const specs: ParamSpec[] = [
    { name: 'wte', shape: [c.vocabSize, c.C], init: std },
    { name: 'wpe', shape: [c.maxLen, c.C], init: std },
  ];
  for (let l = 0; l < c.layers; l++) specs.push(...blockParamSpecs(`h${l}`, block, c.layers));
  specs.push(
    { name: 'lnf.weight', shape: [c.C], init: { kind: 'constant', value: 1 } },
    { name: 'lnf.bias', shape: [c.C], init: { kind: 'constant', value: 0 } },
    { name: 'lmHead', shape: [c.vocabSize, c.C], init: std },
  );
  return Object.freeze({ config: Object.freeze(c), block, specs, layout: new ParamLayout(specs) });
}

/** Everything {@link diffusionForward} keeps for {@link diffusionBackward}: the stack's caches. */
export type DiffusionForward = StackCache;

/** The stack views of a flat buffer (weights or gradients) laid out by `model.layout`. */
function stackWeights(model: DiffusionModel, buf: FloatArray): StackWeights {
  return {
    wte: req(model, buf, 'wte'),
    wpe: req(model, buf, 'wpe'),
    blocks: Array.from({ length: model.config.layers }, (_, l) => blockWeights(`h${l}`, (n) => view(model, buf, n))),
    lnf: req(model, buf, 'lnf.weight'),
    lnfBias: req(model, buf, 'lnf.bias'),
    lmHead: req(model, buf, 'lmHead'),
  };
}

function stackConfig(model: DiffusionModel): StackConfig {
  return { C: model.config.C, vocabSize: model.config.vocabSize, norm: 'layernorm', block: model.block };
}

function view(model: DiffusionModel, buf: FloatArray, name: string): FloatArray | null {
  return model.layout.has(name) ? model.layout.view(buf, name) : null;
}

function req(model: DiffusionModel, buf: FloatArray, name: string): FloatArray {
  return model.layout.view(buf, name);
}

/**
 * Forward over B sequences of T tokens (bidirectional attention, no padding mask: PAD and MASK are
 * ordinary tokens) to logits `(B, T, V)`, with the GEMMs of `numerics` at every site.
 * The element type of `params` decides the arithmetic (Float32Array: the simulator; Float64Array:
 * gradient checks).
 *
 * @param params - flat weights with `model.layout`
 * @param tokens - (B, T) ids in [0, V)
 * @param replay - MoE only: per layer, (B, T, k) experts to replay (a row of −1: the own top-k), or null
 */
export function diffusionForward(
  model: DiffusionModel,
  params: FloatArray,
  tokens: ArrayLike<number>,
  B: number,
  T: number,
  numerics: PolicyNumerics,
  replay: readonly Int32Array[] | null = null,
): DiffusionForward {
  const { maxLen } = model.config;
  if (params.length !== model.layout.size)
    throw new Error(`diffusionForward: params length must be ${model.layout.size}, got ${params.length}`);
  if (T > maxLen) throw new Error(`diffusionForward: T must be ≤ maxLen ${maxLen}, got ${T}`);
  return stackForward(stackWeights(model, params), stackConfig(model), tokens, B, T, numerics, replay);
}

/**
 * Backward of {@link diffusionForward} from `dlogits (B, T, V)`, accumulating (`+=`) into `grads`
 * (same layout and element type as `params`). Uses the backward GEMMs (dgrad, wgrad, attention
 * backward sites) of `numerics`.
 */
export function diffusionBackward(
  model: DiffusionModel,
  params: FloatArray,
  grads: FloatArray,
  fwd: DiffusionForward,
  dlogits: FloatArray,
  numerics: PolicyNumerics,
): void {
  if (grads.length !== model.layout.size)
    throw new Error(`diffusionBackward: grads length must be ${model.layout.size}, got ${grads.length}`);
  stackBackward(stackWeights(model, grads), stackWeights(model, params), stackConfig(model), fwd, dlogits, numerics);
}
