// Instruction emitters both hopper-fp8 WebAssembly kernels build their code with: locals, constants, the SIMD
// opcode table and a counted loop. Not a kernel, not the module layout (wasm.ts).

import { sleb, uleb } from './wasm.js';

/** The core opcodes the emitters below write (WebAssembly core spec §5.4). */
const core = { block: 0x02, loop: 0x03, end: 0x0b, br: 0x0c, brIf: 0x0d, localGet: 0x20, localSet: 0x21, i32Load: 0x28, f64Load: 0x2b, i32Const: 0x41, i32GeU: 0x4f, i32Add: 0x6a, simd: 0xfd } as const;

/** SIMD sub-opcodes (after the 0xFD prefix), LEB128-encoded (SIMD proposal opcode table). */
export const simd = {
  v128Load: [0x00], v128Store: [0x0b], v128Const: [0x0c],
  i32x4ExtractLane: [0x1b], f64x2ExtractLane: [0x21],
  i32x4Splat: [0x11], f64x2Splat: [0x14],
  f64x2Trunc: [0x7a],
  i32x4Add: [0xae, 0x01], i32x4Sub: [0xb1, 0x01], i32x4MaxS: [0xb8, 0x01],
  i64x2ExtendLowI32x4S: [0xc7, 0x01], i64x2ExtendHighI32x4S: [0xc8, 0x01], i64x2Shl: [0xcb, 0x01],
  f64x2Add: [0xf0, 0x01], f64x2Mul: [0xf2, 0x01],
  v128Load32Splat: [0x09], f32x4Add: [0xe4, 0x01], f32x4Mul: [0xe6, 0x01],
} as const;

/** `local.get i`. */
export const get = (i: number): number[] => [core.localGet, ...uleb(i)];
/** `local.set i`. */
export const set = (i: number): number[] => [core.localSet, ...uleb(i)];
/** `i32.const n`. */
export const i32c = (n: number): number[] => [core.i32Const, ...sleb(n)];
/** A SIMD instruction with its immediates (memarg, lane, bytes). */
export const simdOp = (o: readonly number[], imm: number[] = []): number[] => [core.simd, ...o, ...imm];
/** memarg: alignment hint 1, offset 0 (any address is valid). */
export const memarg0 = [0x00, 0x00];

/** `for (local = from; local < limit; local++) body` (unsigned compare). */
export function forLoop(local: number, from: number[], limit: number[], body: number[]): number[] {
  return [
    ...from, ...set(local),
    core.block, 0x40, core.loop, 0x40,
    ...get(local), ...limit, core.i32GeU, core.brIf, 1,
    ...body,
    ...get(local), ...i32c(1), core.i32Add, ...set(local),
    core.br, 0, core.end, core.end,
  ];
}

/** Locals of {@link hopperChunkLoops}: the K counter and its limit, the A/B walkers, the accumulators. */
export interface HopperLoopLocals {
  readonly kk: number;
  /** The local holding the number of K steps. */
  readonly len: number;
  /** A row walker (values f64 then exponents i32 are walked by separate passes) and B panel walker. */
  readonly pa: number;
  readonly pb: number;
  /** i32x4 running max of e_a + e_b over the 4 panel columns. */
  readonly mx: number;
  /** f64x2 splat of the A value; sums of columns 0–1 and 2–3; their 2^(fractionBits − maxE) factors. */
  readonly a: number;
  readonly s01: number;
  readonly s23: number;
  readonly inv01: number;
  readonly inv23: number;
}

/**
 * The two K loops of one hopper-fp8 chunk over a 4-column B panel, as both kernels run them: the max
 * of the exponent sums (A exponent i32, B exponents i32x4), then the sums of trunc(a·b·2^(fb − maxE))
 * (A value f64, B values 2 × f64x2). `pa`/`pb` must point at the exponents (max loop) or the values
 * (sum loop) when each starts.
 */
export function hopperChunkLoops(l: HopperLoopLocals): { readonly maxLoop: number[]; readonly sumLoop: number[] } {
  const advance = (local: number, bytes: number): number[] => [...get(local), ...i32c(bytes), core.i32Add, ...set(local)];
  const scaledTruncAdd = (sum: number, offset: number[], inv: number): number[] => [
    ...get(sum), ...get(l.a), ...get(l.pb), ...simdOp(simd.v128Load, offset), ...simdOp(simd.f64x2Mul), ...get(inv), ...simdOp(simd.f64x2Mul),
    ...simdOp(simd.f64x2Trunc), ...simdOp(simd.f64x2Add), ...set(sum),
  ];
  const maxLoop = forLoop(l.kk, i32c(0), get(l.len), [
    ...get(l.mx),
    ...get(l.pa), core.i32Load, 0x02, 0x00, ...simdOp(simd.i32x4Splat),
    ...get(l.pb), ...simdOp(simd.v128Load, memarg0),
    ...simdOp(simd.i32x4Add), ...simdOp(simd.i32x4MaxS), ...set(l.mx),
    ...advance(l.pa, 4), ...advance(l.pb, 16),
  ]);
  const sumLoop = forLoop(l.kk, i32c(0), get(l.len), [
    ...get(l.pa), core.f64Load, 0x03, 0x00, ...simdOp(simd.f64x2Splat), ...set(l.a),
    ...scaledTruncAdd(l.s01, memarg0, l.inv01),
    ...scaledTruncAdd(l.s23, [0x00, 0x10], l.inv23),
    ...advance(l.pa, 8), ...advance(l.pb, 32),
  ]);
  return { maxLoop, sumLoop };
}
