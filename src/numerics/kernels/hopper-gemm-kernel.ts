// The whole hopper-fp8 GEMM of gemm.ts in one WebAssembly call when every K-segment is one chunk (the presets:
// chunk 16, promoteEvery 1, scale groups of 16): per output and segment the chunk's largest exponent sum and sum of
// truncated scaled products (the SIMD loops of hopper-kernel.ts), the e8m13 rounding (roundE8M of gemm-hopper.ts)
// and the promotion into the float32 accumulator, fma32(fl(s_a·s_b), c, acc) with fine-grained scales or
// fl(acc + c) (fma32 of scales.ts), two outputs per f64x2 with the scalar fma32 for the rare lanes it must decide.
// Not a new semantics: each step is the JS reference's; sums that could leave the float32 range set a flag and the
// caller runs the JS path instead.

import type { FloatFormat } from '../formats.js';
import { NON_FINITE, codeExponents } from '../gemm-hopper.js';
import type { CodeArray } from '../vector.js';
import { decodeTable } from '../vector.js';
import { type HopperOperand, cachedB, factsOf, narrowOkMemo, packInto, packPanels } from './hopper-gemm-operands.js';

export type { HopperOperand };
import { type WasmMemory, lazyOneFunction, oneFunctionModule, uleb } from '../wasm.js';
import { forLoop, get, hopperChunkLoops, i32c, set, simd, simdOp } from '../wasm-emit.js';

/** Core opcodes (WebAssembly core spec §5.4). */
const op = {
  block: 0x02, loop: 0x03, if: 0x04, else: 0x05, end: 0x0b, br: 0x0c, brIf: 0x0d, select: 0x1b,
  localGet: 0x20, localSet: 0x21, localTee: 0x22,
  i32Load: 0x28, f32Load: 0x2a, i32Load16S: 0x2e, i32Load8U: 0x2d, f64Load: 0x2b, i32Store: 0x36, f32Store: 0x38, f64Store: 0x39, i32Store16: 0x3b,
  i32Const: 0x41, i64Const: 0x42, f64Const: 0x44,
  i32Eqz: 0x45, i32Eq: 0x46, i32LtS: 0x48, i32LtU: 0x49, i32GtU: 0x4b, i32GeU: 0x4f,
  f32Eq: 0x5b, f32Lt: 0x5d, f32Gt: 0x5e,
  f64Eq: 0x61, f64Ne: 0x62, f64Lt: 0x63, f64Gt: 0x64,
  i32Add: 0x6a, i32Sub: 0x6b, i32Mul: 0x6c, i32And: 0x71, i32Or: 0x72, i32ShrU: 0x76,
  i64Shl: 0x86,
  f64Add: 0xa0, f64Sub: 0xa1, f64Div: 0xa3,
  i64ExtendI32U: 0xad, f32DemoteF64: 0xb6, f64PromoteF32: 0xbb,
  i32ReinterpretF32: 0xbc, f32ReinterpretI32: 0xbe,
  simd: 0xfd,
} as const;

const T = { i32: 0x7f, f32: 0x7d, f64: 0x7c, v128: 0x7b, void: 0x40 } as const;

/** SIMD opcodes of the vector epilogue beyond the shared table of wasm-emit.ts (SIMD proposal opcode table). */
const vop = {
  i8x16Shuffle: [0x0d], i64x2Splat: [0x12], f32x4Splat: [0x13], f64x2ReplaceLane: [0x22],
  i16x8Splat: [0x10], i16x8Add: [0x8e, 0x01], i16x8MaxS: [0x98, 0x01], i32x4ExtendLowI16x8S: [0xa7, 0x01], i32x4ExtendHighI16x8S: [0xa8, 0x01],
  f32x4Trunc: [0x69], i32x4MinS: [0xb6, 0x01], i32x4Shl: [0xab, 0x01], f32x4Add: [0xe4, 0x01], f32x4Mul: [0xe6, 0x01],
  f64x2Eq: [0x47], f64x2Ne: [0x48], f64x2Ge: [0x4c],
  v128And: [0x4e], v128Or: [0x50], v128AnyTrue: [0x53],
  f32x4DemoteF64x2Zero: [0x5e], f64x2PromoteLowF32x4: [0x5f],
  f64x2Abs: [0xec, 0x01], f64x2Sub: [0xf1, 0x01],
} as const;

// Parameters of `gemm(m, np, K, nseg, segLen, av, ae, bv, be, sa, sb, out, fine, fb, flag, narrow)` (byte addresses):
//   av/ae   A values (f64, or f32 when narrow) and exponents (i32), row-major (m, K)
//   bv/be   B panels of 4 columns over all of K: values panel[p][kk][c] (f64, or f32 when narrow), exponents (i32)
//   nseg    ⌈K / segLen⌉ segments [s·segLen, min((s + 1)·segLen, K)): the last one may be a shorter chunk
//   sa      f64 per (segment, row of A); sb f64 per (segment, 4p + c): the segment's scales (read when fine ≠ 0)
//   out     f32 per (i, 4p + c), row stride 4·np: the float32 accumulator after the last segment
//   fb      fractionBits (0 to 52); flag: i32 set to 1 when a sum needs the JS reference (≥ 2^31 or saturating)
//   narrow  ≠ 0: the chunk sums in float32 lanes, which the caller has shown exact ({@link narrowFacts})
//   ac/at   −1, or A as one code per byte (m, K) and its format's code tables (CODE_TABLE layout): decoded into av/ae first
//   bc/bt   −1, or B as one code per byte (n, K) and its code tables: decoded and packed into the bv/be panels first
//   n       B's rows (the columns of the output; panels pad them to np·4)
//           (a NaN/Inf code, exponent NON_FINITE, sets the flag to 1 before any sum)
const P = {
  m: 0, np: 1, K: 2, nseg: 3, segLen: 4, av: 5, ae: 6, bv: 7, be: 8, sa: 9, sb: 10, out: 11, fine: 12, fb: 13, flag: 14, narrow: 15,
  ac: 16, at: 17, bc: 18, bt: 19, n: 20,
} as const;
const NPARAMS = 21;
// Locals by type, numbered after the parameters in declaration order.
const localNames = {
  i32: ['i', 'p', 's', 'kk', 'pa', 'pb', 'k0', 'len', 'q', 'x', 'cd', 'ex', 'nf', 'src', 'dst', 'sbp'],
  v128: ['mx', 't', 'inv01', 'inv23', 's01', 's23', 'a', 'acc01', 'acc23', 'c', 'sab', 'pv', 'tv', 'rv', 'bpv', 'bad', 'keep', 'lim31', 'lim128', 'mx8', 'mxHi', 'tHi', 'sLo', 'sHi', 'acc45', 'acc67', 'saV'],
  f64: ['pr', 'accd', 'tt', 'bp', 'err', 'r'],
  f32: ['r32', 'o32'],
} as const;
type LocalName = (typeof localNames)[keyof typeof localNames][number];
const L = Object.fromEntries(
  [...localNames.i32, ...localNames.v128, ...localNames.f64, ...localNames.f32].map((name, x) => [name, NPARAMS + x]),
) as Record<LocalName, number>;

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
 * Columns 2h, 2h + 1 of the 4-column panel `p` (h = 0, 1): their chunk sums (`s01`/`s23`, exponent maxima
 * `mx`) rounded to e8m13 and promoted into the f64x2 accumulator `acc` (float32 values), two lanes at a time.
 *
 * e8m13 rounding (roundE8M of gemm-hopper.ts): c = sum·u with u = 2^(maxE − fb) is exact (|sum| < 2^31,
 * a power-of-two factor), and truncating it to fb + 1 significant bits toward zero is clearing the
 * double's low 52 − fb mantissa bits (`keep`); a sum ≥ 2^31 or a |c| ≥ 2^128 (which saturates) sets `bad`
 * (`check`; narrow operands never reach either).
 * Promotion: fl(acc + c) as a double sum rounded to float32 (one rounding of an exact sum); with fine
 * scales fma32(fl(sa·sb), c, acc): the product pr = fl(sa·sb)·c is exact, t = pr + acc, and fl(t) is
 * the answer unless the TwoSum error is nonzero and fl(t) ≠ t, where the scalar routine decides.
 */
function pairEpilogue(h: 0 | 1, acc: number, check: boolean, sbOffset = 0): number[] {
  const sum = h === 0 ? L.s01 : L.s23;
  const extend = h === 0 ? simd.i64x2ExtendLowI32x4S : simd.i64x2ExtendHighI32x4S;
  const fixLane = (lane: number): number[] => [
    ...get(L.pv), ...v(simd.f64x2ExtractLane, [lane]), ...set(L.pr),
    ...get(acc), ...v(simd.f64x2ExtractLane, [lane]), ...set(L.accd),
    ...get(acc), ...fma32Scalar(), op.f64PromoteF32, ...v(vop.f64x2ReplaceLane, [lane]), ...set(acc),
  ];
  const fine = [
    // sab = fl(sa·sb) per lane; pr = sab·c (exact); t = pr + acc; r = fl(t)
    ...get(L.saV), ...get(L.sbp), ...v(simd.v128Load, [0x03, ...uleb(sbOffset + 16 * h)]), ...v(simd.f64x2Mul), ...roundLanes(), ...set(L.sab),
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
    // bad |= |sum| ≥ 2^31 | |c| ≥ 2^128 (narrow operands: neither can happen, narrowOk)
    ...(check ? [
      ...get(L.bad), ...get(sum), ...v(vop.f64x2Abs), ...get(L.lim31), ...v(vop.f64x2Ge), ...v(vop.v128Or),
      ...get(L.c), ...v(vop.f64x2Abs), ...get(L.lim128), ...v(vop.f64x2Ge), ...v(vop.v128Or), ...set(L.bad),
    ] : []),
    ...ifElse(T.void, get(P.fine), fine, [...get(acc), ...get(L.c), ...v(simd.f64x2Add), ...roundLanes(), ...set(acc)]),
  ];
}

/**
 * Byte layout of a format's code tables in the kernel's memory ({@link CODE_TABLE_BYTES} per format): each code's value
 * as f64 and as f32, and its MMA-Sim input exponent as i32 ({@link NON_FINITE} for a NaN/Inf code).
 */
const CODE_TABLE = { f64: 0, f32: 2048, exps: 3072 } as const;
const CODE_TABLE_BYTES = 4096;

/**
 * The prologue that decodes coded operands in the kernel: A's codes (param ac ≠ −1) into the row-major av/ae arrays,
 * B's codes (bc ≠ −1) into the 4- (wide) or 8-column (narrow) panels of bv/be with padding columns 0 and −126, each
 * code through its format's tables (values f32 in narrow panels, f64 in wide ones; exponents i16 / i32); `nf` becomes
 * nonzero when a code's exponent is NON_FINITE. The same element values and exponents the JS decoders write.
 */
function decodeCodes(narrow: boolean): number[] {
  const vBytes = narrow ? 4 : 8;
  const eBytes = narrow ? 2 : 4;
  const width = narrow ? 8 : 4;
  const add = (local: number, c: number): number[] => [...get(local), ...i32c(c), op.i32Add, ...set(local)];
  const storeValue = narrow ? [op.f32Store, 0x02, 0x00] : [op.f64Store, 0x03, 0x00];
  const storeExp = narrow ? [op.i32Store16, 0x01, 0x00] : [op.i32Store, 0x02, 0x00];
  // One element: code cd at `src`; its value and exponent (tables at `tab`) stored at the walkers `pa` (values) and
  // `pb` (exponents), which then step by `step` elements.
  const element = (tab: number, step: number): number[] => [
    ...get(L.src), op.i32Load8U, 0x00, 0x00, ...set(L.cd),
    ...get(tab), ...get(L.cd), ...i32c(2), 0x74 /* i32.shl */, op.i32Add, ...set(L.x), // tab + 4·cd: the f32 and exponent entries
    ...get(L.x), op.i32Load, 0x02, ...uleb(CODE_TABLE.exps), ...set(L.ex),
    ...get(L.nf), ...get(L.ex), ...i32c(NON_FINITE), op.i32Eq, op.i32Or, ...set(L.nf),
    ...get(L.pa),
    ...(narrow
      ? [...get(L.x), op.f32Load, 0x02, ...uleb(CODE_TABLE.f32)]
      : [...get(tab), ...get(L.cd), ...i32c(3), 0x74 /* i32.shl */, op.i32Add, op.f64Load, 0x03, ...uleb(CODE_TABLE.f64)]),
    ...storeValue,
    ...get(L.pb), ...get(L.ex), ...storeExp,
    ...add(L.src, 1), ...add(L.pa, step * vBytes), ...add(L.pb, step * eBytes),
  ];
  const decodeA = [
    ...get(P.ac), ...set(L.src), ...get(P.av), ...set(L.pa), ...get(P.ae), ...set(L.pb),
    ...forLoop(L.kk, i32c(0), [...get(P.m), ...get(P.K), op.i32Mul], element(P.at, 1)),
  ];
  // Column j is lane c = j mod width of its panel: element (j − c)·K + kk·width + c, walked by kk; columns j ≥ n are padding.
  const columnStart = [
    ...get(L.dst), ...get(L.dst), ...i32c(width - 1), op.i32And, op.i32Sub, ...get(P.K), op.i32Mul, ...get(L.dst), ...i32c(width - 1), op.i32And, op.i32Add, ...set(L.x),
    ...get(P.bv), ...get(L.x), ...i32c(vBytes), op.i32Mul, op.i32Add, ...set(L.pa),
    ...get(P.be), ...get(L.x), ...i32c(eBytes), op.i32Mul, op.i32Add, ...set(L.pb),
  ];
  const padding = [
    ...get(L.pa), ...(narrow ? [...i32c(0), op.f32ReinterpretI32] : f64c(0)), ...storeValue,
    ...get(L.pb), ...i32c(-126), ...storeExp,
    ...add(L.pa, width * vBytes), ...add(L.pb, width * eBytes),
  ];
  const decodeB = [
    ...get(P.bc), ...set(L.src),
    ...forLoop(L.dst, i32c(0), get(P.n), [...columnStart, ...forLoop(L.kk, i32c(0), get(P.K), element(P.bt, width))]),
    ...forLoop(L.dst, get(P.n), [...get(P.np), ...i32c(4), op.i32Mul], [...columnStart, ...forLoop(L.kk, i32c(0), get(P.K), padding)]),
  ];
  return [
    ...ifElse(T.void, [...get(P.ac), ...i32c(-1), op.i32Eq, op.i32Eqz], decodeA),
    ...ifElse(T.void, [...get(P.bc), ...i32c(-1), op.i32Eq, op.i32Eqz], decodeB),
  ];
}

function gemmBody(): number[] {
  // Element offset of (row, k0) in a (rows, K) layout: (row·K + k0)
  const at = (row: number): number[] => [...get(row), ...get(P.K), op.i32Mul, ...get(L.k0), op.i32Add];
  const { maxLoop, sumLoop } = hopperChunkLoops({ kk: L.kk, len: L.len, pa: L.pa, pb: L.pb, mx: L.mx, a: L.a, s01: L.s01, s23: L.s23, inv01: L.inv01, inv23: L.inv23 });
  const v128Zero = simdOp(simd.v128Const, new Array(16).fill(0));
  const advance = (local: number, bytes: number): number[] => [...get(local), ...i32c(bytes), op.i32Add, ...set(local)];
  const segmentRange = [
    ...get(L.s), ...get(P.segLen), op.i32Mul, ...set(L.k0),
    // len = min(segLen, K − k0): the last segment may be a shorter (ragged) chunk
    ...get(P.segLen), ...get(P.K), ...get(L.k0), op.i32Sub, ...get(P.segLen), ...get(P.K), ...get(L.k0), op.i32Sub, op.i32LtS, op.select, ...set(L.len),
  ];
  // The segment's A scale (splat) and the address of its B scales for panel p: sb + ((s·np + p)·4)·8, the pairs at +16·h.
  const loadSa = ifElse(T.void, get(P.fine), [
    ...get(P.sa), ...get(L.s), ...get(P.m), op.i32Mul, ...get(L.i), op.i32Add, ...i32c(8), op.i32Mul, op.i32Add, op.f64Load, 0x03, 0x00, ...v(simd.f64x2Splat), ...set(L.saV),
    ...get(P.sb), ...get(L.s), ...get(P.np), op.i32Mul, ...get(L.p), op.i32Add, ...i32c(32), op.i32Mul, op.i32Add, ...set(L.sbp),
  ]);
  const perSegment = [
    ...segmentRange,
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
    ...loadSa,
    ...pairEpilogue(0, L.acc01, true), ...pairEpilogue(1, L.acc23, true),
  ];
  // Narrow operands (narrowOk): panels of 8 columns, exponents as int16 (i16x8: one max per 8 outputs) and values as
  // float32 (two f32x4 per K step); the same chunk sums, exact in float32 lanes, with inv = 2^(fb − maxE) as float32
  // bits (fb + 127 − maxE) << 23, the exponent field clamped to [1, 254] (only padding columns reach the clamp);
  // each 4-column half then goes through the epilogue as 4-column panel p = 2q + half.
  const inv32 = (mx: number, t: number): number[] => [
    ...get(P.fb), ...i32c(127), op.i32Add, ...v(simd.i32x4Splat), ...get(mx), ...v(simd.i32x4Sub),
    ...i32c(1), ...v(simd.i32x4Splat), ...v(simd.i32x4MaxS), ...i32c(254), ...v(simd.i32x4Splat), ...v(vop.i32x4MinS),
    ...i32c(23), ...v(vop.i32x4Shl), ...set(t),
  ];
  const widen = (s4: number): number[] => [
    ...get(s4), ...v(vop.f64x2PromoteLowF32x4), ...set(L.s01),
    ...get(s4), ...get(s4), ...v(vop.i8x16Shuffle, [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15]), ...v(vop.f64x2PromoteLowF32x4), ...set(L.s23),
  ];
  const truncAdd = (sum: number, offset: number[], t: number): number[] => [
    ...get(sum), ...get(L.a), ...get(L.pb), ...v(simd.v128Load, offset), ...v(vop.f32x4Mul), ...get(t), ...v(vop.f32x4Mul), ...v(vop.f32x4Trunc), ...v(vop.f32x4Add), ...set(sum),
  ];
  // for (kk = 0; kk < len; kk++) step, unrolled by two (memarg offsets address the second step) with a one-step
  // tail; the sums are exact integers and the maxima order-free, so the order changes nothing.
  const pairedLoop = (step: (u: 0 | 1) => number[], aBytes: number, bBytes: number): number[] => [
    ...i32c(0), ...set(L.kk),
    op.block, T.void, op.loop, T.void,
    ...get(L.kk), ...i32c(2), op.i32Add, ...get(L.len), op.i32GtU, op.brIf, 1,
    ...step(0), ...step(1),
    ...advance(L.pa, 2 * aBytes), ...advance(L.pb, 2 * bBytes), ...advance(L.kk, 2),
    op.br, 0, op.end, op.end,
    ...ifElse(T.void, [...get(L.kk), ...get(L.len), op.i32LtU], step(0)),
  ];
  const narrowSegment = [
    ...segmentRange,
    ...i32c(-126), ...v(vop.i16x8Splat), ...set(L.mx8),
    ...get(P.ae), ...at(L.i), ...i32c(2), op.i32Mul, op.i32Add, ...set(L.pa),
    ...get(P.be), ...at(L.q), ...i32c(16), op.i32Mul, op.i32Add, ...set(L.pb),
    ...pairedLoop((u) => [
      ...get(L.mx8), ...get(L.pa), op.i32Load16S, 0x01, ...uleb(2 * u), ...v(vop.i16x8Splat), ...get(L.pb), ...v(simd.v128Load, [0x00, ...uleb(16 * u)]),
      ...v(vop.i16x8Add), ...v(vop.i16x8MaxS), ...set(L.mx8),
    ], 2, 16),
    ...get(L.mx8), ...v(vop.i32x4ExtendLowI16x8S), ...set(L.mx), ...get(L.mx8), ...v(vop.i32x4ExtendHighI16x8S), ...set(L.mxHi),
    ...inv32(L.mx, L.t), ...inv32(L.mxHi, L.tHi),
    ...v128Zero, ...set(L.sLo), ...v128Zero, ...set(L.sHi),
    ...get(P.av), ...at(L.i), ...i32c(4), op.i32Mul, op.i32Add, ...set(L.pa),
    ...get(P.bv), ...at(L.q), ...i32c(32), op.i32Mul, op.i32Add, ...set(L.pb),
    ...pairedLoop((u) => [
      ...get(L.pa), op.f32Load, 0x02, ...uleb(4 * u), ...v(vop.f32x4Splat), ...set(L.a),
      ...truncAdd(L.sLo, [0x00, ...uleb(32 * u)], L.t), ...truncAdd(L.sHi, [0x00, ...uleb(32 * u + 16)], L.tHi),
    ], 4, 32),
    ...get(L.q), ...i32c(2), op.i32Mul, ...set(L.p),
    ...loadSa,
    ...widen(L.sLo),
    ...pairEpilogue(0, L.acc01, false), ...pairEpilogue(1, L.acc23, false),
    ...get(L.p), ...i32c(1), op.i32Add, ...set(L.p), ...get(L.mxHi), ...set(L.mx), ...widen(L.sHi),
    ...pairEpilogue(0, L.acc45, false, 32), ...pairEpilogue(1, L.acc67, false, 32),
  ];
  const outAddr = (c: number): number[] => [...get(P.out), ...get(L.i), ...get(P.np), op.i32Mul, ...get(L.p), op.i32Add, ...i32c(4), op.i32Mul, ...i32c(c), op.i32Add, ...i32c(4), op.i32Mul, op.i32Add];
  const store4 = (acc01: number, acc23: number): number[] =>
    [0, 1, 2, 3].flatMap((c) => [...outAddr(c), ...get(c < 2 ? acc01 : acc23), ...v(simd.f64x2ExtractLane, [c % 2]), op.f32DemoteF64, op.f32Store, 0x02, 0x00]);
  const perPanel = [
    ...v128Zero, ...set(L.acc01), ...v128Zero, ...set(L.acc23),
    ...forLoop(L.s, i32c(0), get(P.nseg), perSegment),
    ...store4(L.acc01, L.acc23),
  ];
  const perNarrowPanel = [
    ...v128Zero, ...set(L.acc01), ...v128Zero, ...set(L.acc23), ...v128Zero, ...set(L.acc45), ...v128Zero, ...set(L.acc67),
    ...forLoop(L.s, i32c(0), get(P.nseg), narrowSegment),
    ...get(L.q), ...i32c(2), op.i32Mul, ...set(L.p), ...store4(L.acc01, L.acc23),
    ...get(L.p), ...i32c(1), op.i32Add, ...set(L.p), ...store4(L.acc45, L.acc67),
  ];
  // narrow: np is even (4-column panels of the 8-column ones), q < np / 2
  const narrowLoops = forLoop(L.i, i32c(0), get(P.m), forLoop(L.q, i32c(0), [...get(P.np), ...i32c(1), op.i32ShrU], perNarrowPanel));
  const wideLoops = forLoop(L.i, i32c(0), get(P.m), forLoop(L.p, i32c(0), get(P.np), perPanel));
  const setup = [
    // keep = −1 << (52 − fb) in both i64 lanes; the limits 2^31 and 2^128; bad = 0
    op.i64Const, 0x7f, ...i32c(52), ...get(P.fb), op.i32Sub, op.i64ExtendI32U, op.i64Shl, ...v(vop.i64x2Splat), ...set(L.keep),
    ...f64c(2 ** 31), ...v(simd.f64x2Splat), ...set(L.lim31),
    ...f64c(2 ** 128), ...v(simd.f64x2Splat), ...set(L.lim128),
    ...v128Zero, ...set(L.bad),
  ];
  const finish = ifElse(T.void, [...get(L.bad), ...v(vop.v128AnyTrue)], [...get(P.flag), ...i32c(1), op.i32Store, 0x02, 0x00]);
  const decode = ifElse(T.void, get(P.narrow), decodeCodes(true), decodeCodes(false));
  const code = [
    ...i32c(0), ...set(L.nf), ...decode,
    ...ifElse(T.void, get(L.nf), [...get(P.flag), ...i32c(1), op.i32Store, 0x02, 0x00],
      [...setup, ...ifElse(T.void, get(P.narrow), narrowLoops, wideLoops), ...finish]),
    op.end,
  ];
  const locals = [4, ...uleb(localNames.i32.length), T.i32, ...uleb(localNames.v128.length), T.v128, ...uleb(localNames.f64.length), T.f64, ...uleb(localNames.f32.length), T.f32];
  const body = [...locals, ...code];
  return [...uleb(body.length), ...body];
}

const hopperGemmWasm = lazyOneFunction<(...args: number[]) => void>(() => oneFunctionModule('gemm', NPARAMS, gemmBody()), 'gemm');

/** Whether the one-call WebAssembly hopper-fp8 GEMM is in use (for tests and reports). @internal */
export function hopperGemmKernelIsSimd(): boolean {
  return hopperGemmWasm() !== null;
}

/** x rounded up to a multiple of 16 (byte addresses, far below 2^31). */
function align(x: number): number {
  return (x + 15) & ~15;
}

/** Code-table slots at the start of the kernel's memory (one page): a format's tables are written once, when first used. */
const TABLE_SLOTS = 16;
const DATA_BASE = TABLE_SLOTS * CODE_TABLE_BYTES;
const tableSlots = new Map<FloatFormat, number>();

/** The byte address of `fmt`'s code tables in the kernel's memory (written on first use), or null when every slot is taken. */
function codeTableOf(fmt: FloatFormat, memory: WasmMemory): number | null {
  let at = tableSlots.get(fmt);
  if (at !== undefined) return at;
  if (tableSlots.size === TABLE_SLOTS || fmt.kind !== 'float' || fmt.bits > 8) return null;
  at = tableSlots.size * CODE_TABLE_BYTES;
  const { f64, f32, i32 } = viewsOf(memory, DATA_BASE);
  const values = decodeTable(fmt);
  const exps = codeExponents(fmt);
  f64.set(values, (at + CODE_TABLE.f64) / 8);
  f32.set(values, (at + CODE_TABLE.f32) / 4);
  i32.set(exps, (at + CODE_TABLE.exps) / 4);
  tableSlots.set(fmt, at);
  return at;
}

/** Sizes, scales and caching of one {@link hopperGemm} call. @internal */
export interface HopperGemmOptions {
  /** Rows of A (and of the output). */
  readonly m: number;
  /** Rows of B (the output's columns). */
  readonly n: number;
  /** The reduction length. */
  readonly K: number;
  /** The chunk: every K-segment is one chunk [s·segLen, min((s + 1)·segLen, K)), the last one possibly shorter. */
  readonly segLen: number;
  /** Fractional bits of the e8m13 rounding, 0 to 52 (else the call returns false). */
  readonly fractionBits: number;
  /**
   * Fine-grained scales of each segment, `a` (nseg·m: [s·m + i]) and `b` (nseg·n: [s·n + j]): promotion by
   * fma32(fl(sa·sb), c, acc). Null: no fine scales, promotion by fl(acc + c).
   */
  readonly segmentScales: { readonly a: Float64Array; readonly b: Float64Array } | null;
  /** A decoded B is an immutable cached weight decoding: its packed panels are kept with it. @defaultValue false */
  readonly cacheB?: boolean;
  /** Sum in float32 lanes where narrowOk clears the operands (false: never, for tests comparing both). @defaultValue true */
  readonly allowNarrow?: boolean;
}

/**
 * The float32 accumulator of every output (i, j) of a hopper-fp8 GEMM whose K-segments are all one
 * chunk: [s·segLen, min((s + 1)·segLen, K)) for s < nseg = ⌈K / segLen⌉ (the last one may be shorter),
 * written into `total[i·n + j]`: per segment the chunk sum from
 * zero, rounded to e8m13, promoted with `fma32(fl(sa[s][i]·sb[s][j]), c, acc)` with segment scales, else
 * `fl(acc + c)` ({@link HopperGemmOptions}: sizes, scales, caching). Returns
 * false (total unspecified) where WebAssembly SIMD is unavailable or a sum needs the JS reference.
 * Either operand may be given as codes ({@link HopperOperand}), decoded in the kernel: no JavaScript pass over
 * the elements; a coded operand with a NaN/Inf code returns false. Operands that narrowOk (hopper-gemm-operands.ts)
 * clears (FP8/FP6/FP4 codes) sum their chunks in float32 lanes, twice as wide.
 * @internal
 */
export function hopperGemm(total: Float32Array, a: HopperOperand, b: HopperOperand, options: HopperGemmOptions): boolean {
  const { m, n, K, segLen, fractionBits, segmentScales, cacheB = false, allowNarrow = true } = options;
  const fine = segmentScales !== null;
  const w = hopperGemmWasm();
  if (w === null || !(fractionBits >= 0 && fractionBits <= 52)) return false; // the e8m13 mask needs 0 ≤ fb ≤ 52
  const at = a.format !== undefined ? codeTableOf(a.format, w.memory) : -1;
  const bt = b.format !== undefined ? codeTableOf(b.format, w.memory) : -1;
  if (at === null || bt === null) return false;
  const nseg = Math.ceil(K / segLen);
  const mk = m * K;
  const nk = n * K;
  const cache = cacheB && b.values !== undefined ? cachedB(b.values, b.exps, n, K) : null;
  const factsA = allowNarrow ? factsOf(a, mk) : null;
  const factsB = factsA === null ? null : cache !== null ? cache.facts : factsOf(b, nk);
  const narrow = factsA !== null && factsB !== null && narrowOkMemo(factsA, factsB, fractionBits, segLen);
  // 4-column panels (the narrow kernel's 8-column panels count as two)
  const np = narrow ? 2 * Math.ceil(n / 8) : Math.ceil(n / 4);
  const av = DATA_BASE;
  const ae = align(av + mk * 8);
  const bv = align(ae + mk * 4);
  const be = align(bv + np * K * 32);
  const so = align(be + np * K * 16);
  const sbo = align(so + nseg * m * 8);
  const out = align(sbo + nseg * np * 4 * 8);
  const flag = align(out + m * np * 16);
  const ac = align(flag + 16);
  const bc = align(ac + (a.codes !== undefined ? mk : 0));
  const need = bc + (b.codes !== undefined ? nk : 0);
  const { f64, i32, f32, i16, u8 } = viewsOf(w.memory, need);
  const values = narrow ? f32 : f64;
  const exps = narrow ? i16 : i32;
  if (a.codes !== undefined) copyCodes(u8, ac, a.codes, mk);
  else {
    // A row-major as it comes: element conversions by TypedArray.set (float32 → f64 and int16 → i32 are exact).
    values.set(a.values.length === mk ? a.values : a.values.subarray(0, mk), av / values.BYTES_PER_ELEMENT);
    exps.set(a.exps.length === mk ? a.exps : a.exps.subarray(0, mk), ae / exps.BYTES_PER_ELEMENT);
  }
  const vo = bv / values.BYTES_PER_ELEMENT;
  const eo = be / exps.BYTES_PER_ELEMENT;
  if (b.codes !== undefined) copyCodes(u8, bc, b.codes, nk);
  else if (cache !== null) {
    const panels = narrow ? (cache.narrow ??= packPanels(b.values, b.exps, n, K, 8)) : (cache.wide ??= packPanels(b.values, b.exps, n, K, 4));
    values.set(panels.values, vo);
    exps.set(panels.exps, eo);
  } else packInto(b.values, b.exps, n, K, narrow ? 8 : 4, { values, vo, exps, eo }); // a per-call operand: packed straight into the kernel's memory
  if (fine) {
    const { a: sa, b: sb } = segmentScales;
    f64.set(sa.subarray(0, nseg * m), so / 8);
    for (let s = 0; s < nseg; s++) {
      const dst = sbo / 8 + s * np * 4;
      for (let j = 0; j < np * 4; j++) f64[dst + j] = j < n ? (sb[s * n + j] as number) : 1;
    }
  }
  i32[flag / 4] = 0;
  w.fn(
    m, np, K, nseg, segLen, av, ae, bv, be, so, sbo, out, fine ? 1 : 0, fractionBits, flag, narrow ? 1 : 0,
    a.codes !== undefined ? ac : -1, at, b.codes !== undefined ? bc : -1, bt, n,
  );
  if (i32[flag / 4] !== 0) return false;
  const stride = np * 4;
  if (m * n <= SMALL_COPY) {
    // a few outputs (decode rows): element copies, no subarray views to allocate
    for (let i = 0; i < m; i++) for (let j = 0, src = out / 4 + i * stride; j < n; j++) total[i * n + j] = f32[src + j] as number;
  } else if (stride === n) total.set(f32.subarray(out / 4, out / 4 + m * n));
  else for (let i = 0; i < m; i++) total.set(f32.subarray(out / 4 + i * stride, out / 4 + i * stride + n), i * n);
  return true;
}

/** The first `len` codes into the kernel's bytes at `at`: a loop for up to 32 (a decode row), else one TypedArray.set. */
function copyCodes(u8: Uint8Array, at: number, codes: CodeArray, len: number): void {
  if (len <= 32) for (let x = 0; x < len; x++) u8[at + x] = codes[x] as number;
  else u8.set(codes.length === len ? codes : codes.subarray(0, len), at);
}

/** Outputs up to which {@link hopperGemm} copies them one by one (a speed choice only). */
const SMALL_COPY = 256;

/** Typed views of the kernel's memory, rebuilt only when it grows (a grown memory detaches the old buffer). */
let views: { buffer: ArrayBuffer; f64: Float64Array; i32: Int32Array; f32: Float32Array; i16: Int16Array; u8: Uint8Array } | null = null;

function viewsOf(memory: WasmMemory, need: number): NonNullable<typeof views> {
  const have = memory.buffer.byteLength;
  if (need > have) memory.grow(Math.ceil((need - have) / 65536));
  const buffer = memory.buffer;
  if (views === null || views.buffer !== buffer) {
    views = { buffer, f64: new Float64Array(buffer), i32: new Int32Array(buffer), f32: new Float32Array(buffer), i16: new Int16Array(buffer), u8: new Uint8Array(buffer) };
  }
  return views;
}

