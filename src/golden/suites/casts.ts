// The `casts` golden suite: every float format × covering cast profile × rounding mode, on every
// code's value (or a sample for 16+ bits), every tie and its float32 neighbours, edges and randoms.

import { type FloatFormat, decode, isNanCode } from '../../numerics/formats.js';
import { profileCoverage, roundingModes } from '../../numerics/profiles.js';
import { scalarEncoder } from '../../numerics/round.js';
import { allocCodes, decodeArray } from '../../numerics/vector.js';
import { createRng, type Rng } from '../../core/rng.js';
import { tensor } from '../write.js';
import type { GoldenCase, GoldenSuite, GoldenTensor } from '../types.js';
import { rngStreams } from '../../core/rng-streams.js';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The float32 whose bit pattern is `bits`. */
function fromBits(bits: number): number {
  u32[0] = bits >>> 0;
  return f32[0] as number;
}

function bitsOf(x: number): number {
  f32[0] = x;
  return u32[0] as number;
}

/** The next float32 toward +∞ (x finite, float32). */
function nextUp(x: number): number {
  if (x === 0) return fromBits(1);
  const b = bitsOf(x);
  return fromBits(x > 0 ? b + 1 : b - 1);
}

/** The next float32 toward −∞. */
function nextDown(x: number): number {
  return -nextUp(-x);
}

const SAFETENSORS_F8: Readonly<Record<string, 'F8_E4M3' | 'F8_E5M2'>> = { e4m3fn: 'F8_E4M3', e5m2: 'F8_E5M2' };

/** Non-negative finite codes to visit: all of them up to 8 bits, else per exponent the ends of the mantissa range plus random codes. */
function positiveCodes(format: FloatFormat, rng: Rng): number[] {
  const top = format.signed ? format.signMask : format.codeCount;
  const finite = (c: number): boolean => !isNanCode(format, c) && Number.isFinite(decode(format, c));
  if (format.bits <= 8) return Array.from({ length: top }, (_, c) => c).filter(finite);
  const codes = new Set<number>();
  const mAll = 2 ** format.manBits;
  for (let e = 0; e < 2 ** format.expBits; e++) for (const m of [0, 1, mAll - 1]) codes.add(e * mAll + m);
  for (let i = 0; i < 128; i++) codes.add(rng.int(top));
  return [...codes].filter((c) => c < top && finite(c)).sort((a, b) => a - b);
}

/** The float32 inputs of one (format) case, as bit patterns so that NaN signs and payloads survive. */
export function castInputs(format: FloatFormat, rng: Rng): Float32Array {
  const bits: number[] = [];
  const push = (v: number): void => {
    bits.push(bitsOf(v), bitsOf(-v));
  };
  const codes = positiveCodes(format, rng);
  // every code's value, both signs
  for (const c of codes) push(Math.fround(decode(format, c)));
  // ties between neighbouring codes and the float32 values on each side
  const top = format.signed ? format.signMask : format.codeCount;
  for (const c of codes) {
    if (c + 1 >= top || isNanCode(format, c + 1)) continue;
    const hi = decode(format, c + 1);
    if (!Number.isFinite(hi)) continue;
    const tie = (decode(format, c) + hi) / 2;
    if (Math.fround(tie) !== tie) continue;
    push(tie);
    push(nextDown(tie));
    push(nextUp(tie));
  }
  // overflow edges: max, the next float32, the half quantum above (the overflow tie) and its neighbours, far above
  const max = format.maxFinite;
  const quantum = 2 ** (Math.floor(Math.log2(max)) - format.manBits);
  const overflowTie = Math.fround(max + quantum / 2);
  for (const v of [
    max,
    nextUp(max),
    overflowTie,
    nextDown(overflowTie),
    nextUp(overflowTie),
    Math.fround(max + quantum),
    Math.fround(2 * max),
    fromBits(0x7f7fffff),
  ]) {
    if (Number.isFinite(v)) push(v);
  }
  // specials: ±Inf, quiet NaN of both signs, a payload NaN, ±0, float32 subnormals, below the smallest subnormal
  push(Infinity);
  bits.push(0x7fc00000, 0xffc00000, 0x7f800001);
  push(0);
  push(fromBits(1));
  push(fromBits(0x007fffff));
  for (const v of [format.minSubnormal / 2, format.minSubnormal / 4, format.minSubnormal * 0.75]) {
    if (Math.fround(v) !== v) continue;
    push(v);
    push(nextUp(v));
  }
  // random float32 across the format's range and a little beyond
  const lo = format.emin - format.manBits - 3;
  const hi = format.emax + 2;
  for (let i = 0; i < 64; i++) {
    const v = Math.fround((1 + rng.uniform()) * 2 ** (lo + rng.int(hi - lo + 1)));
    bits.push(bitsOf(rng.int(2) === 0 ? v : -v));
  }
  const out = new Float32Array(bits.length);
  new Uint32Array(out.buffer).set(bits);
  return out;
}

/** Encodes float32 `inputs` (NaN sign read from the bits) with the scalar reference. */
function encodeAll(
  format: FloatFormat,
  profile: Parameters<typeof scalarEncoder>[1],
  mode: (typeof roundingModes)[number],
  inputs: Float32Array,
  randomBits: Uint32Array | null,
): ReturnType<typeof allocCodes> {
  const encoder = scalarEncoder(format, profile, mode);
  const codes = allocCodes(format, inputs.length);
  for (let i = 0; i < inputs.length; i++) {
    // The float32 → double load keeps a NaN's sign bit. A NaN constant would not: optimising
    // compilers treat every NaN constant as the canonical one, so never substitute one here.
    const code = encoder(inputs[i] as number, randomBits ? (randomBits[i] as number) : undefined);
    codes[i] = code;
  }
  return codes;
}

function castCase(
  format: FloatFormat,
  profileName: string,
  mode: (typeof roundingModes)[number],
  seed: number,
): GoldenCase {
  const rng = createRng(seed).fork(rngStreams.golden.casts(format.name));
  const inputs = castInputs(format, rng);
  const randomBits = mode === 'stochastic' ? Uint32Array.from({ length: inputs.length }, () => rng.uint32()) : null;
  const codes = encodeAll(format, profileName as Parameters<typeof scalarEncoder>[1], mode, inputs, randomBits);
  const values = decodeArray(format, codes);
  const tensors: Record<string, GoldenTensor> = {
    input: tensor('input', inputs, 'bitwise'),
    ...(randomBits ? { randomBits: tensor('input', randomBits, 'bitwise') } : {}),
    codes: tensor('expected', codes, 'bitwise'),
    values: tensor('expected', values, { ulp: 0 }),
  };
  const f8 = SAFETENSORS_F8[format.name];
  if (f8 !== undefined) tensors.codes_f8 = tensor('expected', Uint8Array.from(codes), 'bitwise', [codes.length], f8);
  return {
    name: `${format.name}.${profileName}.${mode}`,
    description: `${format.name} under cast profile ${profileName}, rounding ${mode}: ${inputs.length} float32 inputs (codes, ties ±1 ulp, overflow, specials, subnormals, random)`,
    params: { format: format.name, profile: profileName, mode, bits: format.bits },
    tensors,
  };
}

/** Every format × covering profile × rounding mode. */
export const castsSuite: GoldenSuite = {
  name: 'casts',
  description: 'float32 → format codes and decoded values for every format × covering cast profile × rounding mode',
  cases(seed) {
    const out: GoldenCase[] = [];
    for (const { profile, format } of profileCoverage())
      for (const mode of roundingModes) out.push(castCase(format, profile.name, mode, seed));
    return out;
  },
};
