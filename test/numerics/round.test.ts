import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import {
  type CastProfile,
  type FloatFormat,
  castProfiles,
  decode,
  encode,
  encodeArray,
  floatFormats,
  resolveRules,
  round,
  scalarEncoder,
} from '../../src/numerics/index.js';
import { edgeCodes } from '../../src/numerics/round.js';
import { profileCoverage } from '../../src/numerics/profiles.js';
import { createRng } from '../../src/core/rng.js';

const coverage = profileCoverage();
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const nextUp = (x: number): number => {
  f32[0] = x;
  u32[0] = (u32[0] as number) + (x >= 0 ? 1 : -1);
  return f32[0] as number;
};
const nextDown = (x: number): number => {
  f32[0] = x;
  u32[0] = (u32[0] as number) - (x > 0 ? 1 : -1);
  return f32[0] as number;
};

describe('hand-checked values from the reference', () => {
  it('E4M3FN overflow edges per profile', () => {
    const e = (x: number, profile: string) => encode('e4m3fn', x, { profile: profile as 'ieee' });
    expect(e(464, 'ieee')).toBe(0x7e); // tie → 448 (mantissa 110 even)
    expect(e(465, 'ieee')).toBe(0x7f); // NaN
    expect(e(-465, 'torch-2.11')).toBe(0xff); // NaN with the sign kept
    expect(e(465, 'satfinite')).toBe(0x7e);
    expect(e(1e30, 'onnx-sat')).toBe(0x7e);
    expect(e(-Infinity, 'satfinite')).toBe(0xfe);
    expect(e(485, 'ort-1.30')).toBe(0x7e); // observed quirk [480, 496) → 448
    expect(e(496, 'ort-1.30')).toBe(0x7f);
    expect(e(470, 'ort-1.30')).toBe(0x7f);
    expect(e(Number.NaN, 'vllm-fp8')).toBe(0x7e); // fminf(NaN, 448) = 448
    expect(e(2 ** -10, 'ieee')).toBe(0x00); // tie between 0 and 2^-9 → 0
    expect(e(3 * 2 ** -10, 'ieee')).toBe(0x02); // tie → 2^-8 (even)
    expect(e(-0, 'ieee')).toBe(0x80);
  });

  it('FNUZ formats drop −0 and overflow to the single NaN', () => {
    expect(encode('e4m3fnuz', -0, { profile: 'ieee' })).toBe(0);
    expect(encode('e4m3fnuz', -1e-9, { profile: 'ieee' })).toBe(0);
    expect(encode('e4m3fnuz', 248, { profile: 'ieee' })).toBe(0x80);
    expect(encode('e4m3fnuz', 247.9, { profile: 'ieee' })).toBe(0x7f);
    expect(encode('e4m3fnuz', -1000, { profile: 'onnx-sat' })).toBe(0xff);
    expect(encode('e5m2fnuz', 61440, { profile: 'torch-2.11' })).toBe(0x80);
  });

  it('E5M2: overflow to Inf, ORT quirk, NaN codes per backend', () => {
    expect(encode('e5m2', 61439, { profile: 'ieee' })).toBe(0x7b);
    expect(encode('e5m2', 61440, { profile: 'ieee' })).toBe(0x7c);
    expect(encode('e5m2', -61440, { profile: 'ort-1.30' })).toBe(0xff);
    expect(encode('e5m2', 65536, { profile: 'ort-1.30' })).toBe(0x7c);
    expect(encode('e5m2', Number.NaN, { profile: 'ml-dtypes' })).toBe(0x7e);
    expect(encode('e5m2', Number.NaN, { profile: 'torch-2.11' })).toBe(0x7f);
  });

  it('E2M1 ties: RNE vs ties away, NaN per backend', () => {
    const xs = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5];
    expect(xs.map((x) => round('e2m1', x, { profile: 'satfinite' }))).toEqual([0, 1, 1, 2, 2, 4, 4]);
    expect(xs.map((x) => round('e2m1', x, { profile: 'mx' }))).toEqual([0.5, 1, 1.5, 2, 3, 4, 6]);
    expect(round('e2m1', 7, { profile: 'satfinite' })).toBe(6);
    expect(round('e2m1', Number.NaN, { profile: 'onnx-sat' })).toBe(6);
    expect(Object.is(round('e2m1', Number.NaN, { profile: 'ml-dtypes' }), -0)).toBe(true);
  });

  it('E8M0: nearest with ties up, and each backend’s zero/negative/overflow', () => {
    const e = (x: number, profile: 'torch-2.11' | 'onnx-sat' | 'ml-dtypes' | 'ieee') => encode('e8m0', x, { profile });
    expect([1.5, 3, 0.75, 1.4999999].map((x) => decode(floatFormats.e8m0, e(x, 'torch-2.11')))).toEqual([2, 4, 1, 1]);
    expect(e(0, 'torch-2.11')).toBe(0x00);
    expect(e(0, 'ml-dtypes')).toBe(0xff);
    expect(e(0, 'onnx-sat')).toBe(0x00);
    expect(e(-4, 'torch-2.11')).toBe(0x81);
    expect(e(-4, 'onnx-sat')).toBe(0x00);
    expect(e(-4, 'ml-dtypes')).toBe(0xff);
    expect(e(2 ** -128, 'ml-dtypes')).toBe(0x00);
    expect(e(2 ** -128, 'ieee')).toBe(0xff);
    expect(e(1.5 * 2 ** 127, 'torch-2.11')).toBe(0xff);
    expect(e(1.5 * 2 ** 127, 'onnx-sat')).toBe(0xfe);
  });

  it('library quirks found by the library-casts check (torch 2.13, ml_dtypes 0.6, onnxruntime 1.30)', () => {
    const f32 = new Float32Array(1);
    const u32 = new Uint32Array(f32.buffer);
    const fromBits = (b: number): number => {
      u32[0] = b;
      return f32[0] as number;
    };
    // E8M0: float32 subnormals in (2^-127, 1.5·2^-127] round up on their bits (c10, ml_dtypes)
    for (const p of ['torch-2.13', 'torch-2.11', 'ml-dtypes'] as const) {
      expect(encode('e8m0', fromBits(0x00400001), { profile: p }), p).toBe(0x01);
      expect(encode('e8m0', fromBits(0x00600000), { profile: p }), p).toBe(0x01);
      expect(encode('e8m0', fromBits(0x00400000), { profile: p }), p).toBe(0x00);
      expect(encode('e8m0', fromBits(0x003fffff), { profile: p }), p).toBe(0x00);
    }
    expect(encode('e8m0', -fromBits(0x00500000), { profile: 'torch-2.13' })).toBe(0x01);
    expect(encode('e8m0', fromBits(0x00500000), { profile: 'ieee' })).toBe(0x00); // by value: nearest is 2^-127
    // BF16 NaN: torch's vectorized CPU copy gives 0xFFFF for either sign; onnxruntime keeps the sign
    expect(encode('bf16', Number.NaN, { profile: 'torch-2.13' })).toBe(0xffff);
    expect(encode('bf16', fromBits(0x7fc00000), { profile: 'torch-2.11' })).toBe(0xffff);
    expect(encode('bf16', fromBits(0xffc00000), { profile: 'ort-1.30' })).toBe(0xffc0);
    expect(encode('bf16', fromBits(0xffc00000), { profile: 'onnx-sat' })).toBe(0xffc0);
    // FP16 NaN keeps the top payload bits with the quiet bit set (F16C vcvtps2ph), scalar and vector alike
    for (const p of ['torch-2.13', 'ort-1.30', 'onnx-sat'] as const) {
      expect(encode('fp16', fromBits(0x7f808000), { profile: p }), p).toBe(0x7e04);
      expect(encode('fp16', fromBits(0xffffffff), { profile: p }), p).toBe(0xffff);
      expect(encode('fp16', fromBits(0x7f800001), { profile: p }), p).toBe(0x7e00);
      const src = new Float32Array(new Uint32Array([0x7f808000, 0xffa00000, 0x7fc00000]).buffer);
      expect([...encodeArray('fp16', src, { profile: p })], p).toEqual([0x7e04, 0xff00, 0x7e00]);
    }
    // E4M3FN ±Inf saturate under torch-2.13
    expect(encode('e4m3fn', -Infinity, { profile: 'torch-2.13' })).toBe(0xfe);
  });

  it('BF16 and FP16 RNE edges', () => {
    expect(encode('bf16', 1 + 2 ** -8, { profile: 'ieee' })).toBe(0x3f80); // tie → even
    expect(encode('bf16', 1 + 3 * 2 ** -8, { profile: 'ieee' })).toBe(0x3f82);
    expect(encode('fp16', 65520, { profile: 'ieee' })).toBe(0x7c00);
    expect(encode('fp16', 65519.996, { profile: 'ieee' })).toBe(0x7bff);
    expect(encode('fp16', 2 ** -25, { profile: 'ieee' })).toBe(0x0000);
    expect(encode('fp16', 1.5 * 2 ** -24, { profile: 'ieee' })).toBe(0x0002);
    expect(encode('bf16', Number.NaN, { profile: 'ieee' })).toBe(0x7fc0);
    expect(encode('tf32', 1 + 2 ** -11, { profile: 'ieee', mode: 'rha' })).toBe(
      encode('tf32', 1 + 2 ** -10, { profile: 'ieee' }),
    );
  });

  it('rejects profiles that do not apply and bad stochastic bits', () => {
    expect(() => encode('e2m1', 1, { profile: 'ieee' })).toThrow(/profile 'ieee' does not apply to format 'e2m1'/);
    expect(() => encode('e4m3fnuz', 1, { profile: 'vllm-fp8' })).toThrow(/does not apply/);
    expect(() => encode('e4m3fn', 1.1, { profile: 'ieee', mode: 'stochastic' })).toThrow(/randomBits/);
    expect(() => encode('e4m3fn', 1, { profile: 'nope' as 'ieee' })).toThrow(/unknown cast profile 'nope'/);
  });
});

function finiteCodes(format: FloatFormat): number[] {
  const codes: number[] = [];
  for (let c = 0; c < format.codeCount; c++) if (Number.isFinite(decode(format, c))) codes.push(c);
  return codes;
}

describe('exhaustive over codes', () => {
  const eightBit = coverage.filter((c) => c.format.bits <= 8);
  it.each(eightBit.map((c) => [c.profile.name, c.format.name, c.profile, c.format] as const))(
    '%s/%s: every code decodes and re-encodes to itself (NaN codes to the profile NaN)',
    (_p, _f, profile, format) => {
      const enc = scalarEncoder(format, profile);
      const nanCode = edgeCodes(format, resolveRules(format, profile)).nan[0];
      for (let c = 0; c < format.codeCount; c++) {
        const v = decode(format, c);
        const back = enc(v);
        if (Number.isNaN(v)) expect(back).toBe(nanCode);
        else if (v === Infinity || v === -Infinity)
          expect(decode(format, back)).toBe(
            profile.rules.infinity === 'saturate' && !format.hasInf ? v : decode(format, back),
          );
        else if (Object.is(v, -0) && resolveRules(format, profile).negativeZero === 'positive') expect(back).toBe(0);
        else expect(back).toBe(c);
      }
    },
  );

  // Every tie between neighbouring codes, and the float32 values just above and below it.
  const tieCases = coverage.filter((c) => c.format.bits <= 16);
  it.each(tieCases.map((c) => [c.profile.name, c.format.name, c.profile, c.format] as const))(
    '%s/%s: ties and their neighbours follow the profile’s mode',
    (_p, _f, profile: CastProfile, format: FloatFormat) => {
      const codes = finiteCodes(format)
        .filter((c) => decode(format, c) >= 0 && !Object.is(decode(format, c), -0))
        .sort((a, b) => decode(format, a) - decode(format, b));
      const stride = format.bits > 8 ? 97 : 1; // sample the 16-bit formats
      for (const mode of ['rne', 'rha', 'rhz', 'rtz'] as const) {
        const enc = scalarEncoder(format, profile, mode);
        for (let i = 0; i + 1 < codes.length; i += stride) {
          const lo = codes[i] as number;
          const hi = codes[i + 1] as number;
          const mid = (decode(format, lo) + decode(format, hi)) / 2;
          if (Math.fround(mid) !== mid) continue;
          const loMant = format.manBits === 0 ? 1 : lo & 1; // parity of the significand
          const expectTie = mode === 'rtz' || mode === 'rhz' ? lo : mode === 'rha' ? hi : loMant === 0 ? lo : hi;
          const negZero = format.hasNegZero && resolveRules(format, profile).negativeZero === 'keep';
          for (const sign of format.signed ? [1, -1] : [1]) {
            const s = (c: number) => (sign > 0 || (c === 0 && !negZero) ? c : c + format.signMask);
            if (rawHit(profile, format, mid)) continue;
            expect(enc(sign * mid), `${mode} tie ${sign * mid}`).toBe(s(expectTie));
            expect(enc(sign * nextUp(mid)), `${mode} above ${mid}`).toBe(s(mode === 'rtz' ? lo : hi));
            expect(enc(sign * nextDown(mid)), `${mode} below ${mid}`).toBe(s(lo));
          }
        }
      }
    },
  );

  it.each(
    coverage
      .filter((c) => c.format.bits <= 16)
      .map((c) => [c.profile.name, c.format.name, c.profile, c.format] as const),
  )('%s/%s: the overflow tie max + ½ulp follows the overflow rule', (_p, _f, profile, format) => {
    const rules = resolveRules(format, profile);
    const codes = edgeCodes(format, rules);
    const ulp = 2 ** (format.emax - format.manBits);
    const tie = format.maxFinite + ulp / 2;
    if (Math.fround(tie) !== tie || rawHit(profile, format, tie)) return;
    const maxOdd = (format.maxFinite / ulp) % 2 === 1;
    expect(scalarEncoder(format, profile, 'rne')(tie)).toBe(maxOdd ? codes.overflow[0] : format.maxCode);
    expect(scalarEncoder(format, profile, 'rha')(tie)).toBe(codes.overflow[0]);
    expect(scalarEncoder(format, profile, 'rtz')(tie * 4)).toBe(format.maxCode);
  });
});

function rawHit(profile: CastProfile, format: FloatFormat, x: number): boolean {
  return resolveRules(format, profile).rawRanges.some((r) => Math.abs(x) >= r.lo && Math.abs(x) < r.hi);
}

const float32 = fc.float({ noDefaultInfinity: false });
const finiteFloat32 = fc.float({ noNaN: true, noDefaultInfinity: true });

describe('properties', () => {
  const numericPairs = coverage.filter((c) => c.format.bits <= 32);
  test.prop([fc.constantFrom(...numericPairs), finiteFloat32, finiteFloat32])(
    'monotone: x ≤ y ⇒ round(x) ≤ round(y) when both are numbers',
    ({ profile, format }, x, y) => {
      // Unsigned formats are monotone on their domain x ≥ 0 (negatives follow the `negative` rule).
      const [a, b] = (format.signed ? [x, y] : [Math.abs(x), Math.abs(y)]).sort((p, q) => p - q) as [number, number];
      for (const mode of ['rne', 'rtz', 'rha', 'rhz'] as const) {
        const ra = decode(format, scalarEncoder(format, profile, mode)(a));
        const rb = decode(format, scalarEncoder(format, profile, mode)(b));
        if (Number.isNaN(ra) || Number.isNaN(rb)) continue;
        expect(ra <= rb).toBe(true);
      }
    },
  );

  test.prop([fc.constantFrom(...numericPairs), float32])(
    'idempotent: round(round(x)) = round(x)',
    ({ profile, format }, x) => {
      const once = round(format, x, { profile });
      const twice = round(format, once, { profile });
      if (Number.isNaN(once)) return; // a NaN re-enters through the NaN rule (covered above)
      expect(Object.is(twice, once)).toBe(true);
    },
  );

  test.prop([fc.constantFrom(...numericPairs.filter((c) => c.format.signed)), finiteFloat32])(
    'sign symmetric: round(−x) = −round(x) (up to the −0 rule)',
    ({ profile, format }, x) => {
      const a = round(format, x, { profile });
      const b = round(format, -x, { profile });
      if (Number.isNaN(a)) {
        expect(b).toBeNaN();
        return;
      }
      expect(Math.abs(a)).toBe(Math.abs(b));
      if (a !== 0) expect(Math.sign(a)).toBe(-Math.sign(b));
    },
  );

  test.prop([
    fc.constantFrom(...numericPairs.filter((c) => resolveRules(c.format, c.profile).overflow === 'saturate')),
    float32,
  ])('saturating profiles never leave [−max, max] on non-NaN input', ({ profile, format }, x) => {
    if (Number.isNaN(x)) return;
    const r = round(format, x, { profile });
    expect(Math.abs(r) <= format.maxFinite).toBe(true);
  });

  it('stochastic rounding is unbiased in expectation and reproducible', () => {
    for (const [format, x] of [
      ['e4m3fn', 1.3],
      ['e2m1', 2.6],
      ['bf16', 1 + 2 ** -9 + 2 ** -11],
    ] as const) {
      const rng = createRng(11).fork(`sr-${format}`);
      const n = 40000;
      let sum = 0;
      const first: number[] = [];
      for (let i = 0; i < n; i++) {
        const v = round(format, x, { profile: 'satfinite', mode: 'stochastic', randomBits: rng.uint32() });
        if (i < 20) first.push(v);
        sum += v;
      }
      const lo = round(format, x, { profile: 'satfinite', mode: 'rtz' });
      const hi = round(format, x + (x - lo) * 0 + Math.abs(x) * 1e-12, { profile: 'satfinite', mode: 'rtz' });
      const spacing = Math.max(...first) - Math.min(...first) || hi - lo;
      // Standard error of the mean is at most spacing/(2√n); allow 4 standard errors.
      expect(Math.abs(sum / n - x)).toBeLessThan((4 * spacing) / (2 * Math.sqrt(n)));
      const again = createRng(11).fork(`sr-${format}`);
      const replay = first.map(() =>
        round(format, x, { profile: 'satfinite', mode: 'stochastic', randomBits: again.uint32() }),
      );
      expect(replay).toEqual(first);
    }
  });

  it('stochastic rounding with 0 and 2^32−1 random bits brackets the value', () => {
    expect(round('e4m3fn', 1.3, { profile: 'satfinite', mode: 'stochastic', randomBits: 0 })).toBe(1.25);
    expect(round('e4m3fn', 1.3, { profile: 'satfinite', mode: 'stochastic', randomBits: 2 ** 32 - 1 })).toBe(1.375);
    expect(round('e4m3fn', 1.25, { profile: 'satfinite', mode: 'stochastic', randomBits: 2 ** 32 - 1 })).toBe(1.25);
  });
});

describe('profile records', () => {
  it('every profile covers at least one format and every rule resolves', () => {
    for (const p of Object.values(castProfiles)) {
      expect(Object.keys(p.formats).length).toBeGreaterThan(0);
    }
    expect(coverage.length).toBeGreaterThan(40);
  });
});
