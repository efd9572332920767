// Public surface of the neural-network core: layers, GEMM hook, parameter store, AdamW, block.
// Not a place for logic; see the files next to it.

export * from './array.js';
export * from './gemm.js';
export * from './embedding.js';
export * from './linear.js';
export * from './norm.js';
export * from './activation.js';
export * from './mlp.js';
export * from './moe.js';
export * from './residual.js';
export * from './softmax.js';
export * from './rope.js';
export * from './attention.js';
export * from './attention-decode.js';
export * from './params.js';
export * from './adamw.js';
export * from './block.js';
export * from './block-decode.js';
export * from './stack.js';
export * from './support.js';
export * from './outliers.js';
export * from './row-logprob.js';
