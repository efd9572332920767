// The scalar reference cast: one generic, exact rounding of a number to any float format under
// any cast profile. It is the single source of truth; it is written for clarity, not speed.

import {
  type FloatFormat,
  type FloatFormatName,
  decode,
  encodeExact,
  exponentOf,
  floatFormat,
  signBit,
} from './formats.js';
import {
  type CastProfile,
  type CastProfileName,
  type CastRules,
  type OverflowRule,
  type RawRange,
  type RoundingMode,
  castProfile,
  resolveRules,
} from './profiles.js';

/** Options of {@link encode} and {@link round}. */
export interface RoundOptions {
  /** The cast profile (record or built-in name). */
  readonly profile: CastProfile | CastProfileName;
  /** Rounding mode. @defaultValue the profile's `mode` */
  readonly mode?: RoundingMode;
  /** 32 random bits, an integer in [0, 2^32), required by `stochastic`. */
  readonly randomBits?: number;
}

/** A format given as a record or by name. */
export type FormatLike = FloatFormat | FloatFormatName;

/** @internal Resolves format and profile arguments to records. */
export function resolveFormat(format: FormatLike): FloatFormat {
  return typeof format === 'string' ? floatFormat(format) : format;
}

/** @internal */
export function resolveProfile(profile: CastProfile | CastProfileName): CastProfile {
  return typeof profile === 'string' ? castProfile(profile) : profile;
}

/** Codes for the fixed outcomes of a (format, rules) pair, by sign. */
export interface EdgeCodes {
  /** NaN input, by input sign [positive, negative]. */
  readonly nan: readonly [number, number];
  /** ±Inf input. */
  readonly infinity: readonly [number, number];
  /** Finite overflow after rounding. */
  readonly overflow: readonly [number, number];
  /** ±max (for `rtz` overflow and raw ranges). */
  readonly max: readonly [number, number];
  /** Raw-range NaN results. */
  readonly nanSigned: readonly [number, number];
  /** Result of rounding to zero (or exact zero input), by input sign. */
  readonly zero: readonly [number, number];
  /** Exact zero input (differs from `zero` only for formats without a zero). */
  readonly zeroInput: readonly [number, number];
  /** Negative input to an unsigned format, or null when the rule is `abs`. */
  readonly negative: number | null;
}

function nanCode(format: FloatFormat, negative: boolean, pattern: 'quiet' | 'all-ones' | 'payload'): number {
  const sign = negative && format.signed ? format.signMask : 0;
  const expField = (2 ** format.expBits - 1) * 2 ** format.manBits;
  switch (format.nanEncoding) {
    case 'neg-zero':
      return format.signMask;
    case 'all-ones':
      return sign + expField + (2 ** format.manBits - 1);
    case 'ieee':
      return sign + expField + (pattern === 'all-ones' ? 2 ** format.manBits - 1 : 2 ** (format.manBits - 1));
    case 'none':
      throw new Error(`format ${format.name} has no NaN`);
  }
}

function signed(format: FloatFormat, code: number, negative: boolean): number {
  return negative && format.signed ? code + format.signMask : code;
}

/** @internal The fixed-outcome codes of a format under resolved rules. */
export function edgeCodes(format: FloatFormat, rules: CastRules): EdgeCodes {
  const pattern = rules.nan.to === 'nan' ? rules.nan.pattern : 'quiet';
  // −1 marks "no NaN code"; resolveRules guarantees such a result is never selected.
  const nanOf = (neg: boolean): number => (format.nanEncoding === 'none' ? -1 : nanCode(format, neg, pattern));
  const max = (neg: boolean): number => signed(format, format.maxCode, neg);
  const outOfRange = (rule: OverflowRule, neg: boolean): number => {
    if (rule === 'saturate') return max(neg);
    if (rule === 'inf' && format.infCode !== null) return signed(format, format.infCode, neg);
    return nanOf(neg);
  };
  const zeroCode = (neg: boolean): number =>
    neg && format.hasNegZero && rules.negativeZero === 'keep' ? format.signMask : 0;
  const noZero = (rule: 'min' | 'nan'): number => (rule === 'min' ? 0 : nanOf(false));
  const nanInput = (neg: boolean): number => {
    const rule = rules.nan;
    const outNeg =
      rule.sign === 'keep' ? neg : rule.sign === 'positive' ? false : rule.sign === 'negative' ? true : !neg;
    if (rule.to === 'nan') return nanOf(outNeg);
    if (rule.to === 'max') return max(outNeg);
    return signed(format, 0, outNeg && format.hasNegZero);
  };
  const pair = (f: (neg: boolean) => number): readonly [number, number] => [f(false), f(true)];
  return {
    nan: pair(nanInput),
    infinity: pair((neg) => outOfRange(rules.infinity, neg)),
    overflow: pair((neg) => outOfRange(rules.overflow, neg)),
    max: pair(max),
    nanSigned: pair(nanOf),
    zero: pair((neg) => (format.hasZero ? zeroCode(neg) : noZero(rules.underflow))),
    zeroInput: pair((neg) => (format.hasZero ? zeroCode(neg) : noZero(rules.zero))),
    negative: format.signed || rules.negative === 'abs' ? null : rules.negative === 'min' ? 0 : nanOf(false),
  };
}

/**
 * The codes [positive, negative] a raw range maps to: ±max, NaN, or (`up`) the representable
 * magnitude next above the range's `lo`.
 * @internal
 */
export function rawRangeCodes(format: FloatFormat, range: RawRange, codes: EdgeCodes): readonly [number, number] {
  if (range.to === 'max') return codes.max;
  if (range.to === 'nan') return codes.nanSigned;
  const quantumExp = Math.max(exponentOf(range.lo), format.emin) - format.manBits;
  const magnitude = (Math.floor(range.lo * 2 ** -quantumExp) + 1) * 2 ** quantumExp;
  return [encodeExact(format, false, magnitude), encodeExact(format, format.signed, magnitude)];
}

/**
 * The raw ranges that apply under `mode`: all of them, except that `up` ranges (a bit-level
 * round-to-nearest-even of the library) apply under `rne` only; other modes round by value.
 * @internal
 */
export function activeRawRanges(rules: CastRules, mode: RoundingMode): readonly RawRange[] {
  return rules.rawRanges.filter((r) => r.to !== 'up' || mode === 'rne');
}

/**
 * The mantissa bits a `payload` NaN rule keeps: the top `manBits` bits of the float32 NaN's
 * 23-bit mantissa (0 for other rules), OR-ed into the quiet NaN code.
 * @internal
 */
export function nanPayloadShift(format: FloatFormat, rules: CastRules): number {
  return rules.nan.to === 'nan' && rules.nan.pattern === 'payload' && format.nanEncoding === 'ieee'
    ? 23 - format.manBits
    : -1;
}

/**
 * Whether rounding the magnitude `fl + frac` (fl an integer, 0 ≤ frac < 1) goes up to fl + 1.
 * @internal
 */
export function roundsUp(mode: RoundingMode, fl: number, frac: number, randomBits: number | undefined): boolean {
  switch (mode) {
    case 'rne':
      return frac > 0.5 || (frac === 0.5 && fl % 2 === 1);
    case 'rha':
      return frac >= 0.5;
    case 'rhz':
      return frac > 0.5;
    case 'rtz':
      return false;
    case 'stochastic': {
      if (randomBits === undefined || !Number.isInteger(randomBits) || randomBits < 0 || randomBits >= 2 ** 32) {
        throw new Error(`stochastic rounding needs randomBits, an integer in [0, 2^32), got ${randomBits}`);
      }
      return Math.floor(frac * 2 ** 32) + randomBits >= 2 ** 32;
    }
  }
}

const payloadF32 = new Float32Array(1);
const payloadU32 = new Uint32Array(payloadF32.buffer);

/** A scalar encoder with its format, profile and mode resolved once. */
export type ScalarEncoder = (x: number, randomBits?: number) => number;

/**
 * Builds the scalar reference encoder for (format, profile, mode); {@link encode} calls it once.
 * Use it in loops to avoid re-resolving the profile for every value.
 */
export function scalarEncoder(
  format: FormatLike,
  profile: CastProfile | CastProfileName,
  mode?: RoundingMode,
): ScalarEncoder {
  const fmt = resolveFormat(format);
  const prof = resolveProfile(profile);
  const rules = resolveRules(fmt, prof);
  const codes = edgeCodes(fmt, rules);
  const m = mode ?? prof.mode;
  const ranges = activeRawRanges(rules, m).map((r) => ({ lo: r.lo, hi: r.hi, codes: rawRangeCodes(fmt, r, codes) }));
  const payloadShift = nanPayloadShift(fmt, rules);
  return (x, randomBits) => {
    let negative = signBit(x);
    const idx = negative ? 1 : 0;
    if (Number.isNaN(x)) {
      if (payloadShift < 0) return codes.nan[idx];
      // float64 → float32 keeps a NaN's payload (quieted), so the top mantissa bits survive
      payloadF32[0] = x;
      return (codes.nan[idx] as number) | (((payloadU32[0] as number) & 0x7fffff) >>> payloadShift);
    }
    if (negative && !fmt.signed && x !== 0) {
      if (codes.negative !== null) return codes.negative;
      negative = false;
    }
    const s = negative ? 1 : 0;
    const a = Math.abs(x);
    if (a === Infinity) return codes.infinity[s];
    for (const range of ranges) {
      if (a >= range.lo && a < range.hi) return range.codes[s] as number;
    }
    if (a === 0) return codes.zeroInput[s];
    const quantumExp = Math.max(exponentOf(a), fmt.emin) - fmt.manBits;
    const scaled = a * 2 ** -quantumExp; // exact: a power-of-two scaling
    const fl = Math.floor(scaled);
    const up = roundsUp(m, fl, scaled - fl, randomBits);
    const magnitude = (fl + (up ? 1 : 0)) * 2 ** quantumExp;
    if (magnitude === 0) return codes.zero[s];
    if (magnitude > fmt.maxFinite) return m === 'rtz' ? codes.max[s] : codes.overflow[s];
    return encodeExact(fmt, negative, magnitude);
  };
}

/**
 * Encodes `x` to a code of `format` under a cast profile: the scalar reference.
 *
 * `x` is taken exactly as given (a float32 value for the casts real kernels do; any double works).
 * Order of decisions: NaN → negative input to an unsigned format → ±Inf → the profile's raw
 * ranges → zero → round |x| to the format's grid (subnormals included) with the mode →
 * underflow to zero → overflow. `rtz` never overflows to Inf/NaN (IEEE 754 directed rounding).
 *
 * @example
 * ```ts
 * encode('e4m3fn', 464, { profile: 'satfinite' }); // 0x7e (448: the tie goes to the even mantissa 110)
 * encode('e4m3fn', 470, { profile: 'ieee' });      // 0x7f (NaN)
 * ```
 */
export function encode(format: FormatLike, x: number, options: RoundOptions): number {
  return scalarEncoder(format, options.profile, options.mode)(x, options.randomBits);
}

/**
 * Rounds `x` to `format` and returns the decoded value (NaN for NaN codes): `decode(encode(…))`.
 *
 * @example
 * ```ts
 * round('e2m1', 2.5, { profile: 'satfinite' }); // 2 (tie to even)
 * round('e2m1', 2.5, { profile: 'mx' });        // 3 (ties away from zero)
 * ```
 */
export function round(format: FormatLike, x: number, options: RoundOptions): number {
  const fmt = resolveFormat(format);
  return decode(fmt, encode(fmt, x, options));
}
