// The single-chunk step of the hopper-fp8 table kernel as a tiny WebAssembly SIMD module (assembled below from named
// opcodes): per output the largest exponent sum and the sum of truncated scaled products. Not the rounding to e8m13.
//
// Why it equals the JS loop bit for bit: every product a·b of two float32 values is exact in a double, scaling it by
// the power of two 2^(fractionBits − maxE) is exact, `f64x2.trunc` is IEEE truncation, and the truncated addends are
// integers far below 2^53, so their double sums are exact in any order. The JS caller does the e8m13 rounding.

import { lazyOneFunction, oneFunctionModule, uleb } from '../wasm.js';
import { forLoop, get, hopperChunkLoops, i32c, memarg0, set, simd, simdOp } from '../wasm-emit.js';

/** Core opcodes used (WebAssembly core spec §5.4). */
const op = {
  block: 0x02, loop: 0x03, br: 0x0c, brIf: 0x0d, end: 0x0b,
  localGet: 0x20, localSet: 0x21,
  i32Load: 0x28, f64Load: 0x2b,
  i32Const: 0x41, i32GeU: 0x4f, i32Add: 0x6a, i32Mul: 0x6c,
  simd: 0xfd,
} as const;

// Parameters of `chunk(m, np, len, av, ae, bv, be, sums, maxes, bias)` (byte addresses):
//   av/ae   A values (f64) and exponents (i32), row-major (m, len)
//   bv/be   B panels of 4 columns: values panel[p][kk][c] (f64), exponents (i32), np panels of len rows
//   sums    out: f64 per (i, 4p + c), row stride 4·np; maxes: i32 per (i, 4p + c)
//   bias    fractionBits + 1023 (the double exponent bias plus the kept bits)
const P = { m: 0, np: 1, len: 2, av: 3, ae: 4, bv: 5, be: 6, sums: 7, maxes: 8, bias: 9 } as const;
const L = { i: 10, p: 11, kk: 12, pa: 13, pb: 14, pOut: 15, mx: 16, t: 17, inv01: 18, inv23: 19, s01: 20, s23: 21, a: 22 } as const;


function chunkBody(): number[] {
  // pa/pb walk the A row and the B panel; the row and panel starts are recomputed per (i, p).
  const rowStart = (base: number, bytes: number): number[] => [...get(base), ...get(L.i), ...get(P.len), op.i32Mul, ...i32c(bytes), op.i32Mul, op.i32Add, ...set(L.pa)];
  const panelStart = (base: number, bytes: number): number[] => [...get(base), ...get(L.p), ...get(P.len), op.i32Mul, ...i32c(bytes), op.i32Mul, op.i32Add, ...set(L.pb)];
  const { maxLoop, sumLoop } = hopperChunkLoops({ kk: L.kk, len: P.len, pa: L.pa, pb: L.pb, mx: L.mx, a: L.a, s01: L.s01, s23: L.s23, inv01: L.inv01, inv23: L.inv23 });
  const v128Zero = simdOp(simd.v128Const, new Array(16).fill(0));
  const outIndex = [...get(L.i), ...get(P.np), op.i32Mul, ...get(L.p), op.i32Add, ...set(L.pOut)]; // i·np + p
  const perPanel = [
    // mx = −126 in every lane (the exponent of a zero incoming accumulator)
    ...i32c(-126), ...simdOp(simd.i32x4Splat), ...set(L.mx),
    ...rowStart(P.ae, 4), ...panelStart(P.be, 16), ...maxLoop,
    // inv = 2^(fractionBits − maxE) built from its bits: (bias − maxE) << 52, two lanes per i64x2
    ...get(P.bias), ...simdOp(simd.i32x4Splat), ...get(L.mx), ...simdOp(simd.i32x4Sub), ...set(L.t),
    ...get(L.t), ...simdOp(simd.i64x2ExtendLowI32x4S), ...i32c(52), ...simdOp(simd.i64x2Shl), ...set(L.inv01),
    ...get(L.t), ...simdOp(simd.i64x2ExtendHighI32x4S), ...i32c(52), ...simdOp(simd.i64x2Shl), ...set(L.inv23),
    ...v128Zero, ...set(L.s01), ...v128Zero, ...set(L.s23),
    ...rowStart(P.av, 8), ...panelStart(P.bv, 32), ...sumLoop,
    ...outIndex,
    ...get(P.sums), ...get(L.pOut), ...i32c(32), op.i32Mul, op.i32Add, ...get(L.s01), ...simdOp(simd.v128Store, memarg0),
    ...get(P.sums), ...get(L.pOut), ...i32c(32), op.i32Mul, op.i32Add, ...get(L.s23), ...simdOp(simd.v128Store, [0x00, 0x10]),
    ...get(P.maxes), ...get(L.pOut), ...i32c(16), op.i32Mul, op.i32Add, ...get(L.mx), ...simdOp(simd.v128Store, memarg0),
  ];
  const code = [...forLoop(L.i, i32c(0), get(P.m), forLoop(L.p, i32c(0), get(P.np), perPanel)), op.end];
  const locals = [2, ...uleb(6), 0x7f, ...uleb(7), 0x7b]; // 6 × i32, 7 × v128
  const body = [...locals, ...code];
  return [...uleb(body.length), ...body];
}

function moduleBytes(): Uint8Array {
  return oneFunctionModule('chunk', 10, chunkBody());
}


/** The chunk step: sums and maxes of (m rows of A) × (np panels of B) over `len` K, pointers into its memory. */
type ChunkFn = (m: number, np: number, len: number, av: number, ae: number, bv: number, be: number, sums: number, maxes: number, bias: number) => void;

const hopperWasm = lazyOneFunction<ChunkFn>(moduleBytes, 'chunk');

/** Whether the WebAssembly SIMD hopper step is in use (for tests and reports). */
export function hopperKernelIsSimd(): boolean {
  return hopperWasm() !== null;
}

/** B panels packed for one K-chunk: values (np·len·4 doubles) and exponents (np·len·4 int32), panel[p][kk][c]. */
interface PackedPanels {
  readonly k0: number;
  readonly len: number;
  readonly n: number;
  readonly values: Float64Array;
  readonly exps: Int32Array;
}

/** Packed panels of B operands that are cached decodings of weights (immutable), by values array and k0. */
const packedCache = new WeakMap<Float32Array, Map<number, PackedPanels>>();

function packPanels(B: Float32Array, eB: Int16Array, n: number, k: number, k0: number, len: number): PackedPanels {
  const np = Math.ceil(n / 4);
  const values = new Float64Array(np * len * 4);
  const exps = new Int32Array(np * len * 4);
  for (let p = 0; p < np; p++) {
    for (let c = 0; c < 4; c++) {
      const j = 4 * p + c;
      for (let kk = 0; kk < len; kk++) {
        const at = (p * len + kk) * 4 + c;
        // Padding columns (j ≥ n) compute on zeros; their results are never read.
        values[at] = j < n ? (B[j * k + k0 + kk] as number) : 0;
        exps[at] = j < n ? (eB[j * k + k0 + kk] as number) : -126;
      }
    }
  }
  return { k0, len, n, values, exps };
}

/** {@link packPanels} of a B that is a cached weight decoding (immutable): kept with it, by k0. */
function cachedPanels(B: Float32Array, eB: Int16Array, n: number, k: number, k0: number, len: number): PackedPanels {
  let byK0 = packedCache.get(B);
  if (byK0 === undefined) packedCache.set(B, (byK0 = new Map()));
  let packed = byK0.get(k0);
  if (packed === undefined || packed.len !== len || packed.n !== n) {
    packed = packPanels(B, eB, n, k, k0, len);
    byK0.set(k0, packed);
  }
  return packed;
}

/** Rounds a byte offset up to 16 (every region 16-byte aligned; typed-array views need 8). */
function align(x: number): number {
  return Math.ceil(x / 16) * 16;
}

/** Results of {@link hopperChunkSums}: output (i, j) at `i·stride + j` of both views (valid until the next call). */
export interface HopperChunkResult {
  readonly sums: Float64Array;
  readonly maxes: Int32Array;
  readonly stride: number;
}

/** Sizes, chunk and caching of one {@link hopperChunkSums} call. @internal */
export interface HopperChunkOptions {
  /** Rows of A. */
  readonly m: number;
  /** Rows of B. */
  readonly n: number;
  /** Row length of A and B. */
  readonly k: number;
  /** The chunk [k0, k1). */
  readonly k0: number;
  readonly k1: number;
  /** Fractional bits of the alignment. */
  readonly fractionBits: number;
  /** B is an immutable cached weight decoding: its packed panels are kept with it. @defaultValue false */
  readonly cacheB?: boolean;
}

/**
 * One K-chunk [k0, k1) of every output (i, j) from a zero accumulator: `maxes` = max(−126,
 * max_kk eA(i,kk) + eB(j,kk)) and `sums` = Σ_kk trunc(A(i,kk)·B(j,kk)·2^(fractionBits − maxE)),
 * exactly as the JS table kernel forms them (A (m, k), B (n, k) row-major with their exponent tables;
 * {@link HopperChunkOptions}: sizes, the chunk, caching). Returns null (nothing computed) where WebAssembly SIMD is
 * unavailable.
 * @internal
 */
export function hopperChunkSums(A: Float32Array, B: Float32Array, eA: Int16Array, eB: Int16Array, options: HopperChunkOptions): HopperChunkResult | null {
  const { m, n, k, k0, k1, fractionBits, cacheB = false } = options;
  const w = hopperWasm();
  if (w === null) return null;
  const len = k1 - k0;
  const np = Math.ceil(n / 4);
  const panels = cacheB ? cachedPanels(B, eB, n, k, k0, len) : packPanels(B, eB, n, k, k0, len);
  // layout (bytes): [A values m·len·8][A exps m·len·4][B values np·len·32][B exps np·len·16][sums m·np·32][maxes m·np·16]
  const av = 0;
  const ae = align(av + m * len * 8);
  const bv = align(ae + m * len * 4);
  const be = align(bv + np * len * 32);
  const so = align(be + np * len * 16);
  const mo = align(so + m * np * 32);
  const need = mo + m * np * 16;
  const have = w.memory.buffer.byteLength;
  if (need > have) w.memory.grow(Math.ceil((need - have) / 65536));
  const buf = w.memory.buffer;
  const f64 = new Float64Array(buf);
  const i32 = new Int32Array(buf);
  for (let i = 0; i < m; i++) {
    const src = i * k + k0;
    const dst = i * len;
    for (let kk = 0; kk < len; kk++) {
      f64[av / 8 + dst + kk] = A[src + kk] as number;
      i32[ae / 4 + dst + kk] = eA[src + kk] as number;
    }
  }
  f64.set(panels.values, bv / 8);
  i32.set(panels.exps, be / 4);
  w.fn(m, np, len, av, ae, bv, be, so, mo, fractionBits + 1023);
  return { sums: new Float64Array(buf, so, m * np * 4), maxes: new Int32Array(buf, mo, m * np * 4), stride: np * 4 };
}
