// The three per-token log-prob estimators of the diffusion policy (trajectory, d1, elbo), each with a forward under any PolicyNumerics and a backward into parameter gradients.
// Not a loss: the GRPO loop turns dL/dℓ into the `backward` argument; not the sampler, whose records they replay.

import { allocLike, type FloatArray } from '../../nn/array.js';
import { createRng } from '../../core/rng.js';
import { EOS, MASK } from '../../tasks/tokenizer.js';
import type { PolicyNumerics } from '../numerics.js';
import { rowEntropy, rowLogProb, rowLogProbBackward } from '../../nn/row-logprob.js';
import { diffusionBackward, diffusionForward, type DiffusionModel } from './model.js';
import { diffusionStateAt, type DiffusionSequence } from './sampler.js';
import { rngStreams } from '../../core/rng-streams.js';

/** Names of the per-token log-prob estimators. */
export type DiffusionEstimatorName = 'trajectory' | 'd1' | 'elbo';

/** Hyper-parameters of the estimators (each uses the ones it needs). */
export interface DiffusionEstimatorOptions {
  /**
   * Seed of the d1 prompt masks and of the ELBO masked views. π_old, π_ref and πθ (and the rollout
   * engine) must pass the same seed to see the same views. @defaultValue 0
   */
  readonly seed?: number | string;
  /**
   * τ of `log softmax(z/τ)`. For `trajectory`, pass the rollout's `logpTemperature` to score the
   * distribution the sampler drew from. @defaultValue 1
   */
  readonly temperature?: number;
  /** d1: probability of masking each prompt token (d1's `p_mask_prompt`). @defaultValue 0.15 */
  readonly pMaskPrompt?: number;
  /** elbo: number of Monte-Carlo masked views per sequence. @defaultValue 8 */
  readonly elboSamples?: number;
  /**
   * (B·N·V) sampling-support replay: the kept set of the draw that committed each response slot
   * (`DiffusionRollout.support`, rows in the order of `sequences`). Every view scoring slot j
   * renormalises softmax(z/τ) (and its entropy) over slot j's kept set. @defaultValue null (full vocabulary)
   */
  readonly support?: Uint8Array | null;
  /**
   * MoE routing replay: per layer, (R, T, k) experts for the R rows of the estimator's forward
   * ({@link DiffusionLogprobs.routing} of the same estimator and seed on the same sequences: the
   * rollout's for R3, an earlier trainer pass's for R2); a row of −1 keeps the own top-k.
   */
  readonly routing?: readonly Int32Array[] | undefined;
}

/** Per-token log-probs of a batch of sequences, with their backward. */
export interface DiffusionLogprobs {
  /** Number of sequences B. */
  readonly B: number;
  /** Response length N. */
  readonly N: number;
  /** (B·N) per-token log-probs ℓ (for `elbo`: the per-token shares of the sequence ELBO). */
  readonly logp: Float64Array;
  /**
   * (B·N) entropy of `softmax(z/τ)` (MASK excluded) at each slot's scored position; the mean over
   * the views that score the slot (`elbo`), 0 for a slot no view scores.
   */
  readonly entropy: Float64Array;
  /** Rows (sequences of P+N tokens) of the single batched forward pass that produced `logp`. */
  readonly forwardRows: number;
  /**
   * MoE only (null for a dense model): the experts of that forward, one (R, T, k) array per layer,
   * R = `forwardRows`; the rows of sequence i are R/B consecutive rows from i·R/B.
   */
  readonly routing: readonly Int32Array[] | null;
  /** (n) flat index `row·T + position` of each scored (row, position) of the forward. */
  readonly scoredAt: Int32Array;
  /** (n) the response slot `i·N + j` each entry of {@link DiffusionLogprobs.scoredAt} scores. */
  readonly scoredSlot: Int32Array;
  /**
   * Accumulates `Σ dlogp·∂ℓ/∂θ` into `grads` (layout and element type of `params`), through the
   * backward GEMMs of the same numerics. May be called more than once.
   *
   * @param dlogp - (B·N) dL/dℓ
   */
  backward(dlogp: ArrayLike<number>, grads: FloatArray): void;
}

/** The signature every estimator in {@link diffusionEstimators} has. */
export type DiffusionEstimatorFn = (
  model: DiffusionModel,
  params: FloatArray,
  sequences: readonly DiffusionSequence[],
  numerics: PolicyNumerics,
  options?: DiffusionEstimatorOptions,
) => DiffusionLogprobs;

/**
 * Masked views to score: R rows of T tokens and (row, position, target, output slot, weight) entries,
 * for B sequences of N response slots.
 */
interface Views {
  readonly tokens: Int32Array; // (R, T)
  readonly R: number;
  readonly T: number;
  readonly B: number;
  readonly N: number;
  readonly row: number[];
  readonly pos: number[];
  readonly target: number[];
  readonly slot: number[]; // index into (B·N)
  readonly weight: number[];
}

function shapeOf(sequences: readonly DiffusionSequence[]): { B: number; P: number; N: number } {
  const B = sequences.length;
  if (B < 1) throw new Error('diffusion estimator: sequences must not be empty');
  const P = sequences[0]!.prompt.length;
  const N = sequences[0]!.response.length;
  sequences.forEach((s, i) => {
    if (s.prompt.length !== P || s.response.length !== N) {
      throw new Error(
        `diffusion estimator: sequences[${i}] has prompt/response lengths ${s.prompt.length}/${s.response.length}, expected ${P}/${N} like sequences[0]`,
      );
    }
  });
  return { B, P, N };
}

function newViews(R: number, T: number, sequences: { B: number; N: number }): Views {
  const { B, N } = sequences;
  return { tokens: new Int32Array(R * T), R, T, B, N, row: [], pos: [], target: [], slot: [], weight: [] };
}

/** Adds the entry scoring response slot j of sequence i at view row `row`, position P + j, with `weight`. */
function addEntry(views: Views, row: number, s: DiffusionSequence, at: { i: number; j: number; weight: number }): void {
  const P = s.prompt.length;
  views.row.push(row);
  views.pos.push(P + at.j);
  views.target.push(s.response[at.j]!);
  views.slot.push(at.i * views.N + at.j);
  views.weight.push(at.weight);
}

function temperatureOf(options: DiffusionEstimatorOptions): number {
  const tau = options.temperature ?? 1;
  if (!(tau > 0) || !Number.isFinite(tau))
    throw new Error(`diffusion estimator: temperature must be finite and > 0, got ${tau}`);
  return tau;
}

/**
 * One batched forward over the views; ℓ[slot] = Σ weight·log softmax(z[row, pos]/τ)[target], the
 * softmax renormalised over the slot's kept set when `support` (B·N·V) is given.
 */
function scoreViews(
  model: DiffusionModel,
  params: FloatArray,
  numerics: PolicyNumerics,
  views: Views,
  options: DiffusionEstimatorOptions,
): DiffusionLogprobs {
  const { T, B, N } = views;
  const tau = temperatureOf(options);
  const support = options.support ?? null;
  const replay = options.routing;
  const V = model.config.vocabSize;
  if (support !== null && support.length !== B * N * V)
    throw new Error(`diffusion estimator: support must have B·N·V = ${B * N * V} entries, got ${support.length}`);
  const keepOf = (slot: number): Uint8Array | null =>
    support === null ? null : support.subarray(slot * V, (slot + 1) * V);
  const fwd = diffusionForward(model, params, views.tokens, views.R, T, numerics, replay ?? null);
  const logp = new Float64Array(B * N); // (B, N)
  const entropy = new Float64Array(B * N); // (B, N)
  const scored = new Float64Array(B * N); // (B, N) number of views scoring each slot
  const n = views.row.length;
  for (let e = 0; e < n; e++) {
    const off = (views.row[e]! * T + views.pos[e]!) * V;
    const slot = views.slot[e]!;
    const keep = keepOf(slot);
    logp[slot] = logp[slot]! + views.weight[e]! * rowLogProb(fwd.logits, off, V, views.target[e]!, tau, keep, MASK);
    entropy[slot] = entropy[slot]! + rowEntropy(fwd.logits, off, V, tau, MASK, keep);
    scored[slot] = scored[slot]! + 1;
  }
  for (let k = 0; k < B * N; k++) if (scored[k]! > 1) entropy[k] = entropy[k]! / scored[k]!;
  return {
    B,
    N,
    logp,
    entropy,
    forwardRows: views.R,
    routing: model.block.moe ? fwd.blocks.map((b) => b.moe!.routing) : null,
    scoredAt: Int32Array.from(views.row, (r, e) => r * T + views.pos[e]!),
    scoredSlot: Int32Array.from(views.slot),
    backward(dlogp, grads) {
      if (dlogp.length !== B * N)
        throw new Error(`diffusion estimator backward: dlogp must have B·N = ${B * N} entries, got ${dlogp.length}`);
      const dlogits = allocLike(params, views.R * T * V); // (R, T, V)
      for (let e = 0; e < n; e++) {
        const g = dlogp[views.slot[e]!]! * views.weight[e]!;
        if (g === 0) continue;
        rowLogProbBackward(
          dlogits,
          fwd.logits,
          (views.row[e]! * T + views.pos[e]!) * V,
          V,
          views.target[e]!,
          tau,
          g,
          MASK,
          keepOf(views.slot[e]!),
        );
      }
      diffusionBackward(model, params, grads, fwd, dlogits, numerics);
    },
  };
}

/**
 * `trajectory`: ℓ_j = log softmax(z/τ)[o_j] with z the logits of the recorded partially masked state
 * of the step that committed slot j (TraceRL-style trajectory-aware likelihood). All B·S states run
 * as one batch of B·S rows, so it costs as much as the rollout's forward passes.
 */
export const trajectoryEstimator: DiffusionEstimatorFn = (model, params, sequences, numerics, options = {}) => {
  const { B, P, N } = shapeOf(sequences);
  const T = P + N;
  let S = 0;
  sequences.forEach((s, i) => {
    if (!s.commitStep)
      throw new Error(
        `trajectory estimator: sequences[${i}] (${JSON.stringify(s.id)}) has no commitStep; only sampled sequences can be scored`,
      );
    for (let j = 0; j < N; j++) {
      const k = s.commitStep[j]!;
      if (!Number.isInteger(k) || k < 0)
        throw new Error(`trajectory estimator: sequences[${i}].commitStep[${j}] must be a step ≥ 0, got ${k}`);
      S = Math.max(S, k + 1);
    }
  });
  const views = newViews(B * S, T, { B, N });
  sequences.forEach((s, i) => {
    for (let k = 0; k < S; k++) diffusionStateAt(s, k, views.tokens.subarray((i * S + k) * T, (i * S + k + 1) * T));
    for (let j = 0; j < N; j++) addEntry(views, i * S + s.commitStep![j]!, s, { i, j, weight: 1 });
  });
  return scoreViews(model, params, numerics, views, options);
};

/**
 * `d1` (diffu-GRPO one-step estimator, d1 `forward_process` + `_get_per_token_logps`): each prompt
 * token is masked independently with probability `pMaskPrompt` (one `uniform()` per prompt position,
 * in order, from `createRng(seed).fork('d1').fork(id)`), the whole response is masked, and
 * ℓ_j = log softmax(z_{P+j}/τ)[o_j] from that single forward pass.
 */
export const d1Estimator: DiffusionEstimatorFn = (model, params, sequences, numerics, options = {}) => {
  const { B, P, N } = shapeOf(sequences);
  const T = P + N;
  const p = options.pMaskPrompt ?? 0.15;
  if (!(p >= 0 && p <= 1)) throw new Error(`d1 estimator: pMaskPrompt must be in [0, 1], got ${p}`);
  const views = newViews(B, T, { B, N });
  sequences.forEach((s, i) => {
    d1MaskedView(s, options.seed ?? 0, p, views.tokens.subarray(i * T, (i + 1) * T));
    for (let j = 0; j < N; j++) addEntry(views, i, s, { i, j, weight: 1 });
  });
  return scoreViews(model, params, numerics, views, options);
};

/**
 * The d1 view of one sequence (P+N tokens): prompt token j is MASK iff the j-th `uniform()` of
 * `createRng(seed).fork('d1').fork(sequence.id)` is `< pMaskPrompt`; every response slot is MASK.
 * The `d1` estimator scores exactly this view; exported so that callers can inspect it.
 */
export function d1MaskedView(
  sequence: DiffusionSequence,
  seed: number | string,
  pMaskPrompt: number,
  out?: Int32Array,
): Int32Array {
  const P = sequence.prompt.length;
  const T = P + sequence.response.length;
  const x = out ?? new Int32Array(T);
  const rng = createRng(seed).fork(rngStreams.diffusion.d1).fork(rngStreams.diffusion.sequence(sequence.id));
  for (let j = 0; j < P; j++) x[j] = rng.uniform() < pMaskPrompt ? MASK : sequence.prompt[j]!;
  x.fill(MASK, P, T);
  return x;
}

/**
 * `elbo` (LLaDA `get_log_likelihood.py`, the masked-token ELBO with the 1/t weighting at t = l/N):
 * for each of M = `elboSamples` views, draw l uniform in {1 … N} (`rng.int(N)` + 1), mask a uniformly
 * random set of l response slots (the first l of a Fisher–Yates shuffle of 0 … N−1), keep the prompt,
 * and score every masked slot. The sequence ELBO is `(1/M)·Σ_views (N/l)·Σ_{j masked} log p(o_j | view)`;
 * ℓ_j is slot j's share of it, `(1/M)·Σ_{views masking j} (N/l)·log p(o_j | view)`, so Σ_j ℓ_j is the
 * sequence ELBO. Streams: `createRng(seed).fork('elbo').fork(id)`.
 */
export const elboEstimator: DiffusionEstimatorFn = (model, params, sequences, numerics, options = {}) => {
  const { B, P, N } = shapeOf(sequences);
  const T = P + N;
  const M = options.elboSamples ?? 8;
  if (!Number.isInteger(M) || M < 1)
    throw new Error(`elbo estimator: elboSamples must be a positive integer, got ${M}`);
  const root = createRng(options.seed ?? 0).fork(rngStreams.diffusion.elbo);
  const views = newViews(B * M, T, { B, N });
  const order: number[] = [];
  sequences.forEach((s, i) => {
    const rng = root.fork(rngStreams.diffusion.sequence(s.id));
    for (let m = 0; m < M; m++) {
      const r = i * M + m;
      const x = views.tokens.subarray(r * T, (r + 1) * T);
      for (let j = 0; j < P; j++) x[j] = s.prompt[j]!;
      for (let j = 0; j < N; j++) x[P + j] = s.response[j]!;
      const l = 1 + rng.int(N);
      order.length = 0;
      for (let j = 0; j < N; j++) order.push(j);
      rng.shuffle(order);
      const masked = order.slice(0, l).sort((a, b) => a - b);
      for (const j of masked) {
        x[P + j] = MASK;
        addEntry(views, r, s, { i, j, weight: N / l / M });
      }
    }
  });
  return scoreViews(model, params, numerics, views, options);
};

/**
 * The three estimators by name, one signature.
 *
 * @example
 * ```ts
 * const { logp, backward } = diffusionEstimators.d1(model, store.data, rollout.sequences, trainerNumerics, { seed: 17 });
 * backward(dlogp, store.grads);
 * ```
 */
export const diffusionEstimators = Object.freeze({
  trajectory: trajectoryEstimator,
  d1: d1Estimator,
  elbo: elboEstimator,
} as const satisfies Record<DiffusionEstimatorName, DiffusionEstimatorFn>);

/** Names of {@link diffusionEstimators}. */
export const diffusionEstimatorNames: readonly DiffusionEstimatorName[] = Object.freeze(['trajectory', 'd1', 'elbo']);

/**
 * Per-token log-probs of `sequences` under `estimator` and `numerics` (rollout side: its plan, no
 * backward needed; trainer side: its plan, then `backward`).
 */
export function diffusionLogprobs(
  estimator: DiffusionEstimatorName,
  model: DiffusionModel,
  params: FloatArray,
  sequences: readonly DiffusionSequence[],
  numerics: PolicyNumerics,
  options?: DiffusionEstimatorOptions,
): DiffusionLogprobs {
  const fn = (diffusionEstimators as Record<string, DiffusionEstimatorFn | undefined>)[estimator];
  if (!fn)
    throw new Error(
      `diffusion estimator: estimator must be one of ${diffusionEstimatorNames.join(', ')}, got ${JSON.stringify(estimator)}`,
    );
  return fn(model, params, sequences, numerics, options);
}

/**
 * (B·N) completion mask of d1: 1 for response slots up to and including the first EOS, 0 after it
 * (all 1 when there is no EOS).
 */
export function diffusionCompletionMask(sequences: readonly DiffusionSequence[]): Float64Array {
  const { B, N } = shapeOf(sequences);
  const mask = new Float64Array(B * N);
  sequences.forEach((s, i) => {
    for (let j = 0; j < N; j++) {
      mask[i * N + j] = 1;
      if (s.response[j] === EOS) break;
    }
  });
  return mask;
}
