// Test helper: a 1-layer transformer LM (embedding, block, final LayerNorm, LM head, cross-entropy)
// assembled from the nn layers, used by the whole-model gradient check and the training sanity test.

import {
  blockAuxLoss,
  blockBackward,
  blockForward,
  blockParamSpecs,
  blockWeights,
  createBlockCache,
  crossEntropyBackward,
  crossEntropyForward,
  embeddingBackward,
  embeddingForward,
  layerNormBackward,
  layerNormForward,
  linearBackward,
  linearForward,
  ParamLayout,
  type BlockConfig,
  type FloatArray,
  type ParamSpec,
} from '../../src/nn/index.js';

/** A 1-layer transformer LM built from the layers: the model whose whole loss is checked. */
export function tinyModel(cfg: BlockConfig, V: number, T: number) {
  const C = cfg.C;
  const specs: ParamSpec[] = [
    { name: 'wte', shape: [V, C], init: { kind: 'normal', std: 0.02 } },
    { name: 'wpe', shape: [T, C], init: { kind: 'normal', std: 0.02 } },
    ...blockParamSpecs('h0', cfg, 1),
    { name: 'lnf.weight', shape: [C], init: { kind: 'constant', value: 1 } },
    { name: 'lnf.bias', shape: [C], init: { kind: 'constant', value: 0 } },
    { name: 'lmHead', shape: [V, C], init: { kind: 'normal', std: 0.02 } },
  ];
  const layout = new ParamLayout(specs);
  /** Mean cross-entropy of next tokens (+ the block's MoE load-balancing term); fills `grads` (same layout as `params`) when given. */
  const run = (params: FloatArray, tokens: number[], targets: number[], B: number, grads?: FloatArray): number => {
    const N = B * T;
    const P = (n: string) => (layout.has(n) ? layout.view(params, n) : null);
    const a = (n: number) => (params instanceof Float32Array ? new Float32Array(n) : new Float64Array(n));
    const x0 = a(N * C); // (B, T, C)
    embeddingForward(x0, tokens, P('wte')!, P('wpe'), B, T, C, V);
    const x1 = a(N * C); // (B, T, C)
    const cache = createBlockCache(params, B, T, cfg);
    const w = blockWeights('h0', P);
    blockForward(x1, cache, x0, w, B, T, cfg);
    const xf = a(N * C); // (B, T, C)
    const mean = a(N);
    const rstd = a(N);
    layerNormForward(xf, mean, rstd, x1, P('lnf.weight')!, P('lnf.bias'), N, C);
    const logits = a(N * V); // (B, T, V)
    linearForward(logits, xf, P('lmHead')!, null, N, C, V);
    const losses = a(N);
    const probs = a(N * V);
    const loss = crossEntropyForward(losses, probs, logits, targets, N, V) + blockAuxLoss(cache, B, T, cfg);
    if (grads) {
      const G = (n: string) => (layout.has(n) ? layout.view(grads, n) : null);
      const dlogits = a(N * V);
      crossEntropyBackward(dlogits, probs, targets, N, V);
      const dxf = a(N * C);
      linearBackward(dxf, G('lmHead')!, null, dlogits, xf, P('lmHead')!, N, C, V);
      const dx1 = a(N * C);
      layerNormBackward(dx1, G('lnf.weight')!, G('lnf.bias'), dxf, x1, P('lnf.weight')!, mean, rstd, N, C);
      const dx0 = a(N * C);
      blockBackward(dx0, blockWeights('h0', G), dx1, cache, x0, w, B, T, cfg);
      embeddingBackward(G('wte')!, G('wpe'), dx0, tokens, B, T, C);
    }
    return loss;
  };
  return { layout, run };
}
