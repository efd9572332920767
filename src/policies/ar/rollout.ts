// The AR rollout engine: batched sampling of responses with a KV cache (or full recompute per step),
// EOS handling and the per-token log-probs the engine reports. Not the trainer's recompute (logprobs.ts).

import { EOS, PAD } from '../../tasks/tokenizer.js';
import type { Rng } from '../../core/rng.js';
import { withKernelRows, type PolicyNumerics } from '../numerics.js';
import type { EngineExecution } from '../execution.js';
import { scheduleRequests } from './scheduler.js';
import { arDecodeStep, arForward, arPrefill, createDecodeState, type ArPolicy } from './model.js';
import { resolveSampler, sampleToken, type SamplerOptions } from './sampler.js';
import { recordTopk } from './topk.js';
import { allocLike, type FloatArray } from '../../nn/array.js';

/** Options of {@link rollout}. */
export interface RolloutOptions extends SamplerOptions {
  /** Most response tokens per sequence (EOS included). */
  readonly maxNewTokens: number;
  /** The rollout engine's numerics (from the plan's rollout side, built at the weight sync). */
  readonly numerics: PolicyNumerics;
  /** Source of every random draw: one `uniform()` per active sequence per step, b in increasing order. */
  readonly rng: Rng;
  /** KV-cache decoding or full recompute of the prefix per step. @defaultValue 'incremental' */
  readonly decode?: 'incremental' | 'recompute';
  /** Report the log-prob of the processed distribution (vLLM) or of the raw one (τ = 1, no filters). @defaultValue 'processed' */
  readonly logprob?: 'processed' | 'raw';
  /** End-of-sequence id; null = never stop early (every sequence gets maxNewTokens tokens). @defaultValue EOS (2) */
  readonly eos?: number | null;
  /** Token written after a sequence has ended. @defaultValue PAD (0) */
  readonly pad?: number;
  /** Record the sampler's kept set at every sampled position ({@link Rollout.support}). @defaultValue false */
  readonly recordSupport?: boolean;
  /**
   * Record the K most likely ids of the sampled distribution and their log-probs (of the kind of
   * `logprob`) at every sampled position ({@link Rollout.topk}); 0 = off, and off for greedy. Reads
   * the row only: the tokens and ℓroll are those of the same rollout without it. @defaultValue 0
   */
  readonly topkLogprobs?: number;
  /**
   * The engine's scheduler ({@link EngineExecution}: `maxBatch`, `prefillChunk`, `batchInvariant`;
   * its `tensorParallel` lives in the numerics). With `maxBatch` or `prefillChunk` the requests run
   * through {@link scheduleRequests} (incremental decode only). @defaultValue lockstep, one prefill
   */
  readonly engine?: EngineExecution;
  /** (B) most response tokens of each request (1..maxNewTokens), e.g. requests of different lengths. @defaultValue maxNewTokens each */
  readonly requestLengths?: ArrayLike<number>;
}

/** What the rollout engine returns for B sequences (P prompt tokens, L = maxNewTokens response slots). */
export interface Rollout {
  /** Number of sequences. */
  readonly B: number;
  /** Prompt length P. */
  readonly promptLength: number;
  /** Response slots L (= maxNewTokens). */
  readonly responseLength: number;
  /** (B, P + L) prompt then response tokens; `pad` after EOS. */
  readonly tokens: Int32Array;
  /** (B, L) 1 for sampled tokens up to and including EOS, 0 after. */
  readonly responseMask: Float32Array;
  /** (B, L) ℓroll: the engine's log-prob of each sampled token (0 where the mask is 0). */
  readonly logpRollout: Float64Array;
  /** (B) response tokens per sequence (EOS included). */
  readonly lengths: Int32Array;
  /** (B, L, V) with `recordSupport`: 1 on the ids the sampler could draw at each sampled slot (its top-k/top-p kept set). */
  readonly support?: Uint8Array;
  /** With `topkLogprobs` K: the ids (B, L, K), −1 past the support or where no token was sampled, and their ℓ. */
  readonly topk?: { readonly K: number; readonly ids: Int32Array; readonly logp: Float64Array };
  /**
   * MoE only (else null): one (B, P + L, k) array per layer, the k experts (rank order) the engine's
   * router chose for the token at each position; −1 at positions the engine never ran (the last
   * slot, and every slot after decoding stopped). Sequences that ended keep being fed `pad`, and
   * those positions are recorded like any other.
   */
  readonly routing: readonly Int32Array[] | null;
}

/** Checks that every prompt has the same length P ≥ 1 and returns the flat (B, P) tokens. */
function flattenPrompts(prompts: readonly (readonly number[])[]): { flat: Int32Array; B: number; P: number } {
  const B = prompts.length;
  if (B < 1) throw new Error('rollout: prompts must hold at least one prompt, got 0');
  const P = prompts[0]!.length;
  if (P < 1) throw new Error('rollout: prompts[0] must not be empty');
  const flat = new Int32Array(B * P);
  prompts.forEach((p, b) => {
    if (p.length !== P)
      throw new Error(`rollout: every prompt must have length ${P} (left-pad them), prompts[${b}] has ${p.length}`);
    flat.set(p, b * P);
  });
  return { flat, B, P };
}

/**
 * Samples up to `maxNewTokens` response tokens for each prompt (all prompts of one length, left-padded),
 * batched over the B sequences.
 *
 * `incremental`: a prefill forward over the prompts fills the per-layer KV caches, then one
 * `arDecodeStep` per token (every appended K/V row passes the numerics' `kvHook`). `recompute`: a
 * full `arForward` over the whole prefix at every step. A sequence ends at its first EOS; it stays in
 * the batch, fed `pad`, and its later slots have mask 0 and ℓroll 0. Decoding stops when every
 * sequence has ended.
 *
 * @example
 * ```ts
 * const out = rollout(policy, prompts, { maxNewTokens: 7, numerics: numericsFor(plan.rollout), rng: createRng(1).fork('rollout') });
 * ```
 */
export function rollout(policy: ArPolicy, prompts: readonly (readonly number[])[], opts: RolloutOptions): Rollout {
  const s = resolveSampler(opts);
  const { flat, B, P } = flattenPrompts(prompts);
  const L = opts.maxNewTokens;
  const V = policy.config.vocabSize;
  if (!Number.isInteger(L) || L < 1) throw new Error(`rollout: maxNewTokens must be a positive integer, got ${L}`);
  if (P + L > policy.config.maxLen)
    throw new Error(`rollout: prompt length ${P} + maxNewTokens ${L} must be ≤ maxLen ${policy.config.maxLen}`);
  const decode = opts.decode ?? 'incremental';
  const report = opts.logprob ?? 'processed';
  if (decode !== 'incremental' && decode !== 'recompute')
    throw new Error(`rollout: decode must be incremental or recompute, got ${JSON.stringify(decode)}`);
  if (report !== 'processed' && report !== 'raw')
    throw new Error(`rollout: logprob must be processed or raw, got ${JSON.stringify(report)}`);
  const eos = opts.eos === undefined ? EOS : opts.eos;
  const requested = opts.requestLengths;
  if (requested !== undefined) {
    if (requested.length !== B)
      throw new Error(`rollout: requestLengths must have B = ${B} entries, got ${requested.length}`);
    for (let b = 0; b < B; b++) {
      const n = requested[b]!;
      if (!Number.isInteger(n) || n < 1 || n > L)
        throw new Error(`rollout: requestLengths[${b}] must be an integer in 1..${L}, got ${n}`);
    }
  }
  const limit = Int32Array.from({ length: B }, (_, b) => requested?.[b] ?? L); // (B) most tokens per request
  const engine = opts.engine ?? {};
  const scheduled = engine.maxBatch !== undefined || engine.prefillChunk !== undefined;
  if (scheduled && decode !== 'incremental')
    throw new Error(
      'rollout: engine.maxBatch and engine.prefillChunk need decode incremental (a scheduler over KV caches)',
    );
  const pad = opts.pad ?? PAD;
  const T = P + L;
  const tokens = new Int32Array(B * T).fill(pad); // (B, T)
  for (let b = 0; b < B; b++) tokens.set(flat.subarray(b * P, (b + 1) * P), b * T);
  const responseMask = new Float32Array(B * L); // (B, L)
  const logpRollout = new Float64Array(B * L); // (B, L)
  const lengths = new Int32Array(B); // (B)
  const active = new Uint8Array(B).fill(1); // (B)
  const keep = new Uint8Array(V); // (V) sampler scratch
  const support = opts.recordSupport === true && !s.greedy ? new Uint8Array(B * L * V) : undefined; // (B, L, V)
  const K = opts.topkLogprobs ?? 0;
  if (!Number.isInteger(K) || K < 0 || K > V)
    throw new Error(`rollout: topkLogprobs must be an integer in 0..${V} (the vocabulary), got ${K}`);
  const topk =
    K > 0 && !s.greedy
      ? { K, ids: new Int32Array(B * L * K).fill(-1), logp: new Float64Array(B * L * K) } // (B, L, K)
      : undefined;
  const { numerics } = opts;
  const topK = policy.blockConfig.moe?.topK ?? 0;
  const routing =
    topK > 0 ? Array.from({ length: policy.config.layers }, () => new Int32Array(B * T * topK).fill(-1)) : null; // layers × (B, T, k)

  /** Samples slot k of sequence b from logits row `off`; true when the sequence has ended (EOS or its length). */
  const sample = (b: number, k: number, logits: FloatArray, off: number): { token: number; ended: boolean } => {
    const d = sampleToken(logits, off, V, s, opts.rng, keep);
    tokens[b * T + P + k] = d.token;
    responseMask[b * L + k] = 1;
    support?.set(keep, (b * L + k) * V);
    if (topk !== undefined)
      recordTopk(logits, off, V, s.temperature, keep, report, K, topk.ids, topk.logp, (b * L + k) * K);
    logpRollout[b * L + k] = report === 'processed' ? d.logpProcessed : d.logpRaw;
    lengths[b] = k + 1;
    return { token: d.token, ended: (eos !== null && d.token === eos) || k + 1 === limit[b] };
  };
  const lockstep = (): void => {
    const state = decode === 'incremental' ? createDecodeState(policy, B, T) : null;
    let logits: FloatArray = state
      ? arPrefill(policy, state, flat, P, numerics, routing ?? undefined)
      : lastLogits(policy, tokens, B, T, P, numerics, routing, true);
    const step = new Int32Array(B); // (B) tokens fed to the next decode step
    for (let k = 0; k < L; k++) {
      for (let b = 0; b < B; b++) {
        if (!active[b]) {
          step[b] = pad;
          continue;
        }
        const d = sample(b, k, logits, b * V);
        step[b] = d.token;
        if (d.ended) active[b] = 0;
      }
      if (k === L - 1 || !active.some((a) => a === 1)) break;
      logits = state
        ? arDecodeStep(policy, state, step, numerics, routing ?? undefined)
        : lastLogits(policy, tokens, B, T, P + k + 1, numerics, routing, false);
    }
  };
  if (scheduled) {
    scheduleRequests({ policy, prompts: flat, B, P, T, numerics, routing, sample, ...engine });
  } else if (engine.batchInvariant === true) {
    withKernelRows(Infinity, lockstep);
  } else {
    lockstep();
  }
  return {
    B,
    promptLength: P,
    responseLength: L,
    tokens,
    responseMask,
    logpRollout,
    lengths,
    routing,
    ...(support === undefined ? {} : { support }),
    ...(topk === undefined ? {} : { topk }),
  };
}

/**
 * Full recompute: logits (B, V) at position `len − 1` from a forward over the first `len` tokens of
 * each row. With MoE, `routing` (layers × (B, T, k)) receives the experts of position `len − 1`, or
 * of every position when `all` (the first pass, over the prompt).
 */
function lastLogits(
  policy: ArPolicy,
  tokens: Int32Array,
  B: number,
  T: number,
  len: number,
  numerics: PolicyNumerics,
  routing: readonly Int32Array[] | null = null,
  all = false,
): FloatArray {
  const V = policy.config.vocabSize;
  const prefix = new Int32Array(B * len); // (B, len)
  for (let b = 0; b < B; b++) prefix.set(tokens.subarray(b * T, b * T + len), b * len);
  const cache = arForward(policy, prefix, B, len, numerics);
  if (routing) {
    cache.blocks.forEach((bc, l) => {
      const r = bc.moe!.routing; // (B·len, k)
      const k = r.length / (B * len);
      const from = all ? 0 : len - 1;
      for (let b = 0; b < B; b++)
        routing[l]!.set(r.subarray((b * len + from) * k, (b * len + len) * k), (b * T + from) * k);
    });
  }
  const out = allocLike(cache.logits, B * V); // (B, V)
  for (let b = 0; b < B; b++) out.set(cache.logits.subarray((b * len + len - 1) * V, (b * len + len) * V), b * V);
  return out;
}

/**
 * The response slots of each sequence as plain arrays, (B) × L, PAD after EOS included — what a
 * task's `reward(problem, response)` reads (it stops at the first EOS).
 *
 * @example
 * ```ts
 * const rewards = rolloutResponses(r).map((resp, b) => task.reward(problems[b], resp).reward);
 * ```
 */
export function rolloutResponses(r: Rollout): number[][] {
  const T = r.promptLength + r.responseLength;
  return Array.from({ length: r.B }, (_, b) => Array.from(r.tokens.subarray(b * T + r.promptLength, (b + 1) * T)));
}
