import { describe, expect, it } from 'vitest';
import {
  castProfiles,
  decode,
  fakeQuant,
  floatFormats,
  roundArray,
  roundingKernel,
  type CastProfile,
} from '../../src/numerics/index.js';
import { profileCoverage } from '../../src/numerics/profiles.js';
import { roundingIsSimd } from '../../src/numerics/round-array.js';
import { createRng } from '../../src/core/rng.js';

const coverage = profileCoverage();

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const bitsOf = (x: number): number => {
  f32[0] = x;
  return u32[0]!;
};

/**
 * Every float32 top-16-bit bucket (both signs, every exponent, ±Inf and every NaN payload class)
 * with low halves at the ties and their neighbours of the 16- and 13-bit drops (bf16, fp16/tf32),
 * then each format's edges: ±0, its subnormals and min normal, max and just past it, the overflow
 * tie and the last float32 below and above each.
 */
function edgeInputs(wide = true): Float32Array {
  // Formats of 8 bits or fewer drop ≥ 19 bits: their ties and neighbours are in the top half already.
  const lows = wide ? [0, 1, 0x1000, 0x3000, 0x7fff, 0x8000, 0xffff] : [0, 0x8001, 0xffff];
  const bits: number[] = [];
  for (let hi = 0; hi < 65536; hi++) for (const lo of lows) bits.push(hi * 65536 + lo);
  for (const format of Object.values(floatFormats)) {
    const ulp = 2 ** (format.emax - format.manBits);
    const edges = [
      format.minSubnormal,
      format.minSubnormal / 2,
      format.minSubnormal * 1.5,
      format.minNormal,
      format.minNormal - format.minSubnormal,
      format.maxFinite,
      format.maxFinite + ulp / 2,
      format.maxFinite + ulp,
      format.maxFinite + ulp / 4,
    ];
    for (const v of edges) {
      const b = bitsOf(v);
      if (!Number.isFinite(Math.fround(v))) continue;
      for (const d of [-1, 0, 1]) bits.push(b + d, (b + d + 0x80000000) >>> 0);
    }
  }
  return new Float32Array(Uint32Array.from(bits).buffer);
}

function expectSameBits(label: string, got: Float32Array, want: Float32Array): void {
  const g = new Uint32Array(got.buffer, got.byteOffset, got.length);
  const w = new Uint32Array(want.buffer, want.byteOffset, want.length);
  expect(g.length).toBe(w.length);
  for (let i = 0; i < w.length; i++) {
    if (g[i] !== w[i])
      expect(`${label}: input ${i} gives 0x${g[i]!.toString(16)}`).toBe(
        `${label}: input ${i} gives 0x${w[i]!.toString(16)}`,
      );
  }
}

describe('roundArray equals fakeQuant bit for bit', () => {
  const wideInputs = edgeInputs();
  const narrowInputs = edgeInputs(false);
  it.each(coverage.map((c) => [c.profile.name, c.format.name, c.profile, c.format] as const))(
    '%s/%s for rne, rtz, rha and rhz on every float32 bucket and the format edges',
    (_p, _f, profile, format) => {
      const inputs = format.bits > 8 ? wideInputs : narrowInputs;
      for (const mode of ['rne', 'rtz', 'rha', 'rhz'] as const) {
        const want = fakeQuant(format, inputs, { profile, mode });
        expectSameBits(`${profile.name}/${format.name}/${mode}`, roundArray(format, inputs, { profile, mode }), want);
        // Short calls of every length 1 … 65 (the scratch path and its hand-over to the views).
        const kernel = roundingKernel(format, profile, mode);
        const chunked = new Float32Array(inputs.length);
        for (let i = 0, len = 1; i < inputs.length; i += len, len = (len % 65) + 1)
          kernel(inputs.subarray(i, i + len), chunked.subarray(i, i + len));
        expectSameBits(`${profile.name}/${format.name}/${mode} in short calls`, chunked, want);
      }
    },
  );

  it.each(
    coverage
      .filter((c) => c.format.signed && c.format.bits >= 8)
      .map((c) => [c.profile.name, c.format.name, c.profile, c.format] as const),
  )(
    '%s/%s: the WebAssembly path on calls whose every element is in the normal range or zero, of ragged lengths 64 … 400',
    (_p, _f, profile, format) => {
      expect(roundingIsSimd()).toBe(true);
      const all = new Uint32Array(wideInputs.buffer);
      const keep: number[] = [];
      const lo = bitsOf(format.minNormal);
      const hi = bitsOf(format.maxFinite);
      for (const b of all) {
        const a = b & 0x7fffffff;
        if (a === 0 || (a >= lo && a >= 0x00800000 && a <= hi)) keep.push(b);
      }
      const inputs = new Float32Array(Uint32Array.from(keep).buffer);
      for (const mode of ['rne', 'rtz', 'rha', 'rhz'] as const) {
        const want = fakeQuant(format, inputs, { profile, mode });
        const kernel = roundingKernel(format, profile, mode);
        const got = new Float32Array(inputs.length);
        for (let i = 0, len = 64; i < inputs.length; i += len, len = len === 400 ? 64 : len + 7)
          kernel(inputs.subarray(i, i + len), got.subarray(i, i + len));
        expectSameBits(`${profile.name}/${format.name}/${mode} in SIMD calls`, got, want);
      }
    },
  );

  it('agrees with the scalar reference on values (Object.is) at bf16 and fp16 ties of every exponent', () => {
    for (const name of ['bf16', 'fp16'] as const) {
      const format = floatFormats[name];
      const xs: number[] = [];
      for (let e = format.emin; e <= format.emax; e++) {
        const q = 2 ** (e - format.manBits);
        for (const k of [0, 1, 2, 3]) xs.push(2 ** e + k * q + q / 2, -(2 ** e + k * q + q / 2));
      }
      const src = Float32Array.from(xs);
      const got = roundArray(format, src, { profile: 'ieee' });
      const want = fakeQuant(format, src, { profile: 'ieee' });
      for (let i = 0; i < src.length; i++) expect(Object.is(got[i], want[i]), `${name} ${src[i]}`).toBe(true);
      // ties to even: 1 + q/2 → 1, 1 + 3q/2 → 1 + 2q
      const q = 2 ** -format.manBits;
      expect(Array.from(roundArray(format, Float32Array.from([1 + q / 2, 1 + 1.5 * q]), { profile: 'ieee' }))).toEqual([
        1,
        1 + 2 * q,
      ]);
      expect(decode(format, format.maxCode)).toBe(format.maxFinite);
    }
  });

  it('stochastic is fakeQuant with the same random bits', () => {
    const src = edgeInputs().subarray(0, 50000);
    const randomBits = new Uint32Array(src.length);
    const rng = createRng(7).fork('round-array');
    for (let i = 0; i < randomBits.length; i++) randomBits[i] = rng.uint32();
    for (const format of [floatFormats.bf16, floatFormats.fp16]) {
      const options = { profile: 'ieee', mode: 'stochastic', randomBits } as const;
      expectSameBits(`stochastic ${format.name}`, roundArray(format, src, options), fakeQuant(format, src, options));
    }
    expect(() => roundingKernel('bf16', 'ieee', 'stochastic')).toThrow(/stochastic/);
  });

  it('works in place, into a longer dst, on offset views and on zero length; user profiles are not kept', () => {
    const all = edgeInputs();
    const src = all.subarray(12345, 12345 + 7777); // an offset view of a ragged length
    const want = fakeQuant('bf16', src, { profile: 'torch-2.13' });
    const copy = src.slice();
    roundingKernel('bf16', 'torch-2.13')(copy, copy);
    expectSameBits('in place', copy, want);
    const longer = new Float32Array(src.length + 3).fill(5);
    roundingKernel('bf16', 'torch-2.13')(src, longer);
    expectSameBits('longer dst', longer.subarray(0, src.length), want);
    // In place on short arrays whose NaN (signalling payload) or subnormal comes after rounded elements.
    for (const bits of [0x7f800001, 0xff812345, 0x00000003, 0x7f7fffff]) {
      const short = Float32Array.from([1 + 2 ** -9, -3.3, 0, -0, 1e-3, 5, 6, 7]);
      new Uint32Array(short.buffer)[5] = bits;
      const expected = fakeQuant('fp16', short, { profile: 'torch-2.13' });
      roundingKernel('fp16', 'torch-2.13')(short, short);
      expectSameBits(`short in place with 0x${bits.toString(16)}`, short, expected);
    }
    expect(Array.from(longer.subarray(src.length))).toEqual([5, 5, 5]);
    expect(roundArray('fp16', new Float32Array(0), { profile: 'ieee' }).length).toBe(0);
    expect(() => roundingKernel('fp16', 'ieee')(new Float32Array(4), new Float32Array(3))).toThrow(/dst has 3/);
    // A user-defined profile reusing a built-in name: compiled from its own rules, not a cached kernel.
    const saturating: CastProfile = {
      ...castProfiles.ieee,
      rules: { ...castProfiles.ieee.rules, overflow: 'saturate' },
    };
    const big = Float32Array.from([70000, -70000, 65504, 65520]);
    expect(Array.from(roundArray('fp16', big, { profile: saturating }))).toEqual([65504, -65504, 65504, 65504]);
    expect(Array.from(roundArray('fp16', big, { profile: 'ieee' }))).toEqual([Infinity, -Infinity, 65504, Infinity]);
  });
});
