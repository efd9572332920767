// Oracle tests of the cast profiles against onnxruntime-node's Cast kernels (CPU EP, 1.30):
// `onnx-sat` must equal Cast saturate=1 and `ort-1.30` must equal Cast saturate=0, code for code.

import { describe, expect, it } from 'vitest';
import {
  type CastProfileName,
  type FloatFormat,
  decode,
  encodeArray,
  fakeQuant,
  floatFormats,
} from '../../src/numerics/index.js';
import { createRng } from '../../src/core/rng.js';
import { type OrtCastTarget, ortCastCodes, ortCastRoundTrip, ortSupportError } from '../oracle/ort.js';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function step(x: number, dir: 1 | -1): number {
  f32[0] = x;
  if (x === 0) u32[0] = dir > 0 ? 1 : 0x80000001;
  else u32[0] = (u32[0] as number) + (x > 0 ? dir : -dir);
  return f32[0] as number;
}

/**
 * At least `total` float32 inputs for `format`: every code's value, every tie between neighbouring
 * codes and the float32 values just above and below it, the overflow edges, ±Inf, NaN of both signs,
 * ±0 — and random bit patterns (half raw, half in the format's range) for the rest.
 */
function oracleInputs(format: FloatFormat, total: number): Float32Array {
  const values: number[] = [0, -0, Infinity, -Infinity];
  const finite: number[] = [];
  const stride = format.bits > 8 ? 7 : 1;
  for (let c = 0; c < format.codeCount; c += stride) {
    const v = decode(format, c);
    if (Number.isFinite(v) && v >= 0 && !Object.is(v, -0)) finite.push(v);
  }
  finite.sort((a, b) => a - b);
  const ulp = 2 ** (format.emax - format.manBits);
  finite.push(format.maxFinite + ulp, format.maxFinite * 2, 480, 496, 61440, 65536, 248, 3.3895e38);
  for (let i = 0; i < finite.length; i++) {
    const v = finite[i] as number;
    const points = [v, step(v, 1), step(v, -1)];
    const next = finite[i + 1];
    if (next !== undefined && next > v) {
      const mid = Math.fround((v + next) / 2);
      points.push(mid, step(mid, 1), step(mid, -1));
    }
    for (const p of points) values.push(p, -p);
  }
  const out = new Float32Array(Math.max(total, values.length + 2));
  out.set(values);
  const bits = new Uint32Array(out.buffer);
  bits[values.length] = 0x7fc00000; // +NaN
  bits[values.length + 1] = 0xffc00000; // −NaN
  const rng = createRng(2).fork(`oracle-${format.name}`);
  const lo = Math.log2(format.minSubnormal) - 2;
  const hi = Math.log2(format.maxFinite) + 2;
  for (let i = values.length + 2; i < out.length; i++) {
    if (i % 2 === 0) bits[i] = rng.uint32();
    else out[i] = (rng.uniform() < 0.5 ? -1 : 1) * 2 ** (lo + rng.uniform() * (hi - lo));
  }
  return out;
}

function expectSameValues(label: string, got: Float32Array, want: Float32Array, src: Float32Array): void {
  let mismatches = 0;
  for (let i = 0; i < got.length; i++) {
    if (!Object.is(got[i], want[i])) {
      if (mismatches++ < 5) expect.soft(got[i], `${label}: input ${src[i]} (index ${i})`).toBe(want[i]);
    }
  }
  expect(mismatches, `${label}: mismatching values`).toBe(0);
}

function expectSameCodes(label: string, got: ArrayLike<number>, want: ArrayLike<number>, src: Float32Array): void {
  let mismatches = 0;
  for (let i = 0; i < src.length; i++) {
    if (got[i] !== want[i] && mismatches++ < 5) {
      expect
        .soft(`0x${(got[i] as number).toString(16)}`, `${label}: input ${src[i]} (index ${i})`)
        .toBe(`0x${(want[i] as number).toString(16)}`);
    }
  }
  expect(mismatches, `${label}: mismatching codes`).toBe(0);
}

const cases: [OrtCastTarget, 'float8' | 'plain'][] = [
  ['e4m3fn', 'float8'],
  ['e4m3fnuz', 'float8'],
  ['e5m2', 'float8'],
  ['e5m2fnuz', 'float8'],
  ['bf16', 'plain'],
  ['fp16', 'plain'],
];

describe('cast profiles equal onnxruntime Cast', () => {
  for (const [name, kind] of cases) {
    const format = floatFormats[name as keyof typeof floatFormats];
    const src = oracleInputs(format, 100_000);
    const modes: [0 | 1, CastProfileName][] = [
      [1, 'onnx-sat'],
      [0, 'ort-1.30'],
    ];
    for (const [saturate, profile] of modes) {
      it(`${name}: ${profile} ≡ Cast${kind === 'float8' ? ` saturate=${saturate}` : ''} on ${src.length} values (decoded)`, async () => {
        expect(src.length).toBeGreaterThanOrEqual(100_000);
        const opts = kind === 'float8' ? { saturate } : {};
        const ort = await ortCastRoundTrip(src, name, opts);
        expectSameValues(`${name}/${profile}`, fakeQuant(format, src, { profile }), ort, src);
      });
      it(`${name}: ${profile} ≡ Cast${kind === 'float8' ? ` saturate=${saturate}` : ''} storage codes`, async () => {
        const sample = src.subarray(0, 20_000);
        const opts = kind === 'float8' ? { saturate } : {};
        const ortCodes = await ortCastCodes(sample, name, opts);
        const ours = encodeArray(format, sample, { profile });
        if (kind === 'plain') {
          // NaN payloads of bf16/fp16 are not specified by ONNX; compare codes where the value is a number.
          const keep = Array.from(sample.keys()).filter((i) => !Number.isNaN(sample[i]));
          expectSameCodes(
            `${name}/${profile}`,
            keep.map((i) => ortCodes[i] as number),
            keep.map((i) => ours[i] as number),
            Float32Array.from(keep.map((i) => sample[i] as number)),
          );
        } else {
          expectSameCodes(`${name}/${profile}`, ortCodes, ours, sample);
        }
      });
    }
  }

  const e8m0 = oracleInputs(floatFormats.e8m0, 100_000);
  it.each([
    [1, 'onnx-sat'],
    [0, 'ort-1.30'],
    [0, 'ieee'],
  ] as const)('e8m0: Cast-24 round_mode=nearest saturate=%i ≡ %s on 100 000 values', async (saturate, profile) => {
    const ort = await ortCastRoundTrip(e8m0, 'e8m0', { saturate, roundMode: 'nearest' });
    expectSameValues(`e8m0/${profile}`, fakeQuant('e8m0', e8m0, { profile }), ort, e8m0);
    // (Storage codes are not compared: onnxruntime's constant folding cannot emit e8m0 initializers.)
  });

  it('e2m1 (FP4): onnx-sat ≡ Cast where onnxruntime has a kernel', async (ctx) => {
    const reason = await ortSupportError('e2m1');
    if (reason !== null) {
      ctx.skip(`onnxruntime ${'1.30'} has no float→FLOAT4E2M1 Cast kernel: ${reason.slice(0, 120)}`);
      return;
    }
    const src = oracleInputs(floatFormats.e2m1, 100_000);
    const ort = await ortCastRoundTrip(src, 'e2m1');
    expectSameValues('e2m1/onnx-sat', fakeQuant('e2m1', src, { profile: 'onnx-sat' }), ort, src);
  });
});
