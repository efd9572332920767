// The whole hopper-fp8 GEMM of gemm.ts in one WebAssembly call when every K-segment is one chunk (the presets:
// chunk 16, promoteEvery 1, scale groups of 16): per output and segment the chunk's largest exponent sum and sum of
// truncated scaled products (the SIMD loops of hopper-kernel.ts), the e8m13 rounding (roundE8M of gemm-hopper.ts)
// and the promotion into the float32 accumulator, fma32(fl(s_a·s_b), c, acc) with fine-grained scales or
// fl(acc + c) (fma32 of scales.ts), two outputs per f64x2 with the scalar fma32 for the rare lanes it must decide.
// Not a new semantics: each step is the JS reference's; sums that could leave the float32 range set a flag and the
// caller runs the JS path instead.

import { lazyOneFunction, oneFunctionModule, uleb } from './wasm.js';
import { forLoop, get, hopperChunkLoops, i32c, set, simd, simdOp } from './wasm-emit.js';

/** Core opcodes (WebAssembly core spec §5.4). */
const op = {
  block: 0x02, loop: 0x03, if: 0x04, else: 0x05, end: 0x0b, br: 0x0c, brIf: 0x0d, select: 0x1b,
  localGet: 0x20, localSet: 0x21, localTee: 0x22,
  i32Load: 0x28, f32Load: 0x2a, f64Load: 0x2b, i32Store: 0x36, f32Store: 0x38,
  i32Const: 0x41, i64Const: 0x42, f64Const: 0x44,
  i32GeU: 0x4f,
  f32Eq: 0x5b, f32Lt: 0x5d, f32Gt: 0x5e,
  f64Eq: 0x61, f64Ne: 0x62, f64Lt: 0x63, f64Gt: 0x64,
  i32Add: 0x6a, i32Sub: 0x6b, i32Mul: 0x6c,
  i64Shl: 0x86,
  f64Add: 0xa0, f64Sub: 0xa1, f64Div: 0xa3,
  i64ExtendI32U: 0xad, f32DemoteF64: 0xb6, f64PromoteF32: 0xbb,
  i32ReinterpretF32: 0xbc, f32ReinterpretI32: 0xbe,
  simd: 0xfd,
} as const;

const T = { i32: 0x7f, f32: 0x7d, f64: 0x7c, v128: 0x7b, void: 0x40 } as const;

/** SIMD opcodes of the vector epilogue beyond the shared table of wasm-emit.ts (SIMD proposal opcode table). */
const vop = {
  i64x2Splat: [0x12], f64x2ReplaceLane: [0x22],
  f64x2Eq: [0x47], f64x2Ne: [0x48], f64x2Ge: [0x4c],
  v128And: [0x4e], v128Or: [0x50], v128AnyTrue: [0x53],
  f32x4DemoteF64x2Zero: [0x5e], f64x2PromoteLowF32x4: [0x5f],
  f64x2Abs: [0xec, 0x01], f64x2Sub: [0xf1, 0x01],
} as const;

// Parameters of `gemm(m, np, K, nseg, segLen, av, ae, bv, be, sa, sb, out, fine, fb, flag)` (byte addresses):
//   av/ae   A values (f64) and exponents (i32), row-major (m, K)
//   bv/be   B panels of 4 columns over all of K: values panel[p][kk][c] (f64), exponents (i32)
//   sa      f64 per (segment, row of A); sb f64 per (segment, 4p + c): the segment's scales (read when fine ≠ 0)
//   out     f32 per (i, 4p + c), row stride 4·np: the float32 accumulator after the last segment
//   fb      fractionBits (0 to 52); flag: i32 set to 1 when a sum needs the JS reference (≥ 2^31 or saturating)
const P = { m: 0, np: 1, K: 2, nseg: 3, segLen: 4, av: 5, ae: 6, bv: 7, be: 8, sa: 9, sb: 10, out: 11, fine: 12, fb: 13, flag: 14 } as const;
// Locals: i32 (15..21), v128 (22..41), f64 (42..48), f32 (49..50).
const L = {
  i: 15, p: 16, s: 17, kk: 18, pa: 19, pb: 20, k0: 21,
  mx: 22, t: 23, inv01: 24, inv23: 25, s01: 26, s23: 27, a: 28,
  acc01: 29, acc23: 30, c: 31, sab: 32, pv: 33, tv: 34, rv: 35, bpv: 36, bad: 37, keep: 38, lim31: 39, lim128: 40, sbv: 41,
  pr: 42, accd: 43, tt: 44, bp: 45, err: 46, r: 47, saS: 48,
  r32: 49, o32: 50,
} as const;

const f64c = (x: number): number[] => [op.f64Const, ...Array.from(new Uint8Array(Float64Array.of(x).buffer))];
/** `if (cond) then else els` with a result type (or void). */
const ifElse = (type: number, cond: number[], then: number[], els: number[] | null = null): number[] =>
  [...cond, op.if, type, ...then, ...(els === null ? [] : [op.else, ...els]), op.end];
const v = (o: readonly number[], imm: number[] = []): number[] => simdOp(o, imm);
/** fl(x) of every lane of the f64x2 on the stack: demote to float32 (RNE) and promote back (exact). */
const roundLanes = (): number[] => [...v(vop.f32x4DemoteF64x2Zero), ...v(vop.f64x2PromoteLowF32x4)];

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

/**
 * fma32 of scales.ts from its exact product `pr` = fl(sa·sb)·c and the float32 accumulator `accd` (f64 locals),
 * leaving the float32 result on the stack: the scalar routine for the lanes the vector test could not settle.
 */
function fma32Scalar(): number[] {
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
    ...get(L.pr), ...get(L.accd), op.f64Add, ...set(L.tt),
    // t − t ≠ 0: t is ±Inf or NaN → fround(t)
    ...ifElse(T.f32, [...get(L.tt), ...get(L.tt), op.f64Sub, ...f64c(0), op.f64Ne], [...get(L.tt), op.f32DemoteF64], finite),
  ];
}

/**
 * Columns 2h, 2h + 1 of the panel (h = 0, 1): their chunk sums rounded to e8m13 and promoted into the
 * f64x2 accumulator `acc` (float32 values), two lanes at a time.
 *
 * e8m13 rounding (roundE8M of gemm-hopper.ts): c = sum·u with u = 2^(maxE − fb) is exact (|sum| < 2^31,
 * a power-of-two factor), and truncating it to fb + 1 significant bits toward zero is clearing the
 * double's low 52 − fb mantissa bits (`keep`); a sum ≥ 2^31 or a |c| ≥ 2^128 (which saturates) sets `bad`.
 * Promotion: fl(acc + c) as a double sum rounded to float32 (one rounding of an exact sum); with fine
 * scales fma32(fl(sa·sb), c, acc): the product pr = fl(sa·sb)·c is exact, t = pr + acc, and fl(t) is
 * the answer unless the TwoSum error is nonzero and fl(t) ≠ t, where the scalar routine decides.
 */
function pairEpilogue(h: 0 | 1): number[] {
  const sum = h === 0 ? L.s01 : L.s23;
  const acc = h === 0 ? L.acc01 : L.acc23;
  const extend = h === 0 ? simd.i64x2ExtendLowI32x4S : simd.i64x2ExtendHighI32x4S;
  const sbAddr = [...get(P.sb), ...get(L.s), ...get(P.np), op.i32Mul, ...get(L.p), op.i32Add, ...i32c(4), op.i32Mul, ...i32c(2 * h), op.i32Add, ...i32c(8), op.i32Mul, op.i32Add];
  const fixLane = (lane: number): number[] => [
    ...get(L.pv), ...v(simd.f64x2ExtractLane, [lane]), ...set(L.pr),
    ...get(acc), ...v(simd.f64x2ExtractLane, [lane]), ...set(L.accd),
    ...get(acc), ...fma32Scalar(), op.f64PromoteF32, ...v(vop.f64x2ReplaceLane, [lane]), ...set(acc),
  ];
  const fine = [
    // sab = fl(sa·sb) per lane; pr = sab·c (exact); t = pr + acc; r = fl(t)
    ...get(L.saS), ...v(simd.f64x2Splat), ...sbAddr, ...v(simd.v128Load, [0x03, 0x00]), ...v(simd.f64x2Mul), ...roundLanes(), ...set(L.sab),
    ...get(L.sab), ...get(L.c), ...v(simd.f64x2Mul), ...set(L.pv),
    ...get(L.pv), ...get(acc), ...v(simd.f64x2Add), ...set(L.tv),
    ...get(L.tv), ...roundLanes(), ...set(L.rv),
    // TwoSum error: err = (pr − bp) + (acc − (t − bp)), bp = t − acc; lanes with err ≠ 0 and r ≠ t go scalar
    ...get(L.tv), ...get(acc), ...v(vop.f64x2Sub), ...set(L.bpv),
    ...get(L.pv), ...get(L.bpv), ...v(vop.f64x2Sub), ...get(acc), ...get(L.tv), ...get(L.bpv), ...v(vop.f64x2Sub), ...v(vop.f64x2Sub), ...v(simd.f64x2Add),
    ...v(simd.v128Const, new Array(16).fill(0)), ...v(vop.f64x2Ne),
    ...get(L.rv), ...get(L.tv), ...v(vop.f64x2Ne), ...v(vop.v128And), ...v(vop.v128AnyTrue),
    ...ifElse(T.void, [], [...fixLane(0), ...fixLane(1)], [...get(L.rv), ...set(acc)]),
  ];
  return [
    // u = 2^(maxE − fb) from its bits; c = (sum·u) & keep
    ...get(L.mx), ...get(P.fb), ...i32c(-1023), op.i32Add, ...v(simd.i32x4Splat), ...v(simd.i32x4Sub), ...v(extend), ...i32c(52), ...v(simd.i64x2Shl),
    ...get(sum), ...v(simd.f64x2Mul), ...get(L.keep), ...v(vop.v128And), ...set(L.c),
    // bad |= |sum| ≥ 2^31 | |c| ≥ 2^128
    ...get(L.bad), ...get(sum), ...v(vop.f64x2Abs), ...get(L.lim31), ...v(vop.f64x2Ge), ...v(vop.v128Or),
    ...get(L.c), ...v(vop.f64x2Abs), ...get(L.lim128), ...v(vop.f64x2Ge), ...v(vop.v128Or), ...set(L.bad),
    ...ifElse(T.void, get(P.fine), fine, [...get(acc), ...get(L.c), ...v(simd.f64x2Add), ...roundLanes(), ...set(acc)]),
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
    ...pairEpilogue(0), ...pairEpilogue(1),
  ];
  const outAddr = (c: number): number[] => [...get(P.out), ...get(L.i), ...get(P.np), op.i32Mul, ...get(L.p), op.i32Add, ...i32c(4), op.i32Mul, ...i32c(c), op.i32Add, ...i32c(4), op.i32Mul, op.i32Add];
  const perPanel = [
    ...v128Zero, ...set(L.acc01), ...v128Zero, ...set(L.acc23),
    ...forLoop(L.s, i32c(0), get(P.nseg), perSegment),
    ...[0, 1, 2, 3].flatMap((c) => [...outAddr(c), ...get(c < 2 ? L.acc01 : L.acc23), ...v(simd.f64x2ExtractLane, [c % 2]), op.f32DemoteF64, op.f32Store, 0x02, 0x00]),
  ];
  const setup = [
    // keep = −1 << (52 − fb) in both i64 lanes; the limits 2^31 and 2^128; bad = 0
    op.i64Const, 0x7f, ...i32c(52), ...get(P.fb), op.i32Sub, op.i64ExtendI32U, op.i64Shl, ...v(vop.i64x2Splat), ...set(L.keep),
    ...f64c(2 ** 31), ...v(simd.f64x2Splat), ...set(L.lim31),
    ...f64c(2 ** 128), ...v(simd.f64x2Splat), ...set(L.lim128),
    ...v128Zero, ...set(L.bad),
  ];
  const finish = ifElse(T.void, [...get(L.bad), ...v(vop.v128AnyTrue)], [...get(P.flag), ...i32c(1), op.i32Store, 0x02, 0x00]);
  const code = [...setup, ...forLoop(L.i, i32c(0), get(P.m), forLoop(L.p, i32c(0), get(P.np), perPanel)), ...finish, op.end];
  const locals = [4, ...uleb(7), T.i32, ...uleb(20), T.v128, ...uleb(7), T.f64, ...uleb(2), T.f32];
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
  if (w === null || !(fractionBits >= 0 && fractionBits <= 52)) return false; // the e8m13 mask needs 0 ≤ fb ≤ 52
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
  // A row-major as it comes: element conversions by TypedArray.set (float32 → f64 and int16 → i32 are exact).
  f64.set(A.length === mk ? A : A.subarray(0, mk), av / 8);
  i32.set(eA.length === mk ? eA : eA.subarray(0, mk), ae / 4);
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
