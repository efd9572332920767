// The AR mismatch probe: sample responses under a plan's rollout side, recompute ℓ under its trainer
// side (and, for MoE, with the rollout's routing replayed), and summarize the mismatch. Not the CLI
// (src/cli/mismatch.ts) and not an RL step.

import { createRng } from '../../core/rng.js';
import { lengthDiagnostics, type LengthDiagnostics } from '../../rl/length-diagnostics.js';
import { probeDiagnostics, type MismatchDiagnostics } from '../diagnostics.js';
import { sideNumerics, type PrecisionPlan } from '../plans.js';
import { flipRatesAt } from '../moe-replay.js';
import { chunkedLogprobs, chunkedRouting, type ChunkedLogprobs } from './micro-batches.js';
import type { ArPolicy } from './model.js';
import { rollout, type Rollout } from './rollout.js';
import type { SamplerOptions } from './sampler.js';
import { rngStreams } from '../../core/rng-streams.js';

/** Options of {@link arMismatchProbe}. */
export interface ArMismatchProbeOptions extends SamplerOptions {
  /** The precision plan whose two sides are compared. */
  readonly plan: PrecisionPlan;
  /** Response tokens per sequence (EOS is ignored: every sequence gets exactly this many). */
  readonly length: number;
  /** Prompts, all of one length. */
  readonly prompts: readonly (readonly number[])[];
  /** Seed of the sampling stream (`<seed>/probe-rollout`). */
  readonly seed: number | string;
  /** (B) most response tokens of each request (requests of different lengths). @defaultValue `length` each */
  readonly requestLengths?: ArrayLike<number>;
}

/** What {@link arMismatchProbe} measured. */
export interface ArMismatchProbeResult {
  /** The rollout (tokens, ℓroll). */
  readonly rollout: Rollout;
  /** (B, L) ℓold recomputed by the trainer side. */
  readonly logpOld: Float64Array;
  /** Mismatch diagnostics over all sampled tokens. */
  readonly diagnostics: MismatchDiagnostics;
  /** Mismatch by response position and length, sequence log-ratio, error tokens, repetition. */
  readonly lengths: LengthDiagnostics;
  /** MoE policies only (absent for a dense one): routing flips and the mismatch with R3 replay. */
  readonly moe?: ArMoeProbe;
}

/** The MoE part of {@link ArMismatchProbeResult}. */
export interface ArMoeProbe {
  /**
   * Per layer: share of router decisions that differ between the rollout engine and the trainer's
   * own top-k, over the positions whose outputs score a response token (`routingFlipRate`).
   */
  readonly flipRate: readonly number[];
  /** (B, L) ℓold with the rollout's routing replayed (R3). */
  readonly logpOldR3: Float64Array;
  /** Mismatch diagnostics of (ℓroll, ℓold under R3); `diagnostics` is without replay. */
  readonly diagnosticsR3: MismatchDiagnostics;
}

/**
 * Samples `length` tokens per prompt with the plan's rollout side (its decode mode and log-prob
 * semantics, EOS ignored), recomputes ℓold of the same tokens with the plan's trainer side at the same
 * temperature, and returns {@link probeDiagnostics} of (ℓroll, ℓold) and their {@link lengthDiagnostics}.
 *
 * @example
 * ```ts
 * const { diagnostics } = arMismatchProbe(policy, { plan: precisionPlan('bf16-splitk'), length: 16, prompts, seed: 0 });
 * ```
 */
export function arMismatchProbe(policy: ArPolicy, opts: ArMismatchProbeOptions): ArMismatchProbeResult {
  const { plan } = opts;
  const r = rollout(policy, opts.prompts, {
    ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
    ...(opts.topK !== undefined ? { topK: opts.topK } : {}),
    ...(opts.topP !== undefined ? { topP: opts.topP } : {}),
    ...(opts.greedy !== undefined ? { greedy: opts.greedy } : {}),
    maxNewTokens: opts.length,
    numerics: sideNumerics(plan.rollout, policy.weights),
    rng: createRng(opts.seed).fork(rngStreams.ar.probeRollout),
    decode: plan.rollout.decode ?? 'incremental',
    logprob: plan.rollout.logprob ?? 'processed',
    eos: null,
    ...(plan.rollout.engine !== undefined ? { engine: plan.rollout.engine } : {}),
    ...(opts.requestLengths !== undefined ? { requestLengths: opts.requestLengths } : {}),
  });
  const lp = chunkedLogprobs(policy, r.tokens, r.B, r.promptLength, r.responseMask, {
    numerics: sideNumerics(plan.trainer, policy.weights),
    ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
    ...(plan.trainer.temperatureAt !== undefined ? { temperatureAt: plan.trainer.temperatureAt } : {}),
    microBatch: plan.trainer.microBatch,
    padding: plan.trainer.padding,
  });
  // (B, L) response tokens: the columns after the prompt.
  const S = r.promptLength + r.responseLength;
  const responses = new Int32Array(r.B * r.responseLength);
  for (let i = 0; i < r.B; i++)
    responses.set(r.tokens.subarray(i * S + r.promptLength, (i + 1) * S), i * r.responseLength);
  const shape = { B: r.B, T: r.responseLength };
  return {
    rollout: r,
    logpOld: lp.logp,
    diagnostics: probeDiagnostics(r.logpRollout, lp.logp, r.responseMask),
    lengths: lengthDiagnostics({
      shape,
      logpOld: lp.logp,
      logpRollout: r.logpRollout,
      mask: r.responseMask,
      responses,
    }),
    ...(r.routing === null ? {} : { moe: moeProbe(policy, r, r.routing, lp, opts) }),
  };
}

/** Flip rates of the trainer's own routing against the rollout's, and ℓold again with the rollout's routing replayed (R3). */
function moeProbe(
  policy: ArPolicy,
  r: Rollout,
  routing: readonly Int32Array[],
  own: ChunkedLogprobs,
  opts: ArMismatchProbeOptions,
): ArMoeProbe {
  const k = policy.blockConfig.moe!.topK;
  const S = r.promptLength + r.responseLength;
  const scored: number[] = [];
  for (let b = 0; b < r.B; b++)
    for (let j = 0; j < r.responseLength; j++)
      if (r.responseMask[b * r.responseLength + j]) scored.push(b * S + r.promptLength + j - 1);
  const used = chunkedRouting(own);
  const r3 = chunkedLogprobs(policy, r.tokens, r.B, r.promptLength, r.responseMask, {
    numerics: sideNumerics(opts.plan.trainer, policy.weights),
    ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
    ...(opts.plan.trainer.temperatureAt !== undefined ? { temperatureAt: opts.plan.trainer.temperatureAt } : {}),
    routing,
    microBatch: opts.plan.trainer.microBatch,
    padding: opts.plan.trainer.padding,
  });
  return {
    flipRate: flipRatesAt(routing, used, k, scored),
    logpOldR3: r3.logp,
    diagnosticsR3: probeDiagnostics(r.logpRollout, r3.logp, r.responseMask),
  };
}
