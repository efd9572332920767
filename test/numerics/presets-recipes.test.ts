// Hand-computed vectors of the 2026 recipe presets (NVFP4 4over6 of TransformerEngine and FlashInfer, row-scaled
// NVFP4, MXFP8 with NeMo-RL's E8M0 byte 0 → 1) from the lines they cite, and their golden edge cases. The fast
// path equals quantizeReference for these presets in test/numerics/quantize-reference.test.ts (every preset).
import { describe, expect, it } from 'vitest';
import { dequantize, quantPreset, quantize } from '../../src/numerics/index.js';
import { quantizeReference } from '../../src/numerics/quantize-reference.js';

const f32 = (...xs: number[]): Float32Array => Float32Array.from(xs);
const codes = (q: { codes: ArrayLike<number> }): number[] => Array.from(q.codes);
/** A 16-block: the given leading values, zeros after. */
const block16 = (...xs: number[]): Float32Array => {
  const b = new Float32Array(16);
  b.set(xs);
  return b;
};

describe('NVFP4 4over6 (hand-computed from quantize_4over6_nvfp4.cuh and cvt_warp_fp16_to_fp4)', () => {
  // amax 6, TE bound 256: S_enc = 1536/6 = 256, b = 1·256; s6 = e4m3(256) = 0x78, s4 = e4m3(384) = 0x7C.
  // S_dec = 1/256: inv6 = 1, inv4 = fl(1/1.5). Map-to-6 grid ×1: {…, 3, 4, 6}; map-to-4 grid ×1.5: {…, 2.25, 3, 4.5, 6}.
  it('TE (bound 256, MAE): 5 costs 1 on the 6-grid (→ 4), 0.5 on the 4-grid (→ 4.5): map-to-4 wins', () => {
    const x = block16(6, 5, 5, 5);
    const q = quantize(quantPreset('nvfp4-4over6-te'), x, [1, 16]);
    expect(q.globalScale).toBe(1 / 256);
    expect(q.scaleCodes![0]).toBe(0x7c); // 384 = 1.5·2^8
    // 6·fl(2/3) = 4.0000005 → 4 (code 6); 5·fl(2/3) = 3.3333335 → 3 (code 5)
    expect(codes(q).slice(0, 5)).toEqual([6, 5, 5, 5, 0]);
    expect(Array.from(dequantize(q).slice(0, 4))).toEqual([6, 4.5, 4.5, 4.5]);
  });

  it('MAE and MSE choose differently: errors 6-grid {1}, 4-grid {0.5, 0.25, 0.25, 0.25}', () => {
    // 2·fl(2/3) = 1.3333334 → 1.5 → 2.25 (d = 0.25); MAE: 1.25 vs 1 → map-to-6; MSE: 0.4375 vs 1 → map-to-4
    const x = block16(6, 5, 2, 2, 2);
    expect(quantize(quantPreset('nvfp4-4over6-te'), x, [1, 16]).scaleCodes![0]).toBe(0x78);
    expect(quantize(quantPreset('nvfp4-4over6-te', { error: 'mse' }), x, [1, 16]).scaleCodes![0]).toBe(0x7c);
  });

  it('bound 448 (FlashInfer default, TE with nvfp4_4over6_e4m3_use_256 = none): the amax block cannot expand', () => {
    // S_enc = 2688/6 = 448, b = 448: s4 = e4m3(min(672, 448)) = s6 = 448 (0x7E); equal errors, ties keep map-to-6.
    const x = block16(6, 5, 5, 5);
    for (const q of [
      quantize(quantPreset('nvfp4-4over6-flashinfer'), x, [1, 16]),
      quantize(quantPreset('nvfp4-4over6-te', { tensorBound: 448 }), x, [1, 16]),
    ]) {
      expect(q.globalScale).toBe(Math.fround(1 / 448));
      expect(q.scaleCodes![0]).toBe(0x7e);
      expect(codes(q).slice(0, 4)).toEqual([7, 6, 6, 6]); // 5 ties between 4 and 6 → 4 (even code 6)
    }
    // a block at a quarter of the tensor amax has room: amax_b 1.5 → b = 112 (s6 0x6E, inv6 4), fl(1.5b) = 168 ties to
    // s4 = 160 (0x72, inv4 2.8): 1.25 → 5 → 4 on the 6-grid (err 0.25 each), → 3.5 → 4 → 1.4286 on the 4-grid (0.18 each)
    const y = new Float32Array(32);
    y.set([6], 0);
    y.set([1.5, 1.25, 1.25, 1.25], 16);
    const q = quantize(quantPreset('nvfp4-4over6-flashinfer'), y, [1, 32]);
    expect(Array.from(q.scaleCodes!)).toEqual([0x7e, 0x72]);
  });

  it('zeros, −0, an all-zero tensor: scale code 0, codes 0 (TE keeps the sign of −0: 0x8)', () => {
    const x = new Float32Array(32);
    x[0] = 6;
    x[17] = -0;
    const te = quantize(quantPreset('nvfp4-4over6-te'), x, [1, 32]);
    expect(te.scaleCodes![1]).toBe(0);
    expect(codes(te)[17]).toBe(0x8);
    expect(Array.from(dequantize(te).slice(16)).every((v) => v === 0)).toBe(true); // 0 or −0
    const z = quantize(quantPreset('nvfp4-4over6-te'), new Float32Array(16), [1, 16]);
    expect(z.globalScale).toBe(1); // TE: S_enc = 1 when amax is 0
    const zf = quantize(quantPreset('nvfp4-4over6-flashinfer'), new Float32Array(16), [1, 16]);
    expect(zf.globalScale).toBe(Math.fround(1 / Math.fround(3.4028234663852886e38))); // make_nvfp4_global_scale: FLT_MAX
    expect(codes(zf)).toEqual(new Array(16).fill(0));
  });

  it('all-equal block, bf16 max, subnormal block scales: defined codes, reference path equal, finite dequant', () => {
    const cases = [
      new Float32Array(16).fill(Math.fround(3.3)),
      f32(...new Array(15).fill(Math.fround(1e-30)), 3.3895313892515355e38),
      f32(6, ...new Array(15).fill(0), ...new Array(16).fill(Math.fround(1e-38))),
    ];
    for (const name of ['nvfp4-4over6-te', 'nvfp4-4over6-flashinfer', 'nvfp4-row-te'])
      for (const x of cases) {
        const spec = quantPreset(name);
        const q = quantize(spec, x, [1, x.length]);
        const r = quantizeReference(spec, x, [1, x.length]);
        expect(codes(q)).toEqual(codes(r));
        expect(Array.from(q.scaleCodes!)).toEqual(Array.from(r.scaleCodes!));
        expect(Array.from(dequantize(q)).every(Number.isFinite)).toBe(true);
      }
    // all-equal 3.3: map-to-6 puts it at 6 exactly, map-to-4 at 4: both near-exact, the smaller error wins per kernel
    const eq = quantize(quantPreset('nvfp4-4over6-te'), cases[0]!, [1, 16]);
    const y = dequantize(eq);
    expect(Math.abs(y[0]! - 3.3)).toBeLessThan(1e-6);
  });

  it('NaN in a block: its errors are NaN, the comparison fails, map-to-6 is kept; Inf amax gives S_enc = 1', () => {
    const x = block16(Number.NaN, 5, 5, 5, 6);
    const q = quantize(quantPreset('nvfp4-4over6-te'), x, [1, 16]);
    expect(q.scaleCodes![0]).toBe(0x78);
    const inf = quantize(quantPreset('nvfp4-4over6-te'), block16(Infinity, 1), [1, 16]);
    expect(inf.globalScale).toBe(1);
  });
});

describe('row-scaled NVFP4 (TE row_scaled_nvfp4, per_token_activation)', () => {
  it('each row its own S_enc: a row at a tenth of the tensor amax keeps the full E4M3 range', () => {
    const x = new Float32Array(32);
    x[0] = 6;
    x[16] = 0.6;
    // per tensor: S_enc = 448, row 1 block scale e4m3(0.6·fl(448·fl(1/6))) = e4m3(44.8) = 44 (0x63)
    expect(Array.from(quantize(quantPreset('nvfp4'), x, [2, 16]).scaleCodes!)).toEqual([0x7e, 0x63]);
    // per row: S_enc,1 = fl(2688/0.6) → block scale 448 (0x7E), S_dec,1 folded into the stored scale
    const q = quantize(quantPreset('nvfp4-row-te'), x, [2, 16]);
    expect(Array.from(q.scaleCodes!)).toEqual([0x7e, 0x7e]);
    expect(q.globalScale).toBeUndefined();
    expect(q.scales[1]).toBe(Math.fround(448 * Math.fround(1 / Math.fround(2688 / Math.fround(0.6)))));
    expect(dequantize(q)[16]).toBe(Math.fround(6 * (q.scales[1] as number)));
  });

  it('a row scale depends only on its own row: changing row 0 leaves row 1 bit-identical (not so per tensor)', () => {
    const a = f32(...new Array(16).fill(1), ...new Array(16).fill(0.3));
    const b = f32(...new Array(16).fill(100), ...new Array(16).fill(0.3));
    const row1 = (name: string, x: Float32Array): number[] =>
      Array.from(dequantize(quantize(quantPreset(name), x, [2, 16])).slice(16));
    expect(row1('nvfp4-row-te', a)).toEqual(row1('nvfp4-row-te', b));
    expect(row1('nvfp4', a)).not.toEqual(row1('nvfp4', b));
  });
});

describe('MXFP8 zero-block E8M0 byte (NeMo-RL #3477 quantize_mxfp8_weight)', () => {
  it('a zero block: byte 0 (2^-127) in vLLM/FlashInfer, stored as 1 (2^-126) after the reshard; both decode 0', () => {
    const x = new Float32Array(64);
    x[32] = 448;
    const plain = quantize(quantPreset('mxfp8', { exponent: 'ceil-bits' }), x, [1, 64]);
    const nemo = quantize(quantPreset('mxfp8-nemo-rl-reshard'), x, [1, 64]);
    expect(Array.from(plain.scaleCodes!)).toEqual([0, 127]);
    expect(Array.from(nemo.scaleCodes!)).toEqual([1, 127]);
    expect(nemo.scales[0]).toBe(2 ** -126);
    expect(codes(nemo)).toEqual(codes(plain));
    expect(Array.from(dequantize(nemo))).toEqual(Array.from(dequantize(plain)));
  });

  it('a nonzero block whose byte is 0 (amax ≤ 448·2^-127) decodes doubled after the remap', () => {
    const tiny = Math.fround(2 ** -120); // amax/448 < 2^-127: e clamps to −127, elements x·2^127 = 2^7 = 128
    const x = f32(tiny, ...new Array(31).fill(0));
    const plain = quantize(quantPreset('mxfp8', { exponent: 'ceil-bits' }), x, [1, 32]);
    const nemo = quantize(quantPreset('mxfp8-nemo-rl-reshard'), x, [1, 32]);
    expect(plain.scaleCodes![0]).toBe(0);
    expect(dequantize(plain)[0]).toBe(tiny);
    expect(dequantize(nemo)[0]).toBe(2 * tiny);
  });
});
