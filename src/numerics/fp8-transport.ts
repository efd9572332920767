// Pre-quantized FP8 weight transport: the trainer sends each linear weight as blockwise E4M3 codes with FP32
// `weight_scale_inv` (SkyRL's blockwise cast), in the scale layout one engine's loader expects (the raw block
// scale, or SGLang/DeepGEMM's mn-major packed UE8M0). Not a GEMM and not a quantizer preset (quantize.ts).

import { decode, floatFormats } from './formats.js';
import { scalarEncoder } from './round.js';
import { float32Bits, pow2Exponent } from './scales.js';

/**
 * How the per-block weight scale travels: `raw`, the (⌈n/b⌉, ⌈k/b⌉) FP32 `weight_scale_inv` as stored on
 * disk (what vLLM's FP8 loader narrows per TP rank and packs itself); `mn-major-packed`, SGLang's
 * `transform_scale_ue8m0`: the block scale repeated for each of the n output rows, reduced to its
 * UE8M0 exponent byte, four bytes packed per int32, logical shape (n, ⌈⌈k/b⌉/4⌉), stored MN-major.
 */
export type ScaleLayout = 'raw' | 'mn-major-packed';

/** The scale layouts, in documentation order. */
export const scaleLayouts: readonly ScaleLayout[] = Object.freeze(['raw', 'mn-major-packed']);

/** Options of {@link blockwiseCastToFp8}. */
export interface BlockwiseFp8Options {
  /** Block edge b (rows and columns; SkyRL's default is 128). */
  readonly block: number;
  /** Round each scale up to a power of two, 2^⌈log2f s⌉ (`NVTE_FP8_BLOCK_SCALING_FP32_SCALES=0`). @defaultValue false */
  readonly power2Scale?: boolean;
  /** Floor of the block amax before the division, max(ε, 1e-10) (`NVTE_FP8_BLOCK_AMAX_EPSILON`). @defaultValue 0 */
  readonly amaxEpsilon?: number;
}

/** One weight as the trainer sends it. */
export interface BlockwiseFp8Weight {
  /** (n, k) E4M3 codes. */
  readonly codes: Uint8Array;
  /** (⌈n/b⌉, ⌈k/b⌉) FP32 scale_inv (dequantized weight = code · scale_inv). */
  readonly scaleInv: Float32Array;
  readonly n: number;
  readonly k: number;
  readonly block: number;
}

const E4M3_MAX = 448;
const encodeE4m3 = scalarEncoder('e4m3fn', 'ieee', 'rne');

/**
 * SkyRL's `blockwise_cast_to_fp8` (NovaSky-AI/SkyRL `skyrl/backends/skyrl_train/weight_sync/serialization/
 * blockwise_fp8.py` @323007f, lines 80–114; defaults lines 22–43): per b×b block (the tensor zero-padded to whole blocks),
 * s = max(amax, fp32(max(ε, 1e-10))) / 448 in float32, optionally 2^⌈log2f s⌉, then each element
 * e4m3fn(clamp(x / s, −448, 448)) with round to nearest even.
 *
 * @example
 * ```ts
 * blockwiseCastToFp8(Float32Array.of(1, -0.5, 0.25, 3), 2, 2, { block: 2 }).scaleInv; // [3/448 in fp32]
 * ```
 */
export function blockwiseCastToFp8(
  w: Float32Array,
  n: number,
  k: number,
  opts: BlockwiseFp8Options,
): BlockwiseFp8Weight {
  const b = opts.block;
  if (!Number.isInteger(b) || b < 1) throw new Error(`block: expected a positive integer, got ${b}`);
  const eps = opts.amaxEpsilon ?? 0;
  if (!Number.isFinite(eps) || eps < 0) throw new Error(`amaxEpsilon: expected a finite number ≥ 0, got ${eps}`);
  if (w.length !== n * k) throw new Error(`blockwiseCastToFp8: expected n·k = ${n * k} values, got ${w.length}`);
  const floor = Math.fround(Math.max(eps, 1e-10));
  const nb = Math.ceil(n / b);
  const kb = Math.ceil(k / b);
  const scaleInv = new Float32Array(nb * kb); // (nb, kb)
  const codes = new Uint8Array(n * k); // (n, k)
  for (let bi = 0; bi < nb; bi++) {
    for (let bj = 0; bj < kb; bj++) {
      let amax = 0; // padding is zero and never raises it
      for (let i = bi * b; i < Math.min(n, (bi + 1) * b); i++)
        for (let j = bj * b; j < Math.min(k, (bj + 1) * b); j++) amax = Math.max(amax, Math.abs(w[i * k + j]!));
      let s = Math.fround(Math.max(amax, floor) / E4M3_MAX);
      if (opts.power2Scale === true) s = 2 ** pow2Exponent(s, 'exp2-ceil-log2');
      scaleInv[bi * kb + bj] = s;
      for (let i = bi * b; i < Math.min(n, (bi + 1) * b); i++)
        for (let j = bj * b; j < Math.min(k, (bj + 1) * b); j++) {
          const q = Math.fround(w[i * k + j]! / s);
          codes[i * k + j] = encodeE4m3(Math.min(E4M3_MAX, Math.max(-E4M3_MAX, q)));
        }
    }
  }
  return { codes, scaleInv, n, k, block: b };
}

/** The scale tensor on the wire: its layout, dtype, logical shape and storage. */
export interface WireScale {
  readonly layout: ScaleLayout;
  readonly dtype: 'float32' | 'int32';
  /** Logical shape; numel = shape[0]·shape[1]. */
  readonly shape: readonly [number, number];
  /** `raw`: row-major FP32; `mn-major-packed`: int32 words, column j of the logical shape at j·⌈n⌉₄ (MN-major, rows padded to 4). */
  readonly data: Float32Array | Int32Array;
}

const align4 = (x: number): number => Math.ceil(x / 4) * 4;

/**
 * The scale of `w` in `layout`. `mn-major-packed` follows SGLang's `transform_scale_ue8m0` and
 * DeepGEMM's torch reference it calls (sgl-project/sglang `python/sglang/srt/layers/quantization/
 * fp8_utils.py` @002ed7e: `transform_scale_ue8m0`, `_get_mn_major_tma_aligned_packed_ue8m0_tensor_torch_impl`):
 * row r of the (n, ⌈k/b⌉) repeat takes block row ⌊r/b⌋ (SGLang: ⌊r/128⌋); each byte is the float32 bits
 * >> 23 (the exponent field: exact for a power-of-two scale, the mantissa dropped otherwise); bytes
 * are zero-padded to (⌈n⌉₄, ⌈kb⌉₄) and packed little-endian, four per int32 word.
 */
export function wireScale(w: BlockwiseFp8Weight, layout: ScaleLayout): WireScale {
  const nb = Math.ceil(w.n / w.block);
  const kb = Math.ceil(w.k / w.block);
  if (layout === 'raw') return { layout, dtype: 'float32', shape: [nb, kb], data: Float32Array.from(w.scaleInv) };
  if (layout !== 'mn-major-packed')
    throw new Error(`scaleLayout: expected one of ${scaleLayouts.join(', ')}, got ${JSON.stringify(layout)}`);
  const mnAligned = align4(w.n);
  const words = align4(kb) / 4;
  const data = new Int32Array(mnAligned * words); // (words, ⌈n⌉₄): MN-major
  for (let r = 0; r < w.n; r++)
    for (let j = 0; j < kb; j++) {
      const byte = (float32Bits(w.scaleInv[Math.floor(r / w.block) * kb + j]!) >>> 23) & 0xff;
      data[(j >> 2) * mnAligned + r]! |= byte << (8 * (j & 3));
    }
  return { layout, dtype: 'int32', shape: [w.n, words], data };
}

/**
 * The (⌈n/b⌉, ⌈k/b⌉) FP32 block scales an engine whose loader expects `expected` reads from `wire`. A
 * layout other than the expected one is refused, naming both shapes and element counts (vLLM's MoE
 * loader asserts equal numel — vllm-project/vime PR 133 — and the dtypes differ as well). A packed scale
 * is unpacked as SGLang's `_inverse_transform_scale_ue8m0_impl` does, byte << 23 read as float32,
 * checking that the rows of each block repeat.
 */
export function loadWireScale(
  wire: WireScale,
  expected: ScaleLayout,
  n: number,
  k: number,
  block: number,
): Float32Array {
  const nb = Math.ceil(n / block);
  const kb = Math.ceil(k / block);
  if (wire.layout !== expected) {
    const want = expected === 'raw' ? `float32 [${nb}, ${kb}]` : `int32 [${n}, ${align4(kb) / 4}]`;
    throw new Error(
      `scale layout: the engine's loader expects ${expected} scales (${want}, numel ${expected === 'raw' ? nb * kb : n * (align4(kb) / 4)}), got ${wire.layout} (${wire.dtype} [${wire.shape.join(', ')}], numel ${wire.shape[0] * wire.shape[1]})`,
    );
  }
  if (wire.layout === 'raw') return Float32Array.from(wire.data);
  const mnAligned = align4(n);
  const out = new Float32Array(nb * kb);
  const bits = new Uint32Array(1);
  const f = new Float32Array(bits.buffer);
  for (let r = 0; r < n; r++)
    for (let j = 0; j < kb; j++) {
      const byte = (wire.data[(j >> 2) * mnAligned + r]! >>> (8 * (j & 3))) & 0xff;
      bits[0] = byte << 23;
      const v = f[0]!;
      const at = Math.floor(r / block) * kb + j;
      if (r % block === 0) out[at] = v;
      else if (!Object.is(out[at], v))
        throw new Error(`scale layout: packed rows of block row ${Math.floor(r / block)} differ at row ${r}`);
    }
  return out;
}

/** (n, k) dequantized weight: fp32(e4m3(code) · scale_inv of its block). */
export function dequantBlockwiseFp8(
  codes: Uint8Array,
  scaleInv: Float32Array,
  n: number,
  k: number,
  block: number,
): Float32Array {
  const kb = Math.ceil(k / block);
  const e4m3 = floatFormats.e4m3fn;
  const out = new Float32Array(n * k);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < k; j++)
      out[i * k + j] = decode(e4m3, codes[i * k + j]!) * scaleInv[Math.floor(i / block) * kb + Math.floor(j / block)]!;
  return out;
}
