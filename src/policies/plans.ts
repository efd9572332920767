// Precision plans as data: what the rollout engine and the trainer each do at every GEMM site, and the
// frozen table of named presets. Not the numerics themselves (numerics.ts builds them from a plan side).

import type { CastProfileName } from '../numerics/index.js';
import {
  fp32Numerics,
  roundingNumerics,
  type AccumulatorOrder,
  type PolicyNumerics,
  type RoundingFormat,
} from './numerics.js';

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
}

/**
 * What a plan side does at the GEMM sites. A union on `kind` so that quantized operand specs
 * (FP8/INT8/INT4 quantizers with accumulator models and KV-cache quantization) can be added as
 * further variants without changing the existing ones.
 */
export type GemmPlan = Fp32GemmPlan | RoundingGemmPlan;

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
    }),
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
    default: {
      const kind: never = g;
      throw new Error(`numericsFor: gemm.kind must be one of ${Object.keys(numericsBuilders).join(', ')}, got ${JSON.stringify((kind as { kind?: unknown }).kind)}`);
    }
  }
}

function deepFreeze<T>(x: T): T {
  if (x && typeof x === 'object') {
    for (const v of Object.values(x)) deepFreeze(v);
    Object.freeze(x);
  }
  return x;
}

const bf16Gemm: RoundingGemmPlan = { kind: 'rounding', operands: 'bf16' };
const fp16Gemm: RoundingGemmPlan = { kind: 'rounding', operands: 'fp16' };

/**
 * The presets implemented so far (the quantized ones of `spec/policies.md` §2 come with the
 * quantizers). Every rollout side decodes incrementally and reports processed log-probs.
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
    description: 'BF16 on both sides, but the rollout kernels accumulate split-K (chunks of 16): kernel-order mismatch between two BF16 engines',
    rollout: { gemm: { ...bf16Gemm, accumulator: 'split-k', splitK: 16 }, decode: 'incremental', logprob: 'processed' },
    trainer: { gemm: bf16Gemm },
  },
  fp16: {
    name: 'fp16',
    description: 'FP16 operands, fp32 accumulation, on both sides (the "defeating mismatch via FP16" baseline)',
    rollout: { gemm: fp16Gemm, decode: 'incremental', logprob: 'processed' },
    trainer: { gemm: fp16Gemm },
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
    throw new Error(`precision plan: name must be one of ${Object.keys(precisionPlans).join(', ')}, got ${JSON.stringify(name)}`);
  }
  return precisionPlans[name as PrecisionPlanName];
}
