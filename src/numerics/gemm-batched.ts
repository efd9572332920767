// Many small independent GEMMs of one shape in one call, each equal bit for bit to its own gemm call:
// per-tensor dynamic operand scales computed for every pair in one quantizer pass (one scale cell per
// pair), then each pair's accumulation. Not a semantics of its own: gemm-reference.ts is the definition.

import { decodeWithExponents, hopperRangeFast } from './gemm-hopper.js';
import {
  type GemmOptions,
  type OperandQuant,
  gemmSettings,
  referenceDot,
  segmentBoundaries,
} from './gemm-reference.js';
import { gemm } from './gemm.js';
import { castProfile } from './profiles.js';
import { amaxRun, grown } from './quant-cells.js';
import {
  type QuantSpec,
  type QuantizedTensor,
  createQuantizeScratch,
  elementFormat,
  quantizeTransient,
} from './quantize.js';
import type { FloatFormat } from './formats.js';
import { roundArray } from './round-array.js';

/**
 * The per-row version of a per-tensor quantizer: on a (count, len) matrix whose rows are `count`
 * tensors laid end to end, one scale cell per row is one per tensor. Cached per spec object.
 */
const rowSpecs = new WeakMap<QuantSpec, QuantSpec>();

function perRowSpec(spec: QuantSpec): QuantSpec {
  let r = rowSpecs.get(spec);
  if (r === undefined) {
    r = Object.freeze({ ...spec, granularity: { kind: 'row' } }) as QuantSpec;
    rowSpecs.set(spec, r);
  }
  return r;
}

/**
 * Whether one quantizer pass over all pairs (per-row scales) gives each pair's per-tensor quantization
 * bit for bit: a per-tensor `amax` rule (each cell's scale is a function of that cell's amax alone),
 * a float format of at most 8 bits, and a deterministic rounding mode. Other specs take one gemm per pair.
 */
function batchableSpec(q: OperandQuant | undefined): q is QuantSpec {
  if (q === undefined || typeof q === 'string') return false;
  if (q.granularity.kind !== 'tensor' || q.scale.kind !== 'amax') return false;
  const fmt = elementFormat(q.format);
  if (fmt.kind !== 'float' || fmt.bits > 8) return false;
  const profile = q.profile ?? 'satfinite';
  const mode = q.mode ?? (typeof profile === 'string' ? castProfile(profile) : profile).mode;
  return mode !== 'stochastic';
}

/** Scratch of {@link gemmBatched}, grown on demand (nothing it calls re-enters it). */
const batchScratch = {
  quantize: [createQuantizeScratch(), createQuantizeScratch()] as const,
  values: [new Float32Array(256), new Float32Array(256)] as [Float32Array, Float32Array],
  exponents: [new Int16Array(256), new Int16Array(256)] as [Int16Array, Int16Array],
  partial: new Float32Array(64),
  acc: new Float32Array(64),
  total: new Float32Array(64),
};

/** Element values (and hopper-fp8 exponents, 0x7fff for a non-finite code) of a quantized batch operand, in scratch slot `slot`. */
function decodedOperand(q: QuantizedTensor, n: number, slot: 0 | 1): [Float32Array, Int16Array, boolean] {
  const s = batchScratch;
  if (s.values[slot].length < n) s.values[slot] = new Float32Array(Math.max(n, 2 * s.values[slot].length));
  if (s.exponents[slot].length < n) s.exponents[slot] = new Int16Array(Math.max(n, 2 * s.exponents[slot].length));
  const values = s.values[slot].subarray(0, n);
  const exps = s.exponents[slot].subarray(0, n);
  const [, table] = decodeWithExponents(q, elementFormat(q.spec.format) as FloatFormat, values, exps);
  return [values, exps, table !== null];
}

/** Whether exps[from, to) holds no non-finite sentinel. */
function finiteRange(exps: Int16Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (exps[i] === 0x7fff) return false;
  return true;
}

/** Elements of one row of the memo's quantization batch before its sentinel (any width gives the same codes). */
const MEMO_ROW = 15;

/**
 * What {@link gemmBatched} remembers of a B operand between calls: its input bits, each pair's amax, and
 * the element values, hopper-fp8 exponents and scales they quantized to. Opaque; one per call site.
 */
export interface BatchedOperandMemo {
  /** @internal */
  state: MemoState | null;
  /** @internal Two sets of arrays, used in turn: the state's, and the next call's. */
  readonly buffers: MemoBuffers[];
  /** @internal */
  next: number;
}

interface MemoBuffers {
  values: Float32Array;
  exps: Int16Array;
  input: Float32Array;
  amax: Float32Array;
  scales: Float32Array;
}

function memoBuffers(): MemoBuffers {
  return {
    values: new Float32Array(0),
    exps: new Int16Array(0),
    input: new Float32Array(0),
    amax: new Float32Array(0),
    scales: new Float32Array(0),
  };
}

interface MemoState {
  readonly spec: QuantSpec;
  readonly count: number;
  readonly rows: number;
  readonly cols: number;
  readonly input: Float32Array;
  readonly amax: Float32Array;
  readonly values: Float32Array;
  readonly exps: Int16Array;
  readonly scales: Float32Array;
  readonly finite: boolean;
}

/** An empty memo for {@link gemmBatched}'s B operand. */
export function createBatchedOperandMemo(): BatchedOperandMemo {
  return { state: null, buffers: [memoBuffers(), memoBuffers()], next: 0 };
}

/** Scratch of {@link rememberedOperand}'s quantization batch, grown on demand. */
const memoScratch = {
  quantize: createQuantizeScratch(),
  rows: new Float32Array(256) as Float32Array,
  /** Per batch element: its index in the operand (−1: padding or sentinel). */
  where: new Int32Array(256),
  status: new Uint8Array(64),
  amax: new Float32Array(64) as Float32Array,
};

/** Whether the int32 words a[ao …] and b[bo …] of length n are equal. */
function sameWords(a: Int32Array, ao: number, b: Int32Array, bo: number, n: number): boolean {
  for (let i = 0; i < n; i++) if (a[ao + i] !== b[bo + i]) return false;
  return true;
}

function bitsOf(x: Float32Array): Int32Array {
  return new Int32Array(x.buffer, x.byteOffset, x.length);
}

/**
 * B (count, R, K) quantized per pair (per-tensor), through the memo. When the previous call's B was
 * (count, R', K') with R' ≤ R and K' ≤ K, a pair whose elements inside that block have the previous bits, and whose amax is unchanged, has the same
 * cell parameters (an amax rule's scale and factor are functions of the amax alone) and so the same
 * codes there: they are copied, and only the other elements are quantized. Every element quantized
 * here goes through one quantizer call over rows of at most {@link MEMO_ROW} elements of one pair plus
 * a sentinel equal to that pair's amax (padding zeros), so each row's amax, and with it every code,
 * is the pair's.
 */
function rememberedOperand(
  memo: BatchedOperandMemo,
  spec: QuantSpec,
  x: Float32Array,
  count: number,
  R: number,
  K: number,
): [Float32Array, Int16Array, boolean, Float32Array] {
  const len = R * K;
  const amaxNan = spec.amaxNan ?? 'ignore';
  // Only an operand that contains the previous one (rows and columns kept or grown): its amax continues the previous amax.
  const last = memo.state;
  const prev =
    last !== null && last.spec === spec && last.count === count && last.rows <= R && last.cols <= K ? last : null;
  const ms = memoScratch;
  if (ms.status.length < count) {
    ms.status = new Uint8Array(Math.max(count, 2 * ms.status.length));
    ms.amax = new Float32Array(Math.max(count, 2 * ms.amax.length));
  }
  const status = ms.status; // 1: copy the previous block, quantize the rest; 0: quantize the whole pair
  const amax = ms.amax;
  const xBits = bitsOf(x);
  const R0 = prev ? Math.min(R, prev.rows) : 0;
  const K0 = prev ? Math.min(K, prev.cols) : 0;
  const prevLen = prev ? prev.rows * prev.cols : 0;
  let quantized = 0; // elements to quantize
  for (let p = 0; p < count; p++) {
    const o = p * len;
    let reuse = prev !== null && R0 > 0 && K0 > 0;
    if (reuse) {
      const pBits = bitsOf((prev as MemoState).input);
      const cols = (prev as MemoState).cols;
      if (cols === K)
        reuse = sameWords(xBits, o, pBits, p * prevLen, R0 * K); // the old block is one run
      else for (let r = 0; reuse && r < R0; r++) reuse = sameWords(xBits, o + r * K, pBits, p * prevLen + r * cols, K0);
    }
    let am: number;
    if (reuse) {
      am = (prev as MemoState).amax[p] as number;
      if (K0 < K) for (let r = 0; r < R0; r++) am = amaxRun(x, o + r * K + K0, o + (r + 1) * K, am, amaxNan);
      am = amaxRun(x, o + R0 * K, o + len, am, amaxNan);
      reuse = Object.is(am, (prev as MemoState).amax[p]);
    } else am = amaxRun(x, o, o + len, 0, amaxNan);
    amax[p] = am;
    status[p] = reuse ? 1 : 0;
    quantized += reuse ? len - R0 * K0 : len;
  }
  // The quantization batch: each pair's elements to quantize, MEMO_ROW per row, then the pair's amax.
  const width = MEMO_ROW + 1;
  let rowsTotal = 0;
  for (let p = 0; p < count; p++) rowsTotal += Math.ceil((status[p] === 1 ? len - R0 * K0 : len) / MEMO_ROW);
  const cap = rowsTotal * width;
  if (ms.rows.length < cap) {
    ms.rows = new Float32Array(Math.max(cap, 2 * ms.rows.length));
    ms.where = new Int32Array(Math.max(cap, 2 * ms.where.length));
  }
  const rows = ms.rows.subarray(0, cap);
  const where = ms.where;
  const pairOfRow = new Int32Array(rowsTotal);
  let row = 0;
  let col = 0;
  const push = (p: number, i: number): void => {
    if (col === 0) pairOfRow[row] = p;
    rows[row * width + col] = x[i] as number;
    where[row * width + col] = i;
    if (++col === MEMO_ROW) {
      rows[row * width + MEMO_ROW] = amax[p] as number;
      where[row * width + MEMO_ROW] = -1;
      row++;
      col = 0;
    }
  };
  const closeRow = (p: number): void => {
    if (col === 0) return;
    for (; col < MEMO_ROW; col++) {
      rows[row * width + col] = 0;
      where[row * width + col] = -1;
    }
    rows[row * width + MEMO_ROW] = amax[p] as number;
    where[row * width + MEMO_ROW] = -1;
    row++;
    col = 0;
  };
  for (let p = 0; p < count; p++) {
    const o = p * len;
    if (status[p] === 1) {
      for (let r = 0; r < R0; r++) for (let c = K0; c < K; c++) push(p, o + r * K + c);
      for (let i = o + R0 * K; i < o + len; i++) push(p, i);
    } else for (let i = o; i < o + len; i++) push(p, i);
    closeRow(p);
  }
  const q = quantizeTransient(perRowSpec(spec), rows, [rowsTotal, width], ms.quantize);
  const [cv, ce, compactFinite] = decodedOperand(q, cap, 1); // slot 1: A's values are in slot 0
  const n = count * len;
  // The result goes into the memo's other buffers (the previous result, read below, stays in its own).
  const buf = memo.buffers[memo.next]!;
  memo.next ^= 1;
  if (buf.values.length < n) {
    const size = Math.max(n, 2 * buf.values.length);
    buf.values = new Float32Array(size);
    buf.exps = new Int16Array(size);
    buf.input = new Float32Array(size);
  }
  if (buf.amax.length < count) {
    buf.amax = new Float32Array(count);
    buf.scales = new Float32Array(count);
  }
  const values = buf.values.subarray(0, n);
  const exps = buf.exps.subarray(0, n);
  const scales = buf.scales.subarray(0, count);
  for (let p = 0; p < count; p++) {
    if (status[p] !== 1) continue;
    const { values: pv, exps: pe, cols } = prev as MemoState;
    const o = p * len;
    const po = p * prevLen;
    if (cols === K) {
      // Rows kept whole (keys: rows appended): the old block is one run.
      values.set(pv.subarray(po, po + R0 * K), o);
      exps.set(pe.subarray(po, po + R0 * K), o);
    } else {
      for (let r = 0; r < R0; r++) {
        const from = po + r * cols;
        const to = o + r * K;
        for (let c = 0; c < K0; c++) {
          values[to + c] = pv[from + c] as number;
          exps[to + c] = pe[from + c] as number;
        }
      }
    }
    scales[p] = (prev as MemoState).scales[p] as number;
  }
  for (let rr = 0; rr < rowsTotal; rr++) {
    scales[pairOfRow[rr] as number] = q.scales[rr] as number;
    for (let c = 0; c < MEMO_ROW; c++) {
      const i = where[rr * width + c] as number;
      if (i < 0) break;
      values[i] = cv[rr * width + c] as number;
      exps[i] = ce[rr * width + c] as number;
    }
  }
  // No non-finite code among those quantized here nor those copied (conservative: false only costs gemmBatched a per-pair check).
  const finite = compactFinite && (prev === null || prev.finite);
  const input = buf.input.subarray(0, n);
  input.set(x.subarray(0, n)); // same element type: a copy of the bytes
  const amaxKept = buf.amax.subarray(0, count);
  amaxKept.set(amax.subarray(0, count));
  memo.state = { spec, count, rows: R, cols: K, input, amax: amaxKept, values, exps, scales, finite };
  return [values, exps, finite, scales];
}

/**
 * `count` independent GEMMs of one shape: for every p in [0, count),
 * `out[p·m·n …](m×n) = A[p·m·k …](m×k) · B[p·n·k …](n×k)ᵀ`, each exactly as
 * `gemm(outₚ, Aₚ, Bₚ, m, n, k, options)` computes it (tests compare them with `Object.is`).
 *
 * The fast path covers per-tensor dynamic quantizers on both operands (e.g. `vllm-fp8-tensor`, FP8
 * attention's QKᵀ and PV per sequence and head): every pair's scale and codes come from one quantizer
 * pass over all pairs with one scale cell per pair, then each pair is accumulated under the model with
 * its own scale pair in the epilogue. Anything else runs one {@link gemm} per pair.
 *
 * With `bMemo`, B's quantization is remembered: a later call re-quantizes only the pairs whose amax
 * changed and, in the others, only the elements outside the previous call's (n, k) block or whose bits
 * differ from that call's (a decode step's keys and values grow by one row or column per step). The
 * result is the same bits with or without it.
 *
 * @param out - (count, m, n)
 * @param a - (count, m, k)
 * @param b - (count, n, k)
 * @param bMemo - B's memo from {@link createBatchedOperandMemo} (one per call site that sees related operands)
 */
export function gemmBatched(
  out: Float32Array,
  a: Float32Array,
  b: Float32Array,
  count: number,
  m: number,
  n: number,
  k: number,
  options: GemmOptions = {},
  bMemo?: BatchedOperandMemo,
): Float32Array {
  const dims = [count, m, n, k].every((d) => Number.isInteger(d) && d >= 0);
  if (!dims || out.length !== count * m * n || a.length !== count * m * k || b.length !== count * n * k) {
    throw new Error(
      `gemmBatched: shapes do not match count × out(m×n) = A(m×k)·B(n×k)ᵀ with count = ${count}, m = ${m}, n = ${n}, k = ${k}: ` +
        `out has ${out.length} elements (need ${count * m * n}), A ${a.length} (need ${count * m * k}), B ${b.length} (need ${count * n * k})`,
    );
  }
  const settings = gemmSettings(options);
  const fast =
    options.reference !== true &&
    settings.model !== 'int32' &&
    count > 0 &&
    m > 0 &&
    n > 0 &&
    k > 0 &&
    batchableSpec(options.aQuant) &&
    batchableSpec(options.bQuant);
  if (!fast) {
    for (let p = 0; p < count; p++) {
      gemm(
        out.subarray(p * m * n, (p + 1) * m * n),
        a.subarray(p * m * k, (p + 1) * m * k),
        b.subarray(p * n * k, (p + 1) * n * k),
        m,
        n,
        k,
        options,
      );
    }
    return out;
  }
  const s = batchScratch;
  const qa = quantizeTransient(perRowSpec(options.aQuant as QuantSpec), a, [count, m * k], s.quantize[0]);
  const [A, eA, finiteA] = decodedOperand(qa, count * m * k, 0);
  let B: Float32Array;
  let eB: Int16Array;
  let finiteB: boolean;
  let scalesB: Float32Array;
  if (bMemo !== undefined) {
    [B, eB, finiteB, scalesB] = rememberedOperand(bMemo, options.bQuant as QuantSpec, b, count, n, k);
  } else {
    const qb = quantizeTransient(perRowSpec(options.bQuant as QuantSpec), b, [count, n * k], s.quantize[1]);
    [B, eB, finiteB] = decodedOperand(qb, count * n * k, 1);
    scalesB = qb.scales;
  }
  const eminA = (elementFormat(qa.spec.format) as FloatFormat).emin;
  const eminB = (elementFormat((options.bQuant as QuantSpec).format) as FloatFormat).emin;
  const { model, splitK, chunk, promoteEvery, fractionBits } = settings;
  const hopper = model === 'hopper-fp8';
  const steps = [hopper && promoteEvery > 0 ? promoteEvery * chunk : Infinity];
  // The K-segments of every split-K part: the same for every pair.
  const partSize = Math.ceil(k / splitK);
  const parts: number[][] = [];
  for (let p = 0; p < splitK; p++) {
    const lo = Math.min(k, p * partSize);
    parts.push(segmentBoundaries(lo, Math.min(k, lo + partSize), steps));
  }
  const mn = m * n;
  s.partial = grown(s.partial, mn);
  s.acc = grown(s.acc, mn);
  s.total = grown(s.total, mn);
  const { partial, acc, total } = s;
  const fr = Math.fround;
  for (let p = 0; p < count; p++) {
    const pa = p * m * k;
    const pb = p * n * k;
    // hopper-fp8 on finite operands: the four-output range kernel on this pair's rows; else the reference dot per output.
    const fastHopper =
      hopper && (finiteA || finiteRange(eA, pa, pa + m * k)) && (finiteB || finiteRange(eB, pb, pb + n * k));
    const Ap = fastHopper ? A.subarray(pa, pa + m * k) : A;
    const Bp = fastHopper ? B.subarray(pb, pb + n * k) : B;
    const eAp = fastHopper ? eA.subarray(pa, pa + m * k) : eA;
    const eBp = fastHopper ? eB.subarray(pb, pb + n * k) : eB;
    for (let part = 0; part < splitK; part++) {
      const bounds = parts[part] as number[];
      acc.fill(0, 0, mn);
      for (let sg = 0; sg + 1 < bounds.length; sg++) {
        const k0 = bounds[sg] as number;
        const k1 = bounds[sg + 1] as number;
        if (fastHopper) hopperRangeFast(partial, Ap, Bp, eAp, eBp, m, n, k, k0, k1, chunk, fractionBits);
        else {
          for (let i = 0; i < m; i++) {
            for (let j = 0; j < n; j++)
              partial[i * n + j] = referenceDot(model, A, B, pa + i * k, pb + j * k, k0, k1, settings, eminA, eminB);
          }
        }
        for (let o = 0; o < mn; o++) acc[o] = fr((acc[o] as number) + (partial[o] as number));
      }
      if (part === 0) for (let o = 0; o < mn; o++) total[o] = acc[o] as number;
      else for (let o = 0; o < mn; o++) total[o] = fr((total[o] as number) + (acc[o] as number));
    }
    // Epilogue: the pair's per-tensor scales, B first, then A (amax rules set no global scale).
    const sa = qa.scales[p] as number;
    const sb = scalesB[p] as number;
    const o0 = p * mn;
    for (let o = 0; o < mn; o++) out[o0 + o] = fr(sa * fr(sb * (total[o] as number)));
  }
  if (options.outFormat !== undefined && options.outFormat !== 'fp32')
    roundArray(options.outFormat, out, { profile: 'ieee' }, out);
  return out;
}
