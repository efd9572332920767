// The log-prob semantics of each side made explicit (raw vs processed, the temperature divided into
// the logits, renormalisation over the top-k/top-p support, the logits epilogue format) and compared,
// naming every field where the rollout's and the trainer's differ. Not the samplers themselves.

import type { GemmPlan, PlanSide } from './plans.js';
import { patternMatches } from './overrides.js';

/** What a reported log-prob is, field by field. */
export interface LogprobSemantics {
  /** `processed`: of the distribution sampled from; `raw`: log-softmax of the logits at temperature 1 (vLLM `logprobs_mode`). */
  readonly values: 'processed' | 'raw';
  /** The temperature T (1 for raw). */
  readonly temperature: number;
  /**
   * Where T enters: `before-log-softmax`, log softmax(z/T) (the samplers, and trainers by default);
   * `after-log-softmax`, log softmax(z)/T (a trainer side's `temperatureAt`). Moot at T = 1.
   */
  readonly temperatureAt: 'before-log-softmax' | 'after-log-softmax';
  /** `truncated`: renormalised over the top-k/top-p kept set (the log-prob carries −log S, S the kept mass); `full`: the whole vocabulary. */
  readonly support: 'full' | 'truncated';
  /** Format of the logits the log-softmax reads (the lm_head GEMM's output rounding). */
  readonly logits: 'fp32' | 'bf16' | 'fp16';
}

/** The sampler settings the semantics depend on. */
export interface SemanticsSampler {
  /** Sampling temperature. @defaultValue 1 */
  readonly temperature?: number;
  /** Top-k (0 = off). @defaultValue 0 */
  readonly topK?: number;
  /** Top-p (1 = off). @defaultValue 1 */
  readonly topP?: number;
  /** The trainer recomputes over the rollout's recorded support (sampling-support replay). @defaultValue false */
  readonly supportReplay?: boolean;
}

function outOf(gemm: GemmPlan, lmHead: boolean): LogprobSemantics['logits'] {
  if (gemm.kind === 'rounding') return gemm.out ?? 'fp32';
  if (gemm.kind === 'quantized') {
    const excluded = (gemm.exclude ?? ['lmHead']).includes('lmHead');
    return lmHead && excluded ? 'fp32' : (gemm.out ?? 'fp32');
  }
  return 'fp32';
}

/** The lm_head's logits format on a side: the first override matching `lmHead`, else the side's GEMM plan. */
export function logitsFormat(side: PlanSide): LogprobSemantics['logits'] {
  for (const o of side.overrides ?? []) {
    const patterns: readonly string[] = Array.isArray(o.match) ? o.match : [o.match as string];
    if (patterns.some((p) => patternMatches(p, 'lmHead', null, 0))) return outOf(o.gemm, false);
  }
  return outOf(side.gemm, true);
}

/**
 * The semantics of a side's reported log-probs under `sampler`: the rollout's per its `logprob`
 * field (processed by default), the trainer's always of the temperature-T distribution over the full
 * vocabulary, or over the rollout's support with `supportReplay`.
 *
 * @example
 * ```ts
 * logprobSemantics(plan.rollout, 'rollout', { temperature: 0.7, topP: 0.9 });
 * // { values: 'processed', temperature: 0.7, temperatureAt: 'before-log-softmax', support: 'truncated', logits: 'fp32' }
 * ```
 */
export function logprobSemantics(
  side: PlanSide,
  role: 'rollout' | 'trainer',
  sampler: SemanticsSampler = {},
): LogprobSemantics {
  const T = sampler.temperature ?? 1;
  const truncated = (sampler.topK ?? 0) > 0 || (sampler.topP ?? 1) < 1;
  if (role === 'trainer') {
    return {
      values: 'processed',
      temperature: T,
      temperatureAt: side.temperatureAt ?? 'before-log-softmax',
      support: sampler.supportReplay && truncated ? 'truncated' : 'full',
      logits: logitsFormat(side),
    };
  }
  const values = side.logprob ?? 'processed';
  return {
    values,
    temperature: values === 'raw' ? 1 : T,
    temperatureAt: 'before-log-softmax',
    support: values === 'processed' && truncated ? 'truncated' : 'full',
    logits: logitsFormat(side),
  };
}

/** One field where two semantics differ. */
export interface SemanticsDifference {
  /** The field. */
  readonly field: 'temperature' | 'temperatureAt' | 'support' | 'logits';
  /** The rollout's value. */
  readonly rollout: string;
  /** The trainer's value. */
  readonly trainer: string;
}

/**
 * The fields where the rollout's and the trainer's semantics differ, in a fixed order: a different
 * `temperature` (a raw rollout log-prob against a trainer at T ≠ 1 is one), a different
 * `temperatureAt` (only where some side's T ≠ 1: at T = 1 both placements agree), a different `support`
 * (the log S offset of top-k/top-p renormalisation on one side only), a different `logits`
 * epilogue. `values` itself is not compared: it only matters through the other three.
 */
export function semanticsDifferences(rollout: LogprobSemantics, trainer: LogprobSemantics): SemanticsDifference[] {
  const out: SemanticsDifference[] = [];
  if (rollout.temperature !== trainer.temperature)
    out.push({ field: 'temperature', rollout: String(rollout.temperature), trainer: String(trainer.temperature) });
  if (rollout.temperatureAt !== trainer.temperatureAt && (rollout.temperature !== 1 || trainer.temperature !== 1))
    out.push({ field: 'temperatureAt', rollout: rollout.temperatureAt, trainer: trainer.temperatureAt });
  if (rollout.support !== trainer.support)
    out.push({ field: 'support', rollout: rollout.support, trainer: trainer.support });
  if (rollout.logits !== trainer.logits)
    out.push({ field: 'logits', rollout: rollout.logits, trainer: trainer.logits });
  return out;
}

/** The differences as one line: `matched`, or `temperature 1≠0.7; support truncated≠full`. */
export function semanticsLine(diffs: readonly SemanticsDifference[]): string {
  return diffs.length === 0 ? 'matched' : diffs.map((d) => `${d.field} ${d.rollout}≠${d.trainer}`).join('; ');
}

/**
 * The run-metric form of {@link semanticsDifferences} for a run of `plan` under `sampler` (whose
 * `logprob` is the rollout's values, as the AR engine reports them): `mismatch/semantics/<field>` = 1
 * for each differing field (`temperature`, `temperatureAt`, `support`, `logits`), and no key at all
 * when the two sides agree — so a run whose sides agree writes the metrics it always wrote.
 *
 * @example
 * ```ts
 * semanticsMetrics(precisionPlan('bf16'), { temperature: 1, topK: 0, topP: 0.9, logprob: 'processed' });
 * // { 'mismatch/semantics/support': 1 }
 * ```
 */
export function semanticsMetrics(
  plan: { readonly rollout: PlanSide; readonly trainer: PlanSide },
  sampler: SemanticsSampler & { readonly logprob?: 'processed' | 'raw' },
): Record<string, number> {
  const rollout = sampler.logprob === undefined ? plan.rollout : { ...plan.rollout, logprob: sampler.logprob };
  const diffs = semanticsDifferences(
    logprobSemantics(rollout, 'rollout', sampler),
    logprobSemantics(plan.trainer, 'trainer', sampler),
  );
  return Object.fromEntries(diffs.map((d) => [`mismatch/semantics/${d.field}`, 1]));
}
