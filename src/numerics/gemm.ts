// The fast GEMM: the semantics of gemm-reference.ts (accumulator models, K-segments, scales) computed with caches of
// decoded weights, the WebAssembly kernels (fp32/int32 with scales in one call, fp32, hopper-fp8) and an unrolled JS
// kernel. Not a semantics of its own.

import type { FloatFormat, FloatFormatName } from './formats.js';
import { type CellLayout, type QuantizedTensor, elementFormat } from './quantize.js';
import { fp32Gemm } from './kernels/fp32-kernel.js';
import {
  type GemmOptions,
  type GemmSettings,
  checkShapes,
  gemmReference,
  gemmSettings,
  referenceDot,
  segmentBoundaries,
  segmentSteps,
} from './gemm-reference.js';
import {
  SIMD_MIN_WORK,
  accumulateChunkSums,
  cachedExponentTable,
  exponentTable,
  hopperRangeFast,
} from './gemm-hopper.js';
import { hopperChunkSums } from './kernels/hopper-kernel.js';
import { type HopperOperand, hopperGemm } from './kernels/hopper-gemm-kernel.js';
import { fma32 } from './scales.js';
import { type ScaledGemmModel, packPanels, scaledGemmKernel } from './kernels/scaled-gemm-kernel.js';
import { exponentScratch, hopperSegmentScales, cachedPanels, scaleTable, segmentLoopScratch } from './gemm-caches.js';
import type { CodeArray } from './vector.js';
import { roundArray } from './round-array.js';
import { type Operand, decodedOperand, prepareOperands } from './gemm-operands.js';

export {
  type AccumulatorModel,
  type GemmOptions,
  type OperandQuant,
  accumulatorModels,
  hopperFusedDotAdd,
  truncateToE8M,
} from './gemm-reference.js';

/** One gemm call's sizes, settings and K-segment steps, as the paths below read them. */
interface GemmCall {
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly settings: GemmSettings;
  /** The K-segment steps of {@link segmentSteps}. */
  readonly steps: number[];
}

/** What the segment loop's K-ranges read: the call, the decoded operands and the kernels chosen for them. */
interface SegmentLoop {
  readonly call: GemmCall;
  /** A (m, k) and B (n, k) element values, row-major. */
  readonly A: Float32Array;
  readonly B: Float32Array;
  readonly eminA: number;
  readonly eminB: number;
  /** The fp32 kernel of fp32, and of int32 on small integer operands; null otherwise. */
  readonly fp32: ((partial: Float32Array, k0: number, k1: number) => void) | null;
  /** hopper-fp8 exponent tables of A and B; null: not hopper-fp8, or a value is not finite. */
  readonly tables: [Int16Array, Int16Array] | null;
}

/** One K-range [k0, k1) of every output with the reference loops of the model, into `partial`. */
function referenceRange(loop: SegmentLoop, partial: Float32Array, k0: number, k1: number): void {
  const { A, B, eminA, eminB } = loop;
  const { m, n, k, settings: s } = loop.call;
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) partial[i * n + j] = referenceDot(s.model, A, B, i * k, j * k, k0, k1, s, eminA, eminB);
  }
}

/**
 * Whether every `int32` sum of A·Bᵀ is computed exactly by float32 arithmetic: integer operands with
 * k·max|A|·max|B| < 2^24. Then each product and each partial sum is an integer below 2^24 in
 * magnitude, exact in float32, so the sequential float32 sum (fp32 model, any order) equals the
 * integer sum, which never reaches 2^31 and so equals the wrapping int32 sum; it starts at +0 and
 * x + (−x) is +0 in round-to-nearest, so no −0 appears either. INT8 operands (|v| ≤ 128) qualify
 * up to k = 1023.
 */
function int32IsExactInFloat32(A: Float32Array, B: Float32Array, m: number, n: number, k: number): boolean {
  let maxA = 0;
  for (let i = 0; i < m * k; i++) {
    const v = Math.abs(A[i] as number);
    if (v > maxA) maxA = v;
  }
  let maxB = 0;
  for (let i = 0; i < n * k; i++) {
    const v = Math.abs(B[i] as number);
    if (v > maxB) maxB = v;
  }
  return k * maxA * maxB < 2 ** 24;
}

/** {@link segmentBoundaries} without a set for the common cases (no step, one distinct step). */
function boundaries(lo: number, hi: number, steps: number[]): number[] {
  // The distinct finite steps: none, one (the common case) or more.
  let step = 0;
  let several = false;
  for (const s of steps) {
    if (!Number.isFinite(s) || s <= 0) continue;
    if (step === 0) step = s;
    else if (s !== step) several = true;
  }
  if (step === 0) return lo === hi ? [lo] : [lo, hi];
  if (!several) {
    // One step: its multiples inside (lo, hi), in order, without a set.
    const s = step;
    const out = [lo];
    for (let b = Math.ceil(lo / s) * s; b < hi; b += s) if (b > lo) out.push(b);
    if (hi !== lo) out.push(hi);
    return out;
  }
  return segmentBoundaries(lo, hi, steps);
}

/** An operand's hopper-fp8 exponent table: decoded with it, cached with its decoding, or computed into the slot's scratch. */
function exponentsOf(op: Operand, slot: 0 | 1): Int16Array | null {
  if (op.exponents !== undefined) return op.exponents;
  return op.cached
    ? cachedExponentTable(op.values, op.emin)
    : exponentTable(op.values, op.emin, exponentScratch(slot, op.values.length));
}

/** The hopper-fp8 exponent tables of both operands, or null when a value is not finite (the scalar reference runs then). */
function hopperTablesOf(opA: Operand, opB: Operand): [Int16Array, Int16Array] | null {
  const eA = exponentsOf(opA, 0);
  const eB = eA === null ? null : exponentsOf(opB, 1);
  return eA !== null && eB !== null ? [eA, eB] : null;
}

/** One K-range [k0, k1) of every output under the model into `partial` (module level: no per-call closures in the hot path). */
function runRange(loop: SegmentLoop, partial: Float32Array, k0: number, k1: number): void {
  // fp32, and int32 on small integer operands (its float32 sums are then the exact int32 sums: int32IsExactInFloat32).
  if (loop.fp32 !== null) return loop.fp32(partial, k0, k1);
  const { m, n, k, settings } = loop.call;
  if (loop.tables !== null)
    return hopperRangeFast(
      partial,
      loop.A,
      loop.B,
      loop.tables[0],
      loop.tables[1],
      m,
      n,
      k,
      k0,
      k1,
      settings.chunk,
      settings.fractionBits,
    );
  // pairwise, fp64, other int32 operands, hopper-fp8 with a non-finite value: the reference loops.
  return referenceRange(loop, partial, k0, k1);
}

/**
 * The scales of the K-segment starting at `k0`, one per row of `op`, into `dst[at + r]` for r < rows: the cell's scale
 * where `op` is fine-grained, else 1 (its per-row / per-tensor scales go to the epilogue). The one gather of the three
 * paths that apply fine scales inside the K loop (hopper one call, scaled one call, segment loop).
 */
function fineScalesOf(dst: Float32Array | Float64Array, at: number, op: Operand, rows: number, k0: number): void {
  if (!op.fine) {
    dst.fill(1, at, at + rows);
    return;
  }
  const scales = op.scales as Float32Array;
  const layout = op.layout as CellLayout;
  for (let r = 0; r < rows; r++) dst[at + r] = scales[layout.index(r, k0)] as number;
}

/** A one-call kernel operand: its codes, or its values with their exponent table (null: a value is not finite). */
function hopperOperand(op: Operand, slot: 0 | 1): HopperOperand | null {
  const q = op.coded;
  if (q !== null) return { codes: q.codes as CodeArray, format: elementFormat(q.spec.format) as FloatFormat };
  const exps = exponentsOf(op, slot);
  return exps === null ? null : { values: op.values, exps };
}

/**
 * The hopper-fp8 GEMM of finite operands in one {@link hopperGemm} call when every K-segment
 * is one chunk (the last one possibly shorter) and there are enough products to pay for the copies; writes the float32
 * accumulators into `total` and returns true, or returns false (nothing written that the segment
 * loop would read) for the segment loop to run.
 */
function hopperOneCall(total: Float32Array, opA: Operand, opB: Operand, call: GemmCall): boolean {
  const { m, n, k, steps } = call;
  const { chunk, fractionBits } = call.settings;
  const fine = opA.fine || opB.fine;
  // Coded operands cost the kernel no JavaScript pass over their elements: worth the call at any size.
  if (k === 0 || (m * n * k < SIMD_MIN_WORK && (opA.coded === null || opB.coded === null))) return false;
  const bounds = boundaries(0, k, steps);
  const nseg = Math.ceil(k / chunk); // the last segment may be a shorter chunk (K not a multiple of it)
  if (bounds.length !== nseg + 1) return false;
  for (let s = 0; s <= nseg; s++) if (bounds[s] !== Math.min(s * chunk, k)) return false;
  const a = hopperOperand(opA, 0);
  const b = a === null ? null : hopperOperand(opB, 1);
  if (a === null || b === null) return false;
  const scales = hopperSegmentScales(fine ? nseg : 0, m, n);
  if (fine) {
    for (let s = 0; s < nseg; s++) {
      fineScalesOf(scales.a, s * m, opA, m, s * chunk);
      fineScalesOf(scales.b, s * n, opB, n, s * chunk);
    }
  }
  return hopperGemm(total, a, b, {
    m,
    n,
    K: k,
    segLen: chunk,
    fractionBits,
    segmentScales: fine ? scales : null,
    cacheB: opB.cached,
  });
}

/**
 * The `fp32` or `int32` GEMM with all its K-segments, fine-grained scales and epilogue in one
 * {@link scaledGemmKernel} call (splitK 1); writes `out` (before the output rounding) and returns true,
 * or returns false (nothing written) where the kernel does not apply: no WebAssembly SIMD, or int32
 * operands outside the kernel's exact range.
 */
function scaledOneCall(out: Float32Array, opA: Operand, opB: Operand, call: GemmCall, model: ScaledGemmModel): boolean {
  const { m, n, k, steps } = call;
  if (model === 'int32' && !(opA.smallIntegers && opB.smallIntegers)) return false;
  const bounds = boundaries(0, k, steps);
  const nseg = bounds.length - 1;
  const n8 = Math.ceil(n / 8) * 8;
  const fine = opA.fine || opB.fine;
  let segA: Float32Array | null = null;
  let segB: Float32Array | null = null;
  if (fine) {
    // The scales of each K-segment, one per row of A and of B (1 where that operand is not fine-grained).
    segA = scaleTable('segA', nseg * m);
    segB = scaleTable('segB', nseg * n8);
    for (let s = 0; s < nseg; s++) {
      fineScalesOf(segA, s * m, opA, m, bounds[s] as number);
      fineScalesOf(segB, s * n8, opB, n, bounds[s] as number);
    }
  }
  // Per-row / per-tensor scales, applied in the epilogue.
  let rowA: Float32Array | null = null;
  let rowB: Float32Array | null = null;
  if (!opA.fine && opA.scales !== null) {
    rowA = scaleTable('rowA', m);
    for (let i = 0; i < m; i++) rowA[i] = opA.scales[(opA.layout as CellLayout).index(i, 0)] as number;
  }
  if (!opB.fine && opB.scales !== null) {
    rowB = scaleTable('rowB', n);
    for (let j = 0; j < n; j++) rowB[j] = opB.scales[(opB.layout as CellLayout).index(j, 0)] as number;
  }
  return scaledGemmKernel(out, {
    model,
    m,
    n,
    k,
    bounds,
    a: opA.values,
    bPanels: opB.cached ? cachedPanels(model, opB.values, n, k) : packPanels(model, opB.values, n, k),
    segScalesA: segA,
    segScalesB: segB,
    rowScalesA: rowA,
    rowScalesB: rowB,
    global: Math.fround(opA.globalScale * opB.globalScale),
  });
}

/** The output rounding of {@link GemmOptions}.outFormat, in place. */
function roundOutput(out: Float32Array, format: FloatFormatName | undefined): void {
  if (format !== undefined && format !== 'fp32') roundArray(format, out, { profile: 'ieee' }, out);
}

/**
 * {@link GemmOptions} with every field present (possibly undefined): what {@link normalizeGemmOptions} returns. A
 * field added to `O` makes the object literal there fail to compile until it is listed, and {@link fastPathReadsOf}
 * fails until the fast path says where it reads it. @internal
 */
export type NormalizedGemmOptions<O extends GemmOptions = GemmOptions> = { readonly [K in keyof Required<O>]: O[K] };

/**
 * Where the fast path reads each {@link GemmOptions} field (`gemmSettings` is shared with the reference, so a field
 * read there is read on every path). A new field fails to compile here until it is placed. @internal
 */
export const fastPathReadsOf = {
  aQuant: 'prepareOperands',
  bQuant: 'prepareOperands',
  accumulator: 'gemmSettings',
  promoteEvery: 'gemmSettings',
  chunk: 'gemmSettings',
  fractionBits: 'gemmSettings',
  splitK: 'gemmSettings',
  outFormat: 'roundOutput',
  reference: 'gemm (runs gemmReference)',
} as const satisfies Record<keyof GemmOptions, string>;

/**
 * Every {@link GemmOptions} field, present (possibly undefined), in one key order: one object shape for the hot code.
 * No cast: the literal must list exactly the fields of {@link NormalizedGemmOptions}. @internal
 */
export function normalizeGemmOptions(o: GemmOptions): NormalizedGemmOptions {
  return {
    aQuant: o.aQuant,
    bQuant: o.bQuant,
    accumulator: o.accumulator,
    promoteEvery: o.promoteEvery,
    chunk: o.chunk,
    fractionBits: o.fractionBits,
    splitK: o.splitK,
    outFormat: o.outFormat,
    reference: o.reference,
  } satisfies NormalizedGemmOptions;
}

/**
 * out(m×n) = A(m×k)·B(n×k)ᵀ, row-major, under an explicit accumulator model (the argument order of the
 * NN layers: output first, then inputs, then sizes). The semantics, step by step, are `gemmReference`'s (gemm-reference.ts);
 * this computes the same bits with caches and kernels (`reference: true` runs the reference itself).
 *
 * - `a`/`b` are Float32Arrays (rounded by `aQuant`/`bQuant` when that is a format name, quantized when
 *   it is a QuantSpec) or QuantizedTensors used as they are.
 * - Both operands scaled: products of the element values (integer codes minus zero points, or
 *   decoded float codes); fine-grained (group/block) scales are applied inside the K loop, once per
 *   K-segment, as DeepGEMM promotes: `acc = fmaf(fl(s_a·s_b), partial, acc)`; per-tensor/per-row
 *   scales once at the end as CUTLASS's `ScaledEpilogue`: `fl(s_a·fl(s_b·acc))`; NVFP4 global scales
 *   last, as the GEMM's alpha.
 * - One operand scaled (weight-only, W4A16): it is dequantized first and rounded to the other
 *   operand's format when that was given as a format name.
 * - `splitK`: each of the parts is summed from zero, the parts are then added in order in float32.
 *
 * @example
 * ```ts
 * const out = new Float32Array(m * n);
 * gemm(out, x, w, m, n, k, { aQuant: 'bf16', bQuant: 'bf16' });                 // bf16 inputs, fp32 sequential
 * gemm(out, x, wq, m, n, k, { aQuant: quantPreset('deepseek-fp8-group', { block: 16 }), accumulator: 'hopper-fp8', chunk: 16 });
 * ```
 */
export function gemm(
  out: Float32Array,
  a: Float32Array | QuantizedTensor,
  b: Float32Array | QuantizedTensor,
  m: number,
  n: number,
  k: number,
  options: GemmOptions = {},
): Float32Array {
  if (options.reference === true) return gemmReference(out, a, b, m, n, k, options);
  checkShapes(out, a, b, m, n, k);
  // Callers pass option objects of many shapes: read them once, here, into one fixed shape.
  const opts = normalizeGemmOptions(options);
  const settings = gemmSettings(opts);
  const [opA, opB] = prepareOperands(a, b, m, n, k, opts);
  accumulate(out, opA, opB, { m, n, k, settings, steps: segmentSteps(opA, opB, settings) });
  roundOutput(out, opts.outFormat);
  return out;
}

/**
 * `out` = A·Bᵀ before the output rounding, on the first path that applies: the scaled one call (scaled fp32, int32),
 * the hopper-fp8 one call, the plain fp32 kernel (no scales, one K-segment), else the segment loop and the epilogue.
 */
function accumulate(out: Float32Array, preparedA: Operand, preparedB: Operand, call: GemmCall): void {
  const { m, n, k, settings } = call;
  const { model, splitK, chunk, fractionBits } = settings;
  let opA = preparedA;
  let opB = preparedB;
  // Scaled fp32 GEMMs and every int32 GEMM in one call; an fp32 GEMM without scales stays on the fp32 kernel (fp32-kernel.ts).
  const scaled = opA.scales !== null || opB.scales !== null;
  if (splitK === 1 && ((model === 'fp32' && scaled) || model === 'int32') && scaledOneCall(out, opA, opB, call, model))
    return;
  const fine = opA.fine || opB.fine;
  const [partial, acc, total, saK, sbK] = segmentLoopScratch(m, n);
  // Every K-segment one chunk (the presets): the whole hopper-fp8 GEMM in one WebAssembly call, else the segment loop below.
  const global = Math.fround(opA.globalScale * opB.globalScale);
  const rowScalesA = !opA.fine && opA.scales !== null;
  const rowScalesB = !opB.fine && opB.scales !== null;
  // No per-tensor, per-row or global scale: the float32 accumulators are the output (no epilogue pass).
  const bare = !rowScalesA && !rowScalesB && global === 1;
  // (the one call writes its target only after reading every input, so `out` may alias one)
  const oneCall = model === 'hopper-fp8' && splitK === 1 && hopperOneCall(bare ? out : total, opA, opB, call);
  if (!oneCall) {
    opA = decodedOperand(opA, 0);
    opB = decodedOperand(opB, 1);
  }
  const A = opA.values;
  const B = opB.values;
  const fp32 =
    model === 'fp32' || (model === 'int32' && int32IsExactInFloat32(A, B, m, n, k)) ? fp32Gemm(A, B, m, n, k) : null;
  if (
    fp32 !== null &&
    splitK === 1 &&
    !fine &&
    opA.scales === null &&
    opB.scales === null &&
    opA.globalScale === 1 &&
    opB.globalScale === 1
  ) {
    fp32(out, 0, k); // plain sums (one K-segment, no scales): the bits the segment loop and the epilogue below write
    return;
  }
  const hopperTables = model === 'hopper-fp8' && !oneCall ? hopperTablesOf(opA, opB) : null;
  const loop: SegmentLoop = { call, A, B, eminA: opA.emin, eminB: opB.emin, fp32, tables: hopperTables };
  const partSize = Math.ceil(k / splitK);
  for (let p = 0; p < (oneCall ? 0 : splitK); p++) {
    const lo = Math.min(k, p * partSize);
    const hi = Math.min(k, lo + partSize);
    const bounds = boundaries(lo, hi, call.steps);
    acc.fill(0, 0, m * n);
    for (let s = 0; s + 1 < bounds.length; s++) {
      const k0 = bounds[s] as number;
      const k1 = bounds[s + 1] as number;
      // A single-chunk hopper-fp8 segment with enough products runs the WebAssembly step (null: no SIMD here).
      const simd =
        hopperTables !== null && k1 - k0 <= chunk && m * n * (k1 - k0) >= SIMD_MIN_WORK
          ? hopperChunkSums(A, B, hopperTables[0], hopperTables[1], {
              m,
              n,
              k,
              k0,
              k1,
              fractionBits,
              cacheB: opB.cached,
            })
          : null;
      if (simd === null) runRange(loop, partial, k0, k1);
      if (fine) {
        fineScalesOf(saK, 0, opA, m, k0);
        fineScalesOf(sbK, 0, opB, n, k0);
      }
      if (simd !== null) {
        accumulateChunkSums(acc, simd, fine ? { a: saK, b: sbK } : null, m, n, fractionBits);
      } else if (fine) {
        for (let i = 0; i < m; i++) {
          const sa = saK[i] as number;
          for (let j = 0; j < n; j++) {
            const o = i * n + j;
            acc[o] = fma32(Math.fround(sa * (sbK[j] as number)), partial[o] as number, acc[o] as number);
          }
        }
      } else {
        for (let o = 0; o < m * n; o++) acc[o] = Math.fround((acc[o] as number) + (partial[o] as number));
      }
    }
    if (p === 0) for (let o = 0; o < m * n; o++) total[o] = acc[o] as number;
    else for (let o = 0; o < m * n; o++) total[o] = Math.fround((total[o] as number) + (acc[o] as number));
  }
  if (bare) {
    if (!oneCall) out.set(total.subarray(0, m * n));
    return;
  }
  // Epilogue: per-tensor / per-row scales (B first, then A), then the global scales.
  if (rowScalesB)
    for (let j = 0; j < n; j++) sbK[j] = (opB.scales as Float32Array)[(opB.layout as CellLayout).index(j, 0)] as number;
  for (let i = 0; i < m; i++) {
    const sa = rowScalesA ? ((opA.scales as Float32Array)[(opA.layout as CellLayout).index(i, 0)] as number) : null;
    for (let j = 0; j < n; j++) {
      const sb = rowScalesB ? (sbK[j] as number) : null;
      let v = total[i * n + j] as number;
      if (sb !== null) v = Math.fround(sb * v);
      if (sa !== null) v = Math.fround(sa * v);
      if (global !== 1) v = Math.fround(v * global);
      out[i * n + j] = v;
    }
  }
}
