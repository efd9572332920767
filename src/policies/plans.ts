// Precision plans as data: what the rollout engine and the trainer each do at every GEMM site, and the
// frozen table of named presets. Not the numerics themselves (numerics.ts builds them from a plan side).

import type { CastProfileName } from '../numerics/profiles.js';
import {
  fp32Numerics,
  roundingNumerics,
  type AccumulatorOrder,
  type PolicyNumerics,
  type RoundingFormat,
} from './numerics.js';
import { quantizedNumerics, type OperandQuantPlan, type QuantizedNumericsOptions } from './quantized.js';
import type { StackWeights } from '../nn/stack.js';
import { z } from 'zod';
import { gemmPlanShapeSchema, parseAt, planDataShapeSchema, type TrainerPadding } from './plan-schema.js';
import { checkRefitChain, ignoredSites, refittedNumerics, type RefitChain } from './refit.js';
import { checkOverrides, overriddenNumerics, type PrecisionOverride } from './overrides.js';
import { checkEngineExecution, tensorParallelNumerics, type EngineExecution } from './execution.js';

/** Exact fp32 GEMMs everywhere (sequential accumulation). */
export interface Fp32GemmPlan {
  /** Discriminant. */
  readonly kind: 'fp32';
}

/** Both operands of every GEMM rounded to a format, fp32 accumulation, optional output rounding. */
export interface RoundingGemmPlan {
  /** Discriminant. */
  readonly kind: 'rounding';
  /** Operand format. */
  readonly operands: RoundingFormat;
  /** Output format; absent = fp32 outputs. */
  readonly out?: 'bf16' | 'fp16';
  /** Accumulation order. @defaultValue 'fp32' (sequential) */
  readonly accumulator?: AccumulatorOrder;
  /** Chunk length for `split-k`. @defaultValue 16 */
  readonly splitK?: number;
  /** Cast profile. @defaultValue 'ieee' */
  readonly profile?: CastProfileName;
  /** `split-k` only: split-K in GEMMs of at most this many rows, sequential above (batch-dependent kernel choice). @defaultValue unset (always) */
  readonly splitKMaxRows?: number;
}

/**
 * Quantized GEMM sites: weight and activation quantizers, accumulator model, exclusions, optional
 * FP8 attention GEMMs and KV cache, and the backward treatment (see {@link quantizedNumerics}).
 */
export interface QuantizedGemmPlan extends QuantizedNumericsOptions {
  /** Discriminant. */
  readonly kind: 'quantized';
}

/**
 * What a plan side does at the GEMM sites: a union on `kind`, one builder per variant in a frozen
 * table (`numericsFor` dispatches on it).
 */
export type GemmPlan = Fp32GemmPlan | RoundingGemmPlan | QuantizedGemmPlan;

/** One side (rollout engine or trainer) of a {@link PrecisionPlan}. */
export interface PlanSide {
  /** The numerics of every GEMM site (and, for quantized variants, the KV cache). */
  readonly gemm: GemmPlan;
  /**
   * Rollout only: decode token by token over a KV cache (`incremental`, what inference engines do)
   * or recompute the whole prefix at every step (`recompute`). Ignored by the trainer.
   * @defaultValue 'incremental'
   */
  readonly decode?: 'incremental' | 'recompute';
  /**
   * Rollout only: which log-prob the engine reports — of the `processed` distribution it sampled
   * from (after temperature, top-k, top-p; vLLM's behaviour) or the `raw` one (softmax of the
   * logits at temperature 1). Ignored by the trainer.
   * @defaultValue 'processed'
   */
  readonly logprob?: 'processed' | 'raw';
  /**
   * How this side's forward weights are derived from the FP32 master at each weight sync (BF16
   * export, checkpoint quantize→dequantize steps, fused scales); see {@link RefitChain} and
   * docs/refit.md. Applied by {@link sideNumerics}; AR policy only.
   * @defaultValue absent (the master weights, as before)
   */
  readonly refit?: RefitChain;
  /**
   * Per-module precision exceptions: sites matched by name pattern (`lmHead`, `h*.router`, `h0.*`,
   * `first:1.*`, `last:1.*`) run their own GEMM plan; the first match wins. See
   * {@link PrecisionOverride} and docs/precision-overrides.md. Applied by {@link sideNumerics}; AR policy only.
   * @defaultValue absent (every site runs `gemm`)
   */
  readonly overrides?: readonly PrecisionOverride<GemmPlan>[];
  /**
   * How the side executes beyond its GEMM numerics: the rollout engine's scheduler (continuous
   * batching, chunked prefill, the batch-invariant switch) and tensor-parallel all-reduce order
   * (either side). See {@link EngineExecution} and docs/engine-paths.md; AR policy only.
   * @defaultValue absent (lockstep batch, one prefill, one device: as before)
   */
  readonly engine?: EngineExecution;
  /**
   * Trainer only: where the temperature T enters its log-prob — `before-log-softmax`,
   * ℓ = log softmax(z/T)[y] (what the samplers sample from), or `after-log-softmax`,
   * ℓ = log softmax(z)[y] / T (a mis-wired recompute; its gradient follows it). See
   * docs/logprob-semantics.md.
   * @defaultValue 'before-log-softmax'
   */
  readonly temperatureAt?: 'before-log-softmax' | 'after-log-softmax';
  /**
   * Trainer only: its recompute runs `microBatch` sequences per forward (TRL / verl micro-batch size; the
   * last chunk may be shorter) and the backward accumulates chunk by chunk, so a kernel chosen by the
   * GEMM's rows (split-K for small GEMMs) or a scale over its rows (per-tensor activation scales) follows
   * the chunk. At most the batch, it changes nothing. See docs/precision-plans.md and
   * docs/lab/trainer-chunking.md.
   * @defaultValue absent (one forward over every sequence of the call)
   */
  readonly microBatch?: number;
  /**
   * Trainer only: what each micro-batch's sequences are padded to before its forward
   * ({@link TrainerPadding}): the call's response slots, the call's longest response, or the micro-batch's
   * longest response. Trimming changes the GEMMs' rows (n·(P + L_chunk)), so a kernel chosen by the rows
   * or a scale over them (padded rows included) follows it; the scored ℓ of a row-independent trainer do
   * not move. See docs/precision-plans.md.
   * @defaultValue 'max-length' (every pass has the call's P + L columns)
   */
  readonly padding?: TrainerPadding;
}

/** A named pair of plan sides: what the rollout engine does and what the trainer does. */
export interface PrecisionPlan {
  /** Registry name. */
  readonly name: string;
  /** One sentence: what it models. */
  readonly description: string;
  /** The rollout engine's side. */
  readonly rollout: PlanSide;
  /** The trainer's side. */
  readonly trainer: PlanSide;
}

type GemmKind = GemmPlan['kind'];

/** How each {@link GemmPlan} variant becomes {@link PolicyNumerics}: one builder per `kind`. */
const numericsBuilders = Object.freeze({
  fp32: () => fp32Numerics(),
  rounding: (g: RoundingGemmPlan) =>
    roundingNumerics({
      operands: g.operands,
      ...(g.out !== undefined ? { out: g.out } : {}),
      ...(g.accumulator !== undefined ? { accumulator: g.accumulator } : {}),
      ...(g.splitK !== undefined ? { splitK: g.splitK } : {}),
      ...(g.profile !== undefined ? { profile: g.profile } : {}),
      ...(g.splitKMaxRows !== undefined ? { splitKMaxRows: g.splitKMaxRows } : {}),
    }),
  quantized: (g: QuantizedGemmPlan) => {
    const { kind: _kind, ...options } = g;
    return quantizedNumerics(options);
  },
} as const satisfies { [K in GemmKind]: (g: Extract<GemmPlan, { kind: K }>) => PolicyNumerics });

/**
 * The {@link PolicyNumerics} of one plan side, freshly built (call it at each weight sync).
 *
 * @example
 * ```ts
 * const plan = precisionPlan('bf16');
 * const rolloutNumerics = numericsFor(plan.rollout);
 * ```
 */
export function numericsFor(side: PlanSide): PolicyNumerics {
  const g = side.gemm;
  switch (g.kind) {
    case 'fp32':
      return numericsBuilders.fp32();
    case 'rounding':
      return numericsBuilders.rounding(g);
    case 'quantized':
      return numericsBuilders.quantized(g);
    default: {
      const kind: never = g;
      throw new Error(
        `numericsFor: gemm.kind must be one of ${Object.keys(numericsBuilders).join(', ')}, got ${JSON.stringify((kind as { kind?: unknown }).kind)}`,
      );
    }
  }
}

/**
 * The {@link PolicyNumerics} of one plan side over a policy's weights: {@link numericsFor}, with the
 * side's precision overrides ({@link overriddenNumerics}) and then its refit chain applied to the
 * forward weights ({@link refittedNumerics}). Without either this is `numericsFor(side)` itself.
 * Build it at each weight sync.
 *
 * @example
 * ```ts
 * const rolloutNumerics = sideNumerics(plan.rollout, policy.weights);
 * ```
 */
export function sideNumerics(side: PlanSide, weights: StackWeights): PolicyNumerics {
  const ignoreRule = side.refit?.faults?.find((f) => f.kind === 'ignore-rule');
  const g = side.gemm;
  // An ignore-rule fault: the engine's ignore list, not the plan's exclusions, says which sites run
  // plain — every site quantized, the caught ones overridden by the plan's plain operands (after the
  // side's own overrides, which keep precedence).
  let inner = numericsFor(
    ignoreRule !== undefined && g.kind === 'quantized' ? { ...side, gemm: { ...g, exclude: [] } } : side,
  );
  const overrides: PrecisionOverride<GemmPlan>[] = [...(side.overrides ?? [])];
  if (ignoreRule !== undefined) {
    if (g.kind !== 'quantized')
      throw new Error(
        `refit.faults: ignore-rule needs a quantized GEMM plan (the rule replaces its exclude list), got kind ${JSON.stringify(g.kind)}`,
      );
    const caught = ignoredSites(ignoreRule, weights);
    if (caught.length > 0)
      overrides.push({ match: caught, gemm: { kind: 'rounding', operands: g.plainOperands ?? 'bf16' } });
  }
  if (overrides.length > 0) {
    inner = overriddenNumerics(
      inner,
      overrides,
      overrides.map((o) => numericsFor({ gemm: o.gemm })),
      weights.blocks.length,
    );
  }
  // inside the refit chain, so the shards are cut from the refitted weights
  const tp = side.engine?.tensorParallel;
  if (tp !== undefined) inner = tensorParallelNumerics(inner, tp);
  return side.refit === undefined
    ? inner
    : refittedNumerics(inner, weights, side.refit, g.kind === 'quantized' ? g.kvCache : undefined);
}

/** True when a plan needs the AR policy's weight structure or its engine (a refit chain, precision overrides, engine execution, a trainer temperature placement, trainer micro-batches or trainer padding on either side). */
export function planNeedsWeights(plan: PrecisionPlan): boolean {
  return [plan.rollout, plan.trainer].some(
    (s) =>
      s.refit !== undefined ||
      (s.overrides !== undefined && s.overrides.length > 0) ||
      s.engine !== undefined ||
      s.temperatureAt !== undefined ||
      s.microBatch !== undefined ||
      s.padding !== undefined,
  );
}

function deepFreeze<T>(x: T): T {
  if (x && typeof x === 'object') {
    for (const v of Object.values(x)) deepFreeze(v);
    Object.freeze(x);
  }
  return x;
}

/** Jet-RL backward: dY and xᵀ in 1×16 FP8 groups along the reduction axis, Wᵀ in 16×16 FP8 blocks, BF16 outputs. */
function jetBackward(): QuantizedGemmPlan['backward'] & { kind: 'quantized' } {
  return {
    kind: 'quantized',
    gradient: q('vllm-fp8-group', TOY_BLOCK),
    weight: q('deepseek-fp8-block', TOY_BLOCK),
    input: q('vllm-fp8-group', TOY_BLOCK),
    out: 'bf16',
  };
}

const bf16Gemm: RoundingGemmPlan = { kind: 'rounding', operands: 'bf16' };
const fp16Gemm: RoundingGemmPlan = { kind: 'rounding', operands: 'fp16' };

/**
 * Group/block size of every quantizer in the presets. The real stacks use 128 (DeepSeek/FP8-RL
 * blocks and groups, GPTQ g128) or 32 (MX); the toy models have d_model 32–64, so 16 keeps at
 * least two groups per row (NVFP4's native 16 is unchanged). See docs/precision-plans.md.
 */
export const TOY_BLOCK = 16;

const q = (preset: OperandQuantPlan['preset'], block?: number): OperandQuantPlan =>
  block === undefined ? { preset } : { preset, params: { block } };

/** FP8 E4M3 W8A8 as in FP8-RL (verl + vLLM/DeepGEMM): 16×16 weight blocks, 1×16 activation groups, Hopper FP8 accumulation. */
const fp8BlockGemm: QuantizedGemmPlan = {
  kind: 'quantized',
  weights: q('deepseek-fp8-block', TOY_BLOCK),
  activations: q('vllm-fp8-group', TOY_BLOCK),
  accumulator: 'hopper-fp8',
  chunk: TOY_BLOCK,
  promoteEvery: 1,
};

/** FP8 KV cache, per-tensor scales recalibrated on the first forward after each weight sync (vLLM `calculate_kv_scales`, reset by verl every step). */
const fp8Kv = { format: 'e4m3fn', calibration: { mode: 'inference' }, loadFormat: 'bf16' } as const;

/** W4A16 as in QaRL: uint4 GPTQ-style groups of 16 along K (zero points), BF16 activations. */
const w4a16Gemm: QuantizedGemmPlan = { kind: 'quantized', weights: q('gptq-w4g128', TOY_BLOCK), activations: 'bf16' };

/**
 * The named presets of docs/precision-plans.md §3 "Presets". Every rollout side decodes
 * incrementally and reports processed log-probs; trainer sides are BF16 unless the plan says
 * otherwise. `qarl` and `jet` give both sides the *same* GEMM plan (the rollout never runs the
 * backward), so their rollout and trainer forwards are bit-identical.
 */
export const precisionPlans = deepFreeze({
  fp32: {
    name: 'fp32',
    description: 'exact fp32 GEMMs on both sides (the no-mismatch reference)',
    rollout: { gemm: { kind: 'fp32' }, decode: 'incremental', logprob: 'processed' },
    trainer: { gemm: { kind: 'fp32' } },
  },
  bf16: {
    name: 'bf16',
    description: 'BF16 operands, fp32 sequential accumulation and fp32 outputs, on both sides (same kernel order)',
    rollout: { gemm: bf16Gemm, decode: 'incremental', logprob: 'processed' },
    trainer: { gemm: bf16Gemm },
  },
  'bf16-splitk': {
    name: 'bf16-splitk',
    description:
      'BF16 on both sides, but the rollout kernels accumulate split-K (chunks of 16): kernel-order mismatch between two BF16 engines',
    rollout: { gemm: { ...bf16Gemm, accumulator: 'split-k', splitK: 16 }, decode: 'incremental', logprob: 'processed' },
    trainer: { gemm: bf16Gemm },
  },
  fp16: {
    name: 'fp16',
    description: 'FP16 operands, fp32 accumulation, on both sides (the "defeating mismatch via FP16" baseline)',
    rollout: { gemm: fp16Gemm, decode: 'incremental', logprob: 'processed' },
    trainer: { gemm: fp16Gemm },
  },
  'fp8-rollout': {
    name: 'fp8-rollout',
    description:
      'FP8-RL (verl, vLLM + DeepGEMM) rollout: E4M3 W8A8 with 16×16 weight blocks and 1×16 activation groups, Hopper FP8 accumulation; lm_head BF16; BF16 trainer',
    rollout: { gemm: fp8BlockGemm, decode: 'incremental', logprob: 'processed' },
    trainer: { gemm: bf16Gemm },
  },
  'fp8-tensor-rollout': {
    name: 'fp8-tensor-rollout',
    description:
      'AIS / TransformerEngine current scaling rollout: E4M3 W8A8 with one dynamic scale per tensor (weights and activations), Hopper FP8 accumulation; lm_head BF16; BF16 trainer',
    rollout: {
      gemm: {
        kind: 'quantized',
        weights: q('te-current'),
        activations: q('te-current'),
        accumulator: 'hopper-fp8',
        chunk: TOY_BLOCK,
        promoteEvery: 1,
      },
      decode: 'incremental',
      logprob: 'processed',
    },
    trainer: { gemm: bf16Gemm },
  },
  'int8-rollout': {
    name: 'int8-rollout',
    description:
      'FlashRL / SmoothQuant-style rollout: INT8 W8A8 with per-channel weight and per-token dynamic activation scales, exact int32 accumulation; lm_head BF16; BF16 trainer',
    rollout: {
      gemm: { kind: 'quantized', weights: q('int8-row'), activations: q('vllm-int8-token'), accumulator: 'int32' },
      decode: 'incremental',
      logprob: 'processed',
    },
    trainer: { gemm: bf16Gemm },
  },
  'w4a16-rollout': {
    name: 'w4a16-rollout',
    description:
      'QaRL rollout: INT4 (uint4 + zero point) weights in groups of 16 along K, dequantized to BF16, BF16 activations; lm_head BF16; BF16 trainer',
    rollout: { gemm: w4a16Gemm, decode: 'incremental', logprob: 'processed' },
    trainer: { gemm: bf16Gemm },
  },
  'nvfp4-rollout': {
    name: 'nvfp4-rollout',
    description:
      'NVFP4 rollout (Blackwell, TransformerEngine rule): E2M1 weights and activations, 1×16 E4M3 block scales and an FP32 tensor scale; lm_head BF16; BF16 trainer',
    rollout: {
      gemm: { kind: 'quantized', weights: q('nvfp4', TOY_BLOCK), activations: q('nvfp4', TOY_BLOCK) },
      decode: 'incremental',
      logprob: 'processed',
    },
    trainer: { gemm: bf16Gemm },
  },
  'mxfp8-rollout': {
    name: 'mxfp8-rollout',
    description:
      'OCP MXFP8 rollout: E4M3 weights and activations with E8M0 power-of-two scales per 1×16 block (32 in the standard); lm_head BF16; BF16 trainer',
    rollout: {
      gemm: { kind: 'quantized', weights: q('mxfp8', TOY_BLOCK), activations: q('mxfp8', TOY_BLOCK) },
      decode: 'incremental',
      logprob: 'processed',
    },
    trainer: { gemm: bf16Gemm },
  },
  'mxfp4-rollout': {
    name: 'mxfp4-rollout',
    description:
      'OCP MXFP4 rollout: E2M1 weights and activations with E8M0 power-of-two scales per 1×32 block (the standard block, one scale per row at C = 32); the coarsest preset; lm_head BF16; BF16 trainer',
    rollout: {
      gemm: { kind: 'quantized', weights: q('mxfp4', 32), activations: q('mxfp4', 32) },
      decode: 'incremental',
      logprob: 'processed',
    },
    trainer: { gemm: bf16Gemm },
  },
  'fp8-kv': {
    name: 'fp8-kv',
    description:
      'FP8-RL §2.3: fp8-rollout plus an E4M3 KV cache with per-tensor scales recalibrated at the first forward after every weight sync (inference-side calibration); BF16 trainer',
    rollout: { gemm: { ...fp8BlockGemm, kvCache: fp8Kv }, decode: 'incremental', logprob: 'processed' },
    trainer: { gemm: bf16Gemm },
  },
  'full-fp8': {
    name: 'full-fp8',
    description:
      'FP8-RL §2.3 "Full FP8": fp8-kv plus FP8 attention GEMMs (QKᵀ and PV with per-tensor dynamic E4M3 operands); BF16 trainer',
    rollout: {
      gemm: { ...fp8BlockGemm, kvCache: fp8Kv, attention: q('vllm-fp8-tensor') },
      decode: 'incremental',
      logprob: 'processed',
    },
    trainer: { gemm: bf16Gemm },
  },
  qarl: {
    name: 'qarl',
    description:
      'QaRL: W4A16 rollout, and a trainer whose forward runs the same quantized GEMMs with a straight-through backward (dgrad through the dequantized weights, plain BF16 wgrad) onto FP32 master weights',
    rollout: {
      gemm: { ...w4a16Gemm, backward: { kind: 'straight-through' } },
      decode: 'incremental',
      logprob: 'processed',
    },
    trainer: { gemm: { ...w4a16Gemm, backward: { kind: 'straight-through' } } },
  },
  jet: {
    name: 'jet',
    description:
      'Jet-RL unified FP8 flow: the fp8-rollout W8A8 forward on both sides, trainer DGrad/WGrad in FP8 (1×16 groups for dY and activations, 16×16 blocks for Wᵀ), BF16 gradients between ops',
    rollout: { gemm: { ...fp8BlockGemm, backward: jetBackward() }, decode: 'incremental', logprob: 'processed' },
    trainer: { gemm: { ...fp8BlockGemm, backward: jetBackward() } },
  },
} as const satisfies Record<string, PrecisionPlan>);

/** Names of the registered presets. */
export type PrecisionPlanName = keyof typeof precisionPlans;

/**
 * The preset called `name`; an unknown name throws an error listing the known ones.
 *
 * @example
 * ```ts
 * precisionPlan('bf16-splitk').rollout.gemm; // { kind: 'rounding', operands: 'bf16', accumulator: 'split-k', splitK: 16 }
 * ```
 */
export function precisionPlan(name: string): PrecisionPlan {
  if (!Object.hasOwn(precisionPlans, name)) {
    throw new Error(
      `precision plan: name must be one of ${Object.keys(precisionPlans).join(', ')}, got ${JSON.stringify(name)}`,
    );
  }
  return precisionPlans[name as PrecisionPlanName];
}

/** A precision plan given as data in a run config: both sides, optionally a name and a description. */
export interface PlanData {
  readonly name?: string;
  readonly description?: string;
  readonly rollout: unknown;
  readonly trainer: unknown;
}

/** Checks one side's values the shape schema leaves to their builders, naming the path. */
function checkSideValues(side: PlanSide, path: string, role: 'rollout' | 'trainer'): void {
  if (side.engine !== undefined) checkEngineExecution(side.engine, `${path}.engine`, role);
  if (side.temperatureAt !== undefined && role === 'rollout')
    throw new Error(
      `${path}.temperatureAt: trainer only (the rollout's processed log-prob is of the distribution it sampled, softmax(z/T)), got ${JSON.stringify(side.temperatureAt)}`,
    );
  if (side.microBatch !== undefined && role === 'rollout')
    throw new Error(
      `${path}.microBatch: trainer only (the rollout engine's batching is engine.maxBatch), got ${JSON.stringify(side.microBatch)}`,
    );
  if (side.padding !== undefined && role === 'rollout')
    throw new Error(
      `${path}.padding: trainer only (the rollout engine batches by engine.maxBatch), got ${JSON.stringify(side.padding)}`,
    );
  if (side.refit !== undefined) checkRefitChain(side.refit, `${path}.refit`);
  checkGemmPlan(side.gemm, `${path}.gemm`);
  side.refit?.faults?.forEach((f, i) => {
    const g = side.gemm;
    if (f.kind === 'ignore-rule' && g.kind !== 'quantized')
      throw new Error(
        `${path}.refit.faults[${i}]: ignore-rule needs a quantized GEMM plan (the rule replaces its exclude list), got gemm.kind ${JSON.stringify(g.kind)}`,
      );
    if (f.kind === 'unity-kv-scales' && (g.kind !== 'quantized' || g.kvCache === undefined))
      throw new Error(
        `${path}.refit.faults[${i}]: unity-kv-scales needs a KV-cache quantizer (gemm.kvCache), the side has none`,
      );
  });
  if (side.overrides !== undefined) checkOverrides(side.overrides, `${path}.overrides`, checkGemmPlan);
}

/** Checks a GEMM plan given as data: its shape (keys per `kind`), then every value by building its numerics. */
function checkGemmPlan(gemm: unknown, gemmPath: string): void {
  parseAt(gemmPlanShapeSchema, gemm, gemmPath);
  // The builders validate every value (formats, quantizer presets, accumulator models …).
  try {
    numericsFor({ gemm: structuredClone(gemm) as GemmPlan });
  } catch (error) {
    throw new Error(`${gemmPath}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/**
 * The precision plan of a run config's `plan` field: a preset name ({@link precisionPlan}), or a
 * plan as data — `{ "rollout": PlanSide, "trainer": PlanSide }` with an optional `name` and
 * `description` — its shape checked by zod (src/policies/plan-schema.ts: unknown keys refused, enums,
 * strings), its values by building both sides' numerics. Errors name the field under `path` and the
 * value, e.g. `plan.rollout.decode: expected "incremental" or "recompute", got "fast"`.
 *
 * @example
 * ```ts
 * resolvePlan({ name: 'my-fp8', rollout: { gemm: { kind: 'rounding', operands: 'bf16' } }, trainer: { gemm: { kind: 'rounding', operands: 'bf16' } } });
 * ```
 */
export function resolvePlan(plan: string | PlanData, path = 'plan'): PrecisionPlan {
  if (typeof plan === 'string') return precisionPlan(plan);
  const data = parseAt(planDataShapeSchema, plan, path);
  const rollout = structuredClone(plan.rollout) as PlanSide;
  const trainer = structuredClone(plan.trainer) as PlanSide;
  checkSideValues(rollout, `${path}.rollout`, 'rollout');
  checkSideValues(trainer, `${path}.trainer`, 'trainer');
  return Object.freeze({
    name: data.name ?? 'custom',
    description: data.description ?? 'a plan given as data in the run config',
    rollout,
    trainer,
  });
}

const presetNameSchema = z.enum(Object.keys(precisionPlans) as [PrecisionPlanName, ...PrecisionPlanName[]], {
  error: `must be one of ${Object.keys(precisionPlans).join(', ')}`,
});

/**
 * {@link resolvePlan} for a run config, as a `UsageError`-ready message: the plan, or an error whose
 * message names the field under `config.plan` and the value.
 */
export function planOfConfig(plan: string | Readonly<Record<string, unknown>>): PrecisionPlan {
  if (typeof plan === 'string') return precisionPlans[parseAt(presetNameSchema, plan, 'config.plan')];
  return resolvePlan(plan as unknown as PlanData, 'config.plan');
}
