// The `fp32` and `int32` GEMM models with their scales in one WebAssembly call: every K-segment's partial sum, the
// fine-grained scale step fma32(fl(s_a·s_b), partial, acc) and the epilogue, four outputs per SIMD instruction. Not a
// semantics of its own: each step is gemm-reference.ts's, operation by operation (proofs beside the emitters).
//
// Why this is exact:
// - fp32 partials: f32x4.mul/add are IEEE binary32 operations with round-to-nearest-even and subnormals, i.e.
//   fl(acc + fl(a·b)) in increasing k from +0, as referenceDot's `fp32` case (the fp32 kernel's argument).
// - int32 partials: i32x4.mul/add wrap modulo 2^32. The reference computes `(acc + a·b) | 0` in doubles; for integer
//   operands with |a|, |b| < 2^26 (checked by the caller) a·b and acc + a·b are exact in double (< 2^53), so ToInt32
//   gives (acc + a·b) mod 2^32, the wrapping i32 sum. f32x4.convert_i32x4_s rounds to nearest even, as `fround`.
// - the fine-scale step is the fused multiply-add of scales.ts fma32, computed by rounding to odd (below);
// - the epilogue multiplies are f32x4.mul: fl(s·v) of two float32 values, as `fround(s * v)` (the double product of
//   two 24-bit significands is exact, so rounding it once to float32 is the binary32 product).

import { lazyOneFunction, oneFunctionModule, uleb } from '../wasm.js';
import { get, i32c, set, simdOp } from '../wasm-emit.js';

/** Core opcodes (WebAssembly core spec §5.4). */
const op = {
  block: 0x02, loop: 0x03, if: 0x04, end: 0x0b, br: 0x0c, brIf: 0x0d,
  i32Load: 0x28, f32Load: 0x2a, i32GeU: 0x4f, i32Add: 0x6a, i32Mul: 0x6c, i32And: 0x71,
} as const;

/** SIMD sub-opcodes used here (WebAssembly SIMD opcode table), LEB128-encoded. */
const v = {
  load: [0x00], store: [0x0b], const: [0x0c], shuffle: [0x0d],
  i32x4Splat: [0x11], f32x4Splat: [0x13],
  f64x2Eq: [0x47], f64x2Ne: [0x48],
  and: [0x4e], or: [0x50], xor: [0x51],
  f32x4DemoteF64x2Zero: [0x5e], f64x2PromoteLowF32x4: [0x5f],
  i32x4Add: [0xae, 0x01], i32x4Mul: [0xb5, 0x01],
  i64x2ShrS: [0xcc, 0x01], i64x2Add: [0xce, 0x01], i64x2Eq: [0xd6, 0x01],
  f32x4Add: [0xe4, 0x01], f32x4Mul: [0xe6, 0x01],
  f64x2Add: [0xf0, 0x01], f64x2Sub: [0xf1, 0x01], f64x2Mul: [0xf2, 0x01],
  f32x4ConvertI32x4S: [0xfa, 0x01],
} as const;

/** The accumulator models this kernel computes. @internal */
export type ScaledGemmModel = 'fp32' | 'int32';

// Parameters of `gemm(m, np, K, nseg, fine, flags, bounds, av, bp, sa, sb, ra, rb, out, g)` (byte addresses):
//   np      panels of 8 columns (n rounded up to a multiple of 8; padding columns are zeros)
//   bounds  i32 (nseg + 1): the K-segment boundaries, ascending from 0 to K
//   av      A values, row-major (m, K): f32 (fp32) or i32 (int32)
//   bp      B panels over all of K: panel[p][kk][c] = B(8p + c, kk), f32 or i32
//   sa/sb   f32 per (segment, row of A) and (segment, column 0..8np): the segment's scales (read when fine ≠ 0)
//   ra/rb   f32 per row of A / column of B: the epilogue's per-row scales (flags bit 0: A's, bit 1: B's)
//   g       address of the f32 global scale (flags bit 2: multiply by it)
//   out     f32 (m, 8np): the outputs
const P = { m: 0, np: 1, K: 2, nseg: 3, fine: 4, flags: 5, bounds: 6, av: 7, bp: 8, sa: 9, sb: 10, ra: 11, rb: 12, out: 13, g: 14 } as const;
// Locals: i32 (15..23), v128 (24..).
const L = {
  i: 15, p: 16, s: 17, k0: 18, k1: 19, pa: 20, pb: 21, col: 22, n8: 23,
  part0: 24, part1: 25, acc0: 26, acc1: 27, a: 28, sc: 29,
  x: 30, c: 31, t: 32, bv: 33, e: 34, r0: 35, r1: 36,
} as const;
const I32_LOCALS = 9;
const V128_LOCALS = 13;

const T = { void: 0x40 } as const;
const load = (offset: number): number[] => simdOp(v.load, [0x04, ...uleb(offset)]);
const store = (offset: number): number[] => simdOp(v.store, [0x04, ...uleb(offset)]);
const zero128 = (): number[] => simdOp(v.const, new Array<number>(16).fill(0));
/** v128.const i64x2(1, 1) (little-endian lanes). */
const i64x2One = (): number[] => simdOp(v.const, [1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
/** i8x16.shuffle with the 16 byte indices (0..15 first operand, 16..31 second). */
const shuffle = (lanes: number[]): number[] => simdOp(v.shuffle, lanes);
const HIGH_HALF = [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15];
const LOWS_OF_BOTH = [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23];
const addTo = (local: number, bytes: number): number[] => [...get(local), ...i32c(bytes), op.i32Add, ...set(local)];
const ifThen = (cond: number[], then: number[]): number[] => [...cond, op.if, T.void, ...then, op.end];
/** `while (counter < limit) { body }` (unsigned compare; the body advances the counter). */
const whileLess = (counter: number, limit: number, body: number[]): number[] => [
  op.block, T.void, op.loop, T.void,
  ...get(counter), ...get(limit), op.i32GeU, op.brIf, 1,
  ...body,
  op.br, 0, op.end, op.end,
];

/** Lanes 0–1 (`high` false) or 2–3 of the f32x4 local `local`, promoted to f64x2 (exact). */
const promoted = (local: number, high: boolean): number[] => [
  ...get(local), ...(high ? [...get(local), ...shuffle(HIGH_HALF)] : []), ...simdOp(v.f64x2PromoteLowF32x4),
];

/**
 * fma32(sc, part, acc) of scales.ts for two lanes (`high`: lanes 2–3) of the f32x4 locals, leaving the two
 * float32 results in lanes 0–1 of an f32x4 on the stack.
 *
 * Proof. For float32 s, q, c: p = s·q in double is exact (24 + 24 ≤ 53 bits; |p| ≥ 2^-298 stays normal, and
 * |p| < 2^256 cannot overflow). t = RN64(p + c) and TwoSum's e = (p − b) + (c − (t − b)), b = t − c, is the exact
 * error p + c − t when t is finite (Knuth; no overflow: |p + c| < 2^257). Rounding to odd: if e ≠ 0 and t's last
 * significand bit is even, step t one ulp towards e (bits + 1 when t and e have the same sign, − 1 otherwise);
 * the result is RO64(p + c) (the exact sum lies strictly between t and that neighbour, and exactly one of the
 * two is odd; t = 0 only when p + c = 0 exactly, where e = 0). Boldo and Melquiond (IEEE TC 57(4), 2008, Thm. 1):
 * with 53 ≥ 24 + 2 bits, RN32(RO64(x)) = RN32(x), overflow and float32 subnormals included (the double keeps
 * 53 bits there). f32x4.demote_f64x2_zero rounds to nearest even, so each lane is RN32(s·q + c) = fma32(s, q, c),
 * whose scalar definition is that same correctly rounded value. A non-finite t (an Inf or NaN input) is
 * demoted as it is, as fma32 returns fround(t).
 */
function fmaHalf(sc: number, part: number, acc: number, high: boolean): number[] {
  return [
    // x = p = s·q, c = acc (f64x2), t = p + c, bv = t − c, e = (p − bv) + (c − (t − bv))
    ...promoted(sc, high), ...promoted(part, high), ...simdOp(v.f64x2Mul), ...set(L.x),
    ...promoted(acc, high), ...set(L.c),
    ...get(L.x), ...get(L.c), ...simdOp(v.f64x2Add), ...set(L.t),
    ...get(L.t), ...get(L.c), ...simdOp(v.f64x2Sub), ...set(L.bv),
    ...get(L.x), ...get(L.bv), ...simdOp(v.f64x2Sub),
    ...get(L.c), ...get(L.t), ...get(L.bv), ...simdOp(v.f64x2Sub), ...simdOp(v.f64x2Sub),
    ...simdOp(v.f64x2Add), ...set(L.e),
    // t bits + (((t ^ e) >> 63) | 1) & (e ≠ 0) & (t − t = 0: finite) & (t's last bit = 0)
    ...get(L.t),
    ...get(L.t), ...get(L.e), ...simdOp(v.xor), ...i32c(63), ...simdOp(v.i64x2ShrS), ...i64x2One(), ...simdOp(v.or),
    ...get(L.e), ...zero128(), ...simdOp(v.f64x2Ne), ...simdOp(v.and),
    ...get(L.t), ...get(L.t), ...simdOp(v.f64x2Sub), ...zero128(), ...simdOp(v.f64x2Eq), ...simdOp(v.and),
    ...get(L.t), ...i64x2One(), ...simdOp(v.and), ...zero128(), ...simdOp(v.i64x2Eq), ...simdOp(v.and),
    ...simdOp(v.i64x2Add),
    ...simdOp(v.f32x4DemoteF64x2Zero),
  ];
}

/** acc_h = fma32(sc, part_h, acc_h) for both halves of the 8-column tile; `sc` is computed per half first. */
function fineStep(): number[] {
  const code: number[] = [];
  for (let h = 0; h < 2; h++) {
    const part = h === 0 ? L.part0 : L.part1;
    const acc = h === 0 ? L.acc0 : L.acc1;
    // sc = fl(s_a · s_b) (f32x4.mul: the binary32 product, as fround(sa * sb)); s_a at sa + 4(s·m + i), s_b at sb + 4(s·n8 + col) + 16h
    code.push(
      ...get(P.sa), ...get(L.s), ...get(P.m), op.i32Mul, ...get(L.i), op.i32Add, ...i32c(4), op.i32Mul, op.i32Add, op.f32Load, 0x02, 0x00, ...simdOp(v.f32x4Splat),
      ...get(P.sb), ...get(L.s), ...get(L.n8), op.i32Mul, ...get(L.col), op.i32Add, ...i32c(4), op.i32Mul, op.i32Add, ...load(16 * h),
      ...simdOp(v.f32x4Mul), ...set(L.sc),
      ...fmaHalf(L.sc, part, acc, false), ...set(L.r0),
      ...fmaHalf(L.sc, part, acc, true), ...set(L.r1),
      ...get(L.r0), ...get(L.r1), ...shuffle(LOWS_OF_BOTH), ...set(acc),
    );
  }
  return code;
}

function gemmBody(model: ScaledGemmModel): number[] {
  const int = model === 'int32';
  const splat = int ? [op.i32Load, 0x02, 0x00, ...simdOp(v.i32x4Splat)] : [op.f32Load, 0x02, 0x00, ...simdOp(v.f32x4Splat)];
  const madd = (part: number, offset: number): number[] => [
    ...get(part), ...get(L.a), ...get(L.pb), ...load(offset), ...simdOp(int ? v.i32x4Mul : v.f32x4Mul), ...simdOp(int ? v.i32x4Add : v.f32x4Add), ...set(part),
  ];
  const kLoop = whileLess(L.pa, L.k1, [
    ...get(L.pa), ...splat, ...set(L.a),
    ...madd(L.part0, 0), ...madd(L.part1, 16),
    ...addTo(L.pa, 4), ...addTo(L.pb, 32),
  ]);
  const toFloat = int ? [...get(L.part0), ...simdOp(v.f32x4ConvertI32x4S), ...set(L.part0), ...get(L.part1), ...simdOp(v.f32x4ConvertI32x4S), ...set(L.part1)] : [];
  const plainStep = [...get(L.acc0), ...get(L.part0), ...simdOp(v.f32x4Add), ...set(L.acc0), ...get(L.acc1), ...get(L.part1), ...simdOp(v.f32x4Add), ...set(L.acc1)];
  const segment = [
    // k0, k1 as byte addresses into A's row i: pa = av + 4(i·K + k0), k1 = av + 4(i·K + bounds[s+1]); pb = bp + 32(p·K + k0)
    ...get(P.bounds), ...get(L.s), ...i32c(4), op.i32Mul, op.i32Add, op.i32Load, 0x02, 0x00, ...set(L.k0),
    ...get(P.bounds), ...get(L.s), ...i32c(4), op.i32Mul, op.i32Add, op.i32Load, 0x02, 0x04, ...set(L.k1),
    ...get(P.av), ...get(L.i), ...get(P.K), op.i32Mul, ...get(L.k0), op.i32Add, ...i32c(4), op.i32Mul, op.i32Add, ...set(L.pa),
    ...get(P.av), ...get(L.i), ...get(P.K), op.i32Mul, ...get(L.k1), op.i32Add, ...i32c(4), op.i32Mul, op.i32Add, ...set(L.k1),
    ...get(P.bp), ...get(L.p), ...get(P.K), op.i32Mul, ...get(L.k0), op.i32Add, ...i32c(32), op.i32Mul, op.i32Add, ...set(L.pb),
    ...zero128(), ...set(L.part0), ...zero128(), ...set(L.part1),
    ...kLoop,
    ...toFloat,
    ...get(P.fine), op.if, T.void, ...fineStep(), 0x05 /* else */, ...plainStep, op.end,
    ...addTo(L.s, 1),
  ];
  const flag = (bit: number): number[] => [...get(P.flags), ...i32c(bit), op.i32And];
  const scaleBy = (scale: number[]): number[] => [
    ...scale, ...get(L.acc0), ...simdOp(v.f32x4Mul), ...set(L.acc0),
    ...scale, ...get(L.acc1), ...simdOp(v.f32x4Mul), ...set(L.acc1),
  ];
  const rowA = [...get(P.ra), ...get(L.i), ...i32c(4), op.i32Mul, op.i32Add, op.f32Load, 0x02, 0x00, ...simdOp(v.f32x4Splat)];
  const colB = (h: number): number[] => [...get(P.rb), ...get(L.col), ...i32c(4), op.i32Mul, op.i32Add, ...load(16 * h)];
  const epilogue = [
    // v = fl(s_b·v), then fl(s_a·v), then fl(v·g), as the reference's epilogue (each a commutative binary32 multiply)
    ...ifThen(flag(2), [
      ...colB(0), ...get(L.acc0), ...simdOp(v.f32x4Mul), ...set(L.acc0),
      ...colB(1), ...get(L.acc1), ...simdOp(v.f32x4Mul), ...set(L.acc1),
    ]),
    ...ifThen(flag(1), scaleBy(rowA)),
    ...ifThen(flag(4), scaleBy([...get(P.g), op.f32Load, 0x02, 0x00, ...simdOp(v.f32x4Splat)])),
    // out + 4(i·n8 + col)
    ...get(P.out), ...get(L.i), ...get(L.n8), op.i32Mul, ...get(L.col), op.i32Add, ...i32c(4), op.i32Mul, op.i32Add, ...set(L.pa),
    ...get(L.pa), ...get(L.acc0), ...store(0),
    ...get(L.pa), ...get(L.acc1), ...store(16),
  ];
  const tile = [
    ...get(L.p), ...i32c(8), op.i32Mul, ...set(L.col),
    ...zero128(), ...set(L.acc0), ...zero128(), ...set(L.acc1),
    ...i32c(0), ...set(L.s),
    ...whileLess(L.s, P.nseg, segment),
    ...epilogue,
    ...addTo(L.p, 1),
  ];
  const code = [
    ...get(P.np), ...i32c(8), op.i32Mul, ...set(L.n8),
    ...i32c(0), ...set(L.i),
    ...whileLess(L.i, P.m, [...i32c(0), ...set(L.p), ...whileLess(L.p, P.np, tile), ...addTo(L.i, 1)]),
    op.end,
  ];
  const locals = [2, ...uleb(I32_LOCALS), 0x7f, ...uleb(V128_LOCALS), 0x7b];
  const body = [...locals, ...code];
  return [...uleb(body.length), ...body];
}

type GemmFn = (m: number, np: number, K: number, nseg: number, fine: number, flags: number, bounds: number, av: number, bp: number, sa: number, sb: number, ra: number, rb: number, out: number, g: number) => void;

const kernels = {
  fp32: lazyOneFunction<GemmFn>(() => oneFunctionModule('gemm', 15, gemmBody('fp32')), 'gemm'),
  int32: lazyOneFunction<GemmFn>(() => oneFunctionModule('gemm', 15, gemmBody('int32')), 'gemm'),
} as const;

/** Whether the kernel of `model` runs here (WebAssembly SIMD available). @internal */
export function scaledGemmKernelAvailable(model: ScaledGemmModel): boolean {
  return kernels[model]() !== null;
}

/** The operands and scales of one {@link scaledGemmKernel} call; arrays are read, never kept. @internal */
export interface ScaledGemmArgs {
  readonly model: ScaledGemmModel;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  /** K-segment boundaries, ascending from 0 to k (one entry [0] when k = 0). */
  readonly bounds: readonly number[];
  /** A values (m, k) row-major; for int32, integers with |v| < 2^26. */
  readonly a: Float32Array;
  /** B packed by {@link packPanels} for this model. */
  readonly bPanels: Float32Array | Int32Array;
  /** Per (segment, row of A) scales, or null (no fine-grained scales: fl(acc + partial) between segments). */
  readonly segScalesA: Float32Array | null;
  /** Per (segment, column of B) scales, segment-major with stride 8·⌈n/8⌉, or null. */
  readonly segScalesB: Float32Array | null;
  /** Per-row scales of A (m) and of B (n) for the epilogue, or null. */
  readonly rowScalesA: Float32Array | null;
  readonly rowScalesB: Float32Array | null;
  /** The float32 global scale (NVFP4 alpha); 1 for none. */
  readonly global: number;
}

/** Panels packed by {@link packPanels} since the module loaded (tests count packs with it). */
let panelPacks = 0;

/** How many times {@link packPanels} has run in this thread: a test's view of the packed-panel cache. @internal */
export function scaledPanelPacks(): number {
  return panelPacks;
}

/** B (n, k) as panels of 8 columns over all of K, panel[p][kk][c] = B(8p + c, kk), zeros past n; Int32 values for int32. @internal */
export function packPanels(model: ScaledGemmModel, b: Float32Array, n: number, k: number): Float32Array | Int32Array {
  panelPacks++;
  const np = Math.ceil(n / 8);
  const out = model === 'int32' ? new Int32Array(np * 8 * k) : new Float32Array(np * 8 * k);
  for (let j = 0; j < n; j++) {
    const base = (j >> 3) * k * 8 + (j & 7);
    const row = j * k;
    for (let kk = 0; kk < k; kk++) out[base + kk * 8] = b[row + kk] as number;
  }
  return out;
}

const align16 = (bytes: number): number => (bytes + 15) & ~15;

/** Float32 and Int32 views of a kernel memory's buffer, kept until the memory grows (a new buffer). */
const memoryViews = new WeakMap<ArrayBuffer, { readonly f32: Float32Array; readonly i32: Int32Array }>();

function viewsOf(buf: ArrayBuffer): { readonly f32: Float32Array; readonly i32: Int32Array } {
  let v = memoryViews.get(buf);
  if (v === undefined) {
    v = { f32: new Float32Array(buf), i32: new Int32Array(buf) };
    memoryViews.set(buf, v);
  }
  return v;
}

/**
 * Runs the kernel into `out` (m, n) and returns true, or returns false where WebAssembly SIMD is unavailable
 * (nothing written). Every output: acc = +0; per K-segment the model's partial, then fma32(fl(s_a·s_b), partial,
 * acc) with segment scales or fl(acc + partial) without; then fl(s_b·acc), fl(s_a·…), fl(…·global).
 * @internal
 */
export function scaledGemmKernel(out: Float32Array, args: ScaledGemmArgs): boolean {
  const kernel = kernels[args.model]();
  if (kernel === null) return false;
  const { m, n, k, bounds } = args;
  if (m === 0 || n === 0) return true;
  const np = Math.ceil(n / 8);
  const n8 = np * 8;
  const nseg = bounds.length - 1;
  const fine = args.segScalesA !== null;
  // memory layout (bytes): bounds | sa | sb | ra | rb | g | A | B panels | out
  const oBounds = 0;
  const oSa = align16(oBounds + 4 * (nseg + 1));
  const oSb = align16(oSa + (fine ? 4 * nseg * m : 0));
  const oRa = align16(oSb + (fine ? 4 * nseg * n8 : 0));
  const oRb = align16(oRa + 4 * m);
  const oG = align16(oRb + 4 * n8);
  const oA = align16(oG + 4);
  const oB = align16(oA + 4 * m * k);
  const oOut = align16(oB + 4 * n8 * k);
  const need = oOut + 4 * m * n8;
  const have = kernel.memory.buffer.byteLength;
  if (need > have) kernel.memory.grow(Math.ceil((need - have) / 65536));
  const { f32, i32 } = viewsOf(kernel.memory.buffer);
  for (let s = 0; s <= nseg; s++) i32[oBounds / 4 + s] = bounds[s] as number;
  if (fine) {
    f32.set(args.segScalesA as Float32Array, oSa / 4);
    f32.set(args.segScalesB as Float32Array, oSb / 4);
  }
  if (args.rowScalesA !== null) f32.set(args.rowScalesA, oRa / 4);
  if (args.rowScalesB !== null) f32.set(args.rowScalesB, oRb / 4);
  f32[oG / 4] = args.global;
  if (args.model === 'int32') {
    const a = args.a;
    const base = oA / 4;
    for (let i = 0; i < m * k; i++) i32[base + i] = a[i] as number; // integers below 2^26: exact ToInt32
  } else f32.set(args.a, oA / 4);
  if (args.bPanels instanceof Int32Array) i32.set(args.bPanels, oB / 4);
  else f32.set(args.bPanels, oB / 4);
  const flags = (args.rowScalesA !== null ? 1 : 0) | (args.rowScalesB !== null ? 2 : 0) | (args.global !== 1 ? 4 : 0);
  kernel.fn(m, np, k, nseg, fine ? 1 : 0, flags, oBounds, oA, oB, oSa, oSb, oRa, oRb, oOut, oG);
  const base = oOut / 4;
  if (n === n8) out.set(f32.subarray(base, base + m * n));
  else for (let i = 0; i < m; i++) out.set(f32.subarray(base + i * n8, base + i * n8 + n), i * n);
  return true;
}
