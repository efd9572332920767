// Fast vector casts over Float32Array: encode to codes, decode codes, fake-quantize, pack nibbles.
// They equal the scalar reference (round.ts) bit for bit; they add no behaviour of their own.

import type { Rng } from '../core/rng.js';
import { type FloatFormat, decode } from './formats.js';
import { type CastProfile, type CastProfileName, type RoundingMode, resolveRules } from './profiles.js';
import {
  type FormatLike,
  activeRawRanges,
  edgeCodes,
  nanPayloadShift,
  rawRangeCodes,
  resolveFormat,
  resolveProfile,
  scalarEncoder,
} from './round.js';

/** Typed array holding codes of a format: 8-bit codes in bytes, 16-bit in shorts, wider in words. */
export type CodeArray = Uint8Array | Uint16Array | Uint32Array;

/** Options of the vector casts. */
export interface VectorCastOptions {
  readonly profile: CastProfile | CastProfileName;
  /** @defaultValue the profile's `mode` */
  readonly mode?: RoundingMode;
  /**
   * Random bits for `stochastic`: either one uint32 per element, or a stream from which one
   * `uint32()` is drawn per element in index order.
   */
  readonly randomBits?: Uint32Array | Rng;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function bitsOf(x: number): number {
  f32[0] = x;
  return u32[0] as number;
}

/** Smallest float32 bit pattern whose value is ≥ x (x ≥ 0, finite). */
function ceilBits(x: number): number {
  const b = bitsOf(x);
  return (f32[0] as number) < x ? b + 1 : b;
}

/**
 * A compiled deterministic cast (rne / rtz / rha) of one (format, resolved profile, mode) on float32 bit
 * patterns: what a caller with its own scratch (the quantizer) calls instead of {@link encodeArray}, without
 * the per-call option record, lookups and typed-array views. Equals the scalar reference. @internal
 */
export interface FastEncoder {
  /** The code of one float32 bit pattern (the bit-level form of the scalar reference). */
  readonly encodeBits: (b: number) => number;
  /**
   * The codes of the first `n` float32 bit patterns of `bits` into `dst`, by the bucket tables
   * ({@link EncodeTables}: once built, for `n` ≥ 4096, or once 262 144 elements have been encoded per
   * value, codes of at most 16 bits) or per value.
   */
  readonly encodeBitsInto: (bits: Uint32Array, n: number, dst: CodeArray) => void;
}

/**
 * For formats of at most 16 bits, most float32 inputs are decided by their top 16 bits: `code[hi]` is the
 * code of every float32 whose top 16 bits are `hi`, or {@link AMBIGUOUS}. Rounding is monotone within a
 * bucket of one sign, so equal ends imply one code for the whole bucket; when the ends differ by one code
 * (a rounding boundary inside the bucket), `split[hi]` is the boundary's low 16 bits, `lower[hi]` the code
 * below it and `upper[hi]` the code at and above it (else `split[hi]` is −1). Buckets with more codes or a
 * raw-range edge inside are AMBIGUOUS with split −1 and take `encodeBits`. For a 16-bit format the code
 * 0xffff itself is stored as AMBIGUOUS (it takes the per-value path), and bf16 buckets are all one- or
 * two-code buckets (its codes are the top 16 bits of a float32).
 */
interface EncodeTables {
  readonly code: Uint16Array;
  readonly split: Int32Array;
  readonly lower: Uint16Array;
  readonly upper: Uint16Array;
}

/** The {@link EncodeTables} entry of a bucket that takes the per-value path or its split. */
const AMBIGUOUS = 0xffff;

/** A compiled deterministic cast (rne / rtz / rha) for one (format, profile, mode). */
interface Kernel {
  readonly format: FloatFormat;
  readonly encodeInto: (src: Float32Array, dst: CodeArray) => void;
  readonly fast: FastEncoder;
}

const kernels = new Map<string, Kernel>();

function compileKernel(format: FloatFormat, profile: CastProfile, mode: RoundingMode): Kernel {
  const rules = resolveRules(format, profile);
  const codes = edgeCodes(format, rules);
  const man = format.manBits;
  const shift = 23 - man;
  const signMask = format.signMask;
  const hasSubnormals = format.hasSubnormals;
  const noSubnormalOffset = hasSubnormals ? 0 : 2 ** man;
  // Start of the bit-trick path: the format's min normal, and a normal float32.
  const normalStart = Math.max(ceilBits(format.minNormal), 0x00800000);
  const subnormalQuantumExp = format.emin - man;
  // Smallest |x| bits whose rounding exceeds maxFinite: above max + ½ulp (RNE: at it when the
  // tie goes up, i.e. when max has an odd significand), at max + ½ulp (RHA), at max + ulp (RTZ).
  const ulp = 2 ** (format.emax - man);
  const maxOdd = (format.maxFinite / ulp) % 2 === 1;
  const tie = format.maxFinite + ulp / 2;
  const overflowStart =
    mode === 'rtz'
      ? ceilBits(format.maxFinite + ulp)
      : mode === 'rha' || (mode === 'rne' && maxOdd)
        ? ceilBits(tie)
        : ceilBits(tie) + (Math.fround(tie) === tie ? 1 : 0);
  const overflowCodes = mode === 'rtz' ? codes.max : codes.overflow;
  const ranges = activeRawRanges(rules, mode).map((r) => ({
    lo: ceilBits(r.lo),
    hi: ceilBits(r.hi),
    codes: rawRangeCodes(format, r, codes),
  }));
  const payloadShift = nanPayloadShift(format, rules);
  const roundBias = shift === 0 || mode === 'rtz' ? 0 : mode === 'rha' ? 2 ** (shift - 1) : 2 ** (shift - 1) - 1;
  const addend = (format.bias - 127) * 2 ** 23 + roundBias;
  const tiesToEven = mode === 'rne' && shift > 0;
  const [nanPos, nanNeg] = codes.nan;
  const [infPos, infNeg] = codes.infinity;
  const [ovPos, ovNeg] = overflowCodes;
  const [zeroPos, zeroNeg] = codes.zeroInput;
  const [underPos, underNeg] = codes.zero;
  const negativeCode = codes.negative;
  const unsigned = !format.signed;
  // The range of the common case: normal float32 magnitudes in [normalStart, overflowStart) round by the bit
  // trick below, unless a raw range cuts into it (then the range is empty: every value takes the full path).
  const fastLo = normalStart;
  const fastHi = ranges.some((r) => r.lo < overflowStart && r.hi > normalStart)
    ? normalStart
    : Math.max(normalStart, Math.min(overflowStart, 0x7f800000));

  /** The code of one float32 bit pattern `b` (the bit-level form of the scalar reference). */
  const encodeBits = (b: number): number => {
    let neg = b >>> 31;
    const a = b & 0x7fffffff;
    // The common case first: a normal float32 in [fastLo, fastHi) is finite, not zero, in no raw range and
    // below overflow, so the checks below would all pass to the bit trick (a negative unsigned value would not).
    if (a >= fastLo && a < fastHi && (neg === 0 || !unsigned)) {
      const c = (a + addend + (tiesToEven ? (((a & 0x7fffff) | 0x800000) >>> shift) & 1 : 0)) >>> shift;
      return neg ? c + signMask : c;
    }
    if (a > 0x7f800000) return (neg ? nanNeg : nanPos) | (payloadShift < 0 ? 0 : (a & 0x7fffff) >>> payloadShift);
    if (neg && unsigned) {
      if (a !== 0 && negativeCode !== null) return negativeCode;
      neg = 0;
    }
    if (a === 0x7f800000) return neg ? infNeg : infPos;
    for (const r of ranges) {
      if (a >= r.lo && a < r.hi) return neg ? r.codes[1] : r.codes[0];
    }
    if (a >= overflowStart) return neg ? ovNeg : ovPos;
    let code: number;
    if (a >= normalStart) {
      const odd = tiesToEven ? (((a & 0x7fffff) | 0x800000) >>> shift) & 1 : 0;
      code = (a + addend + odd) >>> shift;
    } else {
      if (a === 0) return neg ? zeroNeg : zeroPos;
      // Integer rounding of the significand to the format's subnormal quantum.
      const e32 = a >>> 23;
      const m24 = e32 === 0 ? a : (a & 0x7fffff) | 0x800000;
      const lsbExp = e32 === 0 ? -149 : e32 - 150;
      const sh = subnormalQuantumExp - lsbExp;
      let q: number;
      if (sh > 24) q = 0;
      else if (sh <= 0) q = m24 * 2 ** -sh;
      else {
        q = m24 >>> sh;
        const rem = m24 - q * 2 ** sh;
        const half = 2 ** (sh - 1);
        if (mode === 'rne') {
          if (rem > half || (rem === half && (q & 1) === 1)) q++;
        } else if (mode === 'rha') {
          if (rem >= half) q++;
        } else if (mode === 'rhz') {
          if (rem > half) q++;
        }
      }
      if (q === 0) return neg ? underNeg : underPos;
      code = q - noSubnormalOffset;
    }
    return neg ? code + signMask : code;
  };

  // The 65 536-bucket tables (EncodeTables), built on first use.
  let tables: EncodeTables | null = null;
  const buildTables = (): EncodeTables => {
    const code = new Uint16Array(65536);
    const split = new Int32Array(65536).fill(-1);
    const lower = new Uint16Array(65536);
    const upper = new Uint16Array(65536);
    const edges = ranges.flatMap((r) => [r.lo, r.hi]);
    for (let hi = 0; hi < 65536; hi++) {
      const lo = hi * 65536;
      const first = encodeBits(lo);
      const last = encodeBits(lo + 0xffff);
      const a = lo & 0x7fffffff;
      const cut = edges.some((e) => e > a && e <= a + 0xffff);
      code[hi] = first === last && !cut ? first : AMBIGUOUS;
      if (first !== last && !cut && Math.abs(last - first) === 1) {
        let l = 0; // encodeBits(lo + l) === first
        let h = 0xffff; // encodeBits(lo + h) === last
        while (l + 1 < h) {
          const mid = (l + h) >>> 1;
          if (encodeBits(lo + mid) === first) l = mid;
          else h = mid;
        }
        split[hi] = h;
        upper[hi] = last;
        code[hi] = AMBIGUOUS;
        lower[hi] = first;
      }
    }
    return { code, split, lower, upper };
  };

  // Elements encoded per value so far: small calls repeated many times (activations and KV rows
  // per decode step) also pay off the tables once their total passes a few table sizes.
  let perValueCount = 0;
  const tablesFor = (n: number): EncodeTables | null => {
    if (tables !== null || n >= 4096 || perValueCount >= 262144) return (tables ??= buildTables());
    perValueCount += n;
    return null;
  };
  const encodeInto = (src: Float32Array, dst: CodeArray): void =>
    encodeBitsInto(new Uint32Array(src.buffer, src.byteOffset, src.length), src.length, dst);
  const encodeBitsInto = (bits: Uint32Array, n: number, dst: CodeArray): void => {
    const t = dst instanceof Uint8Array || dst instanceof Uint16Array ? tablesFor(n) : null;
    if (t !== null) {
      const { code, split, lower, upper } = t;
      for (let i = 0; i < n; i++) {
        const b = bits[i] as number;
        const hi = b >>> 16;
        const c = code[hi] as number;
        if (c !== AMBIGUOUS) {
          dst[i] = c;
          continue;
        }
        const sp = split[hi] as number;
        dst[i] = sp < 0 ? encodeBits(b) : (b & 0xffff) < sp ? (lower[hi] as number) : (upper[hi] as number);
      }
      return;
    }
    for (let i = 0; i < n; i++) dst[i] = encodeBits(bits[i] as number);
  };
  const fast: FastEncoder = { encodeBits, encodeBitsInto };
  return { format, encodeInto, fast };
}

/** Kernels of the built-in profiles by profile record, format record and mode: no key string per call. */
const kernelsByProfile = new WeakMap<CastProfile, Map<FloatFormat, Map<RoundingMode, Kernel>>>();

function kernelFor(format: FloatFormat, profile: CastProfile, mode: RoundingMode): Kernel {
  const known = kernelsByProfile.get(profile)?.get(format)?.get(mode);
  if (known !== undefined) return known;
  const key = `${format.name}|${profile.name}|${mode}`;
  const builtin = kernels.get(key);
  let isBuiltin = false;
  try {
    isBuiltin = resolveProfile(profile.name as CastProfileName) === profile;
  } catch {
    // not a built-in profile: not cached
  }
  // Cache only the built-in records; user-defined profiles may reuse a built-in name.
  const kernel = builtin !== undefined && isBuiltin ? builtin : compileKernel(format, profile, mode);
  if (isBuiltin) {
    kernels.set(key, kernel);
    let byFormat = kernelsByProfile.get(profile);
    if (byFormat === undefined) kernelsByProfile.set(profile, (byFormat = new Map()));
    let byMode = byFormat.get(format);
    if (byMode === undefined) byFormat.set(format, (byMode = new Map()));
    byMode.set(mode, kernel);
  }
  return kernel;
}

/**
 * The {@link FastEncoder} of a deterministic cast (not `stochastic`) of `format` with a resolved profile:
 * what a fused loop (the quantizer's scale-and-encode pass) inlines instead of calling {@link encodeArray}.
 * @internal
 */
export function fastEncoder(format: FloatFormat, profile: CastProfile, mode: RoundingMode): FastEncoder {
  if (mode === 'stochastic')
    throw new Error("fastEncoder: mode 'stochastic' draws random bits per element (use encodeArray)");
  return kernelFor(format, profile, mode).fast;
}

/** Allocates a code array of the right width for `format`. */
export function allocCodes(format: FormatLike, length: number): CodeArray {
  const fmt = resolveFormat(format);
  if (fmt.bits <= 8) return new Uint8Array(length);
  if (fmt.bits <= 16) return new Uint16Array(length);
  return new Uint32Array(length);
}

/**
 * Encodes every element of `src` (float32 values) to codes of `format`; equals the scalar
 * {@link encode} element by element. `stochastic` draws one uint32 per element in index order.
 *
 * @example
 * ```ts
 * const codes = encodeArray('e4m3fn', new Float32Array([1, 500, -0]), { profile: 'satfinite' });
 * // Uint8Array [0x38, 0x7e, 0x80]
 * ```
 */
export function encodeArray(
  format: FormatLike,
  src: Float32Array,
  options: VectorCastOptions,
  dst?: CodeArray,
): CodeArray {
  const fmt = resolveFormat(format);
  const profile = resolveProfile(options.profile);
  const mode = options.mode ?? profile.mode;
  const out = dst ?? allocCodes(fmt, src.length);
  if (out.length < src.length) throw new Error(`encodeArray: dst has ${out.length} elements, need ${src.length}`);
  if (mode === 'stochastic') {
    const scalar = scalarEncoder(fmt, profile, mode);
    const rb = options.randomBits;
    if (rb === undefined) throw new Error('encodeArray: stochastic rounding needs randomBits (Uint32Array or Rng)');
    if (rb instanceof Uint32Array && rb.length < src.length) {
      throw new Error(`encodeArray: randomBits has ${rb.length} elements, need ${src.length}`);
    }
    for (let i = 0; i < src.length; i++) {
      const r = rb instanceof Uint32Array ? (rb[i] as number) : rb.uint32();
      out[i] = scalar(src[i] as number, r);
    }
    return out;
  }
  kernelFor(fmt, profile, mode).encodeInto(src, out);
  return out;
}

const tables = new Map<string, Float32Array>();

/** The decoded value of every code of a format of at most 19 bits (cached, do not mutate). */
export function decodeTable(format: FormatLike): Float32Array {
  const fmt = resolveFormat(format);
  if (fmt.bits > 19) throw new Error(`decodeTable: ${fmt.name} has ${fmt.bits} bits (at most 19)`);
  let table = tables.get(fmt.name);
  if (table === undefined || table.length !== fmt.codeCount) {
    table = new Float32Array(fmt.codeCount);
    for (let c = 0; c < fmt.codeCount; c++) table[c] = decode(fmt, c);
    tables.set(fmt.name, table);
  }
  return table;
}

/** Decodes codes of `format` to float32 values (exact: every listed format fits in float32). */
export function decodeArray(format: FormatLike, codes: CodeArray, dst?: Float32Array): Float32Array {
  const fmt = resolveFormat(format);
  const out = dst ?? new Float32Array(codes.length);
  if (fmt.bits === 32) {
    new Uint32Array(out.buffer, out.byteOffset, codes.length).set(codes);
    return out;
  }
  // Copy bit patterns (integer loads and stores: no float conversions, NaN payloads kept).
  const table = decodeTable(fmt);
  const tableBits = new Uint32Array(table.buffer, table.byteOffset, table.length);
  const outBits = new Uint32Array(out.buffer, out.byteOffset, codes.length);
  if (codes instanceof Uint8Array) {
    for (let i = 0; i < codes.length; i++) outBits[i] = tableBits[codes[i] as number] as number;
  } else {
    for (let i = 0; i < codes.length; i++) outBits[i] = tableBits[codes[i] as number] as number;
  }
  return out;
}

/**
 * Rounds every element to `format` and back to float32 ("fake quantization"): equals
 * `decodeArray(encodeArray(…))` and the scalar {@link round}.
 */
export function fakeQuant(
  format: FormatLike,
  src: Float32Array,
  options: VectorCastOptions,
  dst?: Float32Array,
): Float32Array {
  const fmt = resolveFormat(format);
  const codes = encodeArray(fmt, src, options);
  return decodeArray(fmt, codes, dst);
}

/**
 * Packs 4-bit codes two per byte, element 0 in the low nibble (ONNX/OCP convention); an odd
 * length leaves the last high nibble 0.
 */
export function packNibbles(codes: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(Math.ceil(codes.length / 2));
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i] as number;
    if (!Number.isInteger(c) || c < 0 || c > 15) throw new Error(`packNibbles: codes[${i}] = ${c} is not a 4-bit code`);
    out[i >> 1] = (out[i >> 1] as number) | (i & 1 ? c << 4 : c);
  }
  return out;
}

/** Unpacks `length` 4-bit codes from bytes packed by {@link packNibbles}. */
export function unpackNibbles(packed: Uint8Array, length: number): Uint8Array {
  if (length > packed.length * 2)
    throw new Error(`unpackNibbles: ${packed.length} bytes hold at most ${packed.length * 2} codes, asked ${length}`);
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) {
    const byte = packed[i >> 1] as number;
    out[i] = i & 1 ? byte >> 4 : byte & 0x0f;
  }
  return out;
}
