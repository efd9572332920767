// The whole hopper-fp8 GEMM of gemm.ts in one WebAssembly call when every K-segment is one chunk (the presets:
// chunk 16, promoteEvery 1, scale groups of 16): per output and segment the chunk's largest exponent sum and sum of
// truncated scaled products (the SIMD loops of hopper-kernel.ts), the e8m13 rounding (roundE8M of gemm.ts) and the
// promotion into the float32 accumulator, fma32(fl(s_a·s_b), c, acc) with fine-grained scales or fl(acc + c) (fma32
// of scales.ts, as scalar f64/f32 operations). Not a new semantics: each step is the JS reference's, operation by
// operation; sums that could leave the float32 range set a flag and the caller runs the JS path instead.

import { lazyOneFunction, oneFunctionModule, uleb } from './wasm.js';
import { forLoop, get, hopperChunkLoops, i32c, set, simd, simdOp } from './wasm-emit.js';

/** Core opcodes (WebAssembly core spec §5.4). */
const op = {
  block: 0x02, loop: 0x03, if: 0x04, else: 0x05, end: 0x0b, br: 0x0c, brIf: 0x0d, select: 0x1b,
  localGet: 0x20, localSet: 0x21, localTee: 0x22,
  i32Load: 0x28, f32Load: 0x2a, f64Load: 0x2b, i32Store: 0x36, f32Store: 0x38,
  i32Const: 0x41, i64Const: 0x42, f64Const: 0x44,
  i32Eqz: 0x45, i32GeU: 0x4f, i32GtS: 0x4a, i32LeS: 0x4c,
  f32Eq: 0x5b, f32Lt: 0x5d, f32Gt: 0x5e,
  f64Eq: 0x61, f64Ne: 0x62, f64Lt: 0x63, f64Gt: 0x64, f64Ge: 0x66,
  i32Clz: 0x67, i32Add: 0x6a, i32Sub: 0x6b, i32Mul: 0x6c, i32Shl: 0x74, i32ShrU: 0x76,
  i64Shl: 0x86,
  f32Add: 0x92,
  f64Abs: 0x99, f64Neg: 0x9a, f64Add: 0xa0, f64Sub: 0xa1, f64Mul: 0xa2, f64Div: 0xa3,
  i32TruncF64U: 0xab, i64ExtendI32U: 0xad, f32DemoteF64: 0xb6, f64ConvertI32U: 0xb8, f64PromoteF32: 0xbb,
  i32ReinterpretF32: 0xbc, f32ReinterpretI32: 0xbe, f64ReinterpretI64: 0xbf,
  simd: 0xfd,
} as const;

const T = { i32: 0x7f, f32: 0x7d, f64: 0x7c, void: 0x40 } as const;

// Parameters of `gemm(m, np, K, nseg, segLen, av, ae, bv, be, sa, sb, out, fine, fb, flag)` (byte addresses):
//   av/ae   A values (f64) and exponents (i32), row-major (m, K)
//   bv/be   B panels of 4 columns over all of K: values panel[p][kk][c] (f64), exponents (i32)
//   sa      f64 per (segment, row of A); sb f64 per (segment, 4p + c): the segment's scales (read when fine ≠ 0)
//   out     f32 per (i, 4p + c), row stride 4·np: the float32 accumulator after the last segment
//   fb      fractionBits; flag: i32 set to 1 when a sum needs the JS reference (≥ 2^31 or saturating)
const P = { m: 0, np: 1, K: 2, nseg: 3, segLen: 4, av: 5, ae: 6, bv: 7, be: 8, sa: 9, sb: 10, out: 11, fine: 12, fb: 13, flag: 14 } as const;
// Locals: i32 (15..24), v128 (25..31), f64 (32..42), f32 (43..50).
const L = {
  i: 15, p: 16, s: 17, kk: 18, pa: 19, pb: 20, k0: 21, maxE: 22, si: 23, bits: 24,
  mx: 25, t: 26, inv01: 27, inv23: 28, s01: 29, s23: 30, a: 31,
  sum: 32, u: 33, c64: 34, pr: 35, tt: 36, bp: 37, err: 38, r: 39, accd: 40, saS: 41, tmp: 42,
  acc0: 43, c32: 47, r32: 48, o32: 49, a32: 50,
} as const;

const f64c = (x: number): number[] => [op.f64Const, ...Array.from(new Uint8Array(Float64Array.of(x).buffer))];
/** `if (cond) then else els` with a result type (or void). */
const ifElse = (type: number, cond: number[], then: number[], els: number[] | null = null): number[] =>
  [...cond, op.if, type, ...then, ...(els === null ? [] : [op.else, ...els]), op.end];

/** nextFloat32Up (dir = 1) / nextFloat32Down (dir = −1) of the f32 local `x`, leaving an f32 (scales.ts). */
function nextFloat(x: number, dir: 1 | -1): number[] {
  const bitsPlus = (d: number): number[] => [...get(x), op.i32ReinterpretF32, ...i32c(d), op.i32Add, op.f32ReinterpretI32];
  return ifElse(T.f32, [...get(x), ...f32Zero(), op.f32Eq],
    [...i32c(dir === 1 ? 1 : 0x80000001 | 0), op.f32ReinterpretI32],
    ifElse(T.f32, [...get(x), ...f32Zero(), op.f32Gt], bitsPlus(dir), bitsPlus(-dir)));
}

function f32Zero(): number[] {
  return [...i32c(0), op.f32ReinterpretI32];
}

/** roundE8M(sum, maxE, fb) of gemm.ts into c64 (flag on the cases the JS hands to truncateToE8M). */
function roundE8M(): number[] {
  const flagged = [...get(P.flag), ...i32c(1), op.i32Store, 0x02, 0x00, ...f64c(0), ...set(L.c64)];
  const shifted = [
    // t = ((si >>> shift) << shift)·u, sign of sum put back
    ...get(L.si), ...get(L.bits), ...get(P.fb), op.i32Sub, ...i32c(1), op.i32Sub, op.i32ShrU,
    ...get(L.bits), ...get(P.fb), op.i32Sub, ...i32c(1), op.i32Sub, op.i32Shl,
    op.f64ConvertI32U, ...get(L.u), op.f64Mul, ...set(L.tmp),
    ...get(L.tmp), op.f64Neg, ...get(L.tmp), ...get(L.sum), ...f64c(0), op.f64Lt, op.select, ...set(L.c64),
  ];
  const inRange = [
    // u = 2^(maxE − fb) from its bits
    ...get(L.maxE), ...get(P.fb), op.i32Sub, ...i32c(1023), op.i32Add, op.i64ExtendI32U, op.i64Const, 52, op.i64Shl, op.f64ReinterpretI64, ...set(L.u),
    ...ifElse(T.void, [...get(L.bits), ...get(P.fb), ...i32c(1), op.i32Add, op.i32LeS],
      [...get(L.sum), ...get(L.u), op.f64Mul, ...set(L.c64)], shifted),
  ];
  const nonzero = [
    ...ifElse(T.void, [...get(L.sum), op.f64Abs, ...f64c(2 ** 31), op.f64Ge], flagged, [
      ...get(L.sum), op.f64Abs, op.i32TruncF64U, ...set(L.si),
      ...i32c(32), ...get(L.si), op.i32Clz, op.i32Sub, ...set(L.bits),
      ...ifElse(T.void, [...get(L.maxE), ...get(P.fb), op.i32Sub, ...get(L.bits), op.i32Add, ...i32c(1), op.i32Sub, ...i32c(127), op.i32GtS], flagged, inRange),
    ]),
  ];
  return ifElse(T.void, [...get(L.sum), ...f64c(0), op.f64Eq], [...f64c(0), ...set(L.c64)], nonzero);
}

/** fma32(a32, c32, acc) of scales.ts into the f32 local `acc`. */
function fma32(acc: number): number[] {
  const pick = [
    // err > 0 ? max(r, other) : min(r, other)   (r ≠ other, neither NaN)
    ...get(L.r32), ...get(L.o32), ...get(L.r32), ...get(L.o32), op.f32Gt, op.select, // max
    ...get(L.r32), ...get(L.o32), ...get(L.r32), ...get(L.o32), op.f32Lt, op.select, // min
    ...get(L.err), ...f64c(0), op.f64Gt, op.select,
  ];
  const tie = [
    ...ifElse(T.f32, [...get(L.r), ...get(L.tt), op.f64Lt], nextFloat(L.r32, 1), nextFloat(L.r32, -1)), ...set(L.o32),
    ...ifElse(T.f32, [...get(L.r), ...get(L.o32), op.f64PromoteF32, op.f64Add, ...f64c(2), op.f64Div, ...get(L.tt), op.f64Ne], get(L.r32), pick),
  ];
  const finite = [
    ...get(L.tt), op.f32DemoteF64, ...set(L.r32), ...get(L.r32), op.f64PromoteF32, ...set(L.r),
    ...get(L.tt), ...get(L.accd), op.f64Sub, ...set(L.bp),
    ...get(L.pr), ...get(L.bp), op.f64Sub, ...get(L.accd), ...get(L.tt), ...get(L.bp), op.f64Sub, op.f64Sub, op.f64Add, ...set(L.err),
    ...ifElse(T.f32, [...get(L.err), ...f64c(0), op.f64Eq, ...get(L.r), ...get(L.tt), op.f64Eq, 0x72 /* i32.or */], get(L.r32), tie),
  ];
  return [
    ...get(L.a32), op.f64PromoteF32, ...get(L.c32), op.f64PromoteF32, op.f64Mul, ...set(L.pr),
    ...get(acc), op.f64PromoteF32, ...set(L.accd),
    ...get(L.pr), ...get(L.accd), op.f64Add, ...set(L.tt),
    // t − t ≠ 0: t is ±Inf or NaN → fround(t)
    ...ifElse(T.f32, [...get(L.tt), ...get(L.tt), op.f64Sub, ...f64c(0), op.f64Ne], [...get(L.tt), op.f32DemoteF64], finite),
    ...set(acc),
  ];
}

/** One output column c of the panel: round its chunk sum and promote it into acc_c. */
function lane(c: number): number[] {
  const acc = L.acc0 + c;
  const sbAddr = [...get(P.sb), ...get(L.s), ...get(P.np), op.i32Mul, ...get(L.p), op.i32Add, ...i32c(4), op.i32Mul, ...i32c(c), op.i32Add, ...i32c(8), op.i32Mul, op.i32Add];
  return [
    ...get(c < 2 ? L.s01 : L.s23), ...simdOp(simd.f64x2ExtractLane, [c % 2]), ...set(L.sum),
    ...get(L.mx), ...simdOp(simd.i32x4ExtractLane, [c]), ...set(L.maxE),
    ...roundE8M(),
    ...get(L.c64), op.f32DemoteF64, ...set(L.c32),
    ...ifElse(T.void, get(P.fine), [
      ...get(L.saS), ...sbAddr, op.f64Load, 0x03, 0x00, op.f64Mul, op.f32DemoteF64, ...set(L.a32),
      ...fma32(acc),
    ], [...get(acc), ...get(L.c32), op.f32Add, ...set(acc)]),
  ];
}

function gemmBody(): number[] {
  // Element offset of (row, k0) in a (rows, K) layout: (row·K + k0)
  const at = (row: number): number[] => [...get(row), ...get(P.K), op.i32Mul, ...get(L.k0), op.i32Add];
  const { maxLoop, sumLoop } = hopperChunkLoops({ kk: L.kk, len: P.segLen, pa: L.pa, pb: L.pb, mx: L.mx, a: L.a, s01: L.s01, s23: L.s23, inv01: L.inv01, inv23: L.inv23 });
  const v128Zero = simdOp(simd.v128Const, new Array(16).fill(0));
  const perSegment = [
    ...get(L.s), ...get(P.segLen), op.i32Mul, ...set(L.k0),
    ...i32c(-126), ...simdOp(simd.i32x4Splat), ...set(L.mx),
    ...get(P.ae), ...at(L.i), ...i32c(4), op.i32Mul, op.i32Add, ...set(L.pa),
    ...get(P.be), ...at(L.p), ...i32c(16), op.i32Mul, op.i32Add, ...set(L.pb),
    ...maxLoop,
    // inv = 2^(fb − maxE) from its bits: (fb + 1023 − maxE) << 52
    ...get(P.fb), ...i32c(1023), op.i32Add, ...simdOp(simd.i32x4Splat), ...get(L.mx), ...simdOp(simd.i32x4Sub), ...set(L.t),
    ...get(L.t), ...simdOp(simd.i64x2ExtendLowI32x4S), ...i32c(52), ...simdOp(simd.i64x2Shl), ...set(L.inv01),
    ...get(L.t), ...simdOp(simd.i64x2ExtendHighI32x4S), ...i32c(52), ...simdOp(simd.i64x2Shl), ...set(L.inv23),
    ...v128Zero, ...set(L.s01), ...v128Zero, ...set(L.s23),
    ...get(P.av), ...at(L.i), ...i32c(8), op.i32Mul, op.i32Add, ...set(L.pa),
    ...get(P.bv), ...at(L.p), ...i32c(32), op.i32Mul, op.i32Add, ...set(L.pb),
    ...sumLoop,
    ...ifElse(T.void, get(P.fine), [
      ...get(P.sa), ...get(L.s), ...get(P.m), op.i32Mul, ...get(L.i), op.i32Add, ...i32c(8), op.i32Mul, op.i32Add, op.f64Load, 0x03, 0x00, ...set(L.saS),
    ]),
    ...lane(0), ...lane(1), ...lane(2), ...lane(3),
  ];
  const outAddr = (c: number): number[] => [...get(P.out), ...get(L.i), ...get(P.np), op.i32Mul, ...get(L.p), op.i32Add, ...i32c(4), op.i32Mul, ...i32c(c), op.i32Add, ...i32c(4), op.i32Mul, op.i32Add];
  const perPanel = [
    ...f32Zero(), ...set(L.acc0), ...f32Zero(), ...set(L.acc0 + 1), ...f32Zero(), ...set(L.acc0 + 2), ...f32Zero(), ...set(L.acc0 + 3),
    ...forLoop(L.s, i32c(0), get(P.nseg), perSegment),
    ...[0, 1, 2, 3].flatMap((c) => [...outAddr(c), ...get(L.acc0 + c), op.f32Store, 0x02, 0x00]),
  ];
  const code = [...forLoop(L.i, i32c(0), get(P.m), forLoop(L.p, i32c(0), get(P.np), perPanel)), op.end];
  const locals = [4, ...uleb(10), T.i32, ...uleb(7), 0x7b, ...uleb(11), T.f64, ...uleb(8), T.f32];
  const body = [...locals, ...code];
  return [...uleb(body.length), ...body];
}

const hopperGemmWasm = lazyOneFunction<(...args: number[]) => void>(() => oneFunctionModule('gemm', 15, gemmBody()), 'gemm');

/** Whether the one-call WebAssembly hopper-fp8 GEMM is in use (for tests and reports). @internal */
export function hopperGemmKernelIsSimd(): boolean {
  return hopperGemmWasm() !== null;
}

/** B (n, K) with its exponents packed into 4-column panels over all of K (padding columns: 0 and −126). */
interface FullPanels {
  readonly n: number;
  readonly K: number;
  readonly values: Float64Array;
  readonly exps: Int32Array;
}

/** Packed panels of B operands that are cached weight decodings (immutable), by values array. */
const panelCache = new WeakMap<Float32Array, FullPanels>();

/** Writes B's panels into `values`/`exps` from element `vo`/`eo` on (padding columns: 0 and −126). */
function packInto(B: Float32Array, eB: Int16Array, n: number, K: number, values: Float64Array, vo: number, exps: Int32Array, eo: number): void {
  const np = Math.ceil(n / 4);
  for (let j = n; j < np * 4; j++) {
    const p = j >> 2;
    const c = j & 3;
    for (let kk = 0; kk < K; kk++) {
      values[vo + (p * K + kk) * 4 + c] = 0;
      exps[eo + (p * K + kk) * 4 + c] = -126;
    }
  }
  for (let j = 0; j < n; j++) {
    const p = j >> 2;
    const c = j & 3;
    for (let kk = 0; kk < K; kk++) {
      const at = (p * K + kk) * 4 + c;
      values[vo + at] = B[j * K + kk] as number;
      exps[eo + at] = eB[j * K + kk] as number;
    }
  }
}

function packFull(B: Float32Array, eB: Int16Array, n: number, K: number): FullPanels {
  const np = Math.ceil(n / 4);
  const values = new Float64Array(np * K * 4);
  const exps = new Int32Array(np * K * 4);
  packInto(B, eB, n, K, values, 0, exps, 0);
  return { n, K, values, exps };
}

function align(x: number): number {
  return Math.ceil(x / 16) * 16;
}

/**
 * The float32 accumulator of every output (i, j) of a hopper-fp8 GEMM whose K-segments are all one
 * chunk of `segLen` (K = nseg·segLen), written into `total[i·n + j]`: per segment the chunk sum from
 * zero, rounded to e8m13, promoted with `fma32(fl(sa[s][i]·sb[s][j]), c, acc)` when `fine`, else
 * `fl(acc + c)`. `sa` (nseg·m) and `sb` (nseg·n) are the segments' scales (read when fine). Returns
 * false (total unspecified) where WebAssembly SIMD is unavailable or a sum needs the JS reference.
 * `cacheB`: B is an immutable cached weight decoding, so its packed panels are kept with it.
 * @internal
 */
export function hopperGemmSegments(
  total: Float32Array, A: Float32Array, B: Float32Array, eA: Int16Array, eB: Int16Array, m: number, n: number, K: number,
  segLen: number, fine: boolean, sa: Float64Array, sb: Float64Array, fractionBits: number, cacheB: boolean,
): boolean {
  const w = hopperGemmWasm();
  if (w === null) return false;
  const nseg = K / segLen;
  const np = Math.ceil(n / 4);
  let panels = cacheB ? panelCache.get(B) : undefined;
  if (cacheB && (panels === undefined || panels.n !== n || panels.K !== K)) {
    panels = packFull(B, eB, n, K);
    panelCache.set(B, panels);
  }
  const av = 0;
  const ae = align(av + m * K * 8);
  const bv = align(ae + m * K * 4);
  const be = align(bv + np * K * 32);
  const so = align(be + np * K * 16);
  const sbo = align(so + nseg * m * 8);
  const out = align(sbo + nseg * np * 4 * 8);
  const flag = align(out + m * np * 16);
  const need = flag + 16;
  const have = w.memory.buffer.byteLength;
  if (need > have) w.memory.grow(Math.ceil((need - have) / 65536));
  const buf = w.memory.buffer;
  const f64 = new Float64Array(buf);
  const i32 = new Int32Array(buf);
  const f32 = new Float32Array(buf);
  const mk = m * K;
  for (let x = 0; x < mk; x++) {
    f64[x] = A[x] as number;
    i32[ae / 4 + x] = eA[x] as number;
  }
  if (panels !== undefined) {
    f64.set(panels.values, bv / 8);
    i32.set(panels.exps, be / 4);
  } else packInto(B, eB, n, K, f64, bv / 8, i32, be / 4); // a per-call operand: packed straight into the kernel's memory
  if (fine) {
    f64.set(sa.subarray(0, nseg * m), so / 8);
    for (let s = 0; s < nseg; s++) {
      const dst = sbo / 8 + s * np * 4;
      for (let j = 0; j < np * 4; j++) f64[dst + j] = j < n ? (sb[s * n + j] as number) : 1;
    }
  }
  i32[flag / 4] = 0;
  w.fn(m, np, K, nseg, segLen, av, ae, bv, be, so, sbo, out, fine ? 1 : 0, fractionBits, flag);
  if (i32[flag / 4] !== 0) return false;
  const stride = np * 4;
  for (let i = 0; i < m; i++) {
    const o = out / 4 + i * stride;
    for (let j = 0; j < n; j++) total[i * n + j] = f32[o + j] as number;
  }
  return true;
}
