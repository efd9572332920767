// The fast path of the `fp32` GEMM model: a 4×8 register-blocked kernel written as a tiny WebAssembly SIMD module
// (assembled below from named opcodes). Not a different semantics: f32x4.mul/add are IEEE binary32 RNE ops, so each
// output is fl(acc + fl(a·b)) in increasing k exactly as the scalar definition; tests compare it with Object.is.
//
// Why WebAssembly: the scalar JS kernel pays two float64↔float32 conversions per `Math.fround`, which caps it near
// 2 GFLOP/s. WebAssembly's f32x4 arithmetic is specified as IEEE 754 binary32 with round-to-nearest-even and
// subnormals (no flush to zero), i.e. exactly Math.fround after every operation, four outputs per instruction.
// Only NaN payloads and signs are left unspecified by WebAssembly, and NaN payloads are not part of the model.

import { oneFunctionModule, uleb, wasmApi, type WasmMemory } from './wasm.js';

/** Opcodes used by the kernel (WebAssembly core spec §5.4, SIMD proposal opcode table). */
const op = {
  block: 0x02, loop: 0x03, br: 0x0c, brIf: 0x0d, end: 0x0b,
  localGet: 0x20, localSet: 0x21,
  i32Const: 0x41, i32GeU: 0x4f, i32Add: 0x6a,
  f32Load: 0x2a,
  simd: 0xfd,
} as const;

/** SIMD sub-opcodes (after the 0xFD prefix), LEB128-encoded. */
const simd = {
  v128Load: [0x00], v128Store: [0x0b], v128Const: [0x0c], f32x4Splat: [0x13],
  f32x4Add: [0xe4, 0x01], f32x4Mul: [0xe6, 0x01],
} as const;

// Parameters and locals of `tile(a, kBytes, bp, bpEnd, out, nBytes)`:
//   a      byte address of A(i, k0), rows kBytes apart (A row-major, (m, k) float32)
//   bp     byte address of the packed B panel for columns j..j+7: panel[kk][c] = B(j + c, k0 + kk)
//   bpEnd  bp + (k1 − k0)·32
//   out    byte address of out(i, j), rows nBytes apart
const P = { a: 0, kBytes: 1, bp: 2, bpEnd: 3, out: 4, nBytes: 5 } as const;
const L = { p0: 6, p1: 7, p2: 8, p3: 9, b0: 10, b1: 11, acc: 12, av: 20 } as const; // acc: 12..19 (row r, half h → 12 + 2r + h)

function get(i: number): number[] { return [op.localGet, ...uleb(i)]; }
function set(i: number): number[] { return [op.localSet, ...uleb(i)]; }
function simdOp(o: readonly number[], memarg: number[] = []): number[] { return [op.simd, ...o, ...memarg]; }

function tileBody(): number[] {
  const code: number[] = [];
  // row pointers p_r = a + r·kBytes
  code.push(...get(P.a), ...set(L.p0));
  code.push(...get(L.p0), ...get(P.kBytes), op.i32Add, ...set(L.p1));
  code.push(...get(L.p1), ...get(P.kBytes), op.i32Add, ...set(L.p2));
  code.push(...get(L.p2), ...get(P.kBytes), op.i32Add, ...set(L.p3));
  // accumulators = +0
  for (let i = 0; i < 8; i++) code.push(...simdOp(simd.v128Const, new Array(16).fill(0)), ...set(L.acc + i));
  code.push(op.block, 0x40, op.loop, 0x40);
  code.push(...get(P.bp), ...get(P.bpEnd), op.i32GeU, op.brIf, 1);
  code.push(...get(P.bp), ...simdOp(simd.v128Load, [0x04, 0x00]), ...set(L.b0));
  code.push(...get(P.bp), ...simdOp(simd.v128Load, [0x04, 0x10]), ...set(L.b1));
  const rows = [L.p0, L.p1, L.p2, L.p3];
  rows.forEach((p, r) => {
    code.push(...get(p), op.f32Load, 0x02, 0x00, ...simdOp(simd.f32x4Splat), ...set(L.av));
    for (let h = 0; h < 2; h++) {
      const acc = L.acc + 2 * r + h;
      code.push(...get(acc), ...get(L.av), ...get(h === 0 ? L.b0 : L.b1), ...simdOp(simd.f32x4Mul), ...simdOp(simd.f32x4Add), ...set(acc));
    }
    code.push(...get(p), op.i32Const, 4, op.i32Add, ...set(p));
  });
  code.push(...get(P.bp), op.i32Const, ...[0x20], op.i32Add, ...set(P.bp)); // bp += 32 (i32.const 32 is 0x20 in SLEB)
  code.push(op.br, 0, op.end, op.end);
  // stores: row r at out + r·nBytes, halves at +0 and +16
  for (let r = 0; r < 4; r++) {
    for (let h = 0; h < 2; h++) code.push(...get(P.out), ...get(L.acc + 2 * r + h), ...simdOp(simd.v128Store, [0x04, h * 16]));
    if (r < 3) code.push(...get(P.out), ...get(P.nBytes), op.i32Add, ...set(P.out));
  }
  code.push(op.end);
  const locals = [2, ...uleb(4), 0x7f, ...uleb(11), 0x7b]; // 4 × i32, 11 × v128
  const body = [...locals, ...code];
  return [...uleb(body.length), ...body];
}

function moduleBytes(): Uint8Array {
  return oneFunctionModule('tile', 6, tileBody());
}


/** An instance of the kernel: its memory and its `tile` export. @internal */
export interface WasmKernel {
  readonly memory: WasmMemory;
  readonly tile: (a: number, kBytes: number, bp: number, bpEnd: number, out: number, nBytes: number) => void;
}

let compiled: object | null | undefined;
let kernel: WasmKernel | null | undefined;

/**
 * The compiled kernel module (a `WebAssembly.Module`, which can be posted to worker threads), or null where
 * WebAssembly SIMD is unavailable. Its one export `tile(a, kBytes, bp, bpEnd, out, nBytes)` computes a 4×8
 * block of outputs from 4 rows of A and one packed 8-column panel of B (layout above); `mem` is its memory.
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

/**
 * A new instance of the kernel with its own memory (so callers never share scratch), or null where
 * WebAssembly SIMD is unavailable.
 * @internal
 */
export function newFp32Kernel(): WasmKernel | null {
  const module = fp32KernelModule();
  if (module === null || wasmApi === undefined) return null;
  try {
    const instance = new wasmApi.Instance(module);
    return { memory: instance.exports['mem'] as WasmMemory, tile: instance.exports['tile'] as WasmKernel['tile'] };
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
 * A is copied into WebAssembly memory once; B is packed into 8-column panels per range.
 * @internal
 */
export function fp32Gemm(A: Float32Array, B: Float32Array, m: number, n: number, k: number): (partial: Float32Array, k0: number, k1: number) => void {
  const wk = wasmKernel();
  const m4 = wk === null ? 0 : m - (m % 4);
  const n8 = wk === null ? 0 : n - (n % 8);
  const edges = (partial: Float32Array, k0: number, k1: number): void => {
    for (let i = 0; i < m; i++) {
      for (let j = i < m4 ? n8 : 0; j < n; j++) partial[i * n + j] = scalarDot(A, B, i * k, j * k, k0, k1);
    }
  };
  if (wk === null || m4 === 0 || n8 === 0) return edges;
  // memory layout (bytes): [A: m·k·4][B panels: n8·k·4][out: m4·n8·4]
  const aBytes = m * k * 4;
  const bBytes = n8 * k * 4;
  const outOffset = aBytes + bBytes;
  const need = outOffset + m4 * n8 * 4;
  const have = wk.memory.buffer.byteLength;
  if (need > have) wk.memory.grow(Math.ceil((need - have) / 65536));
  const mem = new Float32Array(wk.memory.buffer);
  mem.set(A, 0);
  const bBase = aBytes / 4;
  return (partial, k0, k1) => {
    const len = k1 - k0;
    if (len <= 0) {
      partial.fill(0);
      return;
    }
    // pack B(j..j+7, k0..k1) as panel[kk][c]
    for (let p = 0; p < n8 / 8; p++) {
      const base = bBase + p * len * 8;
      for (let c = 0; c < 8; c++) {
        const row = (p * 8 + c) * k;
        for (let kk = 0; kk < len; kk++) mem[base + kk * 8 + c] = B[row + k0 + kk] as number;
      }
    }
    const outBase = outOffset / 4;
    for (let i = 0; i < m4; i += 4) {
      for (let p = 0; p < n8 / 8; p++) {
        const bp = aBytes + p * len * 32;
        wk.tile((i * k + k0) * 4, k * 4, bp, bp + len * 32, outOffset + (i * n8 + p * 8) * 4, n8 * 4);
      }
    }
    for (let i = 0; i < m4; i++) {
      for (let j = 0; j < n8; j++) partial[i * n + j] = mem[outBase + i * n8 + j] as number;
    }
    edges(partial, k0, k1);
  };
}
