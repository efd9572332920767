// `qrl-sim/nn`: layers as forward/backward pairs with their caches, weights and GEMM hooks, the parameter store, AdamW, block and stack.
// Chosen names, not `export *` (the rule: docs/decisions.md; pinned by test/api-surface.test.ts).

// Arrays.
export { type FloatArray, allocLike, transpose } from './array.js';

// The GEMM hook of the layers and its exact sequential defaults.
export {
  type GemmFn,
  type LinearGemms,
  type LinearBackwardRounding,
  gemmReference,
  gemmSequential,
  gemmThreads,
  setGemmThreads,
  sequentialLinearGemms,
} from './gemm.js';

// Token embedding.
export { embeddingForward, embeddingBackward } from './embedding.js';

// Linear layer.
export { type RoundedInputT, linearForward, linearBackward, roundedInputT } from './linear.js';

// LayerNorm and RMSNorm.
export { layerNormForward, layerNormBackward, rmsNormForward, rmsNormBackward } from './norm.js';

// GELU and SwiGLU.
export { geluForward, geluBackward, swigluForward, swigluBackward } from './activation.js';

// Feed-forward block (GELU MLP or SwiGLU).
export {
  type MlpKind,
  type MlpCache,
  type MlpGemms,
  type MlpGrads,
  type MlpWeights,
  createMlpCache,
  mlpForward,
  mlpBackward,
  sequentialMlpGemms,
} from './mlp.js';

// Mixture-of-experts feed-forward layer.
export {
  type MoeCache,
  type MoeConfig,
  type MoeGemms,
  type MoeGrads,
  type MoeWeights,
  createMoeCache,
  moeForward,
  moeBackward,
  moeAuxLoss,
  routingFlipRate,
  sequentialMoeGemms,
} from './moe.js';

// Residual connection.
export { residualForward, residualBackward } from './residual.js';

// Softmax, log-softmax, cross-entropy.
export {
  softmaxForward,
  softmaxBackward,
  type SoftmaxOptions,
  logSoftmaxForward,
  logSoftmaxBackward,
  crossEntropyForward,
  crossEntropyBackward,
  type CrossEntropyOptions,
} from './softmax.js';

// Rotary position embedding.
export { ropeForward, ropeBackward, type RopeFn } from './rope.js';

// Multi-head attention.
export {
  type AttentionCache,
  type AttentionDecodeBatch,
  type AttentionGemms,
  type BatchedGemmFn,
  type AttentionOperandRounding,
  type RoundedAttentionOperands,
  type AttentionOptions,
  createAttentionCache,
  attentionForward,
  attentionBackward,
  sequentialAttentionGemms,
} from './attention.js';

// Single-position attention decode over a K/V cache.
export { attentionDecodeForward, attentionDecodeAppend } from './attention-decode.js';

// Flat parameter store.
export {
  ParamStore,
  ParamLayout,
  type ParamSpec,
  type ParamInit,
  type ParamStoreJson,
  GPT2_INIT,
  createParamStore,
  type ParamEntry,
} from './params.js';

// AdamW and global-norm clipping.
export { AdamW, type AdamWConfig, type AdamWState, clipGradNorm } from './adamw.js';

// Pre-norm transformer block.
export {
  type BlockConfig,
  type BlockMoeConfig,
  type BlockCache,
  type BlockGemms,
  type BlockWeights,
  blockParamSpecs,
  blockWeights,
  createBlockCache,
  blockForward,
  blockBackward,
  blockAuxLoss,
  sequentialBlockGemms,
} from './block.js';

// Single-position block decode over a K/V cache.
export { type BlockKvCache, type KvCacheHook, createBlockKvCache, blockDecodeForward } from './block-decode.js';

// Transformer stack (embedding, blocks, final norm, head).
export {
  type StackConfig,
  type StackCache,
  type StackGemms,
  type StackWeights,
  stackForward,
  stackBackward,
} from './stack.js';

// Sampling-support replay log-prob.
export { type KeptSet, type SupportRecord, type SupportLogProb, supportLogProb } from './support.js';

// Outlier channels.
export { outlierChannels } from './outliers.js';

// Row log-prob, entropy and gradient of one logits row (shared by both policies).
export { rowLogSumExp, rowLogProb, rowEntropy, rowProbSqSum, rowLogProbBackward } from './row-logprob.js';
