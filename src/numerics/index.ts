// `qrl-sim/numerics`: float formats, cast profiles, the scalar and vector casts, quantizers and presets, GEMM accumulator models, KV cache.
// Chosen names, not `export *` (the rule: docs/decisions.md; pinned by test/api-surface.test.ts).

// Number formats as data and the generic decode.
export {
  floatFormats,
  floatFormat,
  type FloatFormat,
  type FloatFormatName,
  type FloatFormatSpec,
  defineFloatFormat,
  intFormats,
  type IntFormat,
  type IntFormatName,
  decode,
  type NanEncoding,
  isNanCode,
} from './formats.js';

// Cast profiles: what each backend does at a format's edges (overflow, NaN, subnormals).
export {
  castProfiles,
  castProfile,
  type CastProfile,
  type CastProfileName,
  type CastRules,
  type RoundingMode,
  roundingModes,
  resolveRules,
  profileCovers,
  type OverflowRule,
  type NanRule,
  type RawRange,
} from './profiles.js';

// The scalar reference cast.
export { round, encode, type RoundOptions, scalarEncoder, type ScalarEncoder, type FormatLike } from './round.js';

// Vector casts over Float32Array: encode, decode, fake-quantize, nibble packing.
export {
  fakeQuant,
  encodeArray,
  decodeArray,
  type VectorCastOptions,
  type CodeArray,
  allocCodes,
  packNibbles,
  unpackNibbles,
} from './vector.js';

// The fused fp32 → format → fp32 rounding (fakeQuant's values without a code array).
export { roundArray, roundingKernel, type RoundInto } from './round-array.js';

// Quantizers as data: spec (element format, granularity, scale rule, scaling op, clamp) and the quantizer.
export {
  quantize,
  dequantize,
  quantizedValues,
  type QuantSpec,
  type QuantizedTensor,
  type QuantizeOptions,
  type Granularity,
  type ScaleRule,
  type ElementFormat,
  type ElementFormatName,
  delayedScalingState,
  delayedScalingUpdate,
  type DelayedScalingState,
  type NoScaleRule,
  type StaticScaleRule,
  type AmaxScaleRule,
  type MxScaleRule,
  type MultiplierScaleRule,
  type DelayedScaleRule,
  type MinMaxScaleRule,
  type Nvfp4ScaleRule,
  type FourOverSixRule,
  type QuantCodes,
  type PreCastClamp,
  type ScalingOp,
} from './quantize.js';

// Named quantizer presets of the real stacks.
export {
  quantPreset,
  quantPresets,
  type QuantPreset,
  type QuantPresetName,
  type QuantPresetParams,
} from './presets.js';

// GEMM with operand quantization and accumulator models.
export {
  gemm,
  type GemmOptions,
  type AccumulatorModel,
  accumulatorModels,
  type OperandQuant,
  hopperFusedDotAdd,
  truncateToE8M,
} from './gemm.js';
export { type BatchedOperandMemo, createBatchedOperandMemo, gemmBatched } from './gemm-batched.js';

// FP8 KV-cache quantization.
export {
  kvCacheCalibrate,
  kvCacheForward,
  kvCacheState,
  type KvCacheState,
  kvCacheWeightUpdate,
  kvDequantize,
  kvQuantize,
  type KvCacheSpec,
  type KvCalibration,
  type QuantizedKv,
} from './kvcache.js';

// The threaded fp32 GEMM.
export { disposeGemmThreads, threadedGemmF32, GEMM_ROWS_PER_TASK, GEMM_THREAD_MIN_WORK } from './threads.js';

// Pre-quantized FP8 weight transport: SkyRL's blockwise cast and the engines' scale layouts (refit.transport).
export {
  blockwiseCastToFp8,
  dequantBlockwiseFp8,
  loadWireScale,
  wireScale,
  scaleLayouts,
  type BlockwiseFp8Options,
  type BlockwiseFp8Weight,
  type ScaleLayout,
  type WireScale,
} from './fp8-transport.js';

// Power-of-two scale roundings (a field of quantizer presets).
export type { Pow2Rounding } from './scales.js';
