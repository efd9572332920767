// Tests of the compare rules and of the ndarray edge: bitwise vs ulp vs rtol/atol on NaN, ±0 and
// neighbours; a strided (transposed) ndarray view is written row-major.

import ndarray from 'ndarray';
import { describe, expect, it } from 'vitest';
import { compareArrays, elementMatches, mismatchText, ulpDistance } from '../../src/golden/compare.js';
import { contiguous } from '../../src/golden/write.js';

describe('compare rules', () => {
  it('bitwise tells −0 from +0 and NaN payloads apart; ulp 0 does not', () => {
    expect(elementMatches(-0, 0, 'bitwise', 'F32')).toBe(false);
    expect(elementMatches(-0, 0, { ulp: 0 }, 'F32')).toBe(true);
    expect(elementMatches(Number.NaN, Number.NaN, { ulp: 0 }, 'F32')).toBe(true);
    expect(elementMatches(Number.NaN, 1, { rtol: 1, atol: 1 }, 'F64')).toBe(false);
    expect(elementMatches(Infinity, 1e308, { rtol: 1, atol: 1 }, 'F64')).toBe(false);
  });

  it('counts ulps on the float32 line, across zero', () => {
    expect(ulpDistance(1, Math.fround(1 + 2 ** -23), 'F32')).toBe(1);
    expect(ulpDistance(2 ** -149, -(2 ** -149), 'F32')).toBe(2);
    expect(elementMatches(Math.fround(1 + 2 ** -23), 1, { ulp: 1 }, 'F32')).toBe(true);
    expect(elementMatches(Math.fround(1 + 2 ** -22), 1, { ulp: 1 }, 'F32')).toBe(false);
  });

  it('reports the first mismatch with its index and both values in hex', () => {
    const m = compareArrays(
      new Float32Array([1, 2, -0.5, 4]),
      new Float32Array([1, 2, 0.5, 5]),
      [2, 2],
      'bitwise',
      'F32',
    );
    expect(m).not.toBeNull();
    expect(mismatchText('x', m!, 4, 'bitwise')).toBe(
      'x[1, 0]: got -0.5 (0xbf000000), expected 0.5 (0x3f000000) — 2 of 4 differ (bitwise)',
    );
    expect(
      compareArrays(new Float64Array([1 + 1e-9]), new Float64Array([1]), [1], { rtol: 1e-8, atol: 0 }, 'F64'),
    ).toBeNull();
  });

  it('writes a transposed ndarray view row-major', () => {
    const a = ndarray(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
    expect(Array.from(contiguous(a.transpose(1, 0)))).toEqual([1, 4, 2, 5, 3, 6]);
    expect(contiguous(a)).toBe(a.data);
  });
});
