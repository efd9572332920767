// Quantizer specs as data: element formats, granularity, scale rules, scaling op, clamp, cast profile, and the
// quantized tensor they produce. Not the interpreter (quantize.ts, quantize-reference.ts), not presets (presets.ts).

import type { Rng } from '../core/rng.js';
import {
  type FloatFormat,
  type FloatFormatName,
  type IntFormat,
  type IntFormatName,
  floatFormats,
  intFormats,
} from './formats.js';
import type { CastProfile, CastProfileName, RoundingMode } from './profiles.js';
import type { Pow2Rounding } from './scales.js';
import type { CodeArray } from './vector.js';

/** Element formats a quantizer can target: every float format and every integer format. */
export type ElementFormatName = FloatFormatName | IntFormatName;

/**
 * Which elements share one scale, for a row-major (rows, cols) tensor. Rows are tokens
 * (activations) or output channels (weights); groups and blocks run along a row (the K dimension).
 * A last group or block shorter than its size is allowed (ONNX blocked quantization: ceil).
 */
export type Granularity =
  /** One scale for the whole tensor; scale shape []. */
  | { readonly kind: 'tensor' }
  /** One scale per row (per token / per output channel); scale shape [rows]. */
  | { readonly kind: 'row' }
  /** 1×G groups along each row (DeepSeek 1×128 activations, MX 1×32, NVFP4 1×16, GPTQ g128); scale shape [rows, ⌈cols/G⌉]. */
  | { readonly kind: 'group'; readonly size: number }
  /** B×B blocks (DeepSeek 128×128 weights); scale shape [⌈rows/B⌉, ⌈cols/B⌉]. */
  | { readonly kind: 'block'; readonly size: number };

/** No scaling: elements are rounded to the format as they are (s = 1). */
export interface NoScaleRule {
  readonly kind: 'none';
}

/** A given dequant scale (and zero point) for every cell: ONNX QuantizeLinear, vLLM static scales. */
export interface StaticScaleRule {
  readonly kind: 'static';
  /** One dequant scale for all cells, or one per cell (row-major over the scale shape). */
  readonly scale: number | Float32Array;
  /** Integer zero point(s) for integer formats. @defaultValue 0 */
  readonly zeroPoint?: number | Int32Array;
}

/**
 * Symmetric absmax scaling: `s = clamp(amax, amaxFloor, amaxCeiling) / divisor`, then
 * `s = max(s, scaleFloor)`, then optionally a power of two. All ops in float32.
 */
export interface AmaxScaleRule {
  readonly kind: 'amax';
  /** @defaultValue the format's largest finite value (448 for e4m3fn, 127 for int8) */
  readonly divisor?: number;
  /** Lower clamp of amax (DeepGEMM 1e-4, vLLM group eps 1e-10). @defaultValue none */
  readonly amaxFloor?: number;
  /** Upper clamp of amax (vLLM `scale_ub`). @defaultValue none */
  readonly amaxCeiling?: number;
  /** Lower clamp of s (vLLM per-token `1/(448·512)`). @defaultValue none */
  readonly scaleFloor?: number;
  /** Round s to a power of two (UE8M0 scales) with this rule. @defaultValue none */
  readonly pow2?: Pow2Rounding;
  /** Clamp of the power-of-two exponent. @defaultValue [-127, 127] (DeepGEMM `ceil_to_ue8m0`: [-126, 127]) */
  readonly pow2Range?: readonly [number, number];
  /** What `amaxFloor` makes of a NaN amax: the floor (`fmaxf`, CUDA kernels) or NaN (`torch.clamp`, DeepGEMM). @defaultValue 'floor' */
  readonly amaxFloorNan?: 'floor' | 'propagate';
  /**
   * A NaN or infinite s under `pow2`: kept as it is, or rounded from its float32 bits like a finite
   * one (exponent field 255, plus one for a NaN's mantissa; DeepGEMM `ceil_to_ue8m0`) and clamped
   * to `pow2Range`. @defaultValue 'keep'
   */
  readonly pow2NonFinite?: 'keep' | 'bits';
}

/**
 * MX shared scale (OCP MX v1.0): an E8M0 power of two per block. `floor` is the OCP rule
 * `2^(⌊log2 amax⌋ − emax_elem)`; the other roundings apply to `s = amax / max_elem` (TE/torchao
 * RCEIL compute it as `amax · fl(1/max)`, used for `ceil-bits`). Exponent clamped to [−127, 127];
 * a non-finite amax gives the NaN scale 0xFF (the whole block decodes to NaN).
 */
export interface MxScaleRule {
  readonly kind: 'mx';
  readonly exponent: Pow2Rounding;
  /**
   * How the roundings other than `floor` form `s = amax / max_elem` in float32: `reciprocal` = `fl(amax · fl(1/max))`
   * (TE/torchao RCEIL), `divide` = `fl(amax / max)` (ModelOpt `MXFP4QTensor`, mxfp4_tensor.py line 73, and its
   * CUDA fake quant `compute_scale_e8m0_NV`, tensor_quant_mx.cu line 114, NVIDIA/Model-Optimizer@a2fbac7).
   * @defaultValue 'reciprocal' for `ceil-bits`, else 'divide'
   */
  readonly ratio?: 'reciprocal' | 'divide';
  /**
   * The E8M0 byte 0 (scale 2^-127, what an all-zero block gets) after the elements are cast: `keep`, or
   * `one` = stored as byte 1 (2^-126), NeMo-RL's receiver-side BF16 → MXFP8 reshard (`scale == 0 → 1`).
   * The elements are not recast: a zero block still decodes to 0, a nonzero block with byte 0 decodes
   * doubled. @defaultValue 'keep'
   */
  readonly zeroByte?: 'keep' | 'one';
}

/**
 * A quantization multiplier (TransformerEngine current scaling, torchao float8): elements are
 * `x · mult` with `mult = (max · 2^-margin) / max(amax, amaxFloor)`; the dequant scale stored is
 * `fl(1 / mult)` (TE `scale_inv`).
 */
export interface MultiplierScaleRule {
  readonly kind: 'multiplier';
  /** Lower clamp of amax. @defaultValue none */
  readonly amaxFloor?: number;
  /** Margin in powers of two. @defaultValue 0 */
  readonly margin?: number;
  /** Round the multiplier down to a power of two from its bits (TE `force_pow_2_scales`: `bits & 0xFF800000`). @defaultValue false */
  readonly pow2Down?: boolean;
  /** Round the multiplier to a power of two with this rule instead (torchao `exp2(floor(log2 s))`: `exp2-floor-log2`). @defaultValue none */
  readonly pow2?: Pow2Rounding;
  /**
   * `one`: a zero or non-finite amax gives mult = 1 (TE kernel); `zero`: only a zero amax gives 1, a
   * NaN or infinite one the division as written (TE's PyTorch reference); `literal`: the division as
   * written (torchao). @defaultValue 'one'
   */
  readonly invalidAmax?: 'one' | 'zero' | 'literal';
  /** Precision of the division `max / amax`: float32 (TE `__fdiv_rn`) or double then float32 (torchao). @defaultValue 'fp32' */
  readonly precision?: 'fp32' | 'fp64';
}

/**
 * TransformerEngine delayed scaling: the multiplier comes from an amax history of earlier steps;
 * the state lives in a {@link DelayedScalingState} passed to and returned by {@link quantize}.
 */
export interface DelayedScaleRule {
  readonly kind: 'delayed';
  /** @defaultValue 1024 */
  readonly historyLength?: number;
  /** @defaultValue 0 */
  readonly margin?: number;
  /** `max` over the window, or the `most-recent` amax. @defaultValue 'max' */
  readonly algorithm?: 'max' | 'most-recent';
}

/**
 * Asymmetric min/max scaling with a zero point (integer formats): `s = (max − min) / (qmax − qmin)`,
 * `zp = clamp(round(qmin − min/s), qmin, qmax)`; GPTQ, AWQ and vLLM's azp int8 are instances.
 */
export interface MinMaxScaleRule {
  readonly kind: 'minmax';
  /** Extend the range to contain 0 (GPTQ). @defaultValue false */
  readonly includeZero?: boolean;
  /** GPTQ `sym`: range ±max(|min|, max) (min only when negative) and zero point at the middle code. @defaultValue false */
  readonly symmetric?: boolean;
  /** Lower clamp of max − min (AWQ 1e-5). @defaultValue none */
  readonly rangeFloor?: number;
  /** GPTQ: a range with min = max = 0 becomes (−1, +1). @defaultValue false */
  readonly unitIfZero?: boolean;
}

/**
 * NVFP4 two-level scaling (TransformerEngine): per-tensor `S_enc = min(448·6 / amax, FLT_MAX)` (1 if
 * amax is 0 or S_enc is 0), `S_dec = fl(1/S_enc)`; per block an E4M3 (satfinite) scale
 * `e4m3(block_amax · fl(S_enc · fl(1/6)))`; elements `x · min(fl(1/(s_block · S_dec)), FLT_MAX)`.
 */
export interface Nvfp4ScaleRule {
  readonly kind: 'nvfp4';
  /**
   * When `S_enc` becomes 1: `kernel` = global amax 0, `S_enc` 0 or NaN (TE `core_nvfp4.cuh`);
   * `reference` = `S_enc` 0 only, so an all-zero tensor keeps FLT_MAX and a NaN amax gives NaN
   * (TE `reference_nvfp4.py`). @defaultValue 'kernel'
   */
  readonly unitEncode?: 'kernel' | 'reference';
  /**
   * The E4M3 bound in the tensor scale, `S_enc = fl(bound·6 / amax)`: 448 (NVFP4), or 256 (TransformerEngine's
   * 4over6 default, room for the 1.5× map-to-4 block scale). @defaultValue 448
   */
  readonly tensorBound?: 448 | 256;
  /** Per-row (per-token) global amax instead of one per tensor: TE `row_scaled_nvfp4`. @defaultValue false */
  readonly rowScaled?: boolean;
  /** 4over6 block-scale selection (each block scaled to 4 or to 6, lower error wins). @defaultValue none */
  readonly fourOverSix?: FourOverSixRule;
}

/**
 * NVFP4 "4over6": per 16-block two E4M3 block scales, map-to-6 `e4m3(min(b, 448))` and map-to-4
 * `e4m3(min(fl(b·1.5), 448))` with `b = fl(fl(amax_b/6)·S_enc)`; both candidates are cast, their
 * error summed in float32 over the block, and map-to-4 is kept only when its error is strictly lower.
 */
export interface FourOverSixRule {
  /** Per-element error: `mae` = |d|, `mse` = fl(d·d). */
  readonly error: 'mae' | 'mse';
  /**
   * Dequantization used in the error and the order of the sum: `te` = `fl(fl(fl(q·s_b)·amax)/(6·bound))`,
   * summed over the 16 elements in order (TE `quantize_4over6_nvfp4.cuh`); `flashinfer` =
   * `fl(fl(q·s_b)·fl(1/S_enc))`, two 8-element sums added (FlashInfer `cvt_warp_fp16_to_fp4`, exact math).
   */
  readonly dequant: 'te' | 'flashinfer';
}

/** How a scale is chosen. */
export type ScaleRule =
  | NoScaleRule
  | StaticScaleRule
  | AmaxScaleRule
  | MxScaleRule
  | MultiplierScaleRule
  | DelayedScaleRule
  | MinMaxScaleRule
  | Nvfp4ScaleRule;

/**
 * How `amax`/`minmax`/`static` scales are applied to the elements (float32 ops):
 * `divide` = `x / s` (vLLM per-token and group, DeepSeek Triton, ONNX, GPTQ);
 * `reciprocal` = `x · fl(1/s)` (vLLM per-tensor, DeepGEMM);
 * `max-over-amax` = `x · fl(divisor/amax)`, 0 when amax is 0 (vLLM `dynamic_scaled_int8_quant`).
 * Multiplier, delayed, MX and NVFP4 rules always multiply.
 */
export type ScalingOp = 'divide' | 'reciprocal' | 'max-over-amax';

/**
 * A clamp of the scaled value to ±max before the cast: `fminf-first` = `fmaxf(−max, fminf(v, max))`
 * (vLLM `scaled_fp8_conversion`: NaN → +max); `fmaxf-first` = `fminf(fmaxf(v, −max), max)` (vLLM
 * per-token-group: NaN → −max); `propagate-nan` = `torch.clamp` (NaN stays NaN).
 */
export type PreCastClamp = 'none' | 'fminf-first' | 'fmaxf-first' | 'propagate-nan';

/** A quantizer: plain data; {@link quantize} interprets it. */
export interface QuantSpec {
  /** Preset or user name, for messages and reports. */
  readonly name?: string;
  readonly format: ElementFormatName;
  readonly granularity: Granularity;
  readonly scale: ScaleRule;
  /** @defaultValue 'divide' */
  readonly scaling?: ScalingOp;
  /** @defaultValue 'none' */
  readonly clamp?: PreCastClamp;
  /** Cast profile of float element formats. @defaultValue 'satfinite' */
  readonly profile?: CastProfileName | CastProfile;
  /** Rounding mode (float: the profile's by default; integer: `rne`, `rtz`, `rha` or `rhz`). */
  readonly mode?: RoundingMode;
  /** Integer formats: NaN becomes the format's minimum (ONNX Runtime) or 0 (PTX `cvt.rni.sat`). @defaultValue 'min' */
  readonly intNan?: 'min' | 'zero';
  /** Whether a NaN element makes amax/min/max NaN (`torch.amax`) or is skipped (CUDA `fmaxf`). @defaultValue 'ignore' */
  readonly amaxNan?: 'ignore' | 'propagate';
  /**
   * A scaled element that is exactly ±0 before the cast: kept; −0 made +0 (`positive`: TE's NVFP4 reference
   * tests `x >= 0.0` first); or +0 made −0 (`negative`: ModelOpt `MXFP4QTensor` `cast_fp4` sets the sign bit
   * `(2 − sign(x)) // 2`, which is 1 for sign(±0) = 0; NVIDIA/Model-Optimizer@a2fbac7
   * modelopt/torch/quantization/qtensor/mxfp4_tensor.py line 48). @defaultValue 'keep'
   */
  readonly negativeZero?: 'keep' | 'positive' | 'negative';
}

/** Explicit state of TransformerEngine delayed scaling (never hidden inside the quantizer). */
export interface DelayedScalingState {
  /** amax history, index 0 = the step being recorded (TE layout). */
  readonly amaxHistory: Float32Array;
  /** The multiplier used for the next quantization (TE `scale`). */
  readonly scale: number;
  /** fl(1/scale), the dequant scale (TE `scale_inv`). */
  readonly scaleInv: number;
}

/** Codes of a quantized tensor: float formats as bit codes, integer formats as their integer values. */
export type QuantCodes = CodeArray | Int8Array;

/** The result of {@link quantize}: codes, scales and everything needed to dequantize. */
export interface QuantizedTensor {
  readonly spec: QuantSpec;
  /** (rows, cols) of the original tensor. */
  readonly shape: readonly [number, number];
  /** One code per element, row-major. */
  readonly codes: QuantCodes;
  /** Dequant scale per cell (x ≈ (q − zp)·s, times `globalScale` when present); NaN for a NaN MX scale. */
  readonly scales: Float32Array;
  /** Shape of `scales`: [] per tensor, [rows], [rows, groups] or [blockRows, blockCols]. */
  readonly scaleShape: readonly number[];
  /** Codes of the scales in their own format: E8M0 (MX) or E4M3FN (NVFP4). */
  readonly scaleCodes?: Uint8Array;
  /** Integer zero point per cell (asymmetric integer quantization). */
  readonly zeroPoints?: Int32Array;
  /** Second-level dequant scale (NVFP4 `S_dec`). */
  readonly globalScale?: number;
  /** Updated delayed-scaling state (delayed rules only). */
  readonly state?: DelayedScalingState;
}

/** Options of {@link quantize}. */
export interface QuantizeOptions {
  /** Delayed scaling: the state from the previous step. @defaultValue {@link delayedScalingState}(rule) */
  readonly state?: DelayedScalingState;
  /** Random bits for `stochastic` float casts (one uint32 per element, or a stream). */
  readonly randomBits?: Uint32Array | Rng;
  /**
   * Per-tensor granularity only: the amax the scale rule reads instead of this tensor's own (an engine's
   * dynamic activation scale over every row of its step, of which `x` is a part). @defaultValue the tensor's amax
   */
  readonly tensorAmax?: number;
}

/** The record of an element format: a float format or an integer format. */
export type ElementFormat = FloatFormat | IntFormat;

/** The element format record of a spec. */
export function elementFormat(name: ElementFormatName): ElementFormat {
  const f = (floatFormats as Record<string, FloatFormat>)[name] ?? (intFormats as Record<string, IntFormat>)[name];
  if (f === undefined) {
    throw new Error(
      `format: unknown element format '${name}' (known: ${[...Object.keys(floatFormats), ...Object.keys(intFormats)].join(', ')})`,
    );
  }
  return f;
}

/** Largest finite magnitude of the element format (int: its max). @internal */
export function formatMax(f: ElementFormat): number {
  return f.kind === 'float' ? f.maxFinite : f.max;
}

/** Rounds a finite or infinite number to an integer with `mode` (no clamping; NaN stays NaN). */
export function roundInt(v: number, mode: RoundingMode): number {
  if (!Number.isFinite(v)) return v;
  switch (mode) {
    case 'rne': {
      const f = Math.floor(v);
      const d = v - f;
      return d > 0.5 || (d === 0.5 && f % 2 !== 0) ? f + 1 : f;
    }
    case 'rtz':
      return Math.trunc(v);
    case 'rha':
      return v < 0 ? -Math.floor(-v + 0.5) : Math.floor(v + 0.5);
    case 'rhz':
      return v < 0 ? -Math.ceil(-v - 0.5) : Math.ceil(v - 0.5);
    case 'stochastic':
      throw new Error("mode: 'stochastic' is not supported for integer formats");
  }
}

/** {@link PreCastClamp} as the small integer {@link clampScaled} switches on (a number keeps the element loop's call cheap). @internal */
export const clampCodes: Readonly<Record<PreCastClamp, number>> = Object.freeze({
  none: 0,
  'fminf-first': 1,
  'fmaxf-first': 2,
  'propagate-nan': 3,
});

/**
 * The {@link PreCastClamp} (given by its {@link clampCodes} code) of a scaled element `v` against ±`max`:
 * C `fminf`/`fmaxf` in either order (a NaN becomes +max or −max), or `torch.clamp` (NaN stays). The
 * `fminf`/`fmaxf` decisions are spelled out as comparisons (the intermediate `t` is never NaN) so that
 * the element loops of both quantizers inline one small function. @internal
 */
export function clampScaled(v: number, clamp: number, max: number): number {
  switch (clamp) {
    case 1: {
      // fminf-first: fmaxf(−max, fminf(v, max)); NaN → +max (vLLM scaled_fp8_conversion)
      const t = v !== v ? max : v < max ? v : max;
      return -max > t ? -max : t;
    }
    case 2: {
      // fmaxf-first: fminf(fmaxf(v, −max), max); NaN → −max (vLLM per-token-group)
      const t = v !== v ? -max : v > -max ? v : -max;
      return t < max ? t : max;
    }
    case 3: // propagate-nan: torch.clamp
      return v !== v ? v : Math.min(max, Math.max(-max, v));
    default:
      return v;
  }
}
