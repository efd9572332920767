// The bidirectional toy transformer of the masked-diffusion policy: config, parameters, forward over (B, T) tokens to logits, backward from dlogits.
// Not a sampler and not a log-prob estimator (sampler.ts, estimators.ts); MASK is an ordinary input token here and there is no timestep input.

import {
  allocLike,
  blockBackward,
  blockForward,
  blockParamSpecs,
  blockWeights,
  createBlockCache,
  embeddingBackward,
  embeddingForward,
  layerNormBackward,
  layerNormForward,
  linearBackward,
  linearForward,
  ParamLayout,
  type BlockCache,
  type BlockConfig,
  type FloatArray,
  type ParamSpec,
} from '../../nn/index.js';
import type { PolicyNumerics } from '../numerics.js';

/** Hyper-parameters of the diffusion toy transformer. */
export interface DiffusionModelConfig {
  /** Vocabulary size V (the task's; MASK = 4 is one of its ids). */
  readonly vocabSize: number;
  /** Longest sequence (prompt + generation) the learned position table covers. @defaultValue 64 */
  readonly maxSeqLen: number;
  /** Number of transformer blocks. @defaultValue 2 */
  readonly nLayer: number;
  /** Model width C. @defaultValue 32 */
  readonly C: number;
  /** Attention heads H (divides C). @defaultValue 4 */
  readonly H: number;
  /** MLP hidden width. @defaultValue 4·C = 128 */
  readonly hidden: number;
}

/** Toy defaults of {@link DiffusionModelConfig} (everything but the vocabulary). */
export const diffusionModelDefaults = Object.freeze({ maxSeqLen: 64, nLayer: 2, C: 32, H: 4, hidden: 128 });

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
export function createDiffusionModel(config: Partial<DiffusionModelConfig> & { readonly vocabSize: number }): DiffusionModel {
  const c: DiffusionModelConfig = { ...diffusionModelDefaults, ...config };
  for (const k of ['vocabSize', 'maxSeqLen', 'nLayer', 'C', 'H', 'hidden'] as const) {
    if (!Number.isInteger(c[k]) || c[k] < 1) throw new Error(`diffusion model: ${k} must be a positive integer, got ${c[k]}`);
  }
  if (c.vocabSize < 5) throw new Error(`diffusion model: vocabSize must be ≥ 5 (ids 0–4 are PAD BOS EOS SEP MASK), got ${c.vocabSize}`);
  if (c.C % c.H !== 0) throw new Error(`diffusion model: C (${c.C}) must be divisible by H (${c.H})`);
  const block: BlockConfig = { C: c.C, H: c.H, hidden: c.hidden, norm: 'layernorm', mlp: 'gelu', bias: true, causal: false, rope: false };
  const std = { kind: 'normal', std: 0.02 } as const;
  const specs: ParamSpec[] = [
    { name: 'wte', shape: [c.vocabSize, c.C], init: std },
    { name: 'wpe', shape: [c.maxSeqLen, c.C], init: std },
  ];
  for (let l = 0; l < c.nLayer; l++) specs.push(...blockParamSpecs(`h${l}`, block, c.nLayer));
  specs.push(
    { name: 'lnf.weight', shape: [c.C], init: { kind: 'constant', value: 1 } },
    { name: 'lnf.bias', shape: [c.C], init: { kind: 'constant', value: 0 } },
    { name: 'lmHead', shape: [c.vocabSize, c.C], init: std },
  );
  return Object.freeze({ config: Object.freeze(c), block, specs, layout: new ParamLayout(specs) });
}

/** Everything {@link diffusionForward} keeps for {@link diffusionBackward}. */
export interface DiffusionForward {
  /** Batch size B. */
  readonly B: number;
  /** Sequence length T. */
  readonly T: number;
  /** (B, T) input tokens. */
  readonly tokens: ArrayLike<number>;
  /** nLayer + 1 residual streams (B, T, C): `xs[0]` the embedding, `xs[l+1]` block l's output. */
  readonly xs: readonly FloatArray[];
  /** One cache per block. */
  readonly caches: readonly BlockCache[];
  /** (B, T, C) final LayerNorm output. */
  readonly xf: FloatArray;
  /** (B·T) final LayerNorm mean. */
  readonly lnfMean: FloatArray;
  /** (B·T) final LayerNorm rstd. */
  readonly lnfRstd: FloatArray;
  /** (B, T, V) logits. */
  readonly logits: FloatArray;
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
 */
export function diffusionForward(
  model: DiffusionModel,
  params: FloatArray,
  tokens: ArrayLike<number>,
  B: number,
  T: number,
  numerics: PolicyNumerics,
): DiffusionForward {
  const { C, vocabSize: V, nLayer, maxSeqLen } = model.config;
  if (params.length !== model.layout.size) throw new Error(`diffusionForward: params length must be ${model.layout.size}, got ${params.length}`);
  if (T > maxSeqLen) throw new Error(`diffusionForward: T must be ≤ maxSeqLen ${maxSeqLen}, got ${T}`);
  const N = B * T;
  const a = (n: number): FloatArray => allocLike(params, n);
  const x0 = a(N * C); // (B, T, C)
  embeddingForward(x0, tokens, req(model, params, 'wte'), req(model, params, 'wpe'), B, T, C, V);
  const xs: FloatArray[] = [x0];
  const caches: BlockCache[] = [];
  for (let l = 0; l < nLayer; l++) {
    const out = a(N * C); // (B, T, C)
    const cache = createBlockCache(params, B, T, model.block);
    blockForward(out, cache, xs[l]!, blockWeights(`h${l}`, (n) => view(model, params, n)), B, T, model.block, numerics.block(l));
    xs.push(out);
    caches.push(cache);
  }
  const xf = a(N * C); // (B, T, C)
  const lnfMean = a(N); // (B·T)
  const lnfRstd = a(N); // (B·T)
  layerNormForward(xf, lnfMean, lnfRstd, xs[nLayer]!, req(model, params, 'lnf.weight'), req(model, params, 'lnf.bias'), N, C);
  const logits = a(N * V); // (B, T, V)
  linearForward(logits, xf, req(model, params, 'lmHead'), null, N, C, V, numerics.lmHead());
  return { B, T, tokens, xs, caches, xf, lnfMean, lnfRstd, logits };
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
  const { C, vocabSize: V, nLayer } = model.config;
  const { B, T } = fwd;
  const N = B * T;
  if (grads.length !== model.layout.size) throw new Error(`diffusionBackward: grads length must be ${model.layout.size}, got ${grads.length}`);
  const a = (n: number): FloatArray => allocLike(params, n);
  let dx = a(N * C); // (B, T, C) gradient of the last residual stream
  const dxf = a(N * C); // (B, T, C)
  linearBackward(dxf, req(model, grads, 'lmHead'), null, dlogits, fwd.xf, req(model, params, 'lmHead'), N, C, V, numerics.lmHead());
  layerNormBackward(dx, req(model, grads, 'lnf.weight'), req(model, grads, 'lnf.bias'), dxf, fwd.xs[nLayer]!, req(model, params, 'lnf.weight'), fwd.lnfMean, fwd.lnfRstd, N, C);
  for (let l = nLayer - 1; l >= 0; l--) {
    const dinp = a(N * C); // (B, T, C)
    blockBackward(
      dinp,
      blockWeights(`h${l}`, (n) => view(model, grads, n)),
      dx,
      fwd.caches[l]!,
      fwd.xs[l]!,
      blockWeights(`h${l}`, (n) => view(model, params, n)),
      B,
      T,
      model.block,
      numerics.block(l),
    );
    dx = dinp;
  }
  embeddingBackward(req(model, grads, 'wte'), req(model, grads, 'wpe'), dx, fwd.tokens, B, T, C);
}
