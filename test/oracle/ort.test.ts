// Sanity tests of the onnxruntime oracle harness against ORT results stated, with sources, in shared/reference/numerics.md.
// Not the numerics oracle tests themselves (those compare qrl-sim's casts and quantizers with ORT on large sweeps).
import { afterAll, describe, expect, it } from 'vitest';
import {
  ortCastCodes,
  ortCastRoundTrip,
  ortDecode,
  ortDequantizeLinear,
  ortDisposeSessions,
  ortMatMul,
  ortQuantizeLinear,
  ortQuantizeLinearCodes,
  ortSupportError,
  ortSupports,
  ortVersion,
  prepareOrtCastRoundTrip,
  prepareOrtMatMul,
  type OrtCastTarget,
} from './ort.js';

afterAll(ortDisposeSessions);

const f32 = (...xs: number[]): Float32Array => Float32Array.from(xs);
const bitsOf = (a: Float32Array): number[] => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
/** float32 with the given bit pattern (to build −NaN and exact subnormals). */
const fromBits = (b: number): number => new Float32Array(Uint32Array.of(b).buffer)[0]!;
const negNaN = fromBits(0xffc00000);
/** The sign bit of every element, so that −0 and −NaN are told apart. */
const signs = (a: Float32Array): number[] => bitsOf(a).map((b) => b >>> 31);
/** Round half to even, for expectations of QuantizeLinear on exact quotients. */
const rne = (v: number): number => {
  const r = Math.round(v);
  return Math.abs(v % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
};

describe('harness environment', () => {
  it('runs onnxruntime-node 1.30', () => {
    expect(ortVersion).toMatch(/^1\.30\./);
  });
});

// Reference §2.3 (ONNX Cast saturate table) and §2.4 (ORT 1.30 CPU observed, incl. the two non-spec results).
describe('Cast round trip: float8', () => {
  it('e4m3fn saturate=1: RNE to the 448 ceiling, ties to even, subnormal ties to zero', async () => {
    const y = await ortCastRoundTrip(
      f32(500, 464, 2 ** -10, 3 * 2 ** -10, -500, Infinity, -Infinity, 17, -0),
      'e4m3fn',
      { saturate: 1 },
    );
    expect(Array.from(y)).toEqual([448, 448, 0, 2 ** -8, -448, 448, -448, 16, -0]);
    expect(signs(y)[8]).toBe(1);
  });

  it('e4m3fn saturate=0: NaN past 464, except the ORT 1.30 quirk [480, 496) → 448', async () => {
    const x = f32(470, 479.99997, 480, 488, 495.99997, 496, -480, 464, Infinity, negNaN);
    const y = await ortCastRoundTrip(x, 'e4m3fn', { saturate: 0 });
    expect(Array.from(y.subarray(0, 2)).every(Number.isNaN)).toBe(true);
    expect(Array.from(y.subarray(2, 5))).toEqual([448, 448, 448]);
    expect(Number.isNaN(y[5])).toBe(true);
    expect(y[6]).toBe(-448);
    expect(y[7]).toBe(448);
    expect(Number.isNaN(y[8])).toBe(true);
    expect(Number.isNaN(y[9]) && signs(y)[9] === 1).toBe(true); // NaN sign kept
  });

  it('e5m2 saturate=0: [61440, 65536) → NaN (ORT quirk), ≥ 65536 → Inf; saturate=1 clamps to 57344', async () => {
    const x = f32(57344, 61440, 65535, 65536, -65536, Infinity);
    const nosat = await ortCastRoundTrip(x, 'e5m2', { saturate: 0 });
    expect(nosat[0]).toBe(57344);
    expect(Number.isNaN(nosat[1]) && Number.isNaN(nosat[2])).toBe(true);
    expect(Array.from(nosat.subarray(3))).toEqual([Infinity, -Infinity, Infinity]);
    const sat = await ortCastRoundTrip(x, 'e5m2', { saturate: 1 });
    expect(Array.from(sat)).toEqual([57344, 57344, 57344, 57344, -57344, 57344]);
  });

  it('fnuz types: no −0, Inf saturates to max (Operators.md, ORT)', async () => {
    const a = await ortCastRoundTrip(f32(-0, Infinity, 1000, -(2 ** -12)), 'e4m3fnuz', { saturate: 1 });
    expect(Array.from(a)).toEqual([0, 240, 240, 0]);
    expect(signs(a)).toEqual([0, 0, 0, 0]);
    const b = await ortCastRoundTrip(f32(-0, Infinity, 61440), 'e5m2fnuz', { saturate: 1 });
    expect(Array.from(b)).toEqual([0, 57344, 57344]);
  });
});

describe('Cast round trip: bf16, fp16, e8m0, e2m1', () => {
  it('bf16 rounds ties to even and overflows at 0x7F7F8000', async () => {
    // 1 + 2^-8 is the midpoint of 1 and 1 + 2^-7 (tie → 1, even); 1 + 3·2^-8 ties up to 1 + 2^-6.
    const x = f32(
      1 + 2 ** -8,
      1 + 3 * 2 ** -8,
      1 + 2 ** -8 + 2 ** -20,
      fromBits(0x7f7f7fff),
      fromBits(0x7f7f8000),
      negNaN,
    );
    const y = await ortCastRoundTrip(x, 'bf16');
    expect(bitsOf(y.subarray(0, 5))).toEqual([0x3f800000, 0x3f820000, 0x3f810000, 0x7f7f0000, 0x7f800000]);
    expect(Number.isNaN(y[5]) && signs(y)[5] === 1).toBe(true);
  });

  it('fp16: 65520 → Inf, 2^-25 → 0, 1.5·2^-24 → 2^-23', async () => {
    const y = await ortCastRoundTrip(f32(65504, 65519, 65520, 2 ** -25, 1.5 * 2 ** -24), 'fp16');
    expect(Array.from(y)).toEqual([65504, 65504, Infinity, 0, 2 ** -23]);
  });

  it('e8m0 round modes (reference §2.3, ORT observed)', async () => {
    const x = f32(1.4999999, 1.5, 3, 0.75, 1.75);
    expect(Array.from(await ortCastRoundTrip(x, 'e8m0', { roundMode: 'nearest' }))).toEqual([1, 2, 4, 1, 2]);
    expect(Array.from(await ortCastRoundTrip(x, 'e8m0', { roundMode: 'down' }))).toEqual([1, 1, 2, 0.5, 1]);
    const up = await ortCastRoundTrip(f32(0, -1, 2 ** -127, 3e38, Infinity), 'e8m0', { roundMode: 'up', saturate: 1 });
    expect(Array.from(up)).toEqual([2 ** -127, 2 ** -127, 2 ** -127, 2 ** 127, 2 ** 127]);
    const upNoSat = await ortCastRoundTrip(f32(0, -1, Infinity), 'e8m0', { roundMode: 'up', saturate: 0 });
    expect(Array.from(upNoSat).every(Number.isNaN)).toBe(true);
  });

  it('ortSupports tells whether e2m1 can be tested, with ORT’s reason when not', async () => {
    const reason = await ortSupportError('e2m1');
    if (await ortSupports('e2m1')) {
      expect(reason).toBeNull();
      const y = await ortCastRoundTrip(f32(0.25, 0.75, 1.25, 2.5, 5, 7, -100), 'e2m1');
      expect(Array.from(y)).toEqual([0, 1, 1, 2, 4, 6, -6]);
    } else {
      expect(reason).toMatch(/Cast\(23\)/);
      await expect(ortCastRoundTrip(f32(1), 'e2m1')).rejects.toThrow(/Cast\(23\)/);
    }
    expect(await ortSupports('e4m3fn')).toBe(true);
  });

  it('rejects options the target does not take, naming them', async () => {
    await expect(ortCastRoundTrip(f32(1), 'bf16', { saturate: 0 })).rejects.toThrow(/saturate = 0 .*bf16/);
    await expect(ortCastRoundTrip(f32(1), 'e4m3fn', { roundMode: 'down' })).rejects.toThrow(
      /roundMode = 'down' .*e4m3fn/,
    );
  });
});

describe('raw codes through constant folding', () => {
  it('gives the storage bytes, including the quirk codes', async () => {
    expect(Array.from(await ortCastCodes(f32(480, 470, 448, -0, 2 ** -9), 'e4m3fn', { saturate: 0 }))).toEqual([
      0x7e, 0x7f, 0x7e, 0x80, 0x01,
    ]);
    expect(Array.from(await ortCastCodes(f32(61440, 65536, -Infinity, 57344), 'e5m2', { saturate: 0 }))).toEqual([
      0x7f, 0x7c, 0xfc, 0x7b,
    ]);
    expect(Array.from(await ortCastCodes(f32(1, -2, 65504), 'fp16'))).toEqual([0x3c00, 0xc000, 0x7bff]);
    expect(Array.from(await ortCastCodes(f32(1, -2, 1 + 2 ** -8), 'bf16'))).toEqual([0x3f80, 0xc000, 0x3f80]);
    expect(Array.from(await ortCastCodes(f32(1.5, 0.75), 'e8m0', { roundMode: 'nearest' }))).toEqual([0x80, 0x7f]);
  });

  it('ortDecode of all 256 e4m3fn codes gives the OCP table ends', async () => {
    const y = await ortDecode(
      Uint8Array.from({ length: 256 }, (_, i) => i),
      'e4m3fn',
    );
    expect([y[0x01], y[0x08], y[0x7e], y[0xfe]]).toEqual([2 ** -9, 2 ** -6, 448, -448]);
    expect(Number.isNaN(y[0x7f]) && Number.isNaN(y[0xff])).toBe(true);
    expect(signs(y)[0x80]).toBe(1);
    expect(Array.from(y).filter(Number.isNaN)).toHaveLength(2);
  });

  it('ortDecode of e8m0 codes: 0x00 = 2^-127, 0x7f = 1, 0xfe = 2^127, 0xff = NaN', async () => {
    const y = await ortDecode(Uint8Array.of(0x00, 0x7f, 0xfe, 0xff), 'e8m0');
    expect(Array.from(y.subarray(0, 3))).toEqual([2 ** -127, 1, 2 ** 127]);
    expect(Number.isNaN(y[3])).toBe(true);
  });

  // Two independent ORT paths (runtime Cast→Cast vs constant-folded Cast, then Cast of the codes) must agree bit for bit.
  const sweep = (() => {
    const xs: number[] = [0, -0, Infinity, -Infinity, NaN, negNaN];
    for (let e = -20; e <= 17; e++)
      for (let m = 0; m < 64; m++) xs.push(2 ** e * (1 + m / 64), -(2 ** e) * (1 + (m + 0.5) / 64));
    return Float32Array.from(xs);
  })();
  for (const to of ['e4m3fn', 'e4m3fnuz', 'e5m2', 'e5m2fnuz'] as const satisfies readonly OrtCastTarget[]) {
    it(`${to}: folded codes decode to the runtime round trip on ${sweep.length} values, saturate 0 and 1`, async () => {
      for (const saturate of [0, 1] as const) {
        const roundTrip = await ortCastRoundTrip(sweep, to, { saturate });
        const codes = await ortCastCodes(sweep, to, { saturate });
        expect(bitsOf(await ortDecode(codes, to))).toEqual(bitsOf(roundTrip));
      }
    });
  }
});

// Reference §2.3 "ORT observed QuantizeLinear (opset 21)" and the blocked-quantization rule.
describe('QuantizeLinear-21', () => {
  it('int8 per tensor, scale 1: RNE, saturation, NaN → −128', async () => {
    const x = f32(0.5, 1.5, 2.5, -0.5, -1.5, 127.5, 128, -129, NaN, Infinity, -Infinity);
    const q = await ortQuantizeLinear(x, [x.length], f32(1), [], null, { outputType: 'int8' });
    expect(Array.from(q)).toEqual([0, 2, 2, -0, -2, 127, 127, -128, -128, 127, -128].map((v) => v + 0));
    const codes = await ortQuantizeLinearCodes(x, [x.length], f32(1), [], null, { outputType: 'int8' });
    expect(Array.from(codes)).toEqual(Array.from(q, (v) => v & 0xff));
  });

  it('uint8 with zero point 128 maps NaN to 0; scale 1.5 rounds the quotient', async () => {
    const q = await ortQuantizeLinear(f32(NaN, 1, -200, 0.75, 2.25), [5], f32(1.5), [], [128], { outputType: 'uint8' });
    expect(Array.from(q)).toEqual([0, 129, 0, 128, 130]);
  });

  it('int4 and uint4: 7.5 → 7, −8.5 → −8, NaN → −8; codes are nibbles', async () => {
    const x = f32(7.5, -8.5, NaN, 3, -3, 100);
    const q = await ortQuantizeLinear(x, [6], f32(1), [], null, { outputType: 'int4' });
    expect(Array.from(q)).toEqual([7, -8, -8, 3, -3, 7]);
    expect(Array.from(await ortQuantizeLinearCodes(x, [6], f32(1), [], null, { outputType: 'int4' }))).toEqual([
      7, 8, 8, 3, 13, 7,
    ]);
    const u = await ortQuantizeLinear(x, [6], f32(1), [], [8], { outputType: 'uint4' });
    expect(Array.from(u)).toEqual([15, 0, 0, 11, 5, 15]);
  });

  it('per-axis scales along axis 0', async () => {
    const q = await ortQuantizeLinear(f32(1, 2, 3, 1, 2, 3), [2, 3], f32(1, 0.5), [2], null, {
      outputType: 'int8',
      axis: 0,
    });
    expect(Array.from(q)).toEqual([1, 2, 3, 2, 4, 6]);
  });

  it('blocked, block_size 16: every element uses the scale of its own block (last block partial)', async () => {
    const rows = 2;
    const cols = 40; // blocks [0,16), [16,32), [32,40)
    const x = Float32Array.from({ length: rows * cols }, (_, i) => (i % cols) + 0.5 * Math.floor(i / cols));
    const scale = f32(1, 0.5, 4, 2, 0.25, 8); // (rows, ceil(40/16) = 3)
    const q = await ortQuantizeLinear(x, [rows, cols], scale, [rows, 3], null, {
      outputType: 'int8',
      axis: 1,
      blockSize: 16,
    });
    const expected = Array.from(x, (v, i) => {
      const s = scale[Math.floor(i / cols) * 3 + Math.floor((i % cols) / 16)]!;
      return Math.max(-128, Math.min(127, rne(v / s)));
    });
    expect(Array.from(q)).toEqual(expected);
  });

  it('float8 output: decoded values and raw codes, saturate 1 and 0', async () => {
    const x = f32(1000, 930, 960, 3, -0, NaN);
    const sat = await ortQuantizeLinear(x, [6], f32(2), [], null, { outputType: 'e4m3fn', saturate: 1 });
    expect(Array.from(sat.subarray(0, 5))).toEqual([448, 448, 448, 1.5, -0]);
    expect(Number.isNaN(sat[5])).toBe(true);
    const nosat = await ortQuantizeLinear(x, [6], f32(2), [], null, { outputType: 'e4m3fn', saturate: 0 });
    expect(Number.isNaN(nosat[0]) && Number.isNaN(nosat[1])).toBe(true); // 500, 465 → NaN
    expect(nosat[2]).toBe(448); // 480: the ORT quirk shows through QuantizeLinear too
    const codes = await ortQuantizeLinearCodes(x, [6], f32(2), [], [0], { outputType: 'e4m3fn', saturate: 0 });
    expect(Array.from(codes.subarray(0, 5))).toEqual([0x7f, 0x7f, 0x7e, 0x3c, 0x80]);
  });

  it('float8 zero point: QuantizeLinear ignores a nonzero one, DequantizeLinear refuses it', async () => {
    const one = 0x38; // e4m3fn 1.0 = 0b0_0111_000
    const q = await ortQuantizeLinear(f32(0.5, 3), [2], f32(1), [], [one], { outputType: 'e4m3fn' });
    expect(Array.from(q)).toEqual([0.5, 3]);
    await expect(ortDequantizeLinear([one], [1], f32(1), [], [one], { inputType: 'e4m3fn' })).rejects.toThrow(
      /zero point/,
    );
    expect(Array.from(await ortDequantizeLinear([one], [1], f32(1), [], [0], { inputType: 'e4m3fn' }))).toEqual([1]);
  });

  it('checks shapes and ranges, naming the field', async () => {
    await expect(ortQuantizeLinear(f32(1, 2), [3], f32(1), [], null, { outputType: 'int8' })).rejects.toThrow(
      /^x has 2 elements/,
    );
    await expect(ortQuantizeLinear(f32(1), [1], f32(1), [], [200], { outputType: 'int8' })).rejects.toThrow(
      /zeroPoint\[0\] = 200/,
    );
    await expect(ortQuantizeLinear(f32(1), [1], f32(1), [], null, { outputType: 'int8', saturate: 0 })).rejects.toThrow(
      /saturate/,
    );
  });
});

describe('DequantizeLinear-21', () => {
  it('int8, uint8 with zero point, int4, uint4', async () => {
    expect(
      Array.from(await ortDequantizeLinear([-128, 127, 0], [3], f32(0.5), [], null, { inputType: 'int8' })),
    ).toEqual([-64, 63.5, 0]);
    expect(
      Array.from(await ortDequantizeLinear([0, 255, 128], [3], f32(2), [], [128], { inputType: 'uint8' })),
    ).toEqual([-256, 254, 0]);
    expect(
      Array.from(await ortDequantizeLinear([-8, 7, 1, -1, 0], [5], f32(0.5), [], null, { inputType: 'int4' })),
    ).toEqual([-4, 3.5, 0.5, -0.5, 0]);
    expect(
      Array.from(await ortDequantizeLinear([0, 15, 8, 9], [4], f32(0.5), [], [8], { inputType: 'uint4' })),
    ).toEqual([-4, 3.5, 0, 0.5]);
  });

  it('float8 codes enter as an initializer', async () => {
    const y = await ortDequantizeLinear([0x7e, 0x01, 0xfe, 0x7f], [4], f32(2), [], null, { inputType: 'e4m3fn' });
    expect(Array.from(y.subarray(0, 3))).toEqual([896, 2 ** -8, -896]);
    expect(Number.isNaN(y[3])).toBe(true);
  });

  it('blocked int4 with block_size 16 inverts blocked QuantizeLinear on its grid', async () => {
    const cols = 32;
    const q = Array.from({ length: 2 * cols }, (_, i) => ((i * 5) % 16) - 8);
    const scale = f32(0.5, 0.25, 2, 1);
    const y = await ortDequantizeLinear(q, [2, cols], scale, [2, 2], null, {
      inputType: 'int4',
      axis: 1,
      blockSize: 16,
    });
    expect(Array.from(y)).toEqual(q.map((v, i) => v * scale[Math.floor(i / cols) * 2 + Math.floor((i % cols) / 16)]!));
    const back = await ortQuantizeLinear(y, [2, cols], scale, [2, 2], null, {
      outputType: 'int4',
      axis: 1,
      blockSize: 16,
    });
    expect(Array.from(back)).toEqual(q);
  });

  it('rejects codes outside the storage range', async () => {
    await expect(ortDequantizeLinear([8], [1], f32(1), [], null, { inputType: 'int4' })).rejects.toThrow(
      /q\[0\] = 8 is not a int4 value/,
    );
  });
});

describe('MatMul and prepared runs', () => {
  it('ortMatMul equals the triple loop on small integers', async () => {
    const [m, k, n] = [3, 4, 2];
    const a = Float32Array.from({ length: m * k }, (_, i) => (i % 7) - 3);
    const b = Float32Array.from({ length: k * n }, (_, i) => (i % 5) - 2);
    const c = await ortMatMul(a, b, m, k, n);
    const expected: number[] = [];
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let p = 0; p < k; p++) s += a[i * k + p]! * b[p * n + j]!;
        expected.push(s);
      }
    }
    expect(Array.from(c)).toEqual(expected);
  });

  it('prepared runs reuse inputs and the output buffer and repeat the result', async () => {
    const values = f32(500, 1.3, -0.01);
    const run = await prepareOrtCastRoundTrip(values, 'e4m3fn', { saturate: 1 });
    const first = Array.from(await run.run());
    expect(first).toEqual(Array.from(await ortCastRoundTrip(values, 'e4m3fn', { saturate: 1 })));
    run.output.fill(0);
    expect(Array.from(await run.run())).toEqual(first);
    const mm = await prepareOrtMatMul(f32(1, 2, 3, 4), f32(0, 1, 1, 0), 2, 2, 2);
    expect(Array.from(await mm.run())).toEqual([2, 1, 4, 3]);
    expect((await mm.run()) === mm.output).toBe(true);
  });
});
