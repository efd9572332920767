import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { decode, decodeArray, encodeArray, fakeQuant, scalarEncoder } from '../../src/numerics/index.js';
import { profileCoverage } from '../../src/numerics/profiles.js';
import { fastEncoder } from '../../src/numerics/vector.js';
import { createRng } from '../../src/core/rng.js';

const coverage = profileCoverage();

/** Special float32 bit patterns: zeros, infinities, NaNs of both signs, subnormal and range edges. */
function specialInputs(): Float32Array {
  const bits: number[] = [
    0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xffffffff, 0x00000001,
    0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff,
  ];
  const values = [
    448,
    464,
    465,
    479.9,
    480,
    495.99,
    496,
    240,
    247.9,
    248,
    57344,
    61439,
    61440,
    65536,
    28,
    30,
    7.5,
    7.75,
    6,
    7,
    2 ** -6,
    2 ** -9,
    2 ** -10,
    3 * 2 ** -10,
    2 ** -17,
    2 ** -127,
    2 ** -128,
    1.5 * 2 ** 127,
    3.3895314e38,
    65504,
    65520,
    1 + 2 ** -8,
    1 + 3 * 2 ** -8,
    0.25,
    0.75,
    2.5,
    3.5,
    5,
  ];
  const out = new Float32Array(bits.length + 2 * values.length);
  new Uint32Array(out.buffer).set(bits);
  values.forEach((v, i) => {
    out[bits.length + 2 * i] = v;
    out[bits.length + 2 * i + 1] = -v;
  });
  return out;
}

function randomInputs(seed: number, n: number): Float32Array {
  const rng = createRng(seed).fork('vector-inputs');
  const out = new Float32Array(n);
  const u = new Uint32Array(out.buffer);
  for (let i = 0; i < n; i++) {
    // Half raw bit patterns (all exponents, NaNs included), half values near the formats' ranges.
    if (i % 2 === 0) u[i] = rng.uint32();
    else out[i] = (rng.uniform() * 2 - 1) * 2 ** (rng.int(60) - 30);
  }
  return out;
}

function expectSameCodes(label: string, got: ArrayLike<number>, want: (i: number) => number, n: number): void {
  for (let i = 0; i < n; i++) {
    const w = want(i);
    if (got[i] !== w) expect(got[i], `${label} at ${i}`).toBe(w);
  }
}

describe('vector casts equal the scalar reference', () => {
  const inputs = [specialInputs(), randomInputs(1, 20000)];
  it.each(coverage.map((c) => [c.profile.name, c.format.name, c.profile, c.format] as const))(
    '%s/%s for rne, rtz, rha, rhz and stochastic',
    (_p, _f, profile, format) => {
      for (const src of inputs) {
        for (const mode of ['rne', 'rtz', 'rha', 'rhz'] as const) {
          const scalar = scalarEncoder(format, profile, mode);
          const codes = encodeArray(format, src, { profile, mode });
          expectSameCodes(`${mode}`, codes, (i) => scalar(src[i] as number), src.length);
          const fq = fakeQuant(format, src, { profile, mode });
          for (let i = 0; i < src.length; i++) {
            const want = Math.fround(decode(format, scalar(src[i] as number)));
            if (!Object.is(fq[i], want)) expect(fq[i], `fakeQuant ${mode} at ${i}`).toBe(want);
          }
        }
        const scalar = scalarEncoder(format, profile, 'stochastic');
        const bitsA = createRng(5).fork('sr');
        const codes = encodeArray(format, src, { profile, mode: 'stochastic', randomBits: bitsA });
        const bitsB = createRng(5).fork('sr');
        expectSameCodes('stochastic', codes, (i) => scalar(src[i] as number, bitsB.uint32()), src.length);
      }
    },
  );

  it.each(
    coverage
      .filter((c) => c.format.bits <= 16)
      .map((c) => [c.profile.name, c.format.name, c.profile, c.format] as const),
  )(
    '%s/%s: every tie between neighbouring codes and its float32 neighbours (table path)',
    (_p, _f, profile, format) => {
      const values: number[] = [];
      for (let c = 0; c < format.codeCount; c++) values.push(decode(format, c));
      const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
      const f32 = new Float32Array(1);
      const u32 = new Uint32Array(f32.buffer);
      const near = (x: number, d: number): number => {
        f32[0] = x;
        u32[0] = (u32[0] as number) + d;
        return f32[0] as number;
      };
      const inputs: number[] = [];
      // 16-bit formats: every 17th tie plus all ties of the 64 smallest and largest codes (keeps the test fast).
      const every = format.bits <= 8 ? 1 : 17;
      for (let i = 0; i + 1 < finite.length; i++) {
        if (i % every !== 0 && i >= 64 && i + 65 < finite.length) continue;
        const mid = Math.fround(((finite[i] as number) + (finite[i + 1] as number)) / 2);
        for (const d of [-2, -1, 0, 1, 2]) inputs.push(near(mid, d));
      }
      const src = new Float32Array(Math.max(4096, inputs.length));
      src.set(inputs);
      for (const mode of ['rne', 'rtz', 'rha', 'rhz'] as const) {
        const scalar = scalarEncoder(format, profile, mode);
        const codes = encodeArray(format, src, { profile, mode });
        expectSameCodes(mode, codes, (i) => scalar(src[i] as number), src.length);
      }
    },
  );

  test.prop([fc.constantFrom(...coverage), fc.float32Array({ maxLength: 64 })])(
    'random float32 arrays (fast-check)',
    ({ profile, format }, src) => {
      const scalar = scalarEncoder(format, profile);
      const codes = encodeArray(format, src, { profile });
      expectSameCodes('rne', codes, (i) => scalar(src[i] as number), src.length);
    },
  );

  it.each(coverage.map((c) => [c.profile.name, c.format.name, c.profile, c.format] as const))(
    '%s/%s: fastEncoder per value and per call (before the tables) at the edges of its bit-trick range',
    (_p, _f, profile, format) => {
      // Float32 neighbours of every code's value and of every midpoint between neighbouring codes (the bit
      // trick's range ends at the min normal and at overflow; every code of an 8-bit format, about 4096 of a
      // wider one), plus the special and random patterns.
      const f32 = new Float32Array(1);
      const u32 = new Uint32Array(f32.buffer);
      const patterns: number[] = [];
      const values: number[] = [];
      for (let c = 0; c < format.codeCount; c += format.bits <= 8 ? 1 : Math.floor(format.codeCount / 4093))
        values.push(decode(format, c));
      const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
      for (let i = 0; i < finite.length; i++) {
        const next = finite[i + 1];
        for (const v of next === undefined
          ? [finite[i] as number]
          : [finite[i] as number, ((finite[i] as number) + next) / 2]) {
          f32[0] = v;
          const b = u32[0] as number;
          for (const d of [-1, 0, 1]) patterns.push((b + d) >>> 0, ((b + d) ^ 0x80000000) >>> 0);
        }
      }
      for (const src of inputs) patterns.push(...new Uint32Array(src.buffer, src.byteOffset, src.length));
      for (const mode of ['rne', 'rtz', 'rha', 'rhz'] as const) {
        // (encodeBits may give a 32-bit code as a negative int32, as the Uint32Array it is stored in wraps it.)
        const enc = fastEncoder(format, profile, mode);
        const scalar = scalarEncoder(format, profile, mode);
        const want = (i: number): number => {
          u32[0] = patterns[i] as number;
          return scalar(f32[0] as number);
        };
        expectSameCodes(
          `${mode} encodeBits`,
          patterns.map((b) => enc.encodeBits(b) >>> 0),
          want,
          patterns.length,
        );
        // A short call: per value unless this kernel's tables exist already (the other tests may have built them).
        const bits = Uint32Array.from(patterns.slice(0, 64));
        const dst =
          format.bits <= 8 ? new Uint8Array(64) : format.bits <= 16 ? new Uint16Array(64) : new Uint32Array(64);
        enc.encodeBitsInto(bits, 64, dst);
        expectSameCodes(`${mode} encodeBitsInto`, dst, want, Math.min(64, patterns.length));
      }
      expect(() => fastEncoder(format, profile, 'stochastic')).toThrow(/stochastic/);
    },
  );

  it('decodeArray is exact for every code width', () => {
    const codes = new Uint16Array([0x3f80, 0x7f80, 0x0001, 0x8000]);
    const out = decodeArray('bf16', codes);
    expect(Array.from(out)).toEqual([1, Infinity, 2 ** -133, -0]);
    const f32 = decodeArray('fp32', new Uint32Array([0x3f800000, 0x00000001]));
    expect(Array.from(f32)).toEqual([1, 2 ** -149]);
  });

  it('checks buffer lengths and stochastic bits', () => {
    const src = new Float32Array(4);
    expect(() => encodeArray('e4m3fn', src, { profile: 'satfinite' }, new Uint8Array(2))).toThrow(/dst has 2/);
    expect(() => encodeArray('e4m3fn', src, { profile: 'satfinite', mode: 'stochastic' })).toThrow(/randomBits/);
    expect(() =>
      encodeArray('e4m3fn', src, { profile: 'satfinite', mode: 'stochastic', randomBits: new Uint32Array(3) }),
    ).toThrow(/randomBits has 3/);
  });
});
