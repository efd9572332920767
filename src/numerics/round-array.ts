// Fused fp32 → format → fp32 rounding: the values fakeQuant gives, without a code array or a decode
// table. A bit trick on the float32 pattern for the finite values of a format's normal range; the
// vector casts (encodeArray + decodeArray) for everything else, so it adds no behaviour of its own.

import { type FloatFormat, floatFormats } from './formats.js';
import { type CastProfile, type CastProfileName, type RoundingMode, castProfiles, resolveRules } from './profiles.js';
import { type FormatLike, activeRawRanges, resolveFormat, resolveProfile } from './round.js';
import { type VectorCastOptions, allocCodes, decodeArray, encodeArray, fakeQuant } from './vector.js';
import { lazyOneFunction, oneFunctionModule, uleb } from './wasm.js';
import { forLoop, get, i32c, memarg0, set } from './wasm-emit.js';

/** Rounds every element of `src` into `dst` (same length or longer; `dst` may be `src`). */
export type RoundInto = (src: Float32Array, dst: Float32Array) => void;

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function bitsOf(x: number): number {
  f32[0] = x;
  return u32[0] as number;
}

/**
 * The float32 magnitude bits [lo, hi] where rounding to `format` is the bit trick (lo > hi: none).
 * In a format's normal range the rounded value keeps the float32 exponent and drops the low
 * `23 − manBits` mantissa bits, so the code and its decoding are skipped; the range ends at
 * maxFinite (no rounding of |x| ≤ maxFinite exceeds it), and excludes zero, subnormals of either
 * format and every raw range of the profile.
 */
function fastRange(format: FloatFormat, profile: CastProfile, mode: RoundingMode): readonly [number, number] {
  const none = [1, 0] as const;
  const rules = resolveRules(format, profile);
  const standard = format.signed && format.manBits <= 23 && format.emax <= 127 && format.emin >= -126;
  if (!standard || Math.fround(format.maxFinite) !== format.maxFinite || Math.fround(format.minNormal) !== format.minNormal) return none;
  const lo = Math.max(bitsOf(format.minNormal), 0x00800000);
  const hi = bitsOf(format.maxFinite);
  for (const r of activeRawRanges(rules, mode)) {
    // The range [r.lo, r.hi) of |x| meets [value(lo), value(hi)]: no fast path at all (no built-in
    // profile has a raw range for a format this kernel serves fast).
    if (r.lo <= format.maxFinite && r.hi > format.minNormal) return none;
  }
  return [lo, hi];
}

// The fast range in WebAssembly SIMD, four lanes at a time, for calls of at least WASM_MIN elements:
// `round(nv, lo, span, bias, shift, evenTies, keep, zeroPos, zeroNeg)` reads nv vectors of float32
// bits at byte 32, writes nv vectors of results after them, and stores at byte 0 the count per lane
// of elements outside the fast range and not zero (their lanes hold the input; any such element
// sends the whole call to the JavaScript path, which gives them to the vector casts).
const WASM_MIN = 64;
const R = { nv: 0, lo: 1, span: 2, bias: 3, shift: 4, even: 5, keep: 6, zp: 7, zn: 8 } as const;
const RL = { i: 9, out: 10, b: 11, a: 12, inr: 13, isz: 14, acc: 15, sLo: 16, sSpan: 17, sBias: 18, sEven: 19, sKeep: 20, sZp: 21, sZn: 22, sAbs: 23, sSign: 24, zero: 25 } as const;
/** SIMD sub-opcodes (after the 0xFD prefix), LEB128-encoded (SIMD proposal opcode table). */
const sv = {
  load: [0x00], store: [0x0b], splat: [0x11], not: [0x4d], and: [0x4e], or: [0x50], bitselect: [0x52],
  eq: [0x37], ltS: [0x39], leU: [0x3e], shrU: [0xad, 0x01], add: [0xae, 0x01], sub: [0xb1, 0x01],
} as const;
const sop = (o: readonly number[], imm: number[] = []): number[] => [0xfd, ...o, ...imm];

function roundBody(): number[] {
  const splat = (param: number, local: number): number[] => [...get(param), ...sop(sv.splat), ...set(local)];
  const vget = get;
  const code = [
    ...splat(R.lo, RL.sLo), ...splat(R.span, RL.sSpan), ...splat(R.bias, RL.sBias), ...splat(R.even, RL.sEven),
    ...splat(R.keep, RL.sKeep), ...splat(R.zp, RL.sZp), ...splat(R.zn, RL.sZn),
    ...i32c(0x7fffffff), ...sop(sv.splat), ...set(RL.sAbs), ...i32c(-0x80000000), ...sop(sv.splat), ...set(RL.sSign),
    ...i32c(0), ...sop(sv.splat), ...set(RL.zero), ...vget(RL.zero), ...set(RL.acc),
    // out = 32 + 16·nv
    ...get(R.nv), ...i32c(4), 0x74, ...i32c(32), 0x6a, ...set(RL.out),
    ...forLoop(RL.i, i32c(0), get(R.nv), [
      ...get(RL.i), ...i32c(4), 0x74, ...sop(sv.load, [0x00, ...uleb(32)]), ...set(RL.b),
      ...vget(RL.b), ...vget(RL.sAbs), ...sop(sv.and), ...set(RL.a),
      ...vget(RL.a), ...vget(RL.sLo), ...sop(sv.sub), ...vget(RL.sSpan), ...sop(sv.leU), ...set(RL.inr),
      ...vget(RL.a), ...vget(RL.zero), ...sop(sv.eq), ...set(RL.isz),
      // the store address, then bitselect(fast, bitselect(zeroResult, b, isz), inr)
      ...get(RL.out), ...get(RL.i), ...i32c(4), 0x74, 0x6a,
      ...vget(RL.a), ...vget(RL.sBias), ...sop(sv.add), ...vget(RL.a), ...get(R.shift), ...sop(sv.shrU), ...vget(RL.sEven), ...sop(sv.and), ...sop(sv.add),
      ...vget(RL.sKeep), ...sop(sv.and), ...vget(RL.b), ...vget(RL.sSign), ...sop(sv.and), ...sop(sv.or),
      ...vget(RL.sZn), ...vget(RL.sZp), ...vget(RL.b), ...vget(RL.zero), ...sop(sv.ltS), ...sop(sv.bitselect),
      ...vget(RL.b), ...vget(RL.isz), ...sop(sv.bitselect),
      ...vget(RL.inr), ...sop(sv.bitselect),
      ...sop(sv.store, memarg0),
      // acc −= ¬(inr ∨ isz): +1 per lane outside the fast range and not zero
      ...vget(RL.acc), ...vget(RL.inr), ...vget(RL.isz), ...sop(sv.or), ...sop(sv.not), ...sop(sv.sub), ...set(RL.acc),
    ]),
    ...i32c(0), ...vget(RL.acc), ...sop(sv.store, memarg0),
    0x0b,
  ];
  const locals = [2, ...uleb(2), 0x7f, ...uleb(15), 0x7b]; // 2 × i32, 15 × v128
  const body = [...locals, ...code];
  return [...uleb(body.length), ...body];
}

type RoundFn = (nv: number, lo: number, span: number, bias: number, shift: number, even: number, keep: number, zp: number, zn: number) => void;
const roundWasm = lazyOneFunction<RoundFn>(() => oneFunctionModule('round', 9, roundBody()), 'round');

/** Whether the WebAssembly SIMD rounding is in use (for tests and reports). */
export function roundingIsSimd(): boolean {
  return roundWasm() !== null;
}

/** Compiled roundings of the built-in (format, profile, mode) triples, by `format|profile|mode`. */
const kernels = new Map<string, RoundInto>();

function compileRounding(format: FloatFormat, profile: CastProfile, mode: RoundingMode): RoundInto {
  const [lo, hi] = fastRange(format, profile, mode);
  const shift = 23 - format.manBits;
  // Adding `bias` (+1 when the kept lsb is odd, for ties to even) then clearing the dropped bits is
  // round to nearest even / half away / toward zero on the magnitude; a carry into the exponent is
  // the next binade's first value, as it should be.
  const bias = shift === 0 || mode === 'rtz' ? 0 : mode === 'rha' ? 2 ** (shift - 1) : 2 ** (shift - 1) - 1;
  const evenTies = mode === 'rne' && shift > 0 ? 1 : 0;
  const keep = ~(2 ** shift - 1); // int32 mask of the kept bits
  const cast = { profile, mode } as const;
  // The other elements are gathered and rounded in one call of the vector casts after the loop
  // (zeros, common in activations, are precomputed).
  let pending = new Int32Array(64); // their indices
  let values = new Float32Array(64);
  let codes = allocCodes(format, 64);
  const reference = (src: Float32Array, dst: Float32Array, count: number): void => {
    if (values.length < count) {
      values = new Float32Array(count);
      codes = allocCodes(format, count);
    }
    const v = values.subarray(0, count);
    // Bit copies (no float loads and stores: NaN payloads kept).
    const vBits = new Int32Array(v.buffer, 0, count);
    const srcBits = new Int32Array(src.buffer, src.byteOffset, src.length);
    const dstBits = new Int32Array(dst.buffer, dst.byteOffset, dst.length);
    for (let j = 0; j < count; j++) vBits[j] = srcBits[pending[j] as number] as number;
    decodeArray(format, encodeArray(format, v, cast, codes.subarray(0, count)), v);
    for (let j = 0; j < count; j++) dstBits[pending[j] as number] = vBits[j] as number;
  };
  const zeros = Float32Array.from([0, -0]);
  pending[1] = 1;
  reference(zeros, zeros, 2);
  const zeroBits = new Int32Array(zeros.buffer);
  const zeroPos = zeroBits[0] as number;
  const zeroNeg = zeroBits[1] as number;
  const isNan = (bits: number): boolean => (bits & 0x7fffffff) > 0x7f800000;
  const plainZeros = !isNan(zeroPos) && !isNan(zeroNeg);
  // Below the format's min normal, down to the smallest normal float32 (fp16's subnormals and what
  // rounds to ±0 or to them): the significand rounded by an integer shift to the subnormal quantum
  // 2^(emin − m), as the vector casts do. Only where no raw range applies and a zero result is ±0.
  const quantum = 2 ** (format.emin - format.manBits);
  const subnormalStart =
    lo <= hi && lo > 0x00800000 && format.hasSubnormals && format.hasZero && plainZeros && activeRawRanges(resolveRules(format, profile), mode).length === 0
      ? 0x00800000
      : 0x7fffffff;
  const rne = mode === 'rne';
  const rha = mode === 'rha';
  const rhz = mode === 'rhz';
  const subnormalOut = new Float32Array(1);
  const subnormalBits = new Int32Array(subnormalOut.buffer);
  /** The float32 bits of x (bits `b`, a normal float32 below the format's min normal) rounded to the subnormal grid. */
  const subnormal = (b: number): number => {
    const a = b & 0x7fffffff;
    const m24 = (a & 0x7fffff) | 0x800000;
    const sh = shift + format.emin - ((a >>> 23) - 127); // bits below the quantum, ≥ 1
    let q = 0;
    if (sh <= 24) {
      q = m24 >>> sh;
      const rem = m24 & ((1 << sh) - 1);
      const half = 1 << (sh - 1);
      if (rne ? rem > half || (rem === half && (q & 1) === 1) : rha ? rem >= half : rhz && rem > half) q++;
    }
    if (q === 0) return b < 0 ? zeroNeg : zeroPos; // a format with zero: underflow gives the zero of ±0 input
    subnormalOut[0] = q * quantum; // exact: q ≤ 2^m
    return (subnormalBits[0] as number) | (b & 0x80000000);
  };
  const useWasm = lo <= hi && plainZeros;
  /** Elements start … n−1 through bit views (every input, NaN payloads included). */
  const general = (src: Float32Array, dst: Float32Array, start: number): void => {
    const n = src.length;
    const inBits = new Int32Array(src.buffer, src.byteOffset, n);
    const outBits = new Int32Array(dst.buffer, dst.byteOffset, n);
    let count = 0;
    for (let i = start; i < n; i++) {
      const b = inBits[i] as number;
      const a = b & 0x7fffffff;
      if (a >= lo && a <= hi) outBits[i] = ((a + bias + ((a >> shift) & evenTies)) & keep) | (b & 0x80000000);
      else if (a === 0) outBits[i] = b === 0 ? zeroPos : zeroNeg;
      else if (a < lo && a >= subnormalStart) outBits[i] = subnormal(b);
      else {
        if (count === pending.length) pending = Int32Array.from({ length: 2 * count }, (_, j) => (j < count ? (pending[j] as number) : 0));
        pending[count++] = i;
      }
    }
    if (count > 0) reference(src, dst, count);
  };
  // Short arrays (a decode step's rows, one head's scores) cost more in the two views than in the
  // rounding: their elements go through a one-element scratch instead, as long as they are in the
  // fast range or zeros (float32 → double → float32 is exact for every non-NaN value; the first
  // other element hands the rest to `general`).
  const SHORT = 32;
  const scratch = new Float32Array(1);
  const scratchBits = new Int32Array(scratch.buffer);
  return (src, dst) => {
    const n = src.length;
    if (dst.length < n) throw new Error(`roundInto: dst has ${dst.length} elements, need ${n}`);
    if (n >= WASM_MIN && useWasm) {
      const w = roundWasm();
      if (w !== null) {
        const nv = Math.ceil(n / 4);
        const need = 32 + 32 * nv;
        const have = w.memory.buffer.byteLength;
        if (need > have) w.memory.grow(Math.ceil((need - have) / 65536));
        const buffer = w.memory.buffer;
        const input = new Float32Array(buffer, 32, 4 * nv);
        input.set(src); // same element type: a byte copy (NaN payloads kept)
        if (4 * nv > n) input.fill(0, n);
        w.fn(nv, lo, hi - lo, bias, shift, evenTies, keep, zeroPos, zeroNeg);
        const others = new Int32Array(buffer, 0, 4);
        if ((others[0]! | others[1]! | others[2]! | others[3]!) === 0) {
          dst.set(new Float32Array(buffer, 32 + 16 * nv, n));
          return;
        }
      }
    }
    if (n > SHORT) return general(src, dst, 0);
    for (let i = 0; i < n; i++) {
      scratch[0] = src[i] as number;
      const b = scratchBits[0] as number;
      const a = b & 0x7fffffff;
      if (a >= lo && a <= hi) scratchBits[0] = ((a + bias + ((a >> shift) & evenTies)) & keep) | (b & 0x80000000);
      else if (a === 0 && plainZeros) scratchBits[0] = b === 0 ? zeroPos : zeroNeg;
      else return general(src, dst, i);
      dst[i] = scratch[0] as number;
    }
  };
}

/**
 * The compiled fused rounding of `format` under `profile` with a deterministic `mode` (the
 * profile's by default): a function that writes `fakeQuant(format, src, { profile, mode })` into
 * `dst`, bit for bit (NaN payloads included), without allocating per call. Kernels of the built-in
 * profiles are compiled once and shared. Throws for `stochastic` (use {@link roundArray} with
 * random bits) and for a profile that does not cover the format.
 *
 * @example
 * ```ts
 * const toBf16 = roundingKernel('bf16', 'ieee');
 * const x = new Float32Array([1 + 2 ** -8, 3 * 2 ** -9 + 1]);
 * toBf16(x, x); // x = [1, 1 + 2 ** -7]: ties to even
 * ```
 */
export function roundingKernel(format: FormatLike, profile: CastProfile | CastProfileName, mode?: RoundingMode): RoundInto {
  const fmt = resolveFormat(format);
  const prof = resolveProfile(profile);
  const m = mode ?? prof.mode;
  if (m === 'stochastic') throw new Error('roundingKernel: stochastic rounding needs random bits (use roundArray)');
  // Only built-in records are kept: a user-defined profile or format may reuse a built-in name.
  const builtin = (castProfiles as Record<string, CastProfile | undefined>)[prof.name] === prof && (floatFormats as Record<string, FloatFormat | undefined>)[fmt.name] === fmt;
  const key = `${fmt.name}|${prof.name}|${m}`;
  const known = builtin ? kernels.get(key) : undefined;
  if (known !== undefined) return known;
  const kernel = compileRounding(fmt, prof, m);
  if (builtin) kernels.set(key, kernel);
  return kernel;
}

/**
 * Rounds every element to `format` and back to float32: equals {@link fakeQuant} bit for bit (and so
 * the scalar `round`), through the fused {@link roundingKernel} for deterministic modes; `stochastic`
 * is {@link fakeQuant} itself (one random uint32 per element in index order).
 *
 * @example
 * ```ts
 * roundArray('fp16', new Float32Array([65520, -0, 1e-8]), { profile: 'ieee' }); // [Inf, -0, 0]
 * ```
 */
export function roundArray(format: FormatLike, src: Float32Array, options: VectorCastOptions, dst?: Float32Array): Float32Array {
  const mode = options.mode ?? resolveProfile(options.profile).mode;
  if (mode === 'stochastic') return fakeQuant(format, src, options, dst);
  const out = dst ?? new Float32Array(src.length);
  roundingKernel(format, options.profile, mode)(src, out);
  return out;
}
