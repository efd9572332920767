// Pre-quantized FP8 transport against vectors from the cited code run in torch 2.x on CPU: SkyRL's blockwise
// cast (codes, FP32 scale_inv, power-of-two option, the 1e-10 amax floor on an all-zero block) and SGLang's
// mn-major packed UE8M0 layout; a layout the loader does not expect is refused, naming both.

import { describe, expect, it } from 'vitest';
import { blockwiseCastToFp8, dequantBlockwiseFp8, loadWireScale, wireScale } from '../../src/numerics/fp8-transport.js';

const hex32 = (a: Float32Array | Int32Array): string[] =>
  [...new Uint32Array(a.buffer, a.byteOffset, a.length)].map((v) => `0x${v.toString(16)}`);
const hex8 = (a: Uint8Array): string[] => [...a].map((v) => `0x${v.toString(16)}`);

// (3, 5) weight, 2×2 blocks: the last column block and the last row block are padded, the last row is zero.
// Expected values: the lines of blockwise_fp8.py (SkyRL @323007f, 80–114) and of fp8_utils.py's
// transform_scale_ue8m0 / _get_mn_major_tma_aligned_packed_ue8m0_tensor_torch_impl (SGLang @002ed7e),
// transcribed into torch and run on this tensor (block 2 for 128).
const W = Float32Array.from([0.3, -1.7, 2.5, 0.0, 1e-3, -0.02, 0.7, 448.0 * 0.01, -3.3, 0.11, 0, 0, 0, 0, 0]);

describe('blockwise FP8 transport (SkyRL cast, SGLang packed layout)', () => {
  it('FP32 scales: codes, scale_inv (the zero block at 1e-10/448) and the dequantized weight bit for bit', () => {
    const w = blockwiseCastToFp8(W, 3, 5, { block: 2 });
    expect(hex8(w.codes)).toEqual(
      ['6a', 'fe', '78', '0', '48', 'cb', '74', '7e', 'fa', '7e', '0', '0', '0', '0', '0'].map((c) => `0x${c}`),
    );
    expect(hex32(w.scaleInv)).toEqual(
      ['3b78af8b', '3c23d70a', '3980bb3f', '2a7b5123', '2a7b5123', '2a7b5123'].map((c) => `0x${c}`),
    );
    const deq = dequantBlockwiseFp8(w.codes, loadWireScale(wireScale(w, 'raw'), 'raw', 3, 5, 2), 3, 5, 2);
    expect(hex32(deq)).toEqual(
      [
        '3e9b6db7',
        'bfd9999a',
        '4023d70a',
        '0',
        '3a80bb3f',
        'bcaaf8b0',
        '3f3a83a8',
        '408f5c29',
        'c04ccccc',
        '3de147ae',
        '0',
        '0',
        '0',
        '0',
        '0',
      ].map((c) => `0x${c}`),
    );
  });

  it('power-of-two scales: codes and scales; packed and raw transport then dequantize identically', () => {
    const w = blockwiseCastToFp8(W, 3, 5, { block: 2, power2Scale: true });
    expect(hex8(w.codes)).toEqual(
      ['6a', 'fe', '72', '0', '40', 'ca', '73', '79', 'f5', '76', '0', '0', '0', '0', '0'].map((c) => `0x${c}`),
    );
    expect(hex32(w.scaleInv)).toEqual(
      ['3b800000', '3c800000', '3a000000', '2a800000', '2a800000', '2a800000'].map((c) => `0x${c}`),
    );
    const packed = wireScale(w, 'mn-major-packed');
    expect(packed.dtype).toBe('int32');
    expect(packed.shape).toEqual([3, 1]);
    expect(hex32(packed.data)).toEqual(['0x747977', '0x747977', '0x555555', '0x0']); // (1 word, 4 rows): MN-major
    const viaPacked = loadWireScale(packed, 'mn-major-packed', 3, 5, 2);
    expect(hex32(viaPacked)).toEqual(hex32(w.scaleInv));
  });

  it('FP32 scales in the packed layout keep only the exponent byte (the scale floors to a power of two)', () => {
    const w = blockwiseCastToFp8(W, 3, 5, { block: 2 });
    const packed = wireScale(w, 'mn-major-packed');
    expect(hex32(packed.data)).toEqual(['0x737876', '0x737876', '0x545454', '0x0']);
    // 0x3b78af8b (≈ 3.79e-3) → byte 0x76 → 2^(0x76 − 127) = 2^-9
    expect(hex32(loadWireScale(packed, 'mn-major-packed', 3, 5, 2))).toEqual(
      ['3b000000', '3c000000', '39800000', '2a000000', '2a000000', '2a000000'].map((c) => `0x${c}`),
    );
  });

  it('a layout the loader does not expect is refused, naming both layouts, dtypes, shapes and numel', () => {
    const w = blockwiseCastToFp8(W, 3, 5, { block: 2, power2Scale: true });
    expect(() => loadWireScale(wireScale(w, 'mn-major-packed'), 'raw', 3, 5, 2)).toThrow(
      "scale layout: the engine's loader expects raw scales (float32 [2, 3], numel 6), got mn-major-packed (int32 [3, 1], numel 3)",
    );
    expect(() => loadWireScale(wireScale(w, 'raw'), 'mn-major-packed', 3, 5, 2)).toThrow(
      /expects mn-major-packed scales \(int32 \[3, 1\], numel 3\), got raw \(float32 \[2, 3\], numel 6\)/,
    );
    const corrupt = wireScale(w, 'mn-major-packed');
    (corrupt.data as Int32Array)[1] = 0x747978; // row 1 no longer repeats row 0 of its block
    expect(() => loadWireScale(corrupt, 'mn-major-packed', 3, 5, 2)).toThrow(/block row 0 differ at row 1/);
    expect(() => blockwiseCastToFp8(W, 3, 5, { block: 0 })).toThrow(/block: expected a positive integer, got 0/);
  });
});
