// The policy-backend contract: everything the GRPO run driver asks of a policy, asynchronous and as
// plain data, so that an in-process engine, another process or a GPU stack can stand behind it.
// Not an implementation (src/backend/reference.ts wraps the toy engines; the protocol puts a process
// boundary behind the same operations).

/** The protocol (and contract) version a backend speaks. */
export const BACKEND_PROTOCOL = 'qrl-backend/1';

/** Which side of the precision plan runs a generation. */
export type PlanSideName = 'rollout' | 'trainer';

/** Which policy a log-prob request scores: the trained one, or the frozen reference. */
export type PolicyName = 'current' | 'reference';

/** A JSON value (what a replay record and a plan are made of, besides typed arrays). */
export type JsonValue = null | boolean | number | string | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/**
 * A policy's replay record: what the trainer side needs to score the rollout's samples again
 * (the AR policy's prompt+response tokens, the diffusion policy's sequences and estimator seed, a
 * sampler's kept-token sets, an MoE router's choices). Plain data only: JSON values and typed
 * arrays, never functions or class instances, so that it can cross a process boundary unchanged.
 *
 * An MoE policy adds `moeRouting`: one Int32Array per layer, B rows of S·k experts, the experts
 * the rollout engine's router chose in the forward that gave ℓroll (docs/moe.md). AR: (B, P + L, k),
 * −1 where the engine never ran a position; diffusion: (B, R/B·(P + G), k), the rows of the
 * estimator's forward (the sampler's step passes for `trajectory`). {@link LogprobsRequest.routing}
 * replays it.
 */
export interface ReplayRecord {
  /** The record's kind, e.g. `"ar"` or `"diffusion"`. */
  readonly kind: string;
  readonly [field: string]: ReplayRecordValue;
}

/** A nested value inside a {@link ReplayRecord}. */
export type ReplayRecordValue =
  | JsonValue
  | Int32Array
  | Float32Array
  | Float64Array
  | Uint8Array
  | readonly ReplayRecordValue[]
  | { readonly [key: string]: ReplayRecordValue };

/** Sampler settings of a generation (the run config's `policy.sampler`). */
export interface SamplingParams {
  readonly temperature: number;
  readonly topK: number;
  readonly topP: number;
  /** ℓroll of the processed (temperature/top-k/top-p) distribution, or of the raw logits. */
  readonly logprob: 'processed' | 'raw';
}

/** Vocabulary of the policy: its size and the ids of the special tokens. */
export interface BackendVocabulary {
  readonly size: number;
  readonly pad: number;
  readonly bos: number;
  readonly eos: number;
  readonly sep: number;
  readonly mask: number;
}

/** What a backend can do beyond the required operations. */
export interface BackendCapabilities {
  /** Which ℓroll kinds `generate` can report. */
  readonly logprobs: readonly ('processed' | 'raw')[];
  /**
   * `logprobs` returns the policy's entropy at each position. When false, a `logprobs` result may
   * omit `entropy` (the client then reports NaN entropies and the entropy metrics read NaN).
   */
  readonly entropy: boolean;
  /** `warmStart` is implemented (else the driver warm-starts elsewhere and `load`s the weights). */
  readonly warmStart: boolean;
  /**
   * Whether `load` takes a directory holding only qrl-sim's AR `weights.safetensors` (the driver's
   * warm-start hand-over to a backend without `warmStart`). `false`: the backend's policy is not
   * qrl-sim's transformer; the driver never pushes weights, and a run without `warmStart` must have
   * `sft.steps = 0` (RL starts from the backend's own weights). @defaultValue true
   */
  readonly handOver?: boolean;
  /**
   * `logprobs` returns {@link LogprobsResult.probSqSum} when asked ({@link LogprobsRequest.probSqSum}):
   * the run driver needs it for a token-level advantage (veRL's optimal token baseline) and refuses
   * such a run against a backend without it. @defaultValue false
   */
  readonly probSqSum?: boolean;
  /**
   * `dumpEngine` is implemented: the backend writes what its rollout engine computes with since the
   * last `sync`, and the trainer's state dict, in the format `qrl-sim refit-check` reads
   * (docs/refit-check.md §8). @defaultValue false
   */
  readonly dumpEngine?: boolean;
  /**
   * `warmStart` takes {@link WarmStartRequest.examples}: the driver sends the task's supervised pairs
   * (the toy's own SFT stream), so a backend that does not know qrl-sim's tasks can warm-start on
   * them (docs/adapter.md §3). Without it the field is never sent. @defaultValue false
   */
  readonly sftExamples?: boolean;
  /**
   * The sampler's distribution (docs/adapter.md "Top-k log-probs"): `generate` with
   * {@link GenerateRequest.topkLogprobs} K returns {@link SampledBatch.topk}, `logprobs` with
   * {@link LogprobsRequest.topk} returns the trainer's ℓ at those ids, and `backward` takes their
   * coefficients. A run whose `policy.sampler.topkLogprobs` > 0 is refused without it. @defaultValue false
   */
  readonly topkLogprobs?: boolean;
  /**
   * An AR backend replays the sampling support (`policy.sampler.supportReplay` of the run config it is
   * sent in `info.run`): under a top-k/top-p sampler its record keeps each sampled position's kept set and
   * `logprobs` renormalises ℓ over it, as ℓroll is (docs/adapter.md §3, `capabilities`). A run with
   * `supportReplay` and a truncating sampler is refused against an AR backend without it. A diffusion
   * backend needs no declaration: its record's `support` field is the spec's (docs/adapter.md §7,
   * "Record"), and the driver refuses a batch of such a run whose record lacks it. @defaultValue false
   */
  readonly supportReplay?: boolean;
}

/**
 * The rollout engine's K most likely ids at every response position and their log-probs (the kind
 * of ℓroll), `(B, T, K)`: under top-k/top-p sampling only the ids of the support (the rest −1).
 */
export interface SampledTopk {
  /** Slots per position. */
  readonly K: number;
  /** Ids `(B, T, K)` by ℓ descending (ties: the lower id first), −1 = empty (past the support, or no token). */
  readonly ids: Int32Array;
  /** ℓμ at `ids` `(B, T, K)`, 0 at an empty slot. */
  readonly logp: Float64Array;
}

/**
 * What {@link PolicyBackend.dumpEngine} wrote: two safetensors files under the directory and the
 * `refit-check` arguments that state the backend's intent (its rollout plan's recipe and ignore list).
 */
export interface EngineDump {
  /** File name (under the directory) of the trainer's state dict. */
  readonly trainer: string;
  /** File name of the engine's tensors (Hugging Face FP8 conventions). */
  readonly engine: string;
  /** `--recipe`: a refit-check preset. */
  readonly recipe: string;
  /** `--block` of a block recipe. */
  readonly block?: number;
  /** `--ignore`: the modules the plan keeps in high precision. */
  readonly ignore: readonly string[];
  /** `--match` of `ignore`. */
  readonly match: 'substring' | 'prefix' | 'regex';
}

/** A backend's self-description. */
export interface BackendInfo {
  /** {@link BACKEND_PROTOCOL}. */
  readonly protocol: string;
  /** Identity of the implementation, e.g. `"qrl-sim reference"`, and its version. */
  readonly backend: { readonly name: string; readonly version: string };
  /** `"ar"` or `"diffusion"` (or another kind an external backend declares). */
  readonly policy: string;
  readonly vocabulary: BackendVocabulary;
  /** The precision plan as data: its name and both sides. */
  readonly plan: { readonly name: string; readonly rollout: JsonValue; readonly trainer: JsonValue };
  readonly capabilities: BackendCapabilities;
  /** Number of trainable parameters. */
  readonly parameters: number;
}

/** A `generate` request. */
export interface GenerateRequest {
  /** Prompt token ids, one row per sample (a GRPO group repeats its prompt G times). */
  readonly prompts: readonly (readonly number[])[];
  /** The RNG path of this generation (e.g. `"0/step/3/rollout"`): same seed and weights ⇒ same tokens. */
  readonly seed: string;
  /**
   * Sampler settings. The run driver always sends the run config's `policy.sampler`; a backend
   * samples with exactly these (or refuses the request). Absent (a hand-written client): the
   * backend's configured sampler.
   */
  readonly sampling?: SamplingParams;
  /**
   * Most response tokens to generate per prompt (EOS included); a row that has not emitted EOS by
   * then ends unfinished. The run driver always sends it (AR: the task's response length;
   * diffusion: `policy.diffusion.generationLength`). Absent: the backend's own limit.
   */
  readonly maxNewTokens?: number;
  /** Greedy decoding (argmax; ℓroll is still reported). */
  readonly greedy?: boolean;
  /** Which side of the plan generates. @defaultValue 'rollout' */
  readonly side?: PlanSideName;
  /**
   * Also return the engine's K most likely ids and their ℓ per position ({@link SampledBatch.topk};
   * needs {@link BackendCapabilities.topkLogprobs}; not with `greedy`). Absent or 0: none.
   */
  readonly topkLogprobs?: number;
}

/**
 * The sampled responses of a batch, padded to `T` response positions: the fields every batch
 * shares, the loop's {@link RolloutBatch} and the in-process engine's `EngineBatch` alike.
 */
export interface SampledBatch {
  /** Number of sequences. */
  readonly B: number;
  /** Response positions per sequence (padding included). */
  readonly T: number;
  /** Prompt tokens of each sequence. */
  readonly prompts: readonly (readonly number[])[];
  /** Response tokens `(B, T)`; positions past the mask hold padding. */
  readonly responses: Int32Array;
  /** Response mask `(B, T)`: 1 on the tokens the policy generated (EOS included), else 0. */
  readonly mask: Float64Array;
  /** ℓroll `(B, T)`: the log-prob the generating engine reported (0 where the mask is 0). */
  readonly logpRollout: Float64Array;
  /** The engine's top-k ids and ℓ, when the generation asked for them. */
  readonly topk?: SampledTopk;
}

/** A batch of sampled responses as plain data, as a backend returns it from `generate`. */
export interface RolloutBatch extends SampledBatch {
  /** Weight version of the engine that generated it (what `sync` last returned). */
  readonly weightVersion: number;
  /** What the trainer side needs to score these samples again. */
  readonly record: ReplayRecord;
}

/** A `logprobs` request: trainer-side log-probs of some rows of a batch. */
export interface LogprobsRequest {
  readonly batch: RolloutBatch;
  /** Row indices into the batch. */
  readonly rows: readonly number[];
  /** The trained policy or the frozen reference. */
  readonly policy: PolicyName;
  /** Keep what {@link PolicyBackend.backward} needs and return a handle to it (current policy only). */
  readonly grad?: boolean;
  /**
   * MoE routing replay (docs/moe.md), current policy only; absent: every position routes by the
   * trainer's own top-k.
   * - `'rollout'` (R3): replay the rollout engine's routing, the record's `moeRouting`.
   * - one Int32Array per layer, in the layout of `moeRouting` restricted to `rows` (rows, S, k)
   *   (R2: the `routing` an earlier ℓold pass returned): replay exactly these experts.
   *
   * A row of k × −1 (a position the engine never ran) keeps the trainer's own top-k. No gradient
   * flows through the replayed choice; the router still trains through the gates.
   */
  readonly routing?: 'rollout' | readonly Int32Array[];
  /** MoE: return the experts this pass used in {@link LogprobsResult.routing} (R2 records them in the ℓold pass). */
  readonly returnRouting?: boolean;
  /**
   * Also return Σ_v π(v)² at each position in {@link LogprobsResult.probSqSum} (the ℓold pass of a
   * run whose advantage is veRL's optimal token baseline; needs {@link BackendCapabilities.probSqSum}).
   */
  readonly probSqSum?: boolean;
  /**
   * Also return ℓ at the batch's top-k ids in {@link LogprobsResult.topkLogp} (the batch must carry
   * `topk`; needs {@link BackendCapabilities.topkLogprobs}); with `grad`, `backward` then takes
   * their coefficients too.
   */
  readonly topk?: boolean;
}

/** Per-token trainer log-probs of some rows of a batch. */
export interface LogprobsResult {
  /** ℓ `(rows, T)`, 0 where the mask is 0. */
  readonly logp: Float64Array;
  /** Entropy of the policy at each position `(rows, T)`, 0 where the mask is 0. */
  readonly entropy: Float64Array;
  /**
   * When `probSqSum` was asked: Σ_v π(v)² `(rows, T)` of the distribution each log-prob was taken
   * from (float64, the same softmax row, temperature and kept set as `logp`; veRL `sum_pi_squared`),
   * 0 where the mask is 0.
   */
  readonly probSqSum?: Float64Array;
  /**
   * When `topk` was asked: ℓ `(rows, T, K)` at the batch's top-k ids, from the same softmax row as
   * `logp` (0 at an empty slot and where the mask is 0).
   */
  readonly topkLogp?: Float64Array;
  /** Present when `grad` was set: pass it to {@link PolicyBackend.backward}. */
  readonly handle?: string;
  /** MoE, when `returnRouting` was set: the experts this pass used, one (rows, S, k) Int32Array per layer. */
  readonly routing?: readonly Int32Array[];
  /**
   * MoE, current policy, when the record carries `moeRouting`: per layer, the share of router
   * decisions that differ between the rollout record and this pass at the positions whose outputs
   * score a response token (mask 1). Zero under `'rollout'` replay; the drift of the trainer's own
   * routing from the engine's otherwise.
   */
  readonly routingFlipRate?: readonly number[];
}

/** A `step` request: one optimizer step on the accumulated gradients. */
export interface StepRequest {
  /** Global gradient-norm clip. */
  readonly maxGradNorm: number;
}

/** What `step` reports. */
export interface StepResult {
  /** Global gradient norm before clipping. */
  readonly gradNorm: number;
  /** Weight version after the step (the trainer's; the rollout engine sees it at the next `sync`). */
  readonly weightVersion: number;
}

/** A supervised warm start on the task's gold responses. */
export interface WarmStartRequest {
  /** The task, by name and options (docs/tasks.md). */
  readonly task: { readonly name: string; readonly options: JsonValue };
  readonly steps: number;
  readonly batchSize: number;
  readonly lr: number;
  /** Root seed of the warm start's streams. */
  readonly seed: number;
  /**
   * The supervised pairs, `steps · batchSize` of them in training order (step s trains on
   * `examples[s·batchSize … (s+1)·batchSize)`): the task's problems drawn on the stream `<seed>/sft`
   * paired with the gold responses, exactly what qrl-sim's own warm start trains on. Sent only to a
   * backend declaring {@link BackendCapabilities.sftExamples}.
   */
  readonly examples?: readonly SupervisedPair[];
}

/** One supervised pair of a {@link WarmStartRequest}: a prompt (all of one length) and its gold response. */
export interface SupervisedPair {
  /** Prompt tokens, BOS … SEP (left-padded by the task). */
  readonly prompt: readonly number[];
  /** Gold response tokens, EOS included. */
  readonly response: readonly number[];
}

/**
 * The policy-backend contract the GRPO run driver is written against. Every operation is
 * asynchronous and exchanges plain data. The backend owns its weights, the reference policy, the
 * optimizer (with clipping and gradient zeroing) and its engine state; the run driver owns the
 * files, the steps and the random-stream names.
 */
export interface PolicyBackend {
  /** Protocol version, policy kind, vocabulary, plan and capabilities. */
  info(): Promise<BackendInfo>;
  /**
   * Rebuilds the rollout engine from the trainer's current weights and returns the weight version
   * it now serves.
   *
   * Semantics every backend keeps (the conformance check `qrl-sim backend-check` tests them):
   * - The trainer's weights have a version: 0 when the backend is built, +1 at every
   *   {@link PolicyBackend.step} (and as {@link PolicyBackend.load} restores it). Warm start and
   *   `load` change the weights; only `sync` hands them to the rollout engine.
   * - `sync` is the only way new weights reach the rollout engine: it copies them (re-quantizing
   *   under a quantized plan and recalibrating KV-cache scales), and the engine samples with that
   *   copy until the next `sync`, whatever steps happen in between.
   * - Every {@link RolloutBatch} carries the version of the weights that generated it, so a batch
   *   generated k steps after the last sync reports a version k behind the trainer's (how stale
   *   rollouts are modelled).
   * - Trainer-side {@link PolicyBackend.logprobs} always score with the current weights, whatever the
   *   rollout engine serves.
   */
  sync(): Promise<{ readonly weightVersion: number }>;
  /** Samples (or greedily decodes) one response per prompt. */
  generate(request: GenerateRequest): Promise<RolloutBatch>;
  /** Trainer-side log-probs and entropy of `rows` of a batch under the current or reference policy. */
  logprobs(request: LogprobsRequest): Promise<LogprobsResult>;
  /**
   * Accumulates d(Σ g·ℓ + Σ g_topk·ℓ_topk)/dθ for the log-probs behind `handle`; the handle is spent.
   * `gradTopk` `(rows, T, K)` only for a handle whose pass had `topk`.
   */
  backward(handle: string, gradLogp: Float64Array, gradTopk?: Float64Array): Promise<void>;
  /** Clips the accumulated gradients to `maxGradNorm`, steps the optimizer and zeroes the gradients. */
  step(request: StepRequest): Promise<StepResult>;
  /** Freezes the current weights as the reference policy. */
  setReference(): Promise<void>;
  /** Supervised warm start (when `capabilities.warmStart`); returns its metrics. */
  warmStart(request: WarmStartRequest): Promise<Record<string, number>>;
  /** Writes weights, reference, optimizer and engine state under `dir` (which the driver created). */
  save(dir: string): Promise<void>;
  /** Restores what {@link PolicyBackend.save} wrote. */
  load(dir: string): Promise<void>;
  /**
   * Writes the rollout engine's weights since the last `sync` and the trainer's state dict under
   * `dir` for `qrl-sim refit-check` (only when `capabilities.dumpEngine`; absent otherwise).
   */
  dumpEngine?(dir: string): Promise<EngineDump>;
  /** Releases the backend (ends its process for an external one). */
  close(): Promise<void>;
}
