// Quantizer presets of the 2026 low-precision RL recipes: NVFP4 4over6 (TransformerEngine, FlashInfer), row-scaled
// (per-token) NVFP4, MXFP8 as NeMo-RL's reshard stores it, INT4 and MXFP4 fake QAT (Megatron/miles, ModelOpt, Megatron
// Lite). Registered in presets.ts; QuantSpec data only.

import type { QuantPreset, QuantPresetParams } from './preset-types.js';

const blockOf = (p: QuantPresetParams, dflt: number): number => p.block ?? dflt;

/** The recipe presets (spread into `quantPresets`; docs/quantization.md lists them with the others). */
export const lowPrecisionRecipePresets = Object.freeze({
  'nvfp4-row-te': {
    description:
      'Row-scaled NVFP4 (per-token activations): one FP32 S_enc per row from the row amax, TransformerEngine row_scaled_nvfp4 (recipe row_scaled_activation; the per_token_activation flag of FlashInfer nvfp4_quantize)',
    source:
      'NVIDIA/TransformerEngine@d0067d0 transformer_engine/pytorch/custom_recipes/reference_nvfp4.py _quantize(global_amax_row = max |x| per row), _quantize_blockwise_reference; TE #2931',
    formula:
      'per row r: S_enc,r = min(fl(2688/amax_r), FLT_MAX) (1 if 0); then as nvfp4 within the row; stored scale fl(s_b·S_dec,r) (the row S_dec folded in, no global scale)',
    params: ['block'],
    defaultBlock: 16,
    build: (p) => ({
      name: 'nvfp4-row-te',
      format: 'e2m1',
      granularity: { kind: 'group', size: blockOf(p, 16) },
      scale: { kind: 'nvfp4', rowScaled: true },
      profile: 'satfinite',
    }),
  },
  'nvfp4-4over6-te': {
    description:
      'NVFP4 4over6 as TransformerEngine quantizes it (CUDA, exact error math): each 1×16 block scaled to 4 or to 6, lower error wins (ties: 6); tensor scale with 256 (recipe default nvfp4_4over6_e4m3_use_256 = all)',
    source:
      'NVIDIA/TransformerEngine@d0067d0 transformer_engine/common/cast/nvfp4/quantize_4over6_nvfp4.cuh compute_scale_pair, accumulate_dequant_error; core_nvfp4.cuh compute_global_encode_scaling_factor_FP4<E4M3_MAX>; TE #2972, #3068',
    formula:
      'S_enc = min(fl(6·bound/amax), FLT_MAX) (1 if 0), bound 256; b = fl(fl(amax_b/6)·S_enc); s4 = e4m3(min(fl(1.5b), 448)), s6 = e4m3(min(b, 448)); per candidate q = e2m1(fl(x·min(fl(1/fl(s·S_dec)), FLT_MAX))), d = fl(fl(fl(fl(q·s)·amax)/(6·bound)) − x), err = Σ fl |d| (or d²) in order; s4 iff err4 < err6',
    params: ['block', 'error', 'tensorBound', 'rowScaled'],
    defaultBlock: 16,
    build: (p) => ({
      name: 'nvfp4-4over6-te',
      format: 'e2m1',
      granularity: { kind: 'group', size: blockOf(p, 16) },
      scale: {
        kind: 'nvfp4',
        tensorBound: p.tensorBound ?? 256,
        ...(p.rowScaled ? { rowScaled: true } : {}),
        fourOverSix: { error: p.error ?? 'mae', dequant: 'te' },
      },
      profile: 'satfinite',
    }),
  },
  'nvfp4-4over6-flashinfer': {
    description:
      'NVFP4 4over6 as FlashInfer quantizes it (FLASHINFER_NVFP4_4OVER6=1, fast math off): tensor scale with 448 unless FLASHINFER_NVFP4_4OVER6_E4M3_USE_256, MAE; error dequantized with S_dec; an all-zero tensor gets S_enc = FLT_MAX',
    source:
      'flashinfer-ai/flashinfer@fb28d72 csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh cvt_warp_fp16_to_fp4 (DISABLE_FP4_QUANT_FAST_MATH, NVFP4_4OVER6_CONFIG); flashinfer/quantization/nvfp4_quantization_utils.py make_nvfp4_global_scale; flashinfer #3264',
    formula:
      'S_enc = min(fl(6·bound/amax), FLT_MAX) (amax 0: FLT_MAX), bound 448; s4, s6, q as nvfp4-4over6-te; d = fl(fl(fl(q·s)·fl(1/S_enc)) − x), err = Σ fl |d| (or d²) in order (16 per thread); s4 iff err4 < err6',
    params: ['block', 'error', 'tensorBound'],
    defaultBlock: 16,
    build: (p) => ({
      name: 'nvfp4-4over6-flashinfer',
      format: 'e2m1',
      granularity: { kind: 'group', size: blockOf(p, 16) },
      scale: {
        kind: 'nvfp4',
        unitEncode: 'reference',
        tensorBound: p.tensorBound ?? 448,
        fourOverSix: { error: p.error ?? 'mae', dequant: 'flashinfer' },
      },
      profile: 'satfinite',
    }),
  },
  'mxfp8-nemo-rl-reshard': {
    description:
      "MXFP8 as NeMo-RL's receiver-side BF16 → MXFP8 reshard writes it: vLLM mxfp8_e4m3_quantize (FlashInfer mxfp8_quantize: E8M0 = RoundPosInf of amax·(1/448)), then every E8M0 byte 0 stored as 1",
    source:
      'NVIDIA-NeMo/RL #3477 nemo_rl/models/generation/vllm/quantization/fp8.py quantize_mxfp8_weight (scale == 0 → 1); flashinfer-ai/flashinfer@fb28d72 quantization_utils.cuh cvt_warp_fp16_to_mxfp8',
    formula:
      'e = clamp(⌈log2 fl(amax·fl(1/448))⌉, −127, 127) (amax 0: −127); q = e4m3_satfinite(x·2^-e); stored byte max(e + 127, 1): a zero block reads 2^-126 (decodes 0), a nonzero block with byte 0 decodes doubled',
    params: ['block'],
    defaultBlock: 32,
    build: (p) => ({
      name: 'mxfp8-nemo-rl-reshard',
      format: 'e4m3fn',
      granularity: { kind: 'group', size: blockOf(p, 32) },
      scale: { kind: 'mx', exponent: 'ceil-bits', zeroByte: 'one' },
      profile: 'satfinite',
      amaxNan: 'propagate',
    }),
  },
  'megatron-int4-fake-qat': {
    description:
      "INT4 W4A16 fake quantization for QAT as miles' Megatron fork applies it to routed-expert weights (OPEN_TRAINING_INT4_FAKE_QAT_FLAG=1): symmetric, one scale per 1×group along K, codes ±7, straight-through backward (miles #1651 uses the same rule on FSDP)",
    source:
      'radixark/Megatron-LM@2e64d78 megatron/core/extensions/transformer_engine.py lines 1508–1547 _FakeInt4QuantizationSTE.forward; lines 1779–1791 TEGroupedLinear._get_weight_tensors (group OPEN_TRAINING_INT4_GROUP_SIZE, default 128)',
    formula:
      's = max(fl(amax/7), fl(1e-5)); q = clamp(rne(fl(x/s)), −7, 7); dequantized fl(q·s) (the fork then casts to the weight dtype)',
    params: ['block'],
    defaultBlock: 128,
    build: (p) => ({
      name: 'megatron-int4-fake-qat',
      format: 'int4',
      granularity: { kind: 'group', size: blockOf(p, 128) },
      scale: { kind: 'amax', divisor: 7, scaleFloor: 1e-5 },
      scaling: 'divide',
      mode: 'rne',
      amaxNan: 'propagate',
    }),
  },
  'modelopt-mxfp4-qtensor': {
    description:
      "MXFP4 as ModelOpt's MXFP4QTensor.quantize encodes it (the weights verl's QAT exporter hands the rollout engine, verl #7895): E8M0 = ceil of the float32 log2 of amax/6, E2M1 elements with ties toward zero, an exact zero stored as −0",
    source:
      'NVIDIA/Model-Optimizer@a2fbac7 modelopt/torch/quantization/qtensor/mxfp4_tensor.py lines 38–81 MXFP4QTensor.quantize (cast_fp4 lines 46–53: sign_bit = (2 − sign(x)) // 2, ord = Σ (|x| − E2M1_bounds) > 0; scale lines 72–77); verl #7895 (routed experts mlp.experts.linear_fc1/fc2 only)',
    formula:
      's = fl(amax/6); e = max(⌈fl(log2 s)⌉, −127) (log2 rounded to float32 first: s a few ulps above 2^k with |k| ≥ 5 gives e = k and saturates the block max to 6); q = E2M1 of fl(x·2^-e), ties toward zero, > 5 → 6; a scaled ±0 → −0 (code 0x8); dequantized q·2^e',
    params: ['block'],
    defaultBlock: 32,
    build: (p) => ({
      name: 'modelopt-mxfp4-qtensor',
      format: 'e2m1',
      granularity: { kind: 'group', size: blockOf(p, 32) },
      scale: { kind: 'mx', exponent: 'exp2-ceil-log2', ratio: 'divide' },
      profile: 'satfinite',
      mode: 'rhz',
      negativeZero: 'negative',
      amaxNan: 'propagate',
    }),
  },
  'megatron-lite-mxfp4-qat': {
    description:
      "MXFP4 weight-only fake quantization for QAT as Megatron Lite's primitive runs it (ISEEKYAN/Megatron-LM #127): the scale and E2M1 rounding of ModelOpt's MXFP4QTensor (rollout-aligned), the zero's sign kept, straight-through backward",
    source:
      'ISEEKYAN/Megatron-LM@22b9a50 experimental/lite/megatron/lite/primitive/quantization/mxfp4.py lines 43–66 mx_shared_scale_exponent (descale = amax/6, ceil(maximum(log2, −127))), lines 74–89 e2m1_round_index (bucketize right=False: ties down); @0270b07 quantization/qat.py _e2m1_qdq (sign(x)·level), _mxfp4_fake_quantize_weight (block 32, w_hat = qdq(w/2^e)·2^e), _FloatFakeQuantSTE',
    formula:
      'as modelopt-mxfp4-qtensor, except that the dequantized value keeps the sign of x: sign(x)·level, so a scaled ±0 stays ±0 (the exported code of an exact zero is −0); dequantized q·2^e',
    params: ['block'],
    defaultBlock: 32,
    build: (p) => ({
      name: 'megatron-lite-mxfp4-qat',
      format: 'e2m1',
      granularity: { kind: 'group', size: blockOf(p, 32) },
      scale: { kind: 'mx', exponent: 'exp2-ceil-log2', ratio: 'divide' },
      profile: 'satfinite',
      mode: 'rhz',
      amaxNan: 'propagate',
    }),
  },
  'modelopt-mxfp4-fake-cuda': {
    description:
      "MXFP4 fake quantization as ModelOpt's TensorQuantizer runs it on the GPU (dynamic block quant, cuda_ext_mx fused_amax_convert; the trainer side of verl #7895): E8M0 = the exact ceiling of log2 fl(amax/6) read from its bits, E2M1 round to nearest even",
    source:
      'NVIDIA/Model-Optimizer@a2fbac7 modelopt/torch/kernels/quantization/gemm/tensor_quant_mx.cu lines 105–137 compute_scale_e8m0_NV, 140–156 compute_scale, 36–55 quantize, 239–294 amax_and_convert_kernel; tensor_quant_mx.h lines 104–141 round_to_even, convert_to_table_types; modelopt/torch/quantization/tensor_quant.py lines 157–196 _dynamic_block_quantize_impl',
    formula:
      's = fl(amax/6) (RNE division); e = field − 126 when the mantissa is nonzero, else field − 127 (⌈log2 s⌉ exact); q = E2M1 of fl(|x|·2^-e), RNE, saturating; dequantized q·2^e with the sign of x (amax 0, ±Inf or NaN: the kernel uses scale 1, here 2^-127 resp. NaN — the same zeros for a zero block)',
    params: ['block'],
    defaultBlock: 32,
    build: (p) => ({
      name: 'modelopt-mxfp4-fake-cuda',
      format: 'e2m1',
      granularity: { kind: 'group', size: blockOf(p, 32) },
      scale: { kind: 'mx', exponent: 'ceil-bits', ratio: 'divide' },
      profile: 'satfinite',
    }),
  },
} as const satisfies Record<string, QuantPreset>);
