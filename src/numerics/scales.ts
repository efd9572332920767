// Float32 arithmetic helpers for scale rules: C fminf/fmaxf, fused multiply-add, power-of-two scale roundings.
// Not a quantizer (quantize.ts) and not a cast: every function here returns a float32 value or an exponent.

import { exponentOf } from './formats.js';

/** Largest finite float32, 0x7F7FFFFF = (2 − 2^-23)·2^127. */
export const FLT_MAX = 3.4028234663852886e38;

/** Smallest positive normal float32, 2^-126. */
const FLT_MIN_NORMAL = 2 ** -126;

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The IEEE bit pattern of `x` rounded to float32. */
export function float32Bits(x: number): number {
  f32[0] = x;
  return u32[0] as number;
}

/** C `fminf`: the smaller operand; a NaN operand is ignored (returns the other one). */
export function fminf(a: number, b: number): number {
  if (Number.isNaN(a)) return b;
  if (Number.isNaN(b)) return a;
  return a < b ? a : b;
}

/** C `fmaxf`: the larger operand; a NaN operand is ignored (returns the other one). */
export function fmaxf(a: number, b: number): number {
  if (Number.isNaN(a)) return b;
  if (Number.isNaN(b)) return a;
  return a > b ? a : b;
}

/**
 * Fused multiply-add in float32, `fround(a·b + c)` with a single rounding (CUDA `fmaf`, PTX
 * `fma.rn.f32`), for float32 a, b, c. The product of two float32 values is exact in double; the
 * double sum t is then rounded to float32. That double rounding can only go wrong when t lands
 * exactly on a float32 midpoint while the exact sum is not; TwoSum recovers the lost part and
 * breaks the tie in its direction.
 *
 * @example
 * ```ts
 * fma32(1 + 2 ** -12, 1 + 2 ** -12, -1); // 2^-11 + 2^-24 (the separate product would round first)
 * ```
 */
export function fma32(a: number, b: number, c: number): number {
  const p = a * b; // exact: 24 × 24 bits
  const t = p + c;
  if (!Number.isFinite(t)) return Math.fround(t);
  const r = Math.fround(t);
  // TwoSum error of t = p + c.
  const bp = t - c;
  const err = p - bp + (c - (t - bp));
  if (err === 0 || r === t) return r;
  // Is t exactly halfway between two float32 neighbours?
  const other = r < t ? nextFloat32Up(r) : nextFloat32Down(r);
  if ((r + other) / 2 !== t) return r;
  // Tie in double but not in exact arithmetic: round toward the side the error points to.
  const lower = Math.min(r, other);
  const upper = Math.max(r, other);
  return err > 0 ? upper : lower;
}

/** The next float32 above `x` (x a finite float32). */
export function nextFloat32Up(x: number): number {
  if (x === 0) return 2 ** -149;
  const b = float32Bits(x);
  u32[0] = x > 0 ? b + 1 : b - 1;
  return f32[0] as number;
}

/** The next float32 below `x` (x a finite float32). */
export function nextFloat32Down(x: number): number {
  return -nextFloat32Up(-x);
}

/**
 * How a positive scale is rounded to a power of two (UE8M0 scales, power-of-two per-tensor scales).
 *
 * - `floor`: 2^⌊log2 s⌋ (OCP MX §6.3, torchao FLOOR, microxcaling, gfloat `compute_scale_amax`).
 * - `ceil-bits`: the exponent field plus one when any mantissa bit is set (DeepGEMM
 *   `ceil_to_ue8m0`, TransformerEngine `float_to_e8m0`, torchao RCEIL, PTX `cvt.rp.ue8m0x2`).
 * - `exp2-ceil-log2`: `exp2f(ceilf(log2f(s)))` in float32 (vLLM per-token-group, DeepSeek Triton);
 *   `log2f` is modelled as correctly rounded, so s a few ulps above 2^k gives 2^k, not 2^(k+1).
 * - `exp2-floor-log2`: `exp2(floor(log2(s)))` in float32 (torchao `_round_scale_down_to_power_of_2`);
 *   s a few ulps below 2^k has log2 rounded to exactly k, so it gives 2^k, above s.
 * - `nearest-ties-up`: nearest power of two in the significand, 1.5·2^k going up (torch c10
 *   `Float8_e8m0fnu`, ml_dtypes, ONNX Runtime `round_mode="nearest"`).
 * - `nearest-ties-even`: as above but 1.5·2^k goes to the even biased exponent (gfloat
 *   `round_float(ocp_e8m0, TiesToEven)`).
 */
export type Pow2Rounding =
  | 'floor'
  | 'ceil-bits'
  | 'exp2-ceil-log2'
  | 'exp2-floor-log2'
  | 'nearest-ties-up'
  | 'nearest-ties-even';

/**
 * The unbiased exponent k of the power of two 2^k that `rule` rounds the positive float32 `s` to
 * (no clamping; s must be finite and > 0). Float32 subnormals are read as fp32 bit patterns:
 * exponent field 0 means 2^-127 (the E8M0 reading of a zero exponent field).
 *
 * @example
 * ```ts
 * pow2Exponent(Math.fround(1 + 2 ** -23), 'ceil-bits');      // 1
 * pow2Exponent(Math.fround(1 + 2 ** -23), 'exp2-ceil-log2'); // 0 (log2f rounds to exactly 0)
 * pow2Exponent(Math.fround(16 * (1 - 2 ** -23)), 'exp2-floor-log2'); // 4 (log2f rounds up to exactly 4)
 * pow2Exponent(1.5, 'nearest-ties-up');   // 1
 * pow2Exponent(1.5, 'nearest-ties-even'); // 0 (biased exponent 127 is odd, 128 even → 1)
 * ```
 */
export function pow2Exponent(s: number, rule: Pow2Rounding): number {
  if (!(s > 0) || !Number.isFinite(s)) throw new Error(`pow2Exponent: s = ${s} is not a positive finite number`);
  const bits = float32Bits(s);
  const field = bits >>> 23;
  const mant = bits & 0x7fffff;
  const e = field - 127; // field 0 (fp32 subnormal) reads as 2^-127
  switch (rule) {
    case 'floor':
      return e;
    case 'ceil-bits':
      // A subnormal s is a multiple of 2^-149 below 2^-126: it rounds up to 2^-127 iff s ≤ 2^-127.
      if (field === 0) return mant <= 0x400000 ? -127 : -126;
      return mant === 0 ? e : e + 1;
    case 'exp2-ceil-log2':
      return Math.ceil(Math.fround(Math.log2(Math.fround(s))));
    case 'exp2-floor-log2':
      return Math.floor(Math.fround(Math.log2(Math.fround(s))));
    case 'nearest-ties-up':
      if (field === 0) return mant >= 0x600000 ? -126 : -127; // 1.5·2^-127 ties up
      return mant >= 0x400000 ? e + 1 : e;
    case 'nearest-ties-even': {
      if (field === 0) return mant > 0x600000 ? -126 : -127; // the tie stays on the even field 0
      if (mant > 0x400000) return e + 1;
      if (mant < 0x400000) return e;
      return (field & 1) === 1 ? e + 1 : e; // tie: to the even biased exponent
    }
  }
}

/** ⌊log2 x⌋ of a positive finite float32 read from its bits (subnormals give −127, as E8M0 does). */
export function float32Exponent(x: number): number {
  if (x >= FLT_MIN_NORMAL) return exponentOf(x);
  return -127;
}
