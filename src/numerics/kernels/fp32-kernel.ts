// The fast path of the `fp32` GEMM model: register-blocked tiles of MR rows × 8 columns written as a small WebAssembly
// SIMD module (assembled below from named opcodes), with the loops over tiles inside the module. Not a different
// semantics: f32x4.mul/add are IEEE binary32 RNE ops, so each output is fl(acc + fl(a·b)) in increasing k from +0
// exactly as the scalar definition; the vectors run across outputs, never across k. Tests compare it with Object.is.
//
// Why WebAssembly: the scalar JS kernel pays two float64↔float32 conversions per `Math.fround`, which caps it near
// 2 GFLOP/s. WebAssembly's f32x4 arithmetic is specified as IEEE 754 binary32 with round-to-nearest-even and
// subnormals (no flush to zero), i.e. exactly Math.fround after every operation, four outputs per instruction.
// Only NaN payloads and signs are left unspecified by WebAssembly, and NaN payloads are not part of the model.
//
// Layout in the kernel's memory (bytes): [A rows (m, k) row-major][B panels][out (m, 8·np) row-major]. B (n, k) is
// packed into np = ⌈n/8⌉ panels of 8 columns, panel p = [kk][c] = B(8p + c, kk), columns past n zero; the output
// columns past n are computed and dropped. A K-range [k0, k1) of every panel is contiguous, so split-K and
// fine-scale segments read one packing of B at an offset.

import { uleb, wasmApi, wasmModule, type WasmMemory } from '../wasm.js';
import { forLoop, get, i32c, set, simd, simdOp } from '../wasm-emit.js';
import { verifyImmutableArray } from '../operand-checks.js';

/** Core opcodes of the kernel beyond the emitters' (WebAssembly core spec §5.4). */
const op = {
  block: 0x02, loop: 0x03, if: 0x04, else: 0x05, end: 0x0b, br: 0x0c, brIf: 0x0d, call: 0x10, select: 0x1b,
  f32Load: 0x2a, f32Store: 0x38, i32Eq: 0x46, i32LtU: 0x49, i32GtU: 0x4b, i32GeU: 0x4f, i32Add: 0x6a, i32Sub: 0x6b, i32Mul: 0x6c, i32And: 0x71, i32Or: 0x72, i32DivU: 0x6e, f32Const: 0x43,
} as const;

/** Rows of A per register tile (MR); the tile is MR × 8 outputs, 2·MR f32x4 accumulators. */
export const FP32_TILE_ROWS = 4;
/** Cache blocking of the kernel (K-block length, bytes of a panel group): see the `gemm` body. @internal */
export const FP32_BLOCKING = { kc: 256, groupBytes: 128 * 1024 } as const;

const v128Memarg = (offset: number): number[] => [0x04, ...uleb(offset)];
const f32Memarg = (offset: number): number[] => [0x02, ...uleb(offset)];
const addTo = (local: number, code: number[]): number[] => [...get(local), ...code, op.i32Add, ...set(local)];
/** Encoded function body: local declarations (count, type) then code, with the size prefix. */
function encodeBody(locals: readonly (readonly [number, number])[], code: number[]): number[] {
  const body = [...uleb(locals.length), ...locals.flatMap(([count, type]) => [...uleb(count), type]), ...code, op.end];
  return [...uleb(body.length), ...body];
}
const I32 = 0x7f;
const V128 = 0x7b;

/**
 * `tile<rows>(pa, bp, bpEnd, out, nBytes, carry)`: outputs (rows × 8) at `out` (rows nBytes apart) from a block of
 * packed A at `pa` (per k: each row's value in all four lanes, rows·16 bytes) and the panel range [bp, bpEnd) (32
 * bytes per k). Each output starts from +0 (carry = 0) or from the float32 already at `out` (carry ≠ 0: the sum of
 * the K-block before, which a register would have held), then acc = fl(acc + fl(a·b)) for every k in order. One k
 * per iteration: TurboFan hoists the loads of an unrolled body above its arithmetic and spills the accumulators, so
 * unrolling measured slower.
 */
function tileBody(rows: number): number[] {
  const P = { pa: 0, bp: 1, bpEnd: 2, out: 3, nBytes: 4, carry: 5 } as const;
  const o = 6;
  const acc = (r: number, h: number): number => 7 + 2 * r + h;
  const b = (h: number): number => 7 + 2 * rows + h;
  const av = 7 + 2 * rows + 2;
  /** For each row r: `each(r)`, with local o at row r of out. */
  const rowsOfOut = (each: (r: number) => number[]): number[] => {
    const c: number[] = [...get(P.out), ...set(o)];
    for (let r = 0; r < rows; r++) c.push(...each(r), ...(r + 1 < rows ? addTo(o, get(P.nBytes)) : []));
    return c;
  };
  const code: number[] = [...get(P.carry), op.if, 0x40];
  code.push(...rowsOfOut((r) => [0, 1].flatMap((h) => [...get(o), ...simdOp(simd.v128Load, v128Memarg(16 * h)), ...set(acc(r, h))])));
  code.push(op.else);
  for (let r = 0; r < rows; r++) for (let h = 0; h < 2; h++) code.push(...simdOp(simd.v128Const, new Array<number>(16).fill(0)), ...set(acc(r, h)));
  code.push(op.end);
  code.push(op.block, 0x40, op.loop, 0x40);
  code.push(...get(P.bp), ...get(P.bpEnd), op.i32GeU, op.brIf, 1);
  for (let h = 0; h < 2; h++) code.push(...get(P.bp), ...simdOp(simd.v128Load, v128Memarg(16 * h)), ...set(b(h)));
  for (let r = 0; r < rows; r++) {
    code.push(...get(P.pa), ...simdOp(simd.v128Load, v128Memarg(16 * r)), ...set(av));
    for (let h = 0; h < 2; h++) code.push(...get(acc(r, h)), ...get(av), ...get(b(h)), ...simdOp(simd.f32x4Mul), ...simdOp(simd.f32x4Add), ...set(acc(r, h)));
  }
  code.push(...addTo(P.pa, i32c(16 * rows)), ...addTo(P.bp, i32c(32)), op.br, 0, op.end, op.end);
  code.push(...rowsOfOut((r) => [0, 1].flatMap((h) => [...get(o), ...get(acc(r, h)), ...simdOp(simd.v128Store, v128Memarg(16 * h))])));
  return encodeBody([[1, I32], [2 * rows + 3, V128]], code);
}

/**
 * `gemm(pa, k16, k0, bp, panelBytes, len, out, nBytes, m, np, kc, groupBytes)`: all tiles of m rows × np panels over
 * the K-range [k0, k0 + len). Packed A at `pa` (blocks of MR rows, the last one of m mod MR, each k·rows·16 bytes
 * = k16·rows); panels from `bp` (at k = 0), `panelBytes` apart; outputs at `out`, rows nBytes apart, panel p at
 * +32p. Cache blocking, none of it changing a sum: the range goes in K-blocks of `kc` (each tile carries its sums
 * from one K-block to the next through `out`, exactly, in increasing k); in each K-block the panels go in groups of
 * about `groupBytes` (kept in L2) and every block of A (kc·rows·16 bytes, kept in L1) passes over a group's panels.
 * Function r ≥ 1 of the module is the tile of r rows.
 */
function gemmBody(): number[] {
  const P = { pa: 0, k16: 1, k0: 2, bp: 3, panelBytes: 4, len: 5, out: 6, nBytes: 7, m: 8, np: 9, kc: 10, groupBytes: 11 } as const;
  const L = { g0: 12, g1: 13, i: 14, p: 15, pb: 16, aRow: 17, oRow: 18, rem: 19, kb: 20, kl: 21, group: 22 } as const;
  const callTile = (rows: number): number[] => [
    // pb = bp + p·panelBytes + (k0 + kb)·32
    ...get(P.bp), ...get(L.p), ...get(P.panelBytes), op.i32Mul, op.i32Add, ...get(P.k0), ...get(L.kb), op.i32Add, ...i32c(32), op.i32Mul, op.i32Add, ...set(L.pb),
    ...get(L.aRow), ...get(L.pb), ...get(L.pb), ...get(L.kl), ...i32c(32), op.i32Mul, op.i32Add,
    ...get(L.oRow), ...get(L.p), ...i32c(32), op.i32Mul, op.i32Add, ...get(P.nBytes), ...get(L.kb),
    op.call, ...uleb(rows),
  ];
  const overGroup = (rows: number): number[] => forLoop(L.p, get(L.g0), get(L.g1), callTile(rows));
  // block start: pa + i·k16 + (k0 + kb)·16·rows; output row: out + i·nBytes
  const rowStart = (rows: number[]): number[] => [
    ...get(P.pa), ...get(L.i), ...get(P.k16), op.i32Mul, op.i32Add, ...get(P.k0), ...get(L.kb), op.i32Add, ...i32c(16), op.i32Mul, ...rows, op.i32Mul, op.i32Add, ...set(L.aRow),
    ...get(P.out), ...get(L.i), ...get(P.nBytes), op.i32Mul, op.i32Add, ...set(L.oRow),
  ];
  const min = (x: number[], y: number[]): number[] => [...x, ...y, ...x, ...y, op.i32LtU, op.select];
  const code: number[] = [...i32c(0), ...set(L.kb), op.loop, 0x40];
  // kl = min(kc, len − kb); group = max(1, groupBytes / (kl·32)) (every panel when kl = 0)
  code.push(...min(get(P.kc), [...get(P.len), ...get(L.kb), op.i32Sub]), ...set(L.kl));
  code.push(...get(P.groupBytes), ...get(L.kl), ...i32c(32), op.i32Mul, ...i32c(1), op.i32Or, op.i32DivU, ...set(L.group));
  code.push(...get(L.group), ...i32c(1), ...get(L.group), op.select, ...set(L.group));
  code.push(...i32c(0), ...set(L.g0), op.block, 0x40, op.loop, 0x40);
  code.push(...get(L.g0), ...get(P.np), op.i32GeU, op.brIf, 1);
  code.push(...min([...get(L.g0), ...get(L.group), op.i32Add], get(P.np)), ...set(L.g1));
  code.push(...i32c(0), ...set(L.i), op.block, 0x40, op.loop, 0x40);
  code.push(...get(L.i), ...i32c(FP32_TILE_ROWS), op.i32Add, ...get(P.m), op.i32GtU, op.brIf, 1);
  code.push(...rowStart(i32c(FP32_TILE_ROWS)), ...overGroup(FP32_TILE_ROWS));
  code.push(...addTo(L.i, i32c(FP32_TILE_ROWS)), op.br, 0, op.end, op.end);
  code.push(...get(P.m), ...get(L.i), op.i32Sub, ...set(L.rem), ...rowStart(get(L.rem)));
  for (let r = 1; r < FP32_TILE_ROWS; r++) code.push(...get(L.rem), ...i32c(r), op.i32Eq, op.if, 0x40, ...overGroup(r), op.end);
  code.push(...get(L.g1), ...set(L.g0), op.br, 0, op.end, op.end);
  // next K-block while kb + kl < len (one pass when len = 0: the tiles then store +0)
  code.push(...addTo(L.kb, get(L.kl)), ...get(L.kb), ...get(P.len), op.i32LtU, op.brIf, 0, op.end);
  return encodeBody([[11, I32]], code);
}

/**
 * `packA(src, m, k, dst)`: A (m, k) row-major at `src` into blocks of MR rows (the last of m mod MR) at `dst`:
 * block [kk][r] = A(i0 + r, kk) in all four lanes (so the tile loads it without a broadcast).
 */
function packABody(): number[] {
  const P = { src: 0, m: 1, k: 2, dst: 3 } as const;
  const L = { i0: 4, rows: 5, r: 6, kk: 7, s: 8, d: 9 } as const;
  const inner = forLoop(L.kk, i32c(0), get(P.k), [
    ...get(L.d), ...get(L.s), ...simdOp(simd.v128Load32Splat, f32Memarg(0)), ...simdOp(simd.v128Store, v128Memarg(0)),
    ...addTo(L.s, i32c(4)), ...addTo(L.d, [...get(L.rows), ...i32c(16), op.i32Mul]),
  ]);
  const perRow = forLoop(L.r, i32c(0), get(L.rows), [
    // s = src + (i0 + r)·k·4; d = dst + i0·k·16 + r·16
    ...get(P.src), ...get(L.i0), ...get(L.r), op.i32Add, ...get(P.k), op.i32Mul, ...i32c(4), op.i32Mul, op.i32Add, ...set(L.s),
    ...get(P.dst), ...get(L.i0), ...get(P.k), op.i32Mul, ...i32c(16), op.i32Mul, op.i32Add, ...get(L.r), ...i32c(16), op.i32Mul, op.i32Add, ...set(L.d),
    ...inner,
  ]);
  const code: number[] = [...i32c(0), ...set(L.i0), op.block, 0x40, op.loop, 0x40];
  code.push(...get(L.i0), ...get(P.m), op.i32GeU, op.brIf, 1);
  // rows = min(MR, m − i0)
  code.push(...get(P.m), ...get(L.i0), op.i32Sub, ...i32c(FP32_TILE_ROWS), ...i32c(FP32_TILE_ROWS), ...get(P.m), ...get(L.i0), op.i32Sub, op.i32GtU, op.select, ...set(L.rows));
  code.push(...perRow, ...addTo(L.i0, get(L.rows)), op.br, 0, op.end, op.end);
  return encodeBody([[6, I32]], code);
}

/** `packB(src, n, k, dst)`: B (n, k) row-major at `src` into ⌈n/8⌉ panels at `dst`, panel p = [kk][c] = B(8p + c, kk), columns past n zero. */
function packBBody(): number[] {
  const P = { src: 0, n: 1, k: 2, dst: 3 } as const;
  const L = { j: 4, kk: 5, s: 6, d: 7, width: 8 } as const;
  const copy = forLoop(L.kk, i32c(0), get(P.k), [
    ...get(L.d), ...get(L.s), op.f32Load, ...f32Memarg(0), op.f32Store, ...f32Memarg(0),
    ...addTo(L.s, i32c(4)), ...addTo(L.d, i32c(32)),
  ]);
  const zero = forLoop(L.kk, i32c(0), get(P.k), [...get(L.d), op.f32Const, 0, 0, 0, 0, op.f32Store, ...f32Memarg(0), ...addTo(L.d, i32c(32))]);
  const code: number[] = [
    // width = 8·⌈n/8⌉; column j of panel j & −8 at (j & 7)
    ...get(P.n), ...i32c(7), op.i32Add, ...i32c(-8), op.i32And, ...set(L.width),
    ...forLoop(L.j, i32c(0), get(L.width), [
      // d = dst + (j & −8)·k·4 + (j & 7)·4
      ...get(P.dst), ...get(L.j), ...i32c(-8), op.i32And, ...get(P.k), op.i32Mul, ...i32c(4), op.i32Mul, op.i32Add, ...get(L.j), ...i32c(7), op.i32And, ...i32c(4), op.i32Mul, op.i32Add, ...set(L.d),
      ...get(L.j), ...get(P.n), op.i32LtU, op.if, 0x40,
      ...get(P.src), ...get(L.j), ...get(P.k), op.i32Mul, ...i32c(4), op.i32Mul, op.i32Add, ...set(L.s),
      ...copy,
      op.else, ...zero, op.end,
    ]),
  ];
  return encodeBody([[5, I32]], code);
}

function moduleBytes(): Uint8Array {
  const tiles = Array.from({ length: FP32_TILE_ROWS }, (_, r) => ({ params: 6, body: tileBody(r + 1) }));
  return wasmModule([{ name: 'gemm', params: 12, body: gemmBody() }, ...tiles, { name: 'packA', params: 4, body: packABody() }, { name: 'packB', params: 4, body: packBBody() }]);
}

/** An instance of the kernel: its memory and its exports (arguments as the module's bodies above say). @internal */
export interface WasmKernel {
  readonly memory: WasmMemory;
  readonly gemm: (pa: number, k16: number, k0: number, bp: number, panelBytes: number, len: number, out: number, nBytes: number, m: number, np: number, kc: number, groupBytes: number) => void;
  readonly packA: (src: number, m: number, k: number, dst: number) => void;
  readonly packB: (src: number, n: number, k: number, dst: number) => void;
}

let compiled: object | null | undefined;
let kernel: WasmKernel | null | undefined;

/**
 * The compiled kernel module (a `WebAssembly.Module`, which can be posted to worker threads), or null where
 * WebAssembly SIMD is unavailable. Exports `packA`, `packB` and `gemm` (layouts above) and its memory `mem`.
 * @internal
 */
export function fp32KernelModule(): object | null {
  if (compiled !== undefined) return compiled;
  try {
    const bytes = moduleBytes();
    compiled = wasmApi !== undefined && wasmApi.validate(bytes) ? new wasmApi.Module(bytes) : null;
  } catch {
    compiled = null;
  }
  return compiled;
}

/** The kernel's exports from an instance's export object (also how the worker threads read them). */
function kernelOf(exports: Record<string, unknown>): WasmKernel {
  return {
    memory: exports['mem'] as WasmMemory,
    gemm: exports['gemm'] as WasmKernel['gemm'],
    packA: exports['packA'] as WasmKernel['packA'],
    packB: exports['packB'] as WasmKernel['packB'],
  };
}

/**
 * A new instance of the kernel with its own memory (so callers never share scratch), or null where
 * WebAssembly SIMD is unavailable.
 * @internal
 */
export function newFp32Kernel(): WasmKernel | null {
  const module = fp32KernelModule();
  if (module === null || wasmApi === undefined) return null;
  try {
    return kernelOf(new wasmApi.Instance(module).exports);
  } catch {
    return null;
  }
}

/** The kernel instance of {@link fp32Gemm}, or null where WebAssembly SIMD is unavailable (the scalar JS loop is used then). */
function wasmKernel(): WasmKernel | null {
  if (kernel === undefined) kernel = newFp32Kernel();
  return kernel;
}

/** Whether the WebAssembly SIMD path is in use (for reports and tests). */
export function fp32KernelIsSimd(): boolean {
  return wasmKernel() !== null;
}

/**
 * Operands their owner promised never to write again (arrays derived from a weight once per weight version and owned
 * by that version's numerics object). Their packed panels are kept and copied into the kernel's memory instead of
 * packing b on every call, so a decode step packs only its activations.
 */
const immutableOperands = new WeakSet<Float32Array>();
/** Packed panels of immutable b operands, by array and the shape (n, k) it was read as. */
const packedPanels = new WeakMap<Float32Array, { readonly n: number; readonly k: number; readonly panels: Float32Array }>();
let panelPacks = 0;

/**
 * Declares that `b` will not be written again, so the fp32 kernel may keep its packed panels (by array identity) for
 * later calls. Only for arrays nobody mutates: a weight copy rounded or decoded once per weight version, owned by the
 * numerics object of that version (never an optimizer's master weights, which are written in place). @internal
 */
export function markGemmOperandImmutable(b: Float32Array): void {
  immutableOperands.add(b);
}

/** How many times this thread has packed B panels (a marked operand is packed once per shape it is read as). @internal */
export function fp32PanelPacks(): number {
  return panelPacks;
}

/**
 * A GEMM laid out in a kernel's memory (float indices): packed A at 0, B panels at `bAt`, outputs (m, width) at
 * `outAt`, and a staging area at `rawAt` where rows are copied before packing.
 */
interface Fp32Layout {
  readonly wk: WasmKernel;
  readonly mem: Float32Array;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly width: number;
  readonly bAt: number;
  readonly outAt: number;
  readonly rawAt: number;
}

/** Grows `wk`'s memory for an (m, n, k) GEMM and returns its layout. */
function layoutOf(wk: WasmKernel, m: number, n: number, k: number): Fp32Layout {
  const width = Math.ceil(n / 8) * 8;
  const bAt = m * k * 4;
  const outAt = bAt + width * k;
  const rawAt = outAt + m * width;
  const need = (rawAt + Math.max(m, n) * k) * 4;
  const have = wk.memory.buffer.byteLength;
  if (need > have) wk.memory.grow(Math.ceil((need - have) / 65536));
  return { wk, mem: memoryView(wk), m, n, k, width, bAt, outAt, rawAt };
}

/** A Float32Array over each kernel's memory, made again only when the memory grew (decode steps make thousands of tiny calls). */
const views = new WeakMap<WasmKernel, Float32Array>();
function memoryView(wk: WasmKernel): Float32Array {
  let view = views.get(wk);
  if (view === undefined || view.buffer !== wk.memory.buffer) {
    view = new Float32Array(wk.memory.buffer);
    views.set(wk, view);
  }
  return view;
}

/** Packs the A rows `rows` (all m rows in order when null) into the layout. */
function loadA(l: Fp32Layout, A: Float32Array, rows: readonly number[] | null): void {
  const { mem, m, k, rawAt } = l;
  if (rows === null) mem.set(A.subarray(0, m * k), rawAt);
  else for (let q = 0; q < m; q++) mem.set(A.subarray((rows[q] as number) * k, (rows[q] as number) * k + k), rawAt + q * k);
  l.wk.packA(rawAt * 4, m, k, 0);
}

/** Writes the panels of B (n, k) into the layout: the kept panels of an operand marked immutable (packed on its first use as that shape), else packed now. */
function loadB(l: Fp32Layout, B: Float32Array): void {
  const { mem, n, k, width, bAt, rawAt } = l;
  const immutable = immutableOperands.has(B);
  if (immutable) verifyImmutableArray(B);
  const known = immutable ? packedPanels.get(B) : undefined;
  if (known !== undefined && known.n === n && known.k === k) {
    mem.set(known.panels, bAt);
    return;
  }
  panelPacks++;
  mem.set(B.subarray(0, n * k), rawAt);
  l.wk.packB(rawAt * 4, n, k, bAt * 4);
  if (immutable) packedPanels.set(B, { n, k, panels: mem.slice(bAt, bAt + width * k) });
}

/** Runs the kernel over the K-range [k0, k1) of a loaded layout; the outputs are at `outAt`, rows `width` apart. */
function runRange(l: Fp32Layout, k0: number, k1: number): void {
  const { wk, m, k, width, bAt, outAt } = l;
  wk.gemm(0, k * 16, k0, bAt * 4, k * 32, k1 - k0, outAt * 4, width * 4, m, width / 8, FP32_BLOCKING.kc, FP32_BLOCKING.groupBytes);
}

/** out(row, ·) = the first n outputs of each layout row, for rows `rows` of out (0 … m − 1 when null). */
function storeRows(l: Fp32Layout, out: Float32Array, rows: readonly number[] | null): void {
  const { mem, m, n, width, outAt } = l;
  if (rows === null && width === n) {
    out.set(mem.subarray(outAt, outAt + m * n));
    return;
  }
  for (let q = 0; q < m; q++) out.set(mem.subarray(outAt + q * width, outAt + q * width + n), (rows === null ? q : (rows[q] as number)) * n);
}

/** out (m, n) = A (m, k) · B (n, k)ᵀ, row-major: the operands and sizes of one fp32 product. @internal */
export interface Fp32Product {
  readonly A: Float32Array;
  readonly B: Float32Array;
  readonly out: Float32Array;
  readonly m: number;
  readonly n: number;
  readonly k: number;
}

/**
 * out(rows, ·) = A(rows, ·) · Bᵀ of `product` through the kernel `wk`, whole K (the GEMM of one thread of
 * threadedGemmF32): `rows` the rows of A and out to compute, in order (null: all m rows). @internal
 */
export function fp32KernelRows(wk: WasmKernel, product: Fp32Product, rows: readonly number[] | null): void {
  const { A, B, out, m, n, k } = product;
  const count = rows === null ? m : rows.length;
  if (count === 0 || n === 0) return;
  const l = layoutOf(wk, count, n, k);
  loadA(l, A, rows);
  loadB(l, B);
  runRange(l, 0, k);
  storeRows(l, out, rows);
}

/** Scalar float32 sequential sum of one output over [k0, k1). */
function scalarDot(A: Float32Array, B: Float32Array, ra: number, rb: number, k0: number, k1: number): number {
  const fr = Math.fround;
  let s = 0;
  for (let kk = k0; kk < k1; kk++) s = fr(s + fr((A[ra + kk] as number) * (B[rb + kk] as number)));
  return s;
}

/**
 * A prepared fp32 GEMM over fixed A (m, k) and B (n, k): `range(partial, k0, k1)` writes
 * partial(i, j) = Σ_{kk ∈ [k0, k1)} fl(A(i,kk)·B(j,kk)) summed in float32 in increasing kk, from +0.
 * A and B are packed once (B's kept panels copied, for an operand marked immutable); every range reads them at an
 * offset. Valid until the next call of fp32Gemm.
 * @internal
 */
export function fp32Gemm(A: Float32Array, B: Float32Array, m: number, n: number, k: number): (partial: Float32Array, k0: number, k1: number) => void {
  const wk = wasmKernel();
  if (wk === null || m === 0 || n === 0) {
    return (partial, k0, k1) => {
      for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) partial[i * n + j] = scalarDot(A, B, i * k, j * k, k0, k1);
    };
  }
  const l = layoutOf(wk, m, n, k);
  loadA(l, A, null);
  loadB(l, B);
  return (partial, k0, k1) => {
    if (k1 <= k0) {
      partial.fill(0, 0, m * n);
      return;
    }
    runRange(l, k0, k1);
    storeRows(l, partial, null);
  };
}
