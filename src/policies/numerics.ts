// The precision seam between the toy policies and the precision plans: which GEMM functions and KV-cache rounding an engine uses.
// Not a precision plan: plans build a PolicyNumerics per side at each weight sync; this file only fixes the contract and the fp32 default.

import type { AttentionGemms, BlockGemms, KvCacheHook, LinearGemms } from '../nn/index.js';
import { sequentialBlockGemms, sequentialLinearGemms } from '../nn/index.js';

/** GEMM functions and KV-cache rounding one engine uses; built from a precision plan side at each weight sync. */
export interface PolicyNumerics {
  readonly label: string;
  block(layer: number): BlockGemms;           // every GEMM site of layer `layer`
  lmHead(): LinearGemms;
  kvHook(layer: number): KvCacheHook | null;  // unused by the diffusion policy (no KV cache)
}

/**
 * Exact float32 numerics: the sequential GEMMs of the NN core at every site (`sequentialBlockGemms`,
 * `sequentialLinearGemms`) and no KV-cache rounding. On Float64Array weights the same GEMMs run in
 * plain doubles, which is what the gradient checks use.
 *
 * @example
 * ```ts
 * const numerics = fp32Numerics();
 * numerics.block(0).q.forward === gemmSequential; // true
 * ```
 */
export function fp32Numerics(): PolicyNumerics {
  const block: BlockGemms & { readonly attention: AttentionGemms } = sequentialBlockGemms; // attention QKᵀ/PV included
  return Object.freeze({
    label: 'fp32',
    block: (_layer: number): BlockGemms => block,
    lmHead: (): LinearGemms => sequentialLinearGemms,
    kvHook: (_layer: number): KvCacheHook | null => null,
  });
}
