import { describe, expect, it } from 'vitest';
import { decode, floatFormat, floatFormats, packNibbles, unpackNibbles } from '../../src/numerics/index.js';
import { encodeExact, isNanCode } from '../../src/numerics/formats.js';

describe('format records', () => {
  // Constants from the format table (spec §1; reference/numerics.md §1).
  const table: [string, number, number, number, number | null][] = [
    // name, maxFinite, maxCode, minSubnormal, infCode
    ['e4m3fn', 448, 0x7e, 2 ** -9, null],
    ['e4m3fnuz', 240, 0x7f, 2 ** -10, null],
    ['e5m2', 57344, 0x7b, 2 ** -16, 0x7c],
    ['e5m2fnuz', 57344, 0x7f, 2 ** -17, null],
    ['e3m2', 28, 0x1f, 2 ** -4, null],
    ['e2m3', 7.5, 0x1f, 2 ** -3, null],
    ['e2m1', 6, 0x7, 0.5, null],
    ['e8m0', 2 ** 127, 0xfe, 2 ** -127, null],
    ['bf16', (2 - 2 ** -7) * 2 ** 127, 0x7f7f, 2 ** -133, 0x7f80],
    ['fp16', 65504, 0x7bff, 2 ** -24, 0x7c00],
    ['tf32', (2 - 2 ** -10) * 2 ** 127, 0x3fbff, 2 ** -136, 0x3fc00],
    ['fp32', 3.4028234663852886e38, 0x7f7fffff, 2 ** -149, 0x7f800000],
  ];
  it.each(table)('%s has the published constants', (name, max, maxCode, minSub, inf) => {
    const f = floatFormat(name);
    expect(f.maxFinite).toBe(max);
    expect(f.maxCode).toBe(maxCode);
    expect(f.minSubnormal).toBe(minSub);
    expect(f.infCode).toBe(inf);
    expect(decode(f, f.maxCode)).toBe(max);
  });

  it('NaN codes match each encoding', () => {
    expect(floatFormats.e4m3fn.nanCodes).toEqual([0x7f, 0xff]);
    expect(floatFormats.e4m3fnuz.nanCodes).toEqual([0x80]);
    expect(floatFormats.e5m2.nanCodes).toEqual([0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff]);
    expect(floatFormats.e8m0.nanCodes).toEqual([0xff]);
    expect(floatFormats.e2m1.nanCodes).toEqual([]);
    expect(isNanCode(floatFormats.bf16, 0x7fc0)).toBe(true);
    expect(isNanCode(floatFormats.bf16, 0x7f80)).toBe(false);
  });

  it('E2M1 decodes to the OCP value set', () => {
    const values = Array.from({ length: 8 }, (_, c) => decode(floatFormats.e2m1, c));
    expect(values).toEqual([0, 0.5, 1, 1.5, 2, 3, 4, 6]);
    expect(Object.is(decode(floatFormats.e2m1, 8), -0)).toBe(true);
  });

  it('E8M0 has no zero and no sign', () => {
    expect(decode(floatFormats.e8m0, 0)).toBe(2 ** -127);
    expect(decode(floatFormats.e8m0, 127)).toBe(1);
    expect(decode(floatFormats.e8m0, 0xff)).toBeNaN();
    expect(() => encodeExact(floatFormats.e8m0, false, 0)).toThrow(/no zero/);
  });

  it('encodeExact inverts decode on every finite code of the small formats', () => {
    for (const f of Object.values(floatFormats).filter((f) => f.bits <= 16)) {
      for (let c = 0; c < f.codeCount; c++) {
        const v = decode(f, c);
        if (!Number.isFinite(v)) continue;
        expect(encodeExact(f, v < 0 || Object.is(v, -0), Math.abs(v))).toBe(c);
      }
    }
  });

  it('unknown format names list the known ones', () => {
    expect(() => floatFormat('e9m9')).toThrow(/unknown float format 'e9m9'.*e4m3fn/);
  });
});

describe('4-bit packing', () => {
  it('puts element 0 in the low nibble', () => {
    expect(Array.from(packNibbles([0x1, 0x2, 0xf]))).toEqual([0x21, 0x0f]);
    expect(Array.from(unpackNibbles(new Uint8Array([0x21, 0x0f]), 3))).toEqual([1, 2, 15]);
  });
  it('round-trips and rejects non-nibbles', () => {
    const codes = Array.from({ length: 33 }, (_, i) => (i * 7) % 16);
    expect(Array.from(unpackNibbles(packNibbles(codes), 33))).toEqual(codes);
    expect(() => packNibbles([16])).toThrow(/codes\[0\] = 16/);
    expect(() => unpackNibbles(new Uint8Array(1), 3)).toThrow(/at most 2/);
  });
});
