// The seam between the toy policies and precision: PolicyNumerics (GEMM functions and KV-cache rounding
// per site) and its non-quantized implementations (exact fp32; operand rounding to bf16/fp16/tf32). Not a quantizer.

import { gemmSequential, sequentialLinearGemms, type GemmFn, type LinearGemms } from '../nn/gemm.js';
import { sequentialBlockGemms, type BlockGemms } from '../nn/block.js';
import type { AttentionGemms } from '../nn/attention.js';
import { transpose, type FloatArray } from '../nn/array.js';
import type { KvCacheHook } from '../nn/block-decode.js';
import { fakeQuant } from '../numerics/vector.js';
import { roundingKernel, type RoundInto } from '../numerics/round-array.js';
import { floatFormats, type FloatFormat } from '../numerics/formats.js';
import type { CastProfile, CastProfileName } from '../numerics/profiles.js';
import { markGemmOperandImmutable } from '../numerics/threads.js';

/**
 * The GEMM functions and KV-cache rounding one engine (rollout or trainer) uses, built from a
 * precision-plan side at each weight sync.
 *
 * A `PolicyNumerics` is a snapshot of one set of weight values: implementations may cache the
 * rounded or quantized form of a weight by the identity of its array (the `b` operand of a linear
 * layer's forward GEMM). Build a new one whenever the weights change — at each weight sync for the
 * rollout engine, after each optimizer step for the trainer.
 */
export interface PolicyNumerics {
  /** Human-readable description, e.g. `"bf16 operands, fp32 accumulate, bf16 out"`. */
  readonly label: string;
  /** Every GEMM site of block `layer` (q, k, v, o, MLP up/gate/down, attention QKᵀ/PV and their backward). */
  block(layer: number): BlockGemms;
  /** The LM head's GEMMs. */
  lmHead(): LinearGemms;
  /** Applied to each K/V row appended to the rollout KV cache; null = exact (no rounding). */
  kvHook(layer: number): KvCacheHook | null;
}

/** A linear-layer site of a block: the attention projections and the MLP's (the router is apart). */
export type BlockLinearSite = 'q' | 'k' | 'v' | 'o' | 'up' | 'gate' | 'down';

/**
 * The {@link BlockGemms} of one block, frozen: `linear(site)` at each linear site, the attention products,
 * and the router's GEMMs when the block has them (an MoE block's).
 */
export function blockGemmsOf(
  linear: (site: BlockLinearSite) => LinearGemms,
  attention: AttentionGemms,
  router?: LinearGemms,
): BlockGemms {
  return Object.freeze({
    q: linear('q'),
    k: linear('k'),
    v: linear('v'),
    o: linear('o'),
    mlp: Object.freeze({ up: linear('up'), gate: linear('gate'), down: linear('down') }),
    attention,
    ...(router === undefined ? {} : { router }),
  });
}

/**
 * Exact fp32 numerics: {@link gemmSequential} at every site (IEEE float32 for Float32Array
 * outputs, plain doubles for Float64Array ones, which is what the gradient checks use), no KV hook.
 *
 * @example
 * ```ts
 * const numerics = fp32Numerics();
 * numerics.block(0).q.forward === gemmSequential; // true
 * ```
 */
export function fp32Numerics(): PolicyNumerics {
  return FP32_NUMERICS;
}

const FP32_NUMERICS: PolicyNumerics = Object.freeze({
  label: 'fp32',
  block: () => sequentialBlockGemms,
  lmHead: () => sequentialLinearGemms,
  kvHook: () => null,
});

/** Formats an operand (or a GEMM output) can be rounded to by {@link roundingNumerics}. */
export type RoundingFormat = 'bf16' | 'fp16' | 'tf32';

/**
 * How the fp32 accumulator sums the k products of one output element:
 * - `fp32`: sequentially over p = 0 … k−1 from +0 (the trainer's kernel, {@link gemmSequential});
 * - `pairwise`: a balanced binary tree, {@link pairwiseSum} (a tree-reduction kernel);
 * - `split-k`: k split into chunks of `splitK` consecutive products, each summed sequentially
 *   from +0, and the chunk partial sums added sequentially (a split-K kernel).
 * Every product and every add is rounded to float32.
 */
export type AccumulatorOrder = 'fp32' | 'pairwise' | 'split-k';

/** Options of {@link roundingNumerics}. */
export interface RoundingNumericsOptions {
  /** Both operands of every GEMM are rounded to this format before the products. */
  readonly operands: RoundingFormat;
  /** If set, every GEMM output is rounded to this format (a kernel that writes bf16/fp16). @defaultValue none (fp32 out) */
  readonly out?: 'bf16' | 'fp16';
  /** Cast profile of the roundings. @defaultValue 'ieee' (round to nearest even, overflow to ±Inf) */
  readonly profile?: CastProfile | CastProfileName;
  /** Accumulation order of the fp32 accumulator. @defaultValue 'fp32' (sequential) */
  readonly accumulator?: AccumulatorOrder;
  /** Chunk length of the `split-k` accumulator. @defaultValue 16 */
  readonly splitK?: number;
  /**
   * `split-k` only: use split-K only in GEMMs of at most this many rows (the tokens the engine
   * batches into one GEMM: B in a decode step, B·P in a prefill), sequential accumulation above —
   * a kernel choice that depends on the batch the engine runs (docs/engine-paths.md).
   * @defaultValue unset (split-K in every GEMM)
   */
  readonly splitKMaxRows?: number;
}

/** The token count of the engine step being computed, or null (each GEMM's own row count). */
let kernelRows: number | null = null;

/**
 * Runs `fn` with every linear layer's batch-dependent kernel choice ({@link RoundingNumericsOptions.splitKMaxRows})
 * made for `rows` tokens instead of the rows of each GEMM call: the tokens of one engine step, which
 * an engine that computes a step as several calls (per request, per prefill chunk) runs as one GEMM.
 * `Infinity` picks the large-batch kernel at every step (the batch-invariant switch). Attention GEMMs
 * keep their own shape. Calls nest; the previous value is restored on return or throw.
 *
 * @example
 * ```ts
 * const logits = withKernelRows(24, () => arDecodeStep(policy, state, tokens, numerics));
 * ```
 */
export function withKernelRows<T>(rows: number, fn: () => T): T {
  if (!(rows >= 1)) throw new Error(`withKernelRows: rows must be ≥ 1, got ${rows}`);
  const before = kernelRows;
  kernelRows = rows;
  try {
    return fn();
  } finally {
    kernelRows = before;
  }
}

/**
 * Sum of `x[lo … lo+n−1]` by a balanced binary tree: one element is itself, otherwise
 * `fround(sum(first ⌈n/2⌉) + sum(last ⌊n/2⌋))`. `n = 0` gives +0.
 */
export function pairwiseSum(x: Float64Array | Float32Array, lo: number, n: number): number {
  if (n <= 0) return 0;
  if (n === 1) return x[lo]!;
  const h = Math.ceil(n / 2);
  return Math.fround(pairwiseSum(x, lo, h) + pairwiseSum(x, lo + h, n - h));
}

/** A float32 GEMM with the pairwise accumulator (products rounded to float32). */
function gemmPairwise(out: FloatArray, a: FloatArray, b: FloatArray, m: number, n: number, k: number): void {
  const prod = new Float64Array(k); // (k) rounded products of one output element
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      for (let p = 0; p < k; p++) prod[p] = Math.fround(a[i * k + p]! * b[j * k + p]!);
      out[i * n + j] = pairwiseSum(prod, 0, k);
    }
  }
}

/** A float32 GEMM with the split-K accumulator of chunk length `chunk`. */
function gemmSplitK(chunk: number): GemmFn {
  return (out, a, b, m, n, k) => {
    const fr = Math.fround;
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let total = 0;
        for (let p0 = 0; p0 < k; p0 += chunk) {
          const end = Math.min(k, p0 + chunk);
          let part = 0;
          for (let p = p0; p < end; p++) part = fr(part + fr(a[i * k + p]! * b[j * k + p]!));
          total = fr(total + part);
        }
        out[i * n + j] = total;
      }
    }
  };
}

function accumulatorGemm(order: AccumulatorOrder, splitK: number): GemmFn {
  if (order === 'fp32') return gemmSequential;
  if (order === 'pairwise') return gemmPairwise;
  return gemmSplitK(splitK);
}

function asFloat32(x: FloatArray): Float32Array {
  return x instanceof Float32Array ? x : Float32Array.from(x);
}

/**
 * Numerics that round both operands of every GEMM to `operands` (round to nearest even under the
 * `ieee` profile by default: the values of the numerics core's {@link fakeQuant}, computed by its
 * fused rounding kernel), accumulate in fp32 (sequentially, unless `accumulator` says otherwise) and optionally round the output to `out`.
 * No KV hook: K and V are operands of the attention GEMMs and are rounded there already.
 *
 * The rounded `b` operand of every linear forward GEMM (the weight matrix) is cached by array
 * identity for the life of this object, so build a new one when the weights change.
 *
 * @example
 * ```ts
 * const rollout = roundingNumerics({ operands: 'bf16', out: 'bf16', accumulator: 'split-k' });
 * const trainer = roundingNumerics({ operands: 'bf16', out: 'bf16' });
 * ```
 */
export function roundingNumerics(options: RoundingNumericsOptions): PolicyNumerics {
  const { operands, out } = options;
  const profile = options.profile ?? 'ieee';
  const order = options.accumulator ?? 'fp32';
  const splitK = options.splitK ?? 16;
  if (!['bf16', 'fp16', 'tf32'].includes(operands))
    throw new Error(`roundingNumerics: operands must be bf16, fp16 or tf32, got ${JSON.stringify(operands)}`);
  if (out !== undefined && !['bf16', 'fp16'].includes(out))
    throw new Error(`roundingNumerics: out must be bf16 or fp16, got ${JSON.stringify(out)}`);
  if (!['fp32', 'pairwise', 'split-k'].includes(order))
    throw new Error(`roundingNumerics: accumulator must be fp32, pairwise or split-k, got ${JSON.stringify(order)}`);
  if (!Number.isInteger(splitK) || splitK < 1)
    throw new Error(`roundingNumerics: splitK must be a positive integer, got ${splitK}`);
  const maxRows = options.splitKMaxRows;
  if (maxRows !== undefined && (!Number.isInteger(maxRows) || maxRows < 1 || order !== 'split-k'))
    throw new Error(
      `roundingNumerics: splitKMaxRows must be a positive integer with accumulator split-k, got ${maxRows}`,
    );
  const byOrder = accumulatorGemm(order, splitK);
  const accumulate: GemmFn =
    maxRows === undefined ? byOrder : (o, a, b, m, n, k) => (m <= maxRows ? byOrder : gemmSequential)(o, a, b, m, n, k);
  // A linear layer's kernel follows the tokens of the engine step that runs it (withKernelRows).
  const accumulateLinear: GemmFn =
    maxRows === undefined
      ? byOrder
      : (o, a, b, m, n, k) => ((kernelRows ?? m) <= maxRows ? byOrder : gemmSequential)(o, a, b, m, n, k);
  const opFormat = floatFormats[operands];
  const outFormat = out === undefined ? null : floatFormats[out];
  // The fused rounding of a format (fakeQuant's values), compiled at its first use: a profile that
  // does not cover the format, or a stochastic one, fails where fakeQuant would, at the first GEMM.
  const kernelOf = (format: FloatFormat): RoundInto => {
    let kernel: RoundInto | null = null;
    return (src, dst) => (kernel ??= roundingKernel(format, profile))(src, dst);
  };
  // GEMMs are not re-entrant, so each operand slot owns one growing scratch array.
  // The view of the last length is kept: consecutive calls mostly share a shape (one per decode step).
  const slot = (format: FloatFormat) => {
    const roundTo = kernelOf(format);
    let values = new Float32Array(0);
    let valuesView = values;
    return (x: FloatArray): Float32Array => {
      const n = x.length;
      if (values.length < n) values = new Float32Array(n);
      if (valuesView.length !== n || valuesView.buffer !== values.buffer) valuesView = values.subarray(0, n);
      roundTo(asFloat32(x), valuesView);
      return valuesView;
    };
  };
  /** The first `n` elements of `x`, without a new view when that is all of it. */
  const head = (x: FloatArray, n: number): FloatArray => (x.length === n ? x : x.subarray(0, n));
  const roundA = slot(opFormat);
  const roundB = slot(opFormat);
  const roundOut = outFormat ? slot(outFormat) : null;
  const roundOutInPlace = outFormat ? kernelOf(outFormat) : null;
  const roundOp = kernelOf(opFormat);
  const round = (x: FloatArray): Float32Array => {
    const xf = asFloat32(x);
    const rounded = new Float32Array(xf.length);
    roundOp(xf, rounded);
    return rounded;
  };
  const finish = (o: FloatArray): void => {
    if (o instanceof Float32Array && roundOutInPlace) roundOutInPlace(o, o);
    else if (roundOut) o.set(roundOut(o));
  };
  /** A GEMM rounding both operands per call. */
  const gemm: GemmFn = (o, a, b, m, n, k) => {
    accumulate(o, roundA(head(a, m * k)), roundB(head(b, n * k)), m, n, k);
    finish(head(o, m * n));
  };
  // The backward's operands rounded once each (linearBackward): dout for both products, the weight's
  // transpose once per weight array, the input once for every layer that reads it.
  // Inputs of linear forwards with their rounding, by array identity: q, k and v read one normalized
  // input, MLP up and gate another, and the backward rounds the same inputs again for wgrad. Rounding is
  // a function of the float32 bits, so a remembered result is used only for an input whose bits are
  // still those it was made from (a buffer reused with new values is rounded afresh). A ring of
  // REMEMBERED slots whose buffers are reused: a decode step allocates nothing, and a forward of up to
  // about REMEMBERED/4 blocks is still there for its backward (beyond that it is rounded again).
  const REMEMBERED = 64;
  // Inputs below REMEMBER_MIN elements (a decode step's rows) are rounded per call: at that size the
  // bookkeeping measured slower than the rounding it saves (the bf16 rollout of `bench sizes` tiny).
  const REMEMBER_MIN = 4096;
  const ring = Array.from({ length: REMEMBERED }, () => ({
    key: null as FloatArray | null,
    bits: new Uint32Array(0),
    rounded: new Float32Array(0),
    n: 0,
  }));
  let next = 0;
  const remembered = (x: FloatArray, xf: Float32Array): Float32Array | null => {
    for (const slot of ring) {
      if (slot.key !== x) continue;
      if (slot.n !== xf.length) return null;
      const bits = new Uint32Array(xf.buffer, xf.byteOffset, xf.length);
      for (let i = 0; i < bits.length; i++) if (bits[i] !== slot.bits[i]) return null;
      return slot.rounded.length === slot.n ? slot.rounded : slot.rounded.subarray(0, slot.n);
    }
    return null;
  };
  const remember = (x: FloatArray, xf: Float32Array): Float32Array => {
    const n = xf.length;
    let slot = ring.find((e) => e.key === x); // an input rounded before with other bits: its own slot
    if (slot === undefined) {
      slot = ring[next]!;
      next = (next + 1) % REMEMBERED;
    }
    if (slot.bits.length < n) {
      slot.bits = new Uint32Array(n);
      slot.rounded = new Float32Array(n);
    }
    slot.key = null; // until both copies are whole
    slot.bits.set(new Uint32Array(xf.buffer, xf.byteOffset, n));
    const rounded = slot.rounded.length === n ? slot.rounded : slot.rounded.subarray(0, n);
    roundOp(xf, rounded);
    slot.n = n;
    slot.key = x;
    return rounded;
  };
  /** The rounding of every element of `src` into `dst`. */
  const roundInto = (dst: Float32Array, src: FloatArray): void => {
    const xf = asFloat32(src);
    const known = remembered(src, xf);
    if (known !== null) dst.set(known);
    else roundOp(xf, dst);
  };
  /** The rounding of a linear forward's input (remembered for the layers and the backward that read it again). */
  const roundInput = (x: FloatArray): Float32Array => {
    const xf = asFloat32(x);
    if (xf.length < REMEMBER_MIN) return roundA(xf);
    return remembered(x, xf) ?? remember(x, xf);
  };
  const weightCache = new WeakMap<FloatArray, Float32Array>();
  /** A GEMM whose `b` operand is a weight: rounded once per array identity. */
  const weightGemm: GemmFn = (o, a, b, m, n, k) => {
    let wb = weightCache.get(b);
    if (wb === undefined) {
      wb = round(b);
      weightCache.set(b, wb);
      markGemmOperandImmutable(wb); // nothing writes wb: its packed panels may be kept
    }
    accumulateLinear(o, roundInput(head(a, m * k)), wb, m, n, k);
    finish(head(o, m * n));
  };
  /** A GEMM whose operands are rounded already. */
  const gemmRounded: GemmFn = (o, a, b, m, n, k) => {
    accumulate(o, head(a, m * k), head(b, n * k), m, n, k);
    finish(head(o, m * n));
  };
  const weightTCache = new WeakMap<
    FloatArray,
    { readonly OC: number; readonly C: number; readonly values: Float32Array }
  >();
  const roundedWeightT = (weight: FloatArray, OC: number, C: number): Float32Array => {
    const known = weightTCache.get(weight);
    if (known !== undefined && known.OC === OC && known.C === C) return known.values;
    const weightT = new Float32Array(C * OC); // (C, OC)
    transpose(weightT, weight, OC, C);
    const values = new Float32Array(C * OC); // (C, OC) round(weightᵀ)
    roundInto(values, weightT);
    weightTCache.set(weight, { OC, C, values });
    markGemmOperandImmutable(values); // nothing writes it: its packed panels may be kept
    return values;
  };
  const backwardRounding = Object.freeze({ dgrad: gemm, wgrad: gemm, round: roundInto, gemmRounded, roundedWeightT });
  const linear: LinearGemms = Object.freeze({ forward: weightGemm, dgrad: gemm, wgrad: gemm, backwardRounding });
  // The decode path rounds each cached K/V element once (elementwise, as roundB does, straight into
  // its rounded copy of the cache) and calls this.
  const gemmRoundedB: GemmFn = (o, a, b, m, n, k) => {
    accumulate(o, roundA(head(a, m * k)), head(b, n * k), m, n, k);
    finish(head(o, m * n));
  };
  const decodeRounding = Object.freeze({
    qk: gemm,
    pv: gemm,
    roundB: (dst: Float32Array, src: Float32Array) => roundOp(src, dst),
    qkRoundedB: gemmRoundedB,
    pvRoundedB: gemmRoundedB,
  });
  // the six attention products, forward and backward, all through the one fp32 gemm
  const products = { qk: gemm, pv: gemm, dScores: gemm, dValues: gemm, dQuery: gemm, dKey: gemm };
  const operandRounding = Object.freeze({ ...products, round: roundInto, gemmRounded });
  const attention: AttentionGemms = Object.freeze({ ...products, decodeRounding, operandRounding });
  const block = blockGemmsOf(() => linear, attention, linear);
  const acc =
    order === 'fp32'
      ? 'fp32 accumulate'
      : order === 'pairwise'
        ? 'fp32 pairwise accumulate'
        : `fp32 split-K accumulate (chunk ${splitK}${maxRows === undefined ? '' : `, GEMMs of ≤ ${maxRows} rows`})`;
  const label = `${operands} operands, ${acc}${out ? `, ${out} out` : ''}${profile === 'ieee' ? '' : `, profile ${typeof profile === 'string' ? profile : profile.name}`}`;
  return Object.freeze({ label, block: () => block, lmHead: () => linear, kvHook: () => null });
}
