// The LLaDA semi-autoregressive sampler with low-confidence or random remasking and optional top-k/top-p, recording what the log-prob estimators need.
// Not an estimator and not the GRPO loop: it returns tokens, commit steps and the inline trajectory log-prob, nothing else.

import type { FloatArray } from '../../nn/array.js';
import type { Rng } from '../../core/rng.js';
import { MASK } from '../../tasks/tokenizer.js';
import type { PolicyNumerics } from '../numerics.js';
import { truncatedSupport, truncationActive } from '../truncation.js';
import { rowLogProb } from '../../nn/row-logprob.js';
import { gumbelArgmax, tokenProb } from './logprob.js';
import { diffusionForward, type DiffusionForward, type DiffusionModel } from './model.js';
import { rngStreams } from '../../core/rng-streams.js';

/** How the sampler picks which candidates to commit (LLaDA `remasking`). */
export type DiffusionRemasking = 'low_confidence' | 'random';

/** Sampler settings (LLaDA `generate`). */
export interface DiffusionSamplerConfig {
  /** Generation length N (response slots after the prompt). @defaultValue 24 */
  readonly genLength: number;
  /** Block length; N must be a multiple of it. @defaultValue 8 */
  readonly blockLength: number;
  /** Total denoising steps S over all blocks; must be a multiple of N/blockLength. @defaultValue 12 */
  readonly steps: number;
  /** Gumbel-max sampling temperature; 0 = plain argmax, no random draws. @defaultValue 1 */
  readonly temperature: number;
  /** Which masked positions of the current block are committed. @defaultValue 'low_confidence' */
  readonly remasking: DiffusionRemasking;
  /** Classifier-free guidance scale w: `z = zu + (w+1)·(zc − zu)`; 0 disables it. @defaultValue 0 */
  readonly cfgScale: number;
  /** Keep only the k most likely ids (MASK never counts) for each token draw; 0 = off. @defaultValue 0 */
  readonly topK: number;
  /** Keep the smallest most-likely prefix whose probability reaches p for each token draw; 1 = off. @defaultValue 1 */
  readonly topP: number;
}

/** Defaults of {@link DiffusionSamplerConfig}: the d1/AIS recipe scaled down (blocks of 8, two tokens per step). */
export const diffusionSamplerDefaults: DiffusionSamplerConfig = Object.freeze({
  genLength: 24,
  blockLength: 8,
  steps: 12,
  temperature: 1,
  remasking: 'low_confidence',
  cfgScale: 0,
  topK: 0,
  topP: 1,
});

/** The block/step schedule a sampler config implies. */
export interface DiffusionSchedule {
  /** Number of blocks N / blockLength. */
  readonly blocks: number;
  /** Steps per block s = S / blocks. */
  readonly stepsPerBlock: number;
  /** Tokens committed at step i of a block: ⌊m/s⌋ + [i < m mod s] with m = blockLength. */
  readonly transfer: readonly number[];
}

/**
 * Validates a sampler config and returns its schedule. Divisibility is required (LLaDA's asserts),
 * rather than d1's `max(1, S // blocks)` fallback, so the number of forward passes is always exactly
 * `steps` and a config never silently means something else; `stepsPerBlock ≤ blockLength` so that
 * no step is a forward pass that commits nothing.
 *
 * @example
 * ```ts
 * diffusionSchedule({ ...diffusionSamplerDefaults, steps: 9 }).transfer; // [3, 3, 2]
 * ```
 */
export function diffusionSchedule(config: DiffusionSamplerConfig): DiffusionSchedule {
  const { genLength: N, blockLength: L, steps: S, temperature, remasking, cfgScale, topK, topP } = config;
  for (const [k, v] of [
    ['genLength', N],
    ['blockLength', L],
    ['steps', S],
  ] as const) {
    if (!Number.isInteger(v) || v < 1) throw new Error(`diffusion sampler: ${k} must be a positive integer, got ${v}`);
  }
  if (N % L !== 0) throw new Error(`diffusion sampler: genLength (${N}) must be a multiple of blockLength (${L})`);
  const blocks = N / L;
  if (S % blocks !== 0)
    throw new Error(
      `diffusion sampler: steps (${S}) must be a multiple of the number of blocks (${blocks} = genLength/blockLength)`,
    );
  const s = S / blocks;
  if (s > L)
    throw new Error(
      `diffusion sampler: steps per block (${s}) must be ≤ blockLength (${L}); a step would commit no token`,
    );
  if (!(temperature >= 0) || !Number.isFinite(temperature))
    throw new Error(`diffusion sampler: temperature must be finite and ≥ 0, got ${temperature}`);
  if (!(cfgScale >= 0) || !Number.isFinite(cfgScale))
    throw new Error(`diffusion sampler: cfgScale must be finite and ≥ 0, got ${cfgScale}`);
  if (!Number.isInteger(topK) || topK < 0)
    throw new Error(`diffusion sampler: topK must be a non-negative integer (0 = off), got ${topK}`);
  if (!(topP > 0 && topP <= 1)) throw new Error(`diffusion sampler: topP must be in (0, 1] (1 = off), got ${topP}`);
  if (remasking !== 'low_confidence' && remasking !== 'random')
    throw new Error(`diffusion sampler: remasking must be low_confidence or random, got ${String(remasking)}`);
  const transfer = Array.from({ length: s }, (_, i) => Math.floor(L / s) + (i < L % s ? 1 : 0));
  return Object.freeze({ blocks, stepsPerBlock: s, transfer: Object.freeze(transfer) });
}

/** One sampled sequence and the record the estimators replay. */
export interface DiffusionSequence {
  /** Stable name of the sequence; the d1 and ELBO mask streams are `createRng(seed).fork(estimator).fork(id)`. */
  readonly id: string;
  /** (P) prompt tokens. */
  readonly prompt: readonly number[];
  /** (N) committed response tokens. */
  readonly response: readonly number[];
  /**
   * (N) global step (0 … S−1) at which each response slot was committed. The state the model saw at
   * step k is the prompt followed by `response[j]` where `commitStep[j] < k` and MASK elsewhere
   * ({@link diffusionStateAt}). Null for sequences that were not sampled (e.g. gold responses),
   * which the `trajectory` estimator cannot score.
   */
  readonly commitStep: Int32Array | null;
}

/** What {@link sampleDiffusion} returns. */
export interface DiffusionRollout {
  /** The resolved sampler config. */
  readonly config: DiffusionSamplerConfig;
  /** Its schedule. */
  readonly schedule: DiffusionSchedule;
  /** The sampled sequences, one per prompt, in prompt order. */
  readonly sequences: readonly DiffusionSequence[];
  /**
   * (B·N) the rollout engine's own trajectory log-prob of every response token:
   * `log softmax(zc/τ)[token]` from the conditional logits zc of the step that committed it,
   * τ = {@link DiffusionRollout.logpTemperature}. Equal (`Object.is`) to the `trajectory` estimator
   * under the same numerics when `cfgScale` is 0.
   */
  readonly logpRollout: Float64Array;
  /** τ of `logpRollout`: the sampling temperature, or 1 when it is 0. */
  readonly logpTemperature: number;
  /**
   * (B·N·V) the kept set (1 = could be drawn) of the one draw that committed each response slot, when
   * top-k/top-p truncates (temperature > 0); null otherwise. `logpRollout` is renormalised over it.
   */
  readonly support: Uint8Array | null;
  /** (S) the (B, P+N) token state fed to the model at each step; only with `recordStates`. */
  readonly states: readonly Int32Array[] | null;
  /**
   * MoE only, with `recordRouting`: the experts of every step's forward (the conditional rows), one
   * (B, S, P+N, k) array per layer — row (b, step) is the `trajectory` estimator's view of sequence b
   * at that step, so the layout is that estimator's {@link DiffusionLogprobs.routing}. Else null.
   */
  readonly routing: readonly Int32Array[] | null;
}

/** Options of {@link sampleDiffusion} that are not sampler settings. */
export interface SampleDiffusionOptions {
  /** Sequence ids; @defaultValue the path of each row's stream, `${rng.path}/row-${r}` */
  readonly ids?: readonly string[];
  /** Keep a copy of the state at every step (tests, debugging). @defaultValue false */
  readonly recordStates?: boolean;
  /** MoE: record the routing of every step's forward ({@link DiffusionRollout.routing}). @defaultValue false */
  readonly recordRouting?: boolean;
}

/**
 * The token state `prompt ++ [response[j] if commitStep[j] < step else MASK]` (P+N) that the model
 * saw at global step `step` of a sampled sequence.
 */
export function diffusionStateAt(seq: DiffusionSequence, step: number, out?: Int32Array): Int32Array {
  if (!seq.commitStep)
    throw new Error(`diffusionStateAt: sequence ${JSON.stringify(seq.id)} has no commitStep (it was not sampled)`);
  const P = seq.prompt.length;
  const N = seq.response.length;
  const x = out ?? new Int32Array(P + N);
  for (let j = 0; j < P; j++) x[j] = seq.prompt[j]!;
  for (let j = 0; j < N; j++) x[P + j] = seq.commitStep[j]! < step ? seq.response[j]! : MASK;
  return x;
}

/** What {@link sampleDiffusion} samples from: the model, its weights and the numerics of its forward passes. */
export interface DiffusionSamplerPolicy {
  /** The bidirectional model. */
  readonly model: DiffusionModel;
  /** Its weights (the rollout snapshot). */
  readonly params: FloatArray;
  /** The rollout side's numerics. */
  readonly numerics: PolicyNumerics;
}

/**
 * LLaDA semi-autoregressive sampling (`generate.py::generate`; pseudo-code in docs/policies-diffusion.md)
 * of one response per prompt under `numerics`.
 *
 * Per block b and step i (global step b·s + i), for every row: the masked slots of block b are
 * visited in increasing position; each gets a candidate x0 (Gumbel-max of the logits at the sampling
 * temperature: V uniforms from the row's stream in increasing v; none at temperature 0; with top-k /
 * top-p the argmax runs over the kept set only, still consuming V uniforms) and a
 * confidence (`softmax(z)[x0]` at temperature 1 for `low_confidence`; one more uniform for
 * `random`); the `transfer[i]` candidates with the highest confidence, ties to the lowest position,
 * are committed and never change again; a committed slot's ℓroll is `log softmax(zc/τ)[x0]`
 * renormalised over the kept set of its draw, which `support` records. The confidence is not
 * truncated (LLaDA's `softmax(z)[x0]`). Each row draws from its own stream `rng.fork('row-' + r)`,
 * so a row's sample does not depend on the other rows' draws.
 *
 * @param policy - the model, its weights and the numerics its forward passes run under
 * @param prompts - B prompts of equal length P (task prompts: `[PAD…] BOS problem SEP`), no MASK
 * @example
 * ```ts
 * const rollout = sampleDiffusion(
 *   { model, params: store.data, numerics: fp32Numerics() },
 *   prompts,
 *   { temperature: 0.9 },
 *   createRng(7).fork('rollout'),
 * );
 * ```
 */
export function sampleDiffusion(
  policy: DiffusionSamplerPolicy,
  prompts: readonly (readonly number[])[],
  config: Partial<DiffusionSamplerConfig>,
  rng: Rng,
  options: SampleDiffusionOptions = {},
): DiffusionRollout {
  const { model, params, numerics } = policy;
  const cfg: DiffusionSamplerConfig = Object.freeze({ ...diffusionSamplerDefaults, ...config });
  const schedule = diffusionSchedule(cfg);
  const B = prompts.length;
  if (B < 1) throw new Error('sampleDiffusion: prompts must not be empty');
  const P = prompts[0]!.length;
  const N = cfg.genLength;
  const T = P + N;
  const V = model.config.vocabSize;
  if (T > model.config.maxLen)
    throw new Error(`sampleDiffusion: prompt length ${P} + genLength ${N} must be ≤ maxLen ${model.config.maxLen}`);
  if (options.ids && options.ids.length !== B)
    throw new Error(`sampleDiffusion: ids must have one entry per prompt (${B}), got ${options.ids.length}`);
  const x = new Int32Array(B * T); // (B, T) current state
  prompts.forEach((p, r) => {
    if (p.length !== P)
      throw new Error(`sampleDiffusion: prompts[${r}] has length ${p.length}, expected ${P} like prompts[0]`);
    p.forEach((tok, j) => {
      if (!Number.isInteger(tok) || tok < 0 || tok >= V || tok === MASK)
        throw new Error(`sampleDiffusion: prompts[${r}][${j}] must be a non-MASK id in [0, ${V}), got ${tok}`);
      x[r * T + j] = tok;
    });
    x.fill(MASK, r * T + P, (r + 1) * T);
  });
  const rowRngs = Array.from({ length: B }, (_, r) => rng.fork(rngStreams.diffusion.row(r)));
  const commitSteps = Array.from({ length: B }, () => new Int32Array(N).fill(-1));
  const logpRollout = new Float64Array(B * N);
  const logpTemperature = cfg.temperature > 0 ? cfg.temperature : 1;
  const states: Int32Array[] | null = options.recordStates ? [] : null;
  const cfgOn = cfg.cfgScale > 0;
  const uncond = cfgOn ? new Int32Array(B * T) : null; // (B, T) prompt replaced by MASK
  const guided = new Float64Array(V); // (V) guided logits of one position
  const L = cfg.blockLength;
  const truncate = cfg.temperature > 0 && truncationActive(V, cfg.topK, cfg.topP, MASK);
  const support = truncate ? new Uint8Array(B * N * V) : null; // (B, N, V)
  /** Rows [0, B) of a step's routing (the conditional ones) into (b, step) of the record. */
  const recordStep = (fwd: DiffusionForward, step: number): void => {
    if (routing === null) return;
    routing.forEach((out, l) => {
      const r = fwd.blocks[l]!.moe!.routing; // (rows, T, k)
      for (let b = 0; b < B; b++) out.set(r.subarray(b * T * topK, (b + 1) * T * topK), (b * S + step) * T * topK);
    });
  };
  const cand: { j: number; x0: number; c: number; keep: Uint8Array | null }[] = [];
  const topK = model.block.moe?.topK ?? 0;
  const S = schedule.blocks * schedule.stepsPerBlock;
  const routing =
    options.recordRouting && topK > 0
      ? Array.from({ length: model.config.layers }, () => new Int32Array(B * S * T * topK))
      : null; // layers × (B, S, T, k)
  for (let b = 0; b < schedule.blocks; b++) {
    const lo = P + b * L;
    const hi = lo + L;
    for (let i = 0; i < schedule.stepsPerBlock; i++) {
      const step = b * schedule.stepsPerBlock + i;
      const k = schedule.transfer[i]!;
      if (states) states.push(x.slice());
      let logits: FloatArray; // (B, T, V) conditional logits
      let logitsU: FloatArray | null = null; // (B, T, V) unconditional logits
      if (uncond) {
        uncond.set(x);
        for (let r = 0; r < B; r++) uncond.fill(MASK, r * T, r * T + P);
        const both = new Int32Array(2 * B * T); // (2B, T): [x; un_x] in one batch, as LLaDA does
        both.set(x);
        both.set(uncond, B * T);
        const fwd = diffusionForward(model, params, both, 2 * B, T, numerics);
        logits = fwd.logits.subarray(0, B * T * V);
        logitsU = fwd.logits.subarray(B * T * V);
        recordStep(fwd, step);
      } else {
        const fwd = diffusionForward(model, params, x, B, T, numerics);
        logits = fwd.logits;
        recordStep(fwd, step);
      }
      for (let r = 0; r < B; r++) {
        const rr = rowRngs[r]!;
        cand.length = 0;
        for (let j = lo; j < hi; j++) {
          if (x[r * T + j] !== MASK) continue;
          const off = (r * T + j) * V;
          let row: ArrayLike<number> = logits;
          let rowOff = off;
          if (logitsU) {
            for (let v = 0; v < V; v++)
              guided[v] = logitsU[off + v]! + (cfg.cfgScale + 1) * (logits[off + v]! - logitsU[off + v]!);
            row = guided;
            rowOff = 0;
          }
          let keep: Uint8Array | null = null; // (V) kept set of this draw
          if (truncate) {
            keep = new Uint8Array(V);
            truncatedSupport(row, rowOff, V, cfg.temperature, cfg.topK, cfg.topP, keep, MASK);
          }
          const x0 = gumbelArgmax(row, rowOff, V, cfg.temperature, rr, MASK, keep);
          const c = cfg.remasking === 'low_confidence' ? tokenProb(row, rowOff, V, x0, MASK) : rr.uniformOpen();
          cand.push({ j, x0, c, keep });
        }
        cand.sort((p, q) => (q.c !== p.c ? q.c - p.c : p.j - q.j));
        for (let n = 0; n < k && n < cand.length; n++) {
          const { j, x0, keep } = cand[n]!;
          x[r * T + j] = x0;
          commitSteps[r]![j - P] = step;
          if (keep) support!.set(keep, (r * N + j - P) * V);
          logpRollout[r * N + j - P] = rowLogProb(logits, (r * T + j) * V, V, x0, logpTemperature, keep, MASK);
        }
      }
    }
  }
  const sequences: DiffusionSequence[] = prompts.map((p, r) => ({
    id: options.ids?.[r] ?? rowRngs[r]!.path,
    prompt: [...p],
    response: Array.from(x.subarray(r * T + P, (r + 1) * T)),
    commitStep: commitSteps[r]!,
  }));
  return { config: cfg, schedule, sequences, logpRollout, logpTemperature, states, support, routing };
}
