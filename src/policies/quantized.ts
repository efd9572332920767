// Quantized PolicyNumerics: W8A8 / W4A16 / block-scaled GEMM sites through the numerics core's quantize + gemm,
// per-site exclusions, FP8 attention GEMMs, an FP8 KV-cache hook and the qarl/jet backward GEMMs. Not a plan table.

import type { AttentionGemms, BatchedGemmFn } from '../nn/attention.js';
import type { BlockGemms } from '../nn/block.js';
import type { FloatArray } from '../nn/array.js';
import type { GemmFn, LinearGemms } from '../nn/gemm.js';
import type { KvCacheHook } from '../nn/block-decode.js';
import { dequantize, quantize, type QuantizedTensor, type QuantSpec } from '../numerics/quantize.js';
import { gemm, accumulatorModels, type AccumulatorModel, type GemmOptions } from '../numerics/gemm.js';
import { createBatchedOperandMemo, gemmBatched } from '../numerics/gemm-batched.js';
import {
  kvCacheCalibrate,
  kvCacheState,
  kvFakeQuantize,
  type KvCacheSpec,
  type KvCacheState,
} from '../numerics/kvcache.js';
import { quantPreset, type QuantPresetName, type QuantPresetParams } from '../numerics/presets.js';
import { blockGemmsOf, roundingNumerics, type PolicyNumerics, type RoundingFormat } from './numerics.js';
import { stepScalesActive, stepTensorAmax } from './step-scales.js';
import { amaxRun } from '../numerics/quant-cells.js';

/** The linear GEMM sites of the toy policies. Embeddings are lookups, not GEMMs, and are never quantized. */
export type QuantSite = 'q' | 'k' | 'v' | 'o' | 'up' | 'gate' | 'down' | 'lmHead' | 'router';

/** Every {@link QuantSite}. */
export const quantSites: readonly QuantSite[] = Object.freeze([
  'q',
  'k',
  'v',
  'o',
  'up',
  'gate',
  'down',
  'lmHead',
  'router',
]);

/**
 * An operand quantizer named by a preset of the numerics core (`src/numerics/presets.ts`) and its
 * parameters, e.g. `{ preset: 'deepseek-fp8-block', params: { block: 16 } }`.
 */
export interface OperandQuantPlan {
  /** Quantizer preset name. */
  readonly preset: QuantPresetName;
  /** Preset parameters (group/block size, UE8M0 scales, …). @defaultValue the preset's (real-system) defaults */
  readonly params?: QuantPresetParams;
}

/**
 * What the backward GEMMs (dgrad `dx = dy·W`, wgrad `dW = dyᵀ·x`) of the quantized linear sites do:
 * - `plain`: both as an excluded site (operands rounded to `plainOperands`, the master weight in dgrad);
 * - `straight-through` (QaRL): dgrad multiplies by the *same quantized weight the forward used*
 *   (dequantized, rounded to `plainOperands`), wgrad is plain — the gradient of the forward with the
 *   quantizer treated as the identity, applied to the FP32 master weights;
 * - `quantized` (Jet-RL): dgrad quantizes dy with `gradient` (groups along the output channels) and
 *   Wᵀ with `weight`; wgrad quantizes dyᵀ with `gradient` and xᵀ with `input` (groups along the
 *   tokens); outputs rounded to `out` (BF16 between ops).
 */
export type QuantBackward =
  | { readonly kind: 'plain' }
  | { readonly kind: 'straight-through' }
  | {
      readonly kind: 'quantized';
      /** Quantizer of dy (dgrad) and dyᵀ (wgrad). */
      readonly gradient: OperandQuantPlan;
      /** Quantizer of Wᵀ (dgrad). */
      readonly weight: OperandQuantPlan;
      /** Quantizer of xᵀ (wgrad). */
      readonly input: OperandQuantPlan;
      /** Output rounding of both backward GEMMs. @defaultValue none (fp32) */
      readonly out?: 'bf16' | 'fp16';
    };

/** Options of {@link quantizedNumerics} (the data of a `{ kind: 'quantized' }` GEMM plan). */
export interface QuantizedNumericsOptions {
  /** Quantizer of the weight operand of every quantized linear site (applied once per numerics object). */
  readonly weights: OperandQuantPlan;
  /** Quantizer of the activation operand (per call), or a rounding format (`'bf16'`: weight-only W4A16, the weight dequantized and rounded to it). */
  readonly activations: OperandQuantPlan | RoundingFormat;
  /** Accumulator model of the quantized GEMMs (`src/numerics/gemm.ts`). @defaultValue 'fp32' */
  readonly accumulator?: AccumulatorModel;
  /** `hopper-fp8`: chunks between promotions. @defaultValue 4 */
  readonly promoteEvery?: number;
  /** `hopper-fp8`: K per MMA instruction. @defaultValue 32 */
  readonly chunk?: number;
  /** Split-K parts of the quantized GEMMs (a kernel-order option). @defaultValue 1 */
  readonly splitK?: number;
  /** Output rounding of the quantized GEMMs. @defaultValue none (fp32 out) */
  readonly out?: 'bf16' | 'fp16';
  /** Linear sites left unquantized. @defaultValue ['lmHead'] */
  readonly exclude?: readonly QuantSite[];
  /** What unquantized GEMMs do (excluded sites, attention unless `attention` is set, plain backward): operands rounded to this format, fp32 sequential accumulation, fp32 out. @defaultValue 'bf16' */
  readonly plainOperands?: RoundingFormat;
  /** If set, the attention GEMMs QKᵀ and PV quantize both operands with this quantizer per call (FP8 attention). @defaultValue unset (plain) */
  readonly attention?: OperandQuantPlan;
  /** If set, each K/V row appended to the rollout KV cache is quantized and dequantized with this spec (`fixed` or `inference` calibration). @defaultValue unset (no KV hook) */
  readonly kvCache?: KvCacheSpec;
  /** Backward treatment of the quantized linear sites. @defaultValue { kind: 'plain' } */
  readonly backward?: QuantBackward;
}

/** {@link PolicyNumerics} with the KV-cache calibration state visible (for tests and reports). */
export interface QuantizedPolicyNumerics extends PolicyNumerics {
  /** The current KV-cache calibration state of `layer` (null when the plan has no KV cache quantizer). */
  kvCacheState(layer: number): KvCacheState | null;
}

const roundingFormats: readonly RoundingFormat[] = ['bf16', 'fp16', 'tf32'];

function specOf(p: OperandQuantPlan, field: string): QuantSpec {
  if (typeof p !== 'object' || p === null || typeof p.preset !== 'string')
    throw new Error(`quantizedNumerics: ${field} must be { preset, params? }, got ${JSON.stringify(p)}`);
  try {
    return quantPreset(p.preset, p.params ?? {});
  } catch (error) {
    throw new Error(`quantizedNumerics: ${field}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

function asFloat32(x: FloatArray, n: number): Float32Array {
  const v = x.subarray(0, n);
  return v instanceof Float32Array ? v : Float32Array.from(v);
}

/** Calls the numerics core's {@link gemm}; a Float64Array `out` (gradient checks) receives the float32 result. */
function coreGemm(
  out: FloatArray,
  a: Float32Array | QuantizedTensor,
  b: Float32Array | QuantizedTensor,
  m: number,
  n: number,
  k: number,
  opts: GemmOptions,
): void {
  if (out instanceof Float32Array) {
    gemm(out.subarray(0, m * n), a, b, m, n, k, opts);
    return;
  }
  out.set(gemm(new Float32Array(m * n), a, b, m, n, k, opts));
}

function transposeF32(x: Float32Array, rows: number, cols: number): Float32Array {
  const t = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = x[r * cols + c]!;
  return t;
}

/** True when `a` and `b` hold the same float32 bit patterns (stricter than `Object.is` only for NaN payloads). */
function sameBits(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  const ia = new Int32Array(a.buffer, a.byteOffset, a.length);
  const ib = new Int32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < ia.length; i++) if (ia[i] !== ib[i]) return false;
  return true;
}

/**
 * A quantizer of per-call operands that remembers its last two results: an operand whose shape and
 * float32 bits equal a remembered input gets the same QuantizedTensor back (quantization is a pure
 * function of spec, shape and values, so the bits are those of a fresh quantization). The q, k and v
 * projections read one normalized input, up and gate another, and their wgrad GEMMs the transposes
 * of those, so each such tensor is quantized once instead of once per site.
 */
function rememberingQuantizer(spec: QuantSpec): (x: Float32Array, rows: number, cols: number) => QuantizedTensor {
  const seen: { copy: Float32Array; rows: number; q: QuantizedTensor }[] = [];
  return (x, rows, cols) => {
    for (const e of seen) if (e.rows === rows && sameBits(e.copy, x)) return e.q;
    const copy = Float32Array.from(x);
    const q = quantize(spec, copy, [rows, cols]);
    seen.unshift({ copy, rows, q });
    if (seen.length > 2) seen.pop();
    return q;
  };
}

function sameValues(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

/**
 * Quantized numerics for one plan side. Per quantized linear site:
 *
 * - forward `y = x·Wᵀ`: W quantized with `weights` **once per numerics object** (cached by the
 *   identity of the weight array, so build a new object at each weight sync), x quantized per call
 *   with `activations` (or rounded to a format for weight-only plans), then {@link gemm} with the
 *   accumulator model (fine-grained scales applied inside the K loop, per-tensor/per-row scales in
 *   the epilogue), optional output rounding;
 * - backward per `backward` (see {@link QuantBackward}).
 *
 * Excluded sites (lm_head by default), the attention GEMMs (unless `attention` is set) and the
 * attention backward use plain {@link roundingNumerics} GEMMs with `plainOperands` (BF16). With
 * `kvCache`, `kvHook(layer)` quantizes each appended K/V row; in `inference` calibration the first
 * hook call of a layer after the object was built computes the scales from every row present in the
 * cache (the prefill writes all prompt rows before hooking them), and later calls keep them — one
 * calibration per weight sync, as verl's reset of vLLM's `calculate_kv_scales` flag.
 *
 * @example
 * ```ts
 * const numerics = quantizedNumerics({
 *   weights: { preset: 'deepseek-fp8-block', params: { block: 16 } },
 *   activations: { preset: 'vllm-fp8-group', params: { block: 16 } },
 * });
 * ```
 */
export function quantizedNumerics(options: QuantizedNumericsOptions): QuantizedPolicyNumerics {
  const weightSpec = specOf(options.weights, 'weights');
  const act = options.activations;
  if (typeof act === 'string' && !roundingFormats.includes(act)) {
    throw new Error(
      `quantizedNumerics: activations must be a quantizer { preset, params? } or one of ${roundingFormats.join(', ')}, got ${JSON.stringify(act)}`,
    );
  }
  const actQuant: QuantSpec | RoundingFormat = typeof act === 'string' ? act : specOf(act, 'activations');
  if (options.plainOperands !== undefined && !roundingFormats.includes(options.plainOperands)) {
    throw new Error(
      `quantizedNumerics: plainOperands must be one of ${roundingFormats.join(', ')}, got ${JSON.stringify(options.plainOperands)}`,
    );
  }
  const plainOperands = options.plainOperands ?? 'bf16';
  const exclude = options.exclude ?? ['lmHead'];
  for (const s of exclude)
    if (!quantSites.includes(s))
      throw new Error(
        `quantizedNumerics: exclude must list sites among ${quantSites.join(', ')}, got ${JSON.stringify(s)}`,
      );
  if (options.out !== undefined && !['bf16', 'fp16'].includes(options.out))
    throw new Error(`quantizedNumerics: out must be bf16 or fp16, got ${JSON.stringify(options.out)}`);
  const backward = options.backward ?? { kind: 'plain' };
  if (!['plain', 'straight-through', 'quantized'].includes(backward.kind))
    throw new Error(
      `quantizedNumerics: backward.kind must be plain, straight-through or quantized, got ${JSON.stringify(backward.kind)}`,
    );
  const kvSpec = options.kvCache;
  if (kvSpec && !['fixed', 'inference'].includes(kvSpec.calibration.mode)) {
    throw new Error(
      `quantizedNumerics: kvCache.calibration.mode must be fixed or inference (trainer-side calibration has no data inside the rollout engine), got ${JSON.stringify(kvSpec.calibration.mode)}`,
    );
  }
  const attnSpec = options.attention ? specOf(options.attention, 'attention') : null;

  const accumulate: GemmOptions = {
    ...(options.accumulator !== undefined ? { accumulator: options.accumulator } : {}),
    ...(options.promoteEvery !== undefined ? { promoteEvery: options.promoteEvery } : {}),
    ...(options.chunk !== undefined ? { chunk: options.chunk } : {}),
    ...(options.splitK !== undefined ? { splitK: options.splitK } : {}),
  };
  const forwardOpts: GemmOptions = {
    ...accumulate,
    aQuant: actQuant,
    ...(options.out !== undefined ? { outFormat: options.out } : {}),
  };
  if (options.accumulator !== undefined && !accumulatorModels.includes(options.accumulator)) {
    throw new Error(
      `quantizedNumerics: accumulator must be one of ${accumulatorModels.join(', ')}, got ${JSON.stringify(options.accumulator)}`,
    );
  }

  const plain = roundingNumerics({ operands: plainOperands });
  const plainLinear = plain.lmHead();
  const plainAttention = plain.block(0).attention;

  /** Quantized weights by array identity: one quantization per weight and numerics object. */
  const weightCache = new WeakMap<FloatArray, QuantizedTensor>();
  const quantizedWeight = (w: FloatArray, n: number, k: number): QuantizedTensor => {
    let q = weightCache.get(w);
    if (q === undefined) {
      q = quantize(weightSpec, asFloat32(w, n * k), [n, k]);
      weightCache.set(w, q);
    }
    return q;
  };

  // Scaled activations are quantized here (not inside gemm) so one input shared by several sites is quantized once.
  const quantizedActivation = typeof actQuant === 'string' ? null : rememberingQuantizer(actQuant);
  // A per-tensor dynamic activation scale under the scheduler: the amax over every row of the engine step.
  const perTensorAct =
    typeof actQuant !== 'string' &&
    actQuant.granularity.kind === 'tensor' &&
    (actQuant.scale.kind === 'amax' || actQuant.scale.kind === 'multiplier')
      ? actQuant
      : null;
  const activation = (x: Float32Array, site: FloatArray, m: number, k: number): QuantizedTensor | Float32Array => {
    if (perTensorAct !== null && stepScalesActive()) {
      const shared = stepTensorAmax(site, amaxRun(x, 0, m * k, 0, perTensorAct.amaxNan ?? 'ignore'));
      if (shared !== undefined) return quantize(perTensorAct, x, [m, k], { tensorAmax: shared });
    }
    return quantizedActivation ? quantizedActivation(x, m, k) : x;
  };
  const forward: GemmFn = (out, a, b, m, n, k) => {
    const x = asFloat32(a, m * k);
    coreGemm(out, activation(x, b, m, k), quantizedWeight(b, n, k), m, n, k, forwardOpts);
  };

  // One remembering quantizer of wgrad's xᵀ for the whole object (q, k and v share xᵀ, as do up and gate).
  let wgradInput: ((x: Float32Array, rows: number, cols: number) => QuantizedTensor) | null = null;
  const wgradInputQuantizer = (spec: QuantSpec) => (wgradInput ??= rememberingQuantizer(spec));

  /** One site's LinearGemms: the dgrad operand derived from the weight is cached per site (one weight per site). */
  const quantizedLinear = (): LinearGemms => {
    if (backward.kind === 'plain')
      return Object.freeze({ forward, dgrad: plainLinear.dgrad, wgrad: plainLinear.wgrad });
    // dgrad receives Wᵀ (C×OC) as a fresh copy; the operand derived from it is cached with the values it came from
    // (a site has one weight per numerics object, so this is computed once per site).
    let seenT: Float32Array | null = null;
    let derived: Float32Array | QuantizedTensor | null = null;
    const dgradOperand = (
      wT: Float32Array,
      make: () => Float32Array | QuantizedTensor,
    ): Float32Array | QuantizedTensor => {
      if (seenT === null || derived === null || !sameValues(seenT, wT)) {
        seenT = Float32Array.from(wT);
        derived = make();
      }
      return derived;
    };
    if (backward.kind === 'straight-through') {
      // dx = dy · deq(Q(W)): W quantized exactly as the forward does (same spec, same values), dequantized,
      // transposed back to (C, OC); both operands then rounded like a plain GEMM.
      const dgrad: GemmFn = (out, a, b, m, n, k) => {
        const wT = asFloat32(b, n * k); // (C, OC): n = C, k = OC
        const op = dgradOperand(wT, () =>
          transposeF32(dequantize(quantize(weightSpec, transposeF32(wT, n, k), [k, n])), k, n),
        );
        coreGemm(out, asFloat32(a, m * k), op, m, n, k, { aQuant: plainOperands, bQuant: plainOperands });
      };
      return Object.freeze({ forward, dgrad, wgrad: plainLinear.wgrad });
    }
    const gradSpec = specOf(backward.gradient, 'backward.gradient');
    const wSpec = specOf(backward.weight, 'backward.weight');
    const inSpec = specOf(backward.input, 'backward.input');
    const outOpt: GemmOptions = backward.out !== undefined ? { outFormat: backward.out } : {};
    const dgrad: GemmFn = (out, a, b, m, n, k) => {
      const wT = asFloat32(b, n * k); // (C, OC)
      const op = dgradOperand(wT, () => quantize(wSpec, Float32Array.from(wT), [n, k]));
      coreGemm(out, asFloat32(a, m * k), op, m, n, k, { ...accumulate, ...outOpt, aQuant: gradSpec });
    };
    const quantizedInput = wgradInputQuantizer(inSpec);
    const wgrad: GemmFn = (out, a, b, m, n, k) => {
      coreGemm(out, asFloat32(a, m * k), quantizedInput(asFloat32(b, n * k), n, k), m, n, k, {
        ...accumulate,
        ...outOpt,
        aQuant: gradSpec,
      });
    };
    return Object.freeze({ forward, dgrad, wgrad });
  };

  const site = (s: QuantSite): LinearGemms => (exclude.includes(s) ? plainLinear : quantizedLinear());

  // FP8 attention: one object per layer, whose decode batch remembers that layer's K and Vᵀ quantization between steps.
  let attentionOf = (): AttentionGemms => plainAttention;
  if (attnSpec !== null) {
    const attnOpts: GemmOptions = { ...accumulate, aQuant: attnSpec, bQuant: attnSpec };
    const attnGemm: GemmFn = (out, a, b, m, n, k) =>
      coreGemm(out, asFloat32(a, m * k), asFloat32(b, n * k), m, n, k, attnOpts);
    attentionOf = () => {
      // The decode step's pairs in one call per product, each pair bit for bit its own attnGemm call.
      const kMemo = createBatchedOperandMemo();
      const vMemo = createBatchedOperandMemo();
      const qkBatch: BatchedGemmFn = (out, a, b, count, m, n, k) => {
        gemmBatched(out, a, b, count, m, n, k, attnOpts, kMemo);
      };
      const pvBatch: BatchedGemmFn = (out, a, b, count, m, n, k) => {
        gemmBatched(out, a, b, count, m, n, k, attnOpts, vMemo);
      };
      return Object.freeze({
        ...plainAttention,
        qk: attnGemm,
        pv: attnGemm,
        decodeBatch: Object.freeze({ qk: attnGemm, pv: attnGemm, qkBatch, pvBatch }),
      });
    };
  }

  const blocks: BlockGemms[] = [];
  const block = (layer: number): BlockGemms => {
    if (!Number.isInteger(layer) || layer < 0)
      throw new Error(`quantizedNumerics: layer must be a non-negative integer, got ${layer}`);
    let g = blocks[layer];
    if (g === undefined) {
      g = blockGemmsOf(site, attentionOf(), site('router'));
      blocks[layer] = g;
    }
    return g;
  };
  const head = site('lmHead');

  // Scratch of the KV hook: the gathered rows and the loaded K and V rows (B, C), grown on demand.
  let kvRows = new Float32Array(0);
  const kvOut: [Float32Array, Float32Array] = [new Float32Array(0), new Float32Array(0)];
  /** Row t of every sequence of `cache`, quantized and loaded back (kvDequantize ∘ kvQuantize) into scratch slot `slot`. */
  const kvLoaded = (
    spec: KvCacheSpec,
    rows: Float32Array,
    cache: FloatArray,
    t: number,
    B: number,
    tCap: number,
    C: number,
    scales: Float32Array,
    slot: 0 | 1,
  ): Float32Array => {
    for (let b = 0; b < B; b++) {
      const o = (b * tCap + t) * C;
      for (let c = 0; c < C; c++) rows[b * C + c] = cache[o + c]!;
    }
    if (kvOut[slot].length < B * C) kvOut[slot] = new Float32Array(B * C);
    return kvFakeQuantize(spec, rows, [B, C], scales, kvOut[slot].subarray(0, B * C));
  };
  const kvStates: KvCacheState[] = [];
  const hooks: KvCacheHook[] = [];
  const kvHook = (layer: number): KvCacheHook | null => {
    if (!kvSpec) return null;
    let hook = hooks[layer];
    if (hook === undefined) {
      kvStates[layer] = kvCacheState(kvSpec);
      hook = (kCache, vCache, t, B, tCap, C) => {
        let state = kvStates[layer]!;
        if (!state.calibrated) {
          const n = B * tCap * C;
          state = kvCacheCalibrate(kvSpec, state, asFloat32(kCache, n), asFloat32(vCache, n), [B * tCap, C]);
          kvStates[layer] = state;
        }
        if (kvRows.length < B * C) kvRows = new Float32Array(B * C);
        const rows = kvRows.subarray(0, B * C); // (B, C) row t of every sequence
        const kq = kvLoaded(kvSpec, rows, kCache, t, B, tCap, C, state.kScale, 0);
        const vq = kvLoaded(kvSpec, rows, vCache, t, B, tCap, C, state.vScale, 1);
        for (let b = 0; b < B; b++) {
          const o = (b * tCap + t) * C;
          for (let c = 0; c < C; c++) {
            kCache[o + c] = kq[b * C + c]!;
            vCache[o + c] = vq[b * C + c]!;
          }
        }
      };
      hooks[layer] = hook;
    }
    return hook;
  };

  const operandLabel = (q: QuantSpec | RoundingFormat): string => (typeof q === 'string' ? q : `${q.name ?? q.format}`);
  const label =
    `W ${operandLabel(weightSpec)} A ${operandLabel(actQuant)}, ${options.accumulator ?? 'fp32'} accumulate` +
    (options.out ? `, ${options.out} out` : '') +
    `, excluded [${exclude.join(', ')}] ${plainOperands}` +
    (attnSpec ? `, attention ${operandLabel(attnSpec)}` : '') +
    (kvSpec ? `, KV ${kvSpec.format ?? 'e4m3fn'} (${kvSpec.calibration.mode})` : '') +
    (backward.kind !== 'plain' ? `, backward ${backward.kind}` : '');
  return Object.freeze({
    label,
    block,
    lmHead: () => head,
    kvHook,
    kvCacheState: (layer: number) => (kvSpec ? (kvStates[layer] ?? kvCacheState(kvSpec)) : null),
  });
}
