// Named quantizer presets: what the real stacks (vLLM, DeepSeek, DeepGEMM, TransformerEngine, torchao, OCP MX, NVFP4,
// GPTQ, AWQ) use, as QuantSpec data with block sizes as parameters. Not the quantization code itself (quantize.ts).

import type { CastProfile } from './profiles.js';
import type { QuantSpec } from './quantize.js';
import { lowPrecisionRecipePresets } from './presets-recipes.js';
import type { QuantPreset, QuantPresetParams } from './preset-types.js';

export type { QuantPreset, QuantPresetParams } from './preset-types.js';

const blockOf = (p: QuantPresetParams, dflt: number): number => p.block ?? dflt;

/** DeepSeek-V3's `act_quant` (1×G groups) and `weight_quant` (B×B blocks): the same rule over different cells. */
const deepseekFp8 =
  (name: string, kind: 'group' | 'block') =>
  (p: QuantPresetParams): QuantSpec => ({
    name,
    format: 'e4m3fn',
    granularity: { kind, size: blockOf(p, 128) },
    scale: {
      kind: 'amax',
      ...((p.eps ?? 1e-4) > 0 ? { amaxFloor: p.eps ?? 1e-4 } : {}),
      ...(p.ue8m0 ? { pow2: 'exp2-ceil-log2' as const } : {}),
    },
    scaling: 'divide',
    profile: 'satfinite',
  });

/** DeepGEMM's `per_token_cast_to_fp8` (1×G) and `per_block_cast_to_fp8` (B×B): the same rule over different cells. */
const deepgemmFp8 =
  (name: string, kind: 'group' | 'block') =>
  (p: QuantPresetParams): QuantSpec => ({
    name,
    format: 'e4m3fn',
    granularity: { kind, size: blockOf(p, 128) },
    scale: {
      kind: 'amax',
      amaxFloor: 1e-4,
      amaxFloorNan: 'propagate',
      ...(p.ue8m0
        ? { pow2: 'ceil-bits' as const, pow2Range: [-126, 127] as const, pow2NonFinite: 'bits' as const }
        : {}),
    },
    scaling: 'reciprocal',
    profile: 'satfinite',
    amaxNan: 'propagate',
  });

/** OCP MX: 1×32 blocks of `format` elements with an E8M0 shared scale (MXFP8 and MXFP4 differ only in the element format). */
const mx =
  (name: string, format: 'e4m3fn' | 'e2m1') =>
  (p: QuantPresetParams): QuantSpec => ({
    name,
    format,
    granularity: { kind: 'group', size: blockOf(p, 32) },
    scale: { kind: 'mx', exponent: p.exponent ?? 'floor' },
    profile: p.profile ?? 'satfinite',
    amaxNan: 'propagate',
  });

/**
 * The E2M1 cast of TransformerEngine's NVFP4 reference, `cast_to_fp4x2`: a threshold table (round
 * to nearest even, saturating) where a NaN matches no threshold and stays code 0. Its −0 → +0 is
 * the spec's `negativeZero` (values that round to zero from below keep code 0x8).
 */
const teFp4ReferenceCast: CastProfile = Object.freeze<CastProfile>({
  name: 'te-fp4-reference',
  description: 'TransformerEngine reference_nvfp4.py cast_to_fp4x2: RNE, saturating, NaN → 0',
  source: 'NVIDIA/TransformerEngine transformer_engine/pytorch/custom_recipes/reference_nvfp4.py cast_to_fp4x2',
  mode: 'rne',
  rules: {
    overflow: 'saturate',
    infinity: 'saturate',
    nan: { to: 'zero', sign: 'positive' },
    negativeZero: 'keep',
    zero: 'nan',
    underflow: 'nan',
    negative: 'nan',
    rawRanges: [],
  },
  formats: { e2m1: {} },
});

/** Every named quantizer preset (frozen table). */
export const quantPresets = Object.freeze({
  'vllm-fp8-tensor': {
    description: 'vLLM dynamic per-tensor FP8 (E4M3): s = amax/448, x·(1/s), fminf/fmaxf clamp, satfinite',
    source:
      'vllm csrc/quantization/w8a8/fp8/common.cu scaled_fp8_quant_kernel_strided_dynamic; common.cuh scaled_fp8_conversion',
    formula:
      's = fl(amax/448) (no floor); q = e4m3_satfinite(fmaxf(−448, fminf(fl(x·fl(1/s)), 448))); all-zero tensor: 1/s = Inf, 0·Inf = NaN → +448 codes, dequant 448·0 = 0',
    params: [],
    defaultBlock: null,
    build: () => ({
      name: 'vllm-fp8-tensor',
      format: 'e4m3fn',
      granularity: { kind: 'tensor' },
      scale: { kind: 'amax' },
      scaling: 'reciprocal',
      clamp: 'fminf-first',
      profile: 'satfinite',
    }),
  },
  'vllm-fp8-token': {
    description: 'vLLM dynamic per-token FP8 (E4M3): s = max(min(amax, ub)/448, 1/(448·512)), x/s',
    source:
      'vllm csrc/quantization/w8a8/fp8/common.cu dynamic_per_token_scaled_fp8_quant_kernel_strided; utils.cuh min_scaling_factor',
    formula: 's = max(fl(min(amax, scale_ub)/448), 1/(448·512)); q = e4m3_satfinite(fmaxf(−448, fminf(fl(x/s), 448)))',
    params: ['scaleUb'],
    defaultBlock: null,
    build: (p) => ({
      name: 'vllm-fp8-token',
      format: 'e4m3fn',
      granularity: { kind: 'row' },
      scale: {
        kind: 'amax',
        scaleFloor: 1 / (448 * 512),
        ...(p.scaleUb !== undefined ? { amaxCeiling: p.scaleUb } : {}),
      },
      scaling: 'divide',
      clamp: 'fminf-first',
      profile: 'satfinite',
    }),
  },
  'vllm-fp8-group': {
    description:
      'vLLM per-token-group FP8 (DeepSeek-style 1×G activations), CUDA kernel: s = max(amax, 1e-10)/448, x/s, NaN → −448',
    source:
      'vllm csrc/quantization/w8a8/fp8/per_token_group_quant.cu ComputeGroupScale, QuantizeGroup (per_token_group_quant_8bit_kernel)',
    formula:
      's = fl(max(amax, 1e-10)/448); ue8m0: s = exp2f(ceilf(log2f(max(s, 1e-10)))); q = e4m3_satfinite(fminf(fmaxf(fl(x/s), −448), 448))',
    params: ['block', 'ue8m0'],
    defaultBlock: 128,
    build: (p) => ({
      name: 'vllm-fp8-group',
      format: 'e4m3fn',
      granularity: { kind: 'group', size: blockOf(p, 128) },
      scale: {
        kind: 'amax',
        amaxFloor: 1e-10,
        ...(p.ue8m0 ? { scaleFloor: 1e-10, pow2: 'exp2-ceil-log2' as const } : {}),
      },
      scaling: 'divide',
      clamp: 'fmaxf-first',
      profile: 'satfinite',
    }),
  },
  'vllm-fp8-group-triton': {
    description:
      'vLLM per-token-group FP8, Triton fallback (non-CUDA platforms): as vllm-fp8-group, but the UE8M0 scale has no 1e-10 floor',
    source:
      'vllm vllm/model_executor/layers/quantization/utils/fp8_utils.py _per_token_group_quant_fp8 (used by per_token_group_quant_fp8 when the CUDA op is unavailable)',
    formula:
      's = fl(max(amax, 1e-10)/448); ue8m0: s = exp2(ceil(log2 s)) (an all-zero group: 2^-42, the kernel 2^-33); q = e4m3_satfinite(clamp(fl(x/s), ±448))',
    params: ['block', 'ue8m0'],
    defaultBlock: 128,
    build: (p) => ({
      name: 'vllm-fp8-group-triton',
      format: 'e4m3fn',
      granularity: { kind: 'group', size: blockOf(p, 128) },
      scale: { kind: 'amax', amaxFloor: 1e-10, ...(p.ue8m0 ? { pow2: 'exp2-ceil-log2' as const } : {}) },
      scaling: 'divide',
      clamp: 'fmaxf-first',
      profile: 'satfinite',
    }),
  },
  'sglang-fp8-group-triton': {
    description:
      'SGLang per-token-group FP8, Triton kernel (row-major scales): s = max(amax, 1e-10)/448, elements x·fl(1/s), no UE8M0',
    source:
      'sgl-project/sglang python/sglang/srt/layers/quantization/fp8_kernel.py _per_token_group_quant_8bit (per_token_group_quant_fp8, column_major_scales=False)',
    formula: 's = fl(max(amax, 1e-10)/448); q = e4m3_satfinite(clamp(fl(x·fl(1/s)), ±448))',
    params: ['block'],
    defaultBlock: 128,
    build: (p) => ({
      name: 'sglang-fp8-group-triton',
      format: 'e4m3fn',
      granularity: { kind: 'group', size: blockOf(p, 128) },
      scale: { kind: 'amax', amaxFloor: 1e-10 },
      scaling: 'reciprocal',
      clamp: 'fmaxf-first',
      profile: 'satfinite',
    }),
  },
  'vllm-int8-token': {
    description: 'vLLM dynamic per-token INT8 symmetric: s = amax/127, x·(127/amax), RNE, saturate, NaN → 0',
    source: 'vllm csrc/quantization/w8a8/int8/scaled_quant.cu dynamic_scaled_int8_quant_kernel',
    formula:
      's = fl(amax/127); inv = amax = 0 ? 0 : fl(127/amax); q = sat_s8(rni(fl(x·inv))) (PTX cvt.rni.sat.s8.f32: NaN → 0)',
    params: [],
    defaultBlock: null,
    build: () => ({
      name: 'vllm-int8-token',
      format: 'int8',
      granularity: { kind: 'row' },
      scale: { kind: 'amax' },
      scaling: 'max-over-amax',
      mode: 'rne',
      intNan: 'zero',
    }),
  },
  'vllm-int8-token-azp': {
    description: 'vLLM dynamic per-token INT8 asymmetric (azp): s = (max−min)/255, azp = rint(−128 − min/s), x·(1/s)',
    source: 'vllm csrc/quantization/w8a8/int8/scaled_quant.cu dynamic_scaled_int8_azp_quant_kernel',
    formula: 's = fl(fl(max − min)/255); azp = rne(fl(−128 − fl(min/s))); q = sat_s8(rni(fl(x·fl(1/s))) + azp)',
    params: [],
    defaultBlock: null,
    build: () => ({
      name: 'vllm-int8-token-azp',
      format: 'int8',
      granularity: { kind: 'row' },
      scale: { kind: 'minmax' },
      scaling: 'reciprocal',
      mode: 'rne',
      intNan: 'zero',
    }),
  },
  'int8-row': {
    description:
      'INT8 symmetric per row, plain x/s (ONNX QuantizeLinear, SmoothQuant-style): s = amax/127, RNE, clamp [−128, 127], NaN → −128',
    source:
      'onnx docs/Operators.md QuantizeLinear; mit-han-lab/smoothquant fake_quant.py quantize_activation_per_token_absmax',
    formula: 's = fl(amax/127); q = clamp(rne(fl(x/s)), −128, 127); NaN → −128',
    params: [],
    defaultBlock: null,
    build: () => ({
      name: 'int8-row',
      format: 'int8',
      granularity: { kind: 'row' },
      scale: { kind: 'amax' },
      scaling: 'divide',
      mode: 'rne',
      intNan: 'min',
    }),
  },
  'deepseek-fp8-group': {
    description: 'DeepSeek-V3 activation quantization, 1×G groups (G = 128): s = max(amax, eps)/448, x/s, satfinite',
    source: 'deepseek-ai/DeepSeek-V3 inference/kernel.py act_quant_kernel (eps and ue8m0 as in the V3.2-style kernel)',
    formula: 's = fl(max(amax, eps)/448); ue8m0: s = exp2(ceil(log2 s)); q = e4m3_satfinite(fl(x/s))',
    params: ['block', 'ue8m0', 'eps'],
    defaultBlock: 128,
    build: deepseekFp8('deepseek-fp8-group', 'group'),
  },
  'deepseek-fp8-block': {
    description: 'DeepSeek-V3 weight quantization, B×B blocks (B = 128): s = max(amax, eps)/448, x/s, satfinite',
    source: 'deepseek-ai/DeepSeek-V3 inference/kernel.py weight_quant_kernel',
    formula: 's = fl(max(amax, eps)/448) per B×B block; ue8m0: s = exp2(ceil(log2 s)); q = e4m3_satfinite(fl(x/s))',
    params: ['block', 'ue8m0', 'eps'],
    defaultBlock: 128,
    build: deepseekFp8('deepseek-fp8-block', 'block'),
  },
  'deepgemm-fp8-group': {
    description:
      'DeepGEMM per_token_cast_to_fp8 (1×G): sf = max(amax, 1e-4)/448 (ceil_to_ue8m0 optional), x·(1/sf); torch.amax and clamp, so a NaN cell has sf NaN (UE8M0: 2^127)',
    source: 'deepseek-ai/DeepGEMM deep_gemm/utils/math.py per_token_cast_to_fp8, ceil_to_ue8m0',
    formula:
      'sf = fl(clamp(amax, 1e-4)/448), amax NaN if the group holds a NaN; ue8m0: sf = 2^clamp(exp + (mant ≠ 0), −126, 127) on the bits (NaN, Inf → 2^127); q = e4m3(fl(x·fl(1/sf)))',
    params: ['block', 'ue8m0'],
    defaultBlock: 128,
    build: deepgemmFp8('deepgemm-fp8-group', 'group'),
  },
  'deepgemm-fp8-block': {
    description:
      'DeepGEMM per_block_cast_to_fp8 (B×B): sf = max(amax, 1e-4)/448 (ceil_to_ue8m0 optional), x·(1/sf); torch.amax and clamp, so a NaN cell has sf NaN (UE8M0: 2^127)',
    source: 'deepseek-ai/DeepGEMM deep_gemm/utils/math.py per_block_cast_to_fp8',
    formula:
      'sf = fl(clamp(amax, 1e-4)/448) per B×B block, amax NaN if the block holds a NaN; ue8m0: sf = 2^clamp(exp + (mant ≠ 0), −126, 127) on the bits (NaN, Inf → 2^127); q = e4m3(fl(x·fl(1/sf)))',
    params: ['block', 'ue8m0'],
    defaultBlock: 128,
    build: deepgemmFp8('deepgemm-fp8-block', 'block'),
  },
  'te-delayed': {
    description: 'TransformerEngine DelayedScaling (E4M3 forward): multiplier from an amax history, x·scale, satfinite',
    source: 'NVIDIA/TransformerEngine common/recipe/delayed_scaling.cu kernel; recipe/__init__.py DelayedScaling',
    formula:
      "q = e4m3_satfinite(fl(x·scale)) with the state's scale; then history roll, amax = max(window) or newest, scale = fl(448·2^-margin/amax) if amax finite and > 0 else previous; dequant scale_inv = fl(1/scale)",
    params: ['historyLength', 'margin', 'algorithm'],
    defaultBlock: null,
    build: (p) => ({
      name: 'te-delayed',
      format: 'e4m3fn',
      granularity: { kind: 'tensor' },
      scale: {
        kind: 'delayed',
        historyLength: p.historyLength ?? 1024,
        margin: p.margin ?? 0,
        algorithm: p.algorithm ?? 'max',
      },
      profile: 'satfinite',
    }),
  },
  'te-current': {
    description:
      'TransformerEngine Float8CurrentScaling, CUDA kernel: scale = 448/amax (1 for zero or non-finite amax), x·scale, satfinite',
    source:
      'NVIDIA/TransformerEngine common/recipe/recipe_common.cuh compute_scale_from_amax; recipe/current_scaling.cu',
    formula:
      'scale = amax finite and > 0 ? fl(448/amax) : 1 (Inf → FLT_MAX); q = e4m3_satfinite(fl(x·scale)); dequant fl(1/scale)',
    params: [],
    defaultBlock: null,
    build: () => ({
      name: 'te-current',
      format: 'e4m3fn',
      granularity: { kind: 'tensor' },
      scale: { kind: 'multiplier', invalidAmax: 'one' },
      profile: 'satfinite',
    }),
  },
  'te-current-pyref': {
    description:
      "TransformerEngine's PyTorch current-scaling reference (CustomRecipe current_scaling_ref_factory): as te-current on finite tensors; a NaN amax gives NaN scales, an infinite one scale 0",
    source:
      'NVIDIA/TransformerEngine transformer_engine/pytorch/custom_recipes/reference_current_scaling.py compute_scale, _scale_from_amax_tensor, _quantize',
    formula:
      'amax = torch.amax(|x|) (NaN propagates); scale = fl(448/amax), Inf → FLT_MAX, amax = 0 → 1; q = e4m3(fl(x·scale)) (torch cast); dequant reciprocal(scale)',
    params: [],
    defaultBlock: null,
    build: () => ({
      name: 'te-current-pyref',
      format: 'e4m3fn',
      granularity: { kind: 'tensor' },
      scale: { kind: 'multiplier', invalidAmax: 'zero' },
      profile: 'torch-2.11',
      amaxNan: 'propagate',
    }),
  },
  'torchao-fp8-row': {
    description:
      'torchao float8 rowwise: scale = 448/max(amax, 1e-12) in double, rounded down to a power of two, x·scale, clamp, cast',
    source:
      'pytorch/ao torchao/float8/float8_utils.py amax_to_scale, _round_scale_down_to_power_of_2, to_fp8_saturated',
    formula:
      'scale = exp2(floor(log2f(fl(448/max(amax, 1e-12))))) (double division; log2 in float32, so a scale a few ulps below 2^k gives 2^k); q = e4m3(clamp(fl(x·scale), ±448)) (NaN stays NaN)',
    params: [],
    defaultBlock: null,
    build: () => ({
      name: 'torchao-fp8-row',
      format: 'e4m3fn',
      granularity: { kind: 'row' },
      scale: {
        kind: 'multiplier',
        amaxFloor: 1e-12,
        precision: 'fp64',
        invalidAmax: 'literal',
        pow2: 'exp2-floor-log2',
      },
      clamp: 'propagate-nan',
      profile: 'torch-2.11',
      amaxNan: 'propagate',
    }),
  },
  mxfp8: {
    description: 'OCP MXFP8 (E4M3 elements, 1×32 blocks, E8M0 scale): X = 2^(⌊log2 amax⌋ − 8), x/X, RNE satfinite',
    source:
      'OCP MX v1.0 §6.3; pytorch/ao torchao/prototype/mx_formats/mx_tensor.py to_mx; microsoft/microxcaling mx/mx_ops.py _quantize_mx',
    formula:
      'e = clamp(⌊log2 amax⌋ − 8, −127, 127) (or another exponent rule on s = amax/448); q = e4m3(x·2^-e); non-finite amax → scale 0xFF (NaN block)',
    params: ['block', 'exponent', 'profile'],
    defaultBlock: 32,
    build: mx('mxfp8', 'e4m3fn'),
  },
  mxfp4: {
    description: 'OCP MXFP4 (E2M1 elements, 1×32 blocks, E8M0 scale): X = 2^(⌊log2 amax⌋ − 2), x/X, RNE satfinite',
    source: 'OCP MX v1.0 §6.3; pytorch/ao torchao/prototype/mx_formats/mx_tensor.py to_mx; microsoft/microxcaling',
    formula:
      'e = clamp(⌊log2 amax⌋ − 2, −127, 127) (or another exponent rule on s = amax/6); q = e2m1(x·2^-e); non-finite amax → scale 0xFF (NaN block)',
    params: ['block', 'exponent', 'profile'],
    defaultBlock: 32,
    build: mx('mxfp4', 'e2m1'),
  },
  nvfp4: {
    description:
      'NVFP4 (E2M1 elements, 1×16 blocks, E4M3 block scale, FP32 global scale), TransformerEngine CUDA kernel',
    source:
      'NVIDIA/TransformerEngine common/cast/nvfp4/core_nvfp4.cuh compute_global_encode_scaling_factor_FP4, compute_decoding_scaling_factor',
    formula:
      'S_enc = min(fl(2688/amax_tensor), FLT_MAX) (1 if 0); S_dec = fl(1/S_enc); s_b = e4m3_satfinite(fl(amax_b·fl(S_enc·fl(1/6)))); q = e2m1_satfinite(fl(x·min(fl(1/fl(s_b·S_dec)), FLT_MAX))); x ≈ q·s_b·S_dec',
    params: ['block'],
    defaultBlock: 16,
    build: (p) => ({
      name: 'nvfp4',
      format: 'e2m1',
      granularity: { kind: 'group', size: blockOf(p, 16) },
      scale: { kind: 'nvfp4' },
      profile: 'satfinite',
    }),
  },
  'nvfp4-te-pyref': {
    description:
      "NVFP4 as TransformerEngine's PyTorch reference quantizes it (NVFP4QuantizerRef, 1×16, no RHT): −0 → +0, NaN → code 0, torch.amax/torch.max propagate NaN, an all-zero tensor keeps S_enc = FLT_MAX",
    source:
      'NVIDIA/TransformerEngine transformer_engine/pytorch/custom_recipes/reference_nvfp4.py _quantize_blockwise_reference, cast_to_fp4x2',
    formula:
      'as nvfp4 with S_enc = min(fl(2688/amax_tensor), FLT_MAX), 1 only if that is 0; q = cast_to_fp4x2(clamp(fl(x·enc), ±6)): thresholds, −0 → 0x0, NaN → 0x0',
    params: ['block'],
    defaultBlock: 16,
    build: (p) => ({
      name: 'nvfp4-te-pyref',
      format: 'e2m1',
      granularity: { kind: 'group', size: blockOf(p, 16) },
      scale: { kind: 'nvfp4', unitEncode: 'reference' },
      clamp: 'propagate-nan',
      profile: teFp4ReferenceCast,
      amaxNan: 'propagate',
      negativeZero: 'positive',
    }),
  },
  ...lowPrecisionRecipePresets,
  'gptq-w4g128': {
    description: 'GPTQ W4A16 group quantization (uint4, group 128 along K, range including 0, zero point)',
    source: 'IST-DASLab/gptq quant.py Quantizer.find_params, quantize',
    formula:
      'lo = min(min x, 0), hi = max(max x, 0) (both 0 → −1, 1); s = fl((hi − lo)/15); zp = rne(−lo/s) (sym: ±max(|lo|, hi), zp = 8); q = clamp(rne(fl(x/s)) + zp, 0, 15)',
    params: ['block', 'symmetric'],
    defaultBlock: 128,
    build: (p) => ({
      name: 'gptq-w4g128',
      format: 'uint4',
      granularity: { kind: 'group', size: blockOf(p, 128) },
      scale: { kind: 'minmax', includeZero: true, unitIfZero: true, symmetric: p.symmetric ?? false },
      scaling: 'divide',
      mode: 'rne',
      amaxNan: 'propagate',
    }),
  },
  'awq-w4g128': {
    description: 'AWQ W4A16 group quantization (uint4, group 128, range floored at 1e-5, clamped zero point)',
    source: 'mit-han-lab/llm-awq awq/quantize/quantizer.py pseudo_quantize_tensor',
    formula: 's = fl(max(max − min, 1e-5)/15); zp = clamp(rne(−min/s), 0, 15); q = clamp(rne(fl(x/s)) + zp, 0, 15)',
    params: ['block'],
    defaultBlock: 128,
    build: (p) => ({
      name: 'awq-w4g128',
      format: 'uint4',
      granularity: { kind: 'group', size: blockOf(p, 128) },
      scale: { kind: 'minmax', rangeFloor: 1e-5 },
      scaling: 'divide',
      mode: 'rne',
      amaxNan: 'propagate',
    }),
  },
} as const satisfies Record<string, QuantPreset>);

/** Names of the presets. */
export type QuantPresetName = keyof typeof quantPresets;

/**
 * The spec of a named preset with its parameters (block sizes default to the real systems' sizes;
 * the toy models pass smaller ones).
 *
 * @example
 * ```ts
 * const spec = quantPreset('deepseek-fp8-block', { block: 16 });
 * ```
 */
export function quantPreset(name: string, params: QuantPresetParams = {}): QuantSpec {
  const preset = (quantPresets as Record<string, QuantPreset>)[name];
  if (preset === undefined)
    throw new Error(`preset: unknown quantizer preset '${name}' (known: ${Object.keys(quantPresets).join(', ')})`);
  for (const key of Object.keys(params) as (keyof QuantPresetParams)[]) {
    if (params[key] !== undefined && !preset.params.includes(key)) {
      throw new Error(`preset '${name}' takes no parameter '${key}' (it takes: ${preset.params.join(', ') || 'none'})`);
    }
  }
  if (params.block !== undefined && (!Number.isInteger(params.block) || params.block < 1)) {
    throw new Error(`block: expected a positive integer, got ${params.block}`);
  }
  return preset.build(params);
}

/** The preset table of docs/quantization.md, generated from the records (a test keeps the two equal). */
export function presetTableMarkdown(): string {
  const rows = Object.entries(quantPresets as Record<string, QuantPreset>).map(([name, p]) => {
    const spec = p.build({});
    const g = spec.granularity;
    const gran = g.kind === 'group' ? `1×${g.size}` : g.kind === 'block' ? `${g.size}×${g.size}` : g.kind;
    const params = p.params.length === 0 ? '—' : p.params.map((k) => `\`${k}\``).join(', ');
    return `| \`${name}\` | \`${spec.format}\` | ${gran} | ${p.formula.replace(/\|/g, '\\|')} | ${params} | ${p.description}. Source: ${p.source} |`;
  });
  return [
    '| preset | element | default granularity | exact formula (fl = float32 rounding) | parameters | models |',
    '| --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}
