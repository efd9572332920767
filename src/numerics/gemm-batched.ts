// Many small independent GEMMs of one shape in one call, each equal bit for bit to its own gemm call:
// per-tensor dynamic operand scales computed for every pair in one quantizer pass (one scale cell per
// pair), then each pair's accumulation. Not a semantics of its own: gemm-reference.ts is the definition.

import { decodeWithExponents, hopperRangeFast } from './gemm-hopper.js';
import { type GemmOptions, type OperandQuant, gemmSettings, referenceDot, segmentBoundaries } from './gemm-reference.js';
import { gemm } from './gemm.js';
import { castProfile } from './profiles.js';
import { type QuantSpec, type QuantizedTensor, createQuantizeScratch, elementFormat, quantizeTransient } from './quantize.js';
import type { FloatFormat } from './formats.js';
import { fakeQuant } from './vector.js';

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
  partial: new Float32Array(64) as Float32Array,
  acc: new Float32Array(64) as Float32Array,
  total: new Float32Array(64) as Float32Array,
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

function grownF32(a: Float32Array, n: number): Float32Array {
  return a.length >= n ? a : new Float32Array(Math.max(n, 2 * a.length));
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
 * @param out - (count, m, n)
 * @param a - (count, m, k)
 * @param b - (count, n, k)
 */
export function gemmBatched(out: Float32Array, a: Float32Array, b: Float32Array, count: number, m: number, n: number, k: number, options: GemmOptions = {}): Float32Array {
  const dims = [count, m, n, k].every((d) => Number.isInteger(d) && d >= 0);
  if (!dims || out.length !== count * m * n || a.length !== count * m * k || b.length !== count * n * k) {
    throw new Error(
      `gemmBatched: shapes do not match count × out(m×n) = A(m×k)·B(n×k)ᵀ with count = ${count}, m = ${m}, n = ${n}, k = ${k}: ` +
        `out has ${out.length} elements (need ${count * m * n}), A ${a.length} (need ${count * m * k}), B ${b.length} (need ${count * n * k})`,
    );
  }
  const settings = gemmSettings(options);
  const fast =
    options.reference !== true && settings.model !== 'int32' && count > 0 && m > 0 && n > 0 && k > 0 && batchableSpec(options.aQuant) && batchableSpec(options.bQuant);
  if (!fast) {
    for (let p = 0; p < count; p++) {
      gemm(out.subarray(p * m * n, (p + 1) * m * n), a.subarray(p * m * k, (p + 1) * m * k), b.subarray(p * n * k, (p + 1) * n * k), m, n, k, options);
    }
    return out;
  }
  const s = batchScratch;
  const qa = quantizeTransient(perRowSpec(options.aQuant as QuantSpec), a, [count, m * k], s.quantize[0]);
  const qb = quantizeTransient(perRowSpec(options.bQuant as QuantSpec), b, [count, n * k], s.quantize[1]);
  const [A, eA, finiteA] = decodedOperand(qa, count * m * k, 0);
  const [B, eB, finiteB] = decodedOperand(qb, count * n * k, 1);
  const eminA = (elementFormat(qa.spec.format) as FloatFormat).emin;
  const eminB = (elementFormat(qb.spec.format) as FloatFormat).emin;
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
  s.partial = grownF32(s.partial, mn);
  s.acc = grownF32(s.acc, mn);
  s.total = grownF32(s.total, mn);
  const { partial, acc, total } = s;
  const fr = Math.fround;
  for (let p = 0; p < count; p++) {
    const pa = p * m * k;
    const pb = p * n * k;
    // hopper-fp8 on finite operands: the four-output range kernel on this pair's rows; else the reference dot per output.
    const fastHopper = hopper && (finiteA || finiteRange(eA, pa, pa + m * k)) && (finiteB || finiteRange(eB, pb, pb + n * k));
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
            for (let j = 0; j < n; j++) partial[i * n + j] = referenceDot(model, A, B, pa + i * k, pb + j * k, k0, k1, settings, eminA, eminB);
          }
        }
        for (let o = 0; o < mn; o++) acc[o] = fr((acc[o] as number) + (partial[o] as number));
      }
      if (part === 0) for (let o = 0; o < mn; o++) total[o] = acc[o] as number;
      else for (let o = 0; o < mn; o++) total[o] = fr((total[o] as number) + (acc[o] as number));
    }
    // Epilogue: the pair's per-tensor scales, B first, then A (amax rules set no global scale).
    const sa = qa.scales[p] as number;
    const sb = qb.scales[p] as number;
    const o0 = p * mn;
    for (let o = 0; o < mn; o++) out[o0 + o] = fr(sa * fr(sb * (total[o] as number)));
  }
  if (options.outFormat !== undefined && options.outFormat !== 'fp32') fakeQuant(options.outFormat, out, { profile: 'ieee' }, out);
  return out;
}
