// Hand-checked vectors for each preset's scale rule (all-zero blocks, amax a power of two, a few ulps above one),
// power-of-two scale roundings, edge cases (NaN, ±Inf, empty tensors) and dequantize∘quantize error bounds.
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import {
  type QuantPreset,
  type QuantSpec,
  delayedScalingState,
  dequantize,
  quantPreset,
  quantPresets,
  quantize,
} from '../../src/numerics/index.js';
import { FLT_MAX, fma32, nextFloat32Down, nextFloat32Up, pow2Exponent } from '../../src/numerics/scales.js';
import { roundInt } from '../../src/numerics/quantize.js';

const f32 = (...xs: number[]): Float32Array => Float32Array.from(xs);
const codes = (q: { codes: ArrayLike<number> }): number[] => Array.from(q.codes);

describe('power-of-two scale roundings', () => {
  it('exact powers of two are kept by every rule', () => {
    for (const s of [2 ** -20, 0.125, 1, 2, 2 ** 40]) {
      for (const rule of [
        'floor',
        'ceil-bits',
        'exp2-ceil-log2',
        'exp2-floor-log2',
        'nearest-ties-up',
        'nearest-ties-even',
      ] as const) {
        expect(pow2Exponent(s, rule)).toBe(Math.log2(s));
      }
    }
  });

  it('one ulp above 2^-9: ceil-bits goes up, exp2(ceil(log2f)) stays (log2f rounds to exactly -9)', () => {
    const s = Math.fround(2 ** -9 * (1 + 2 ** -23));
    expect(pow2Exponent(s, 'ceil-bits')).toBe(-8);
    expect(Math.fround(Math.log2(s))).toBe(-9);
    expect(pow2Exponent(s, 'exp2-ceil-log2')).toBe(-9);
    // near 2^-3 the float32 log2 has finer ulps: both rules agree
    expect(pow2Exponent(Math.fround(0.125 * (1 + 2 ** -23)), 'exp2-ceil-log2')).toBe(-2);
  });

  it('nearest: 1.5·2^k ties up (c10) or to the even biased exponent (gfloat)', () => {
    expect(pow2Exponent(1.5, 'nearest-ties-up')).toBe(1);
    expect(pow2Exponent(1.5, 'nearest-ties-even')).toBe(1); // field 127 odd → 128
    expect(pow2Exponent(3, 'nearest-ties-up')).toBe(2);
    expect(pow2Exponent(3, 'nearest-ties-even')).toBe(1); // field 128 even → stays
    expect(pow2Exponent(Math.fround(1.4999999), 'nearest-ties-up')).toBe(0);
    expect(pow2Exponent(1.75, 'floor')).toBe(0);
  });

  it('fma32 rounds once (a double rounding would differ on this tie)', () => {
    // a·b = 1 + 2^-11 + 2^-24 exactly; c = -2^-30: the exact sum is just below the float32 tie 1 + 2^-11 + 2^-24.
    const a = Math.fround(1 + 2 ** -12);
    const r = fma32(a, a, -(2 ** -60));
    expect(r).toBe(Math.fround(1 + 2 ** -11)); // tie broken downward by the tiny addend
    expect(fma32(a, a, 2 ** -60)).toBe(nextFloat32Up(Math.fround(1 + 2 ** -11)));
    expect(fma32(3, 5, 7)).toBe(22);
  });

  it('roundInt: ties to even, toward zero, away from zero, ties toward zero', () => {
    expect([0.5, 1.5, 2.5, -0.5, -1.5, 3.5000002].map((v) => roundInt(v, 'rne') + 0)).toEqual([0, 2, 2, 0, -2, 4]);
    expect([2.7, -2.7].map((v) => roundInt(v, 'rtz'))).toEqual([2, -2]);
    expect([2.5, -2.5].map((v) => roundInt(v, 'rha'))).toEqual([3, -3]);
    expect([2.5, -2.5, 2.5000002, -0.5, 0.7].map((v) => roundInt(v, 'rhz') + 0)).toEqual([2, -2, 3, 0, 1]);
  });
});

describe('multiply by the reciprocal vs divide', () => {
  it('x·fl(1/s) and x/s differ in the last bit, and sometimes in the FP8 code', () => {
    const s = 3;
    const base = { format: 'e4m3fn', granularity: { kind: 'tensor' }, scale: { kind: 'static', scale: s } } as const;
    // inputs around 3·t for every tie t between neighbouring e4m3 values in [1, 448): the two quotients can
    // land on opposite sides of t
    const xs: number[] = [];
    for (let e = 0; e < 8; e++) {
      for (let m = 0; m < 8; m++) {
        const t = (1 + (2 * m + 1) / 16) * 2 ** e;
        let v = Math.fround(3 * t);
        for (let d = 0; d < 4; d++) v = nextFloat32Down(v);
        for (let d = 0; d < 9; d++, v = nextFloat32Up(v)) xs.push(v);
      }
    }
    const x = Float32Array.from(xs);
    let bitDiffs = 0;
    for (const v of x) if (Math.fround(v / s) !== Math.fround(v * Math.fround(1 / s))) bitDiffs++;
    expect(bitDiffs).toBeGreaterThan(0);
    const div = quantize({ ...base, scaling: 'divide' }, x, [1, x.length]);
    const rec = quantize({ ...base, scaling: 'reciprocal' }, x, [1, x.length]);
    const codeDiffs = Array.from(div.codes).filter((c, i) => c !== rec.codes[i]).length;
    expect(codeDiffs).toBeGreaterThan(0);
    expect(codeDiffs).toBeLessThan(bitDiffs);
  });
});

describe('preset scale rules, hand-checked', () => {
  it('vllm-fp8-tensor: s = amax/448, x·(1/s); an all-zero tensor gives s = 0 and +448 codes that dequantize to 0', () => {
    const q = quantize(quantPreset('vllm-fp8-tensor'), f32(448, -224, 1), [1, 3]);
    expect(q.scales[0]).toBe(1);
    expect(codes(q)).toEqual([0x7e, 0xf6, 0x38]);
    const z = quantize(quantPreset('vllm-fp8-tensor'), f32(0, 0, -0), [1, 3]);
    expect(z.scales[0]).toBe(0);
    expect(codes(z)).toEqual([0x7e, 0x7e, 0x7e]);
    expect(Array.from(dequantize(z))).toEqual([0, 0, 0]);
    // NaN → +448 (fminf(NaN, 448) = 448), amax skips the NaN
    const n = quantize(quantPreset('vllm-fp8-tensor'), f32(Number.NaN, 2), [1, 2]);
    expect(codes(n)).toEqual([0x7e, 0x7e]);
  });

  it('vllm-fp8-token: the scale floor 1/(448·512) for an all-zero row, plain amax/448 otherwise', () => {
    const q = quantize(quantPreset('vllm-fp8-token'), f32(0, 0, 896, -448), [2, 2]);
    expect(q.scales[0]).toBe(Math.fround(1 / (448 * 512)));
    expect(q.scales[1]).toBe(2);
    expect(codes(q)).toEqual([0, 0, 0x7e, 0xf6]);
    const ub = quantize(quantPreset('vllm-fp8-token', { scaleUb: 448 }), f32(896, 448), [1, 2]);
    expect(ub.scales[0]).toBe(1);
    expect(codes(ub)).toEqual([0x7e, 0x7e]); // 896/1 saturates
  });

  it('vllm-fp8-group: NaN → −448 (fmaxf first); ue8m0 uses exp2(ceil(log2f s))', () => {
    const q = quantize(quantPreset('vllm-fp8-group', { block: 2 }), f32(Number.NaN, 448, 0, 0), [1, 4]);
    expect(codes(q)).toEqual([0xfe, 0x7e, 0, 0]);
    expect(q.scales[1]).toBe(Math.fround(Math.fround(1e-10) / 448));
    // amax one float32 ulp above 0.875: s = fl(amax/448) = 2^-9·(1 + 2^-23), log2f(s) = −9 exactly
    const amax = nextFloat32Up(0.875);
    expect(Math.fround(amax / 448)).toBe(Math.fround(2 ** -9 * (1 + 2 ** -23)));
    const u = quantize(quantPreset('vllm-fp8-group', { block: 2, ue8m0: true }), f32(amax, 1 / 4), [1, 2]);
    expect(u.scales[0]).toBe(2 ** -9);
    expect(codes(u)[0]).toBe(0x7e); // amax/2^-9 = 448·(1 + …) saturates
    const g = quantize(quantPreset('deepgemm-fp8-group', { block: 2, ue8m0: true }), f32(amax, 1 / 4), [1, 2]);
    expect(g.scales[0]).toBe(2 ** -8); // ceil of the bits: one mantissa bit set → next power
  });

  it('deepseek-fp8-group/block: amax exactly a power of two gives an exact scale; eps floors an all-zero block', () => {
    const x = f32(448, 1, 0, 0, 0, 0, 0, 0);
    const q = quantize(quantPreset('deepseek-fp8-group', { block: 4 }), x, [2, 4]);
    expect(q.scales[0]).toBe(1);
    expect(q.scales[1]).toBe(Math.fround(Math.fround(1e-4) / 448));
    expect(codes(q)).toEqual([0x7e, 0x38, 0, 0, 0, 0, 0, 0]);
    const literal = quantize(quantPreset('deepseek-fp8-group', { block: 4, eps: 0 }), x, [2, 4]);
    expect(literal.scales[1]).toBe(0);
    expect(codes(literal).slice(4)).toEqual([0x7f, 0x7f, 0x7f, 0x7f]); // 0/0 = NaN: the DeepSeek-V3 literal result
    const b = quantize(quantPreset('deepseek-fp8-block', { block: 2 }), f32(896, 1, 2, 3), [2, 2]);
    expect(b.scaleShape).toEqual([1, 1]);
    expect(b.scales[0]).toBe(2);
  });

  it('vllm-int8-token: x·(127/amax), ties to even, NaN → 0; int8-row divides and maps NaN → −128', () => {
    const q = quantize(quantPreset('vllm-int8-token'), f32(127, -63.5, 0.5, Number.NaN, 0, 0, 0, 0), [2, 4]);
    expect(Array.from(q.scales)).toEqual([1, 0]);
    expect(codes(q)).toEqual([127, -64, 0, 0, 0, 0, 0, 0]);
    const r = quantize(quantPreset('int8-row'), f32(254, 1, -3, Number.NaN), [1, 4]);
    expect(r.scales[0]).toBe(2);
    expect(codes(r)).toEqual([127, 0, -2, -128]);
  });

  it('vllm-int8-token-azp: s = (max − min)/255, azp = rint(−128 − min/s)', () => {
    const q = quantize(quantPreset('vllm-int8-token-azp'), f32(-1, 0, 254), [1, 3]);
    expect(q.scales[0]).toBe(1);
    expect(Array.from(q.zeroPoints!)).toEqual([-127]);
    expect(codes(q)).toEqual([-128, -127, 127]);
  });

  it('gptq-w4g128: range including 0, zero point round(−min/s); all-zero group → (−1, 1), zp round(1/fl(2/15)) = 7', () => {
    const q = quantize(quantPreset('gptq-w4g128', { block: 3 }), f32(-1, 0, 2, 0, 0, 0), [2, 3]);
    expect(Array.from(q.scales)).toEqual([Math.fround(0.2), Math.fround(2 / 15)]);
    // 1/fl(2/15) = 7.4999998…: torch.round gives 7, not 8
    expect(Array.from(q.zeroPoints!)).toEqual([5, 7]);
    expect(codes(q)).toEqual([0, 5, 15, 7, 7, 7]);
    expect(Array.from(dequantize(q)).slice(3)).toEqual([0, 0, 0]);
    // symmetric: s = 2·amax/15, zp 8, +amax clips to 7s
    const s = quantize(quantPreset('gptq-w4g128', { block: 2, symmetric: true }), f32(-1.5, 1.5), [1, 2]);
    expect(s.scales[0]).toBe(Math.fround(0.2));
    expect(codes(s)).toEqual([0, 15]);
  });

  it('awq-w4g128: range floored at 1e-5, zero point clamped to [0, 15]', () => {
    const q = quantize(quantPreset('awq-w4g128', { block: 2 }), f32(1, 2, 0, 0), [1, 4]);
    expect(q.scales[0]).toBe(Math.fround(1 / 15));
    expect(q.zeroPoints![0]).toBe(0); // −round(1/s) = −15 → clamped to 0
    expect(codes(q).slice(0, 2)).toEqual([15, 15]);
    expect(q.scales[1]).toBe(Math.fround(Math.fround(1e-5) / 15));
    expect(codes(q).slice(2)).toEqual([0, 0]);
  });

  it('mxfp8 floor: 2^(⌊log2 amax⌋ − 8); all-zero block → 2^-127; NaN block → scale 0xFF, NaN on decode', () => {
    const q = quantize(quantPreset('mxfp8', { block: 2 }), f32(448, 1, 500, -3, 0, 0, Number.NaN, 1), [1, 8]);
    expect(Array.from(q.scaleCodes!)).toEqual([127, 127, 0, 0xff]);
    expect(codes(q).slice(0, 4)).toEqual([0x7e, 0x38, 0x7e, 0xc4]); // 500 saturates to 448 (satfinite)
    const y = dequantize(q);
    expect(Array.from(y.slice(4, 6))).toEqual([0, 0]);
    expect(Number.isNaN(y[6]!) && Number.isNaN(y[7]!)).toBe(true);
  });

  it('mxfp4: the five exponent rules on one block (amax 18: s = 3)', () => {
    const x = f32(18, 1);
    const exp = (rule: 'floor' | 'ceil-bits' | 'exp2-ceil-log2' | 'nearest-ties-up' | 'nearest-ties-even'): number =>
      quantize(quantPreset('mxfp4', { block: 2, exponent: rule }), x, [1, 2]).scaleCodes![0]! - 127;
    expect(exp('floor')).toBe(2); // ⌊log2 18⌋ − 2
    expect(exp('ceil-bits')).toBe(2);
    expect(exp('exp2-ceil-log2')).toBe(2);
    expect(exp('nearest-ties-up')).toBe(2);
    expect(exp('nearest-ties-even')).toBe(1);
    // floor lets 18/4 = 4.5 round to 4; ties-even's 2^1 saturates 9 → 6
    expect(codes(quantize(quantPreset('mxfp4', { block: 2 }), x, [1, 2]))[0]).toBe(6);
    expect(codes(quantize(quantPreset('mxfp4', { block: 2, exponent: 'nearest-ties-even' }), x, [1, 2]))[0]).toBe(7);
  });

  it('nvfp4: two-level scales; an all-zero tensor gives S_enc = 1 and zero codes', () => {
    const q = quantize(quantPreset('nvfp4', { block: 2 }), f32(6, 1, 0.5, 0.25), [1, 4]);
    expect(q.globalScale).toBe(Math.fround(1 / 448));
    expect(q.scaleCodes![0]).toBe(0x7e); // block amax 6 → 6·448/6 = 448
    expect(codes(q)[0]).toBe(7);
    const y = dequantize(q);
    expect(Math.abs(y[0]! - 6)).toBeLessThan(1e-5);
    const z = quantize(quantPreset('nvfp4', { block: 2 }), f32(0, 0), [1, 2]);
    expect(z.globalScale).toBe(1);
    expect(codes(z)).toEqual([0, 0]);
    expect(Array.from(dequantize(z))).toEqual([0, 0]);
  });

  it('te-delayed: scale from earlier steps; keeps the previous scale when amax is 0 (most-recent)', () => {
    const spec = quantPreset('te-delayed', { historyLength: 4, algorithm: 'most-recent' });
    const s1 = quantize(spec, f32(2, -1), [1, 2]);
    expect(s1.scales[0]).toBe(1); // first step: initial scale 1
    expect(s1.state!.scale).toBe(224);
    expect(Array.from(s1.state!.amaxHistory)).toEqual([0, 0, 0, 2]);
    const s2 = quantize(spec, f32(0, 0), [1, 2], { state: s1.state! });
    expect(s2.scales[0]).toBe(Math.fround(1 / 224));
    expect(s2.state!.scale).toBe(224); // amax 0: previous scale kept
    const s3 = quantize(spec, f32(Infinity, 1), [1, 2], { state: s2.state! });
    expect(s3.state!.scale).toBe(224); // amax Inf: previous scale kept
    const max = quantPreset('te-delayed', { historyLength: 2 });
    let st = delayedScalingState({ kind: 'delayed', historyLength: 2 });
    for (const a of [4, 1, 1]) st = quantize(max, f32(a), [1, 1], { state: st }).state!;
    expect(st.scale).toBe(448); // window of 2 no longer holds the 4
  });

  it('te-current and torchao-fp8-row: multipliers, 1 for a zero amax (TE), power-of-two rounded down (torchao)', () => {
    const te = quantize(quantPreset('te-current'), f32(0, 0), [1, 2]);
    expect(te.scales[0]).toBe(1);
    const t2 = quantize(quantPreset('te-current'), f32(3, 0), [1, 2]);
    expect(t2.scales[0]).toBe(Math.fround(1 / Math.fround(448 / 3)));
    const ao = quantize(quantPreset('torchao-fp8-row'), f32(1, -0.5, 3, 0), [2, 2]);
    expect(Array.from(ao.scales)).toEqual([1 / 256, 1 / 128]); // 448 → 256, 149.33 → 128
  });
});

describe('presets that reproduce the code they cite at its edges', () => {
  const u32 = (a: Float32Array): number[] => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));

  it('torchao-fp8-row rounds 448/amax down with exp2(floor(log2f)): one ulp below 2^k gives 2^k', () => {
    // amax one ulp above 28: 448/amax = 16·(1 − 2^-24) in float32, log2f of it rounds to exactly 4.
    const amax = nextFloat32Up(28);
    expect(Math.fround(448 / amax)).toBe(16 - 2 ** -20);
    const q = quantize(quantPreset('torchao-fp8-row'), f32(amax, 1, 28, -3), [2, 2]);
    expect(Array.from(q.scales)).toEqual([1 / 16, 1 / 16]); // the bits would give 1/8 for the first row
    expect(pow2Exponent(Math.fround(448 / amax), 'exp2-floor-log2')).toBe(4);
    expect(pow2Exponent(Math.fround(448 / amax), 'floor')).toBe(3);
  });

  it('torchao-fp8-row: a NaN row scales every element to +NaN (|x| is positive, max/NaN propagates it)', () => {
    const q = quantize(quantPreset('torchao-fp8-row'), f32(Number.NaN, -1, 2, 3), [2, 2]);
    expect(Array.from(q.codes.slice(0, 2))).toEqual([0x7f, 0x7f]);
  });

  it('deepgemm-fp8-group/-block: torch.amax and clamp keep NaN, ceil_to_ue8m0 makes NaN and Inf 2^127', () => {
    for (const name of ['deepgemm-fp8-group', 'deepgemm-fp8-block'] as const) {
      const x = f32(Number.NaN, 1, 2, 3);
      const q = quantize(quantPreset(name, { block: 2 }), x, [2, 2]);
      expect(Number.isNaN(q.scales[0])).toBe(true);
      const qe = quantize(quantPreset(name, { block: 2, ue8m0: true }), x, [2, 2]);
      expect(qe.scales[0]).toBe(2 ** 127);
      const inf = quantize(quantPreset(name, { block: 2, ue8m0: true }), f32(Infinity, 1, 2, 3), [2, 2]);
      expect(inf.scales[0]).toBe(2 ** 127);
      expect(inf.codes[1]).toBe(0); // 1·2^-127 rounds to +0
    }
    const g = quantize(quantPreset('deepgemm-fp8-group', { block: 2 }), f32(Number.NaN, 1, 2, 3), [1, 4]);
    expect(Array.from(g.codes)).toEqual([0x7f, 0x7f, 121, 126]); // the whole NaN group is NaN (torch gives the same codes)
  });

  it('vllm-fp8-group-triton: the UE8M0 scale of an all-zero group has no 1e-10 floor', () => {
    const z = f32(0, 0, 0, 0);
    const cuda = quantize(quantPreset('vllm-fp8-group', { block: 4, ue8m0: true }), z, [1, 4]);
    const triton = quantize(quantPreset('vllm-fp8-group-triton', { block: 4, ue8m0: true }), z, [1, 4]);
    expect(cuda.scales[0]).toBe(2 ** -33); // log2f(1e-10) = −33.2
    expect(triton.scales[0]).toBe(2 ** -42); // log2f(1e-10/448) = −41.9
    const x = f32(1, -2, 0.5, 3);
    expect(u32(quantize(quantPreset('vllm-fp8-group-triton', { block: 4 }), x, [1, 4]).scales)).toEqual(
      u32(quantize(quantPreset('vllm-fp8-group', { block: 4 }), x, [1, 4]).scales),
    );
  });

  it('te-current-pyref: NaN amax gives NaN scales, Inf amax scale 0 (scale_inv Inf), zero amax 1; finite tensors as te-current', () => {
    const pyref = quantPreset('te-current-pyref');
    expect(Number.isNaN(quantize(pyref, f32(Number.NaN, 1), [1, 2]).scales[0])).toBe(true);
    expect(quantize(pyref, f32(Infinity, 1), [1, 2]).scales[0]).toBe(Infinity);
    expect(quantize(quantPreset('te-current'), f32(Infinity, 1), [1, 2]).scales[0]).toBe(1);
    expect(quantize(pyref, f32(0, 0), [1, 2]).scales[0]).toBe(1);
    const x = f32(1, -2, 0.5, 3);
    expect(Array.from(quantize(pyref, x, [1, 4]).codes)).toEqual(
      Array.from(quantize(quantPreset('te-current'), x, [1, 4]).codes),
    );
  });

  it('nvfp4-te-pyref: −0 → code 0, NaN → code 0, tiny negatives keep 0x8, an all-zero tensor keeps S_enc = FLT_MAX', () => {
    const q = quantize(quantPreset('nvfp4-te-pyref', { block: 4 }), f32(-0, -0.01, 6, 1), [1, 4]);
    expect(Array.from(q.codes)).toEqual([0x0, 0x8, 0x7, 0x2]);
    const k = quantize(quantPreset('nvfp4', { block: 4 }), f32(-0, -0.01, 6, 1), [1, 4]);
    expect(Array.from(k.codes)).toEqual([0x8, 0x8, 0x7, 0x2]);
    const z = quantize(quantPreset('nvfp4-te-pyref', { block: 4 }), f32(0, 0, 0, 0), [1, 4]);
    expect(z.globalScale).toBe(Math.fround(1 / FLT_MAX));
    expect(quantize(quantPreset('nvfp4', { block: 4 }), f32(0, 0, 0, 0), [1, 4]).globalScale).toBe(1);
    const n = quantize(quantPreset('nvfp4-te-pyref', { block: 4 }), f32(Number.NaN, 1, 2, 3), [1, 4]);
    expect(Array.from(n.codes)).toEqual([0, 0, 0, 0]);
  });
});

describe('edge cases every preset defines', () => {
  const names = Object.keys(quantPresets);

  it.each(names)('%s: empty tensors give empty codes', (name) => {
    const p = (quantPresets as Record<string, QuantPreset>)[name]!;
    const spec = quantPreset(name, p.defaultBlock === null ? {} : { block: 4 });
    for (const shape of [
      [0, 8],
      [3, 0],
      [0, 0],
    ] as const) {
      const q = quantize(spec, new Float32Array(0), shape);
      expect(q.codes.length).toBe(0);
      expect(dequantize(q).length).toBe(0);
    }
  });

  it.each(names)('%s: NaN and ±Inf inputs give a defined result and leave other cells untouched', (name) => {
    const p = (quantPresets as Record<string, QuantPreset>)[name]!;
    const spec = quantPreset(name, p.defaultBlock === null ? {} : { block: 4 });
    const clean = f32(1, -2, 0.5, 3, 1, -2, 0.5, 3);
    const dirty = f32(Number.NaN, Infinity, -Infinity, 3, 1, -2, 0.5, 3);
    const a = dequantize(quantize(spec, clean, [2, 4]));
    const b = dequantize(quantize(spec, dirty, [2, 4]));
    // TE's NVFP4 reference takes torch.max over the whole tensor: a NaN anywhere makes the global scale NaN.
    const tensorWideNan = spec.scale.kind === 'nvfp4' && spec.amaxNan === 'propagate';
    if ((spec.granularity.kind === 'row' || spec.granularity.kind === 'group') && !tensorWideNan)
      expect(Array.from(b.slice(4))).toEqual(Array.from(a.slice(4)));
    if (tensorWideNan) expect(Array.from(b).every(Number.isNaN)).toBe(true);
    expect(b.length).toBe(8);
    expect(Array.from(quantize(spec, dirty, [2, 4]).codes)).toEqual(Array.from(quantize(spec, dirty, [2, 4]).codes)); // deterministic
  });

  it('a shape that does not match the data names the field', () => {
    expect(() => quantize(quantPreset('int8-row'), f32(1, 2, 3), [2, 2])).toThrow(
      /x: 3 elements do not fill shape \[2, 2\]/,
    );
    expect(() => quantPreset('nope')).toThrow(/unknown quantizer preset 'nope'/);
    expect(() => quantPreset('te-delayed', { block: 4 })).toThrow(/takes no parameter 'block'/);
  });
});

describe('dequantize(quantize(x)) error bounds (properties)', () => {
  const rows = 3;
  const cols = 16;
  const finite = fc.float({ min: -1e4, max: 1e4, noNaN: true, noDefaultInfinity: true });
  const tensor = fc.array(finite, { minLength: rows * cols, maxLength: rows * cols }).map((a) => Float32Array.from(a));

  const within = (spec: QuantSpec, x: Float32Array, bound: (x: number, s: number) => number): void => {
    const q = quantize(spec, x, [rows, cols]);
    const y = dequantize(q);
    const perRow = q.scales.length / rows;
    for (let i = 0; i < x.length; i++) {
      const s = q.scales[Math.floor(i / cols) * perRow + Math.floor((i % cols) / (cols / perRow))]!;
      expect(Math.abs(x[i]! - y[i]!)).toBeLessThanOrEqual(bound(x[i]!, s));
    }
  };

  test.prop([tensor])('int8-row: |x − x̂| ≤ s/2 (+1 ulp of the product)', (x) => {
    within(quantPreset('int8-row'), x, (_, s) => s / 2 + Math.abs(s) * 2 ** -20);
  });

  test.prop([tensor])('vllm-fp8-token: |x − x̂| ≤ 2^-4·|x| + s·2^-10 (half an e4m3 ulp, subnormal floor)', (x) => {
    within(quantPreset('vllm-fp8-token'), x, (v, s) => 2 ** -4 * Math.abs(v) * (1 + 2 ** -20) + s * 2 ** -10 * 1.0001);
  });

  test.prop([tensor])('deepseek-fp8-group (G = 8): the same bound per group', (x) => {
    within(
      quantPreset('deepseek-fp8-group', { block: 8 }),
      x,
      (v, s) => 2 ** -4 * Math.abs(v) * (1 + 2 ** -20) + s * 2 ** -10 * 1.0001,
    );
  });

  test.prop([tensor])('gptq-w4g128 (G = 8, asymmetric): |x − x̂| ≤ s (½ for the element, ½ for the zero point)', (x) => {
    within(quantPreset('gptq-w4g128', { block: 8 }), x, (_, s) => s * (1 + 2 ** -18));
  });

  test.prop([tensor])('mxfp8 (floor): |x − x̂| ≤ max(2^-4·|x|, X·2^-10) or the clamp above 448·X', (x) => {
    within(quantPreset('mxfp8', { block: 8 }), x, (v, s) =>
      Math.max(2 ** -4 * Math.abs(v), s * 2 ** -10, Math.abs(v) - 448 * s),
    );
  });
});
