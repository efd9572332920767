// Cast profiles as data: what each real backend does at the edges of a float format
// (ties, overflow, ±Inf, NaN, −0, no-zero formats). Not the rounding arithmetic (round.ts).

import { type FloatFormat, type FloatFormatName, floatFormats } from './formats.js';

/** Rounding modes of the scalar reference and the vector casts. */
export type RoundingMode =
  /** Round to nearest, ties to even. */
  | 'rne'
  /** Round toward zero (truncate). */
  | 'rtz'
  /** Round to nearest, ties away from zero. */
  | 'rha'
  /**
   * Round to nearest, ties toward zero (the smaller magnitude): ModelOpt's `MXFP4QTensor` E2M1 cast,
   * `ord = Σ (|x| − bounds) > 0` over the midpoints, counts only the midpoints strictly below |x|
   * (NVIDIA/Model-Optimizer@a2fbac7 modelopt/torch/quantization/qtensor/mxfp4_tensor.py lines 46–53).
   */
  | 'rhz'
  /**
   * Stochastic rounding with 32 caller-supplied random bits r ∈ [0, 2^32): round the magnitude
   * up iff ⌊frac·2^32⌋ + r ≥ 2^32, where frac ∈ [0, 1) is the distance to the lower neighbour in
   * units of the target's quantum. P(up) = ⌊frac·2^32⌋/2^32.
   */
  | 'stochastic';

/** Every rounding mode name. */
export const roundingModes: readonly RoundingMode[] = Object.freeze(['rne', 'rtz', 'rha', 'rhz', 'stochastic']);

/**
 * What an out-of-range result becomes: `saturate` = ±maxFinite (sign kept); `inf` = ±Inf when the
 * format has Inf, else NaN as the profile's `nan` rule would encode it with the input's sign;
 * `nan` = NaN with the input's sign (where the format can carry one).
 */
export type OverflowRule = 'saturate' | 'inf' | 'nan';

/** What a NaN input becomes. */
export type NanRule =
  | {
      readonly to: 'nan';
      /** Sign of the NaN code: the input's, always positive, or always negative (sign bit set). */
      readonly sign: 'keep' | 'positive' | 'negative';
      /**
       * Which NaN code of an IEEE-style format: `quiet` = exponent all ones and mantissa MSB only
       * (0x7E for E5M2, 0x7FC0 for BF16); `all-ones` = every exponent and mantissa bit set (0x7F,
       * 0x7FFF); `payload` = the quiet code with the top mantissa bits of the float32 NaN kept
       * (x86 F16C `vcvtps2ph` and Arm `FCVT`: 0x7F808000 → FP16 0x7E04). Formats with a single NaN
       * code ignore this.
       */
      readonly pattern: 'quiet' | 'all-ones' | 'payload';
    }
  | { readonly to: 'max'; readonly sign: 'keep' | 'positive' }
  /** `flip` = +NaN → −0 and −NaN → +0 (ml_dtypes FP4/FP6, whose quiet NaN is the −0 code). */
  | { readonly to: 'zero'; readonly sign: 'keep' | 'positive' | 'flip' };

/**
 * A raw-input range [lo, hi) of |x| that a backend maps to a fixed result before rounding: ±max,
 * NaN, or `up` = the representable magnitude next above `lo` (a bit-level rounding that rounds
 * these inputs up where rounding by value would not).
 */
export interface RawRange {
  readonly lo: number;
  readonly hi: number;
  readonly to: 'max' | 'nan' | 'up';
}

/** The edge rules of a profile for one format. */
export interface CastRules {
  /** A finite input whose rounded magnitude exceeds maxFinite (directed `rtz` always saturates). */
  readonly overflow: OverflowRule;
  /** A ±Inf input. */
  readonly infinity: OverflowRule;
  readonly nan: NanRule;
  /** −0 input (and negative values that round to zero): kept as −0, or made +0. */
  readonly negativeZero: 'keep' | 'positive';
  /** Formats without a zero (E8M0): an exact ±0 input becomes the smallest value or NaN. */
  readonly zero: 'min' | 'nan';
  /** Formats without a zero: a positive value that rounds to 0 becomes the smallest value or NaN. */
  readonly underflow: 'min' | 'nan';
  /** Unsigned formats: a negative input is replaced by its magnitude, by the smallest value, or NaN. */
  readonly negative: 'abs' | 'min' | 'nan';
  /** Backend quirks decided on the raw |x| before rounding (checked after NaN/Inf). */
  readonly rawRanges: readonly RawRange[];
}

/** Names of the built-in cast profiles. */
export type CastProfileName =
  | 'ieee'
  | 'satfinite'
  | 'torch-2.11'
  | 'torch-2.13'
  | 'torch-2.13-scalar'
  | 'ml-dtypes'
  | 'onnx-sat'
  | 'ort-1.30'
  | 'vllm-fp8'
  | 'mx';

/** A cast profile: default rounding, base edge rules, and the formats it covers with overrides. */
export interface CastProfile {
  readonly name: string;
  /** One line: which real backend this reproduces. */
  readonly description: string;
  /** Where the behaviour comes from (source file or observation). */
  readonly source: string;
  /** Rounding mode used when the caller does not pass one. */
  readonly mode: RoundingMode;
  readonly rules: CastRules;
  /** The formats this profile applies to, each with rule overrides (possibly empty). */
  readonly formats: Readonly<Partial<Record<FloatFormatName, Partial<CastRules>>>>;
}

const base: CastRules = {
  overflow: 'inf',
  infinity: 'inf',
  nan: { to: 'nan', sign: 'keep', pattern: 'quiet' },
  negativeZero: 'keep',
  zero: 'nan',
  underflow: 'nan',
  negative: 'nan',
  rawRanges: [],
};

const saturating: Partial<CastRules> = { overflow: 'saturate', infinity: 'saturate' };

/**
 * ONNX Cast-24 to E8M0 without saturation: any |x| outside [2^-127, 2^127] is NaN, decided on the
 * raw value (observed with onnxruntime 1.30, round_mode "nearest"), so 2^127·(1 + 2^-23) does not
 * round down to 2^127 and 0.9·2^-127 does not round up to 2^-127.
 */
const e8m0OutOfRangeNan: Partial<CastRules> = {
  rawRanges: [
    { lo: 2 ** -149, hi: 2 ** -127, to: 'nan' },
    { lo: 2 ** 127 * (1 + 2 ** -23), hi: Infinity, to: 'nan' },
  ],
};

/**
 * E8M0 from float32 by rounding the exponent field with the mantissa as guard/round/sticky bits
 * (c10 fp8e8m0fnu_from_fp32_value; ml_dtypes float8_e8m0fnu): a float32 subnormal's field is 0, an
 * even lsb, so every subnormal in (2^-127, 1.5·2^-127] rounds up to 2^-126, where rounding its value
 * would give 2^-127.
 */
const e8m0SubnormalBits: readonly RawRange[] = [
  { lo: 2 ** -127 + 2 ** -149, hi: 1.5 * 2 ** -127 + 2 ** -149, to: 'up' },
];

/** PyTorch 2.13's per-format rules (torch-2.11 differs only in E4M3FN, which did not saturate yet). */
const torch213Formats = {
  e4m3fn: { overflow: 'saturate', infinity: 'saturate' },
  e4m3fnuz: {},
  e5m2: {},
  e5m2fnuz: {},
  e8m0: { zero: 'min', underflow: 'min', negative: 'abs', rawRanges: e8m0SubnormalBits },
  bf16: { nan: { to: 'nan', sign: 'negative', pattern: 'all-ones' } },
  fp16: { nan: { to: 'nan', sign: 'keep', pattern: 'payload' } },
} as const satisfies CastProfile['formats'];

const profileList: readonly CastProfile[] = [
  {
    name: 'ieee',
    description:
      'IEEE-style non-saturating cast (ONNX Cast saturate=0 spec): overflow → ±Inf, or NaN where there is no Inf',
    source: 'onnx docs/Operators.md Cast (saturate=0 column); IEEE 754',
    mode: 'rne',
    rules: base,
    formats: {
      e4m3fn: {},
      e4m3fnuz: {},
      e5m2: {},
      e5m2fnuz: {},
      e8m0: e8m0OutOfRangeNan,
      bf16: {},
      fp16: {},
      tf32: {},
      fp32: {},
    },
  },
  {
    name: 'satfinite',
    description: 'PTX cvt.rn.satfinite: overflow and ±Inf → ±max, NaN → canonical positive NaN (FP4/FP6: +max)',
    source:
      'PTX ISA cvt (.satfinite); cuda_fp8.hpp __nv_cvt_float_to_fp8(…, __NV_SATFINITE, …); TransformerEngine, Triton',
    mode: 'rne',
    rules: { ...base, ...saturating, nan: { to: 'nan', sign: 'positive', pattern: 'all-ones' } },
    formats: {
      e4m3fn: {},
      e5m2: {},
      e3m2: { nan: { to: 'max', sign: 'positive' } },
      e2m3: { nan: { to: 'max', sign: 'positive' } },
      e2m1: { nan: { to: 'max', sign: 'positive' } },
      bf16: {},
      fp16: {},
      tf32: {},
    },
  },
  {
    name: 'torch-2.13',
    description:
      'PyTorch 2.13 CPU eager cast (Tensor.to): E4M3FN saturates finite overflow and ±Inf to ±448; BF16 NaN → 0xFFFF; FP16 NaN keeps its payload; E8M0 rounds float32 subnormals on their bits',
    source:
      'observed with torch 2.13.0+cpu (python/requirements.lock; the library-casts check runs it in npm test). E4M3FN: PR pytorch/pytorch#178817 (torch/headeronly/util/Float8_e4m3fn.h fp8e4m3fn_from_fp32_value, aten/src/ATen/cpu/vec/vec512/vec512_float8.h); ' +
      'BF16: aten/src/ATen/cpu/vec/vec512/vec512_bfloat16.h cvtfp32_bf16 (NaN lanes blended with 0xffff; the AVX2 copy in vec256/vec256_16bit_float.h likewise); FP16: the F16C vcvtps2ph conversion of the vectorized copy; ' +
      'E8M0: torch/headeronly/util/Float8_e8m0fnu.h fp8e8m0fnu_from_fp32_value (round up iff guard && (round || sticky || exponent-field lsb): a float32 subnormal above 2^-127 rounds up to 2^-126); other formats c10 Float8_e5m2.h, Float8_e4m3fnuz.h, Float8_e5m2fnuz.h',
    mode: 'rne',
    rules: { ...base, nan: { to: 'nan', sign: 'keep', pattern: 'all-ones' } },
    formats: torch213Formats,
  },
  {
    name: 'torch-2.13-scalar',
    description:
      'PyTorch 2.13 CPU eager cast to BF16 on the scalar kernel (ATEN_CPU_CAPABILITY=default): as torch-2.13 except NaN → 0x7FC0 (positive quiet NaN, payload and sign dropped)',
    source:
      'c10/util/BFloat16.h round_to_nearest_even (std::isnan(src) → UINT16_C(0x7FC0)), the conversion of the non-vectorized CPU kernel; ' +
      'observed with torch 2.13.0+cpu under ATEN_CPU_CAPABILITY=default (the library-casts check: every other value equals torch-2.13, the vectorized kernel of AVX2/AVX-512)',
    mode: 'rne',
    rules: { ...base, nan: { to: 'nan', sign: 'keep', pattern: 'all-ones' } },
    formats: { bf16: { nan: { to: 'nan', sign: 'positive', pattern: 'quiet' } } },
  },
  {
    name: 'torch-2.11',
    description:
      'PyTorch CPU eager cast up to 2.11: as torch-2.13 except E4M3FN, which does not saturate (finite overflow and ±Inf → NaN with the input sign)',
    source:
      'pytorch c10/util/Float8_e4m3fn.h fp8e4m3fn_from_fp32_value before PR pytorch/pytorch#178817 (f_bits >= fp8_max → 0x7f); the other formats take the same code as in 2.13. Checked against torch 2.11.0+cu130 on a GPU machine by scripts/gpu-check.sh (2026-11-26): every value of the library-casts suite agrees on its CPU, in all seven formats, and on CUDA except NaN payloads of bf16/fp16, which CUDA canonicalises to 0x7FFF; npm test cannot run it (the lockfile has 2.13)',
    mode: 'rne',
    rules: { ...base, nan: { to: 'nan', sign: 'keep', pattern: 'all-ones' } },
    formats: { ...torch213Formats, e4m3fn: {} },
  },
  {
    name: 'ml-dtypes',
    description:
      'ml_dtypes 0.6 astype (= ONNX reference without saturation); FP4/FP6 saturate and map NaN to ∓0; E8M0 rounds float32 subnormals on their bits',
    source:
      'jax-ml/ml_dtypes include/float8.h ConvertImpl (kSaturate=false), mxfloat.h numeric_limits; observed with ml_dtypes 0.6.0 (the library-casts check)',
    mode: 'rne',
    rules: { ...base, underflow: 'min' },
    formats: {
      e4m3fn: {},
      e4m3fnuz: {},
      e5m2: {},
      e5m2fnuz: {},
      e3m2: { ...saturating, nan: { to: 'zero', sign: 'flip' } },
      e2m3: { ...saturating, nan: { to: 'zero', sign: 'flip' } },
      e2m1: { ...saturating, nan: { to: 'zero', sign: 'flip' } },
      e8m0: { rawRanges: e8m0SubnormalBits },
      bf16: {},
    },
  },
  {
    name: 'onnx-sat',
    description:
      'ONNX Cast/QuantizeLinear saturate=1: float8 overflow and ±Inf → ±max, NaN kept; FP4 NaN → +6; bf16/fp16 unaffected',
    source: 'onnx docs/Operators.md Cast (saturate=1), docs/technical/float4.md; observed onnxruntime 1.30 CPU',
    mode: 'rne',
    rules: { ...base, ...saturating, nan: { to: 'nan', sign: 'keep', pattern: 'all-ones' } },
    formats: {
      e4m3fn: {},
      e4m3fnuz: {},
      e5m2: {},
      e5m2fnuz: {},
      e2m1: { nan: { to: 'max', sign: 'positive' } },
      e8m0: { zero: 'min', underflow: 'min', negative: 'min' },
      bf16: { overflow: 'inf', infinity: 'inf', nan: { to: 'nan', sign: 'keep', pattern: 'quiet' } },
      fp16: { overflow: 'inf', infinity: 'inf', nan: { to: 'nan', sign: 'keep', pattern: 'payload' } },
    },
  },
  {
    name: 'ort-1.30',
    description:
      'onnxruntime 1.30 CPU with saturate=0: the spec plus two observed quirks (E4M3FN [480,496) → ±448, E5M2 [61440,65536) → NaN); BF16 NaN → quiet with sign, FP16 NaN keeps its payload',
    source:
      'observed with onnxruntime-node 1.30 CPU and onnxruntime 1.30 python (the library-casts check); include/onnxruntime/core/framework/float8.h',
    mode: 'rne',
    rules: { ...base, nan: { to: 'nan', sign: 'keep', pattern: 'all-ones' } },
    formats: {
      e4m3fn: { rawRanges: [{ lo: 480, hi: 496, to: 'max' }] },
      e4m3fnuz: {},
      e5m2: { rawRanges: [{ lo: 61440, hi: 65536, to: 'nan' }] },
      e5m2fnuz: {},
      e8m0: e8m0OutOfRangeNan,
      bf16: { nan: { to: 'nan', sign: 'keep', pattern: 'quiet' } },
      fp16: { nan: { to: 'nan', sign: 'keep', pattern: 'payload' } },
    },
  },
  {
    name: 'vllm-fp8',
    description: 'vLLM scaled_fp8_conversion: clamp with fminf/fmaxf then satfinite, so NaN → +448',
    source: 'vllm csrc/quantization/w8a8/fp8/common.cuh scaled_fp8_conversion',
    mode: 'rne',
    rules: { ...base, ...saturating, nan: { to: 'max', sign: 'positive' } },
    formats: { e4m3fn: {} },
  },
  {
    name: 'mx',
    description:
      'microxcaling MX element quantization: ties away from zero, saturate; FP4/FP6 NaN → +0 (the block scale carries NaN)',
    source:
      'microsoft/microxcaling mx/elemwise_ops.py _round_mantissa ("nearest"), _quantize_elemwise_core(saturate_normals=True)',
    mode: 'rha',
    rules: { ...base, ...saturating },
    formats: {
      e4m3fn: {},
      e5m2: {},
      e3m2: { nan: { to: 'zero', sign: 'positive' } },
      e2m3: { nan: { to: 'zero', sign: 'positive' } },
      e2m1: { nan: { to: 'zero', sign: 'positive' } },
    },
  },
];

/** Every built-in cast profile, by name (frozen). */
export const castProfiles: Readonly<Record<CastProfileName, CastProfile>> = Object.freeze(
  Object.fromEntries(profileList.map((p) => [p.name, Object.freeze(p)])) as Record<CastProfileName, CastProfile>,
);

/** Looks up a built-in profile by name; throws an error listing the known profiles otherwise. */
export function castProfile(name: string): CastProfile {
  const profile = (castProfiles as Record<string, CastProfile>)[name];
  if (profile === undefined) {
    throw new Error(`unknown cast profile '${name}' (known: ${Object.keys(castProfiles).join(', ')})`);
  }
  return profile;
}

/** Whether `profile` covers `format`. */
export function profileCovers(profile: CastProfile, format: FloatFormat): boolean {
  return Object.hasOwn(profile.formats, format.name);
}

/**
 * The edge rules of `profile` for `format` (base rules with the format's overrides). Throws when
 * the profile does not cover the format, or when a rule would need a code the format lacks.
 */
export function resolveRules(format: FloatFormat, profile: CastProfile): CastRules {
  const overrides = (profile.formats as Record<string, Partial<CastRules> | undefined>)[format.name];
  if (overrides === undefined) {
    const covered = Object.keys(profile.formats).join(', ');
    throw new Error(`profile '${profile.name}' does not apply to format '${format.name}' (it covers: ${covered})`);
  }
  const rules: CastRules = { ...profile.rules, ...overrides };
  const needsNan =
    rules.nan.to === 'nan' ||
    (!format.hasInf && (rules.overflow !== 'saturate' || rules.infinity !== 'saturate')) ||
    rules.rawRanges.some((r) => r.to === 'nan');
  if (needsNan && format.nanEncoding === 'none') {
    throw new Error(`profile '${profile.name}' needs a NaN code that format '${format.name}' lacks`);
  }
  return rules;
}

/** Every (profile, format) pair that exists, for documentation and exhaustive tests. */
export function profileCoverage(): { profile: CastProfile; format: FloatFormat; rules: CastRules }[] {
  const out: { profile: CastProfile; format: FloatFormat; rules: CastRules }[] = [];
  for (const profile of Object.values(castProfiles)) {
    for (const name of Object.keys(profile.formats) as FloatFormatName[]) {
      const format = floatFormats[name];
      out.push({ profile, format, rules: resolveRules(format, profile) });
    }
  }
  return out;
}
