// `qrl-sim mismatch`: the rollout–trainer mismatch probe of a toy policy under a precision plan.
// Not a training run: the policy is freshly initialized from the seed or loaded from a checkpoint.

import {
  arMismatchProbe,
  arModelPresetNames,
  linearInputChannelStats,
  residualChannelStats,
  type ArPolicy,
} from '../policies/ar-api.js';
import { diffusionEstimatorNames, type DiffusionEstimatorName } from '../policies/diffusion/estimators.js';
import { diffusionMismatchProbe } from '../policies/diffusion/mismatch.js';
import { numericsFor, planNeedsWeights, precisionPlans, type PrecisionPlan } from '../policies/plans.js';
import { planOption } from './plan-option.js';
import { trainerPaddings, type TrainerPadding } from '../policies/plan-schema.js';
import type { EngineExecution, TensorParallel } from '../policies/execution.js';
import { createRng } from '../core/rng.js';
import { freshArPolicy, modelOption } from './model-option.js';
import { logprobSemantics, semanticsDifferences, semanticsLine } from '../policies/semantics.js';
import type { LengthDiagnostics, MismatchBucket } from '../rl/length-diagnostics.js';
import { makeTask, makeTaskFromConfig } from '../tasks/registry.js';
import type { Task } from '../tasks/task.js';
import { loadArProbeCheckpoint, loadDiffusionProbeCheckpoint } from '../runs/probe-checkpoint.js';
import type { Command } from './command.js';
import { UsageError } from '../core/errors.js';
import { readJsonFile } from './input.js';
import {
  booleans,
  integerOption,
  MODEL_OPTIONS,
  parseCommandArgs,
  refuseIgnored,
  required,
  seedOption,
  strings,
} from './parse.js';
import { rngStreams } from '../core/rng-streams.js';

/** Bounds of the probe's sizes (docs/decisions.md, "Size limits"): attention is O(L²) per sequence. */
export const MISMATCH_LIMITS = Object.freeze({ length: 1024, batch: 4096 });

const help = `usage: qrl-sim mismatch --policy ar --plan P [--length L] [--seed S] [--batch B]
                        [--temperature T] [--top-k K] [--top-p P]
                        [--max-batch N] [--prefill-chunk N] [--batch-invariant] [--min-length M]
                        [--trainer-micro-batch N] [--trainer-padding P] [--checkpoint FILE | --preset NAME [--outliers N] [--moe E,K]]
                        [--channels] [--positions] [--json]
       qrl-sim mismatch --policy diffusion --plan P [--length L] [--seed S] [--batch B]
                        [--estimator trajectory|d1|elbo] [--temperature T] [--checkpoint FILE]
                        [--positions] [--json]

ar: samples B responses of exactly L tokens (EOS ignored) with the plan's rollout engine,
recomputes their log-probs with the plan's trainer side.
diffusion: samples B responses of L slots with the masked-diffusion sampler under the rollout
side; ℓroll is the sampler's inline log-prob (trajectory) or the estimator under the rollout side
(d1, elbo), ℓold the same estimator under the trainer side with the same seeds; tokens up to and
including the first EOS count.
Both print the mismatch diagnostics:
  tokens       number of sampled tokens (B·L)
  k1           mean(ℓroll − ℓold)
  k3           mean(e^(−x) − 1 + x), x = ℓroll − ℓold
  meanAbsDp    mean |e^ℓold − e^ℓroll|
  meanAbsDelta mean |δ|, δ = ℓold − ℓroll;  maxAbsDelta  max |δ|
  ess          1 / mean((w / mean w)²), w = e^δ
  fracAbsDeltaGt1e-3  fraction of tokens with |δ| > 1e-3
ar, when the log-prob semantics of the two sides differ (docs/logprob-semantics.md), adds
  semantics    the differing fields, e.g. "support truncated≠full" (processed top-k/top-p
               log-probs carry −log S of the kept mass S), "temperature 1≠0.7" (raw rollout
               log-probs against a trainer at T), "temperatureAt before-log-softmax≠
               after-log-softmax" (a trainer dividing log softmax(z) by T), "logits bf16≠fp32"
               (the lm_head epilogue)
ar, when the plan's rollout side has engine settings (docs/engine-paths.md), adds
  engine       e.g. "maxBatch 8, prefillChunk 2, batchInvariant"; "tp 4 ring bf16" for tensor
               parallelism (rollout side; "trainer tp …" for the trainer's); "trainer
               microBatch 8" for a trainer recomputing 8 sequences per forward, "trainer
               padding longest-in-micro-batch" for one trimming each to its longest response
An MoE policy (a checkpoint of one; ar also --moe) adds, after them:
  flipRate/l<l>  share of router decisions of layer l that differ between the rollout engine and
               the trainer's own top-k, at the positions whose outputs score a response token
  k1R3, k3R3   k1 and k3 with the rollout's routing replayed in the trainer (R3); k1, k3 above
               are without replay

Options:
  --policy ar|diffusion  the autoregressive or the masked-diffusion toy policy
  --plan P            precision plan: ${Object.keys(precisionPlans).join(', ')},
                      or a plan .json file ({ rollout, trainer }: docs/precision-plans.md, docs/refit.md)
  --length L          response tokens per sequence, 1..1024 (default 16; diffusion: 24, or the
                      checkpoint's generationLength; blocks of 8 when 8 divides L, else one block,
                      two tokens committed per step)
  --estimator E       diffusion only: ${diffusionEstimatorNames.join(', ')} (default d1)
  --seed S            initialization (without --checkpoint), prompts and sampling (default 0;
                      an integer in 0..4294967295)
  --batch B           number of sequences, 1..4096 (default 16)
  --temperature T     sampling temperature, also used by the trainer recompute (default 1)
  --checkpoint PATH   a checkpoint directory \`run\` writes (checkpoints/step-N/) or a cached warm
                      start (.cache/sft/<key>/), or their backend.json; ar also takes a policy
                      saved by saveCheckpoint (JSON), diffusion a { config, weights } JSON file
  --preset NAME       ar only, without --checkpoint: the model preset of the fresh policy
                      (${arModelPresetNames.join(', ')}; default tiny)
  --outliers N        with --preset: number of outlier channels (norm gain 20), 0..64 (overrides the preset's)
  --moe E,K           ar only, without --checkpoint: an MoE feed-forward of E experts, top-K routing
                      (1 ≤ K ≤ E ≤ 64)
  --top-k K           ar only: sample from the K most likely tokens (default off)
  --top-p P           ar only: sample from the smallest set of mass ≥ P, 0 < P ≤ 1 (default 1, off)
  --max-batch N       ar only: continuous batching, at most N requests running at once (sets the
                      plan's rollout engine.maxBatch; docs/engine-paths.md), 1..4096
  --prefill-chunk N   ar only: chunked prefill, N prompt tokens per request per engine step
                      (engine.prefillChunk; 1 = token by token), 1..1024
  --batch-invariant   ar only: the batch-invariant switch (engine.batchInvariant)
  --trainer-micro-batch N  ar only: the trainer recomputes N sequences per forward (sets the
                      plan's trainer.microBatch; docs/precision-plans.md), 1..4096
  --trainer-padding P ar only: what the trainer pads each micro-batch to (sets the plan's
                      trainer.padding): max-length (the L slots), longest-in-batch, or
                      longest-in-micro-batch (P + the chunk's longest response); with
                      --min-length for responses of different lengths
  --min-length M      ar only: requests of different lengths, each drawn uniformly from M..L
                      (stream <seed>/probe-lengths), 1..L (default L: all of length L)
  --channels          ar only: also print the residual stream's per-channel mean |x| per layer and,
                      per linear-layer input, the median |x| and the top channels' ratio to it
                      (one fp32 forward over the sampled sequences; outlier channels stand out)
  --positions         also print the mismatch by response position (one row per position t:
                      tokens, k3, mean |δ|), by position bucket and by response-length bucket
                      ([0,8) [8,32) [32,128) [128,∞)), the sequence log-ratio S = Σ_t δ_t
                      (mean, mean |S|, max |S|), the error-token share (e^δ < 1e-2) and the
                      repetition rate (pooled seq-rep-4); with --json, as the keys positions,
                      byPosition, byLength (hi null = ∞), seqLogRatioMean, seqLogRatioAbsMean,
                      seqLogRatioAbsMax, errorTokenFrac, repetitionRate
  --json              one JSON object instead of a table (diffusion adds the key estimator)

ar: prompts are training prompts of the checkpoint's task (reverse when the checkpoint names none,
and without a checkpoint); a fresh policy has vocabulary and prompt layout of the reverse task and
maxLen = prompt length + L. diffusion: prompts of the checkpoint's task, sudoku4 without one; a
fresh policy is the toy default model initialized from the seed.

examples:
  qrl-sim mismatch --policy ar --plan fp8-rollout --batch 4
  qrl-sim mismatch --policy diffusion --plan bf16 --batch 2 --json`;

function parseTopP(value: string | undefined): number {
  if (value === undefined) return 1;
  const p = Number(value);
  if (value.trim() === '' || !Number.isFinite(p) || !(p > 0) || p > 1)
    throw new UsageError(`--top-p: expected a number in (0, 1], got '${value}'`);
  return p;
}

function parseTemperature(value: string | undefined): number {
  if (value === undefined) return 1;
  const t = Number(value);
  if (value.trim() === '' || !Number.isFinite(t) || !(t > 0))
    throw new UsageError(`--temperature: expected a finite number > 0, got '${value}'`);
  return t;
}

/**
 * `--checkpoint FILE` through `load`: a broken backend state (`checkpoint: …`) and an unusable
 * checkpoint become one-line usage errors naming `--checkpoint`; read and parse errors already do.
 */
function checkpointOption<T>(file: string, load: (file: string, readJson: (path: string) => unknown) => T): T {
  try {
    return load(file, (path) => readJsonFile(path, '--checkpoint'));
  } catch (error) {
    if (error instanceof UsageError && error.message.startsWith('checkpoint: '))
      throw new UsageError(`--${error.message}`);
    if (error instanceof UsageError) throw error;
    throw new UsageError(`--checkpoint: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** The MoE lines of the output (none for a dense policy): `flipRate/l<l>`, then `k1R3`, `k3R3`. */
function moeFieldsOf(
  moe:
    | { readonly flipRate: readonly number[]; readonly diagnosticsR3: { readonly k1: number; readonly k3: number } }
    | undefined,
): Record<string, number> {
  if (moe === undefined) return {};
  const out: Record<string, number> = {};
  moe.flipRate.forEach((f, l) => {
    out[`flipRate/l${l}`] = f;
  });
  return { ...out, k1R3: moe.diagnosticsR3.k1, k3R3: moe.diagnosticsR3.k3 };
}

function parsePadding(value: string | undefined): TrainerPadding | undefined {
  if (value === undefined) return undefined;
  if (!(trainerPaddings as readonly string[]).includes(value))
    throw new UsageError(`--trainer-padding: expected one of ${trainerPaddings.join(', ')}, got '${value}'`);
  return value as TrainerPadding;
}

function parseEstimator(value: string | undefined): DiffusionEstimatorName {
  if (value === undefined) return 'd1';
  if (!(diffusionEstimatorNames as readonly string[]).includes(value))
    throw new UsageError(`--estimator: expected one of ${diffusionEstimatorNames.join(', ')}, got '${value}'`);
  return value as DiffusionEstimatorName;
}

function print(result: Record<string, unknown>, json: boolean | undefined, out: (line: string) => void): void {
  if (json) {
    out(JSON.stringify(result));
    return;
  }
  const width = Math.max(...Object.keys(result).map((k) => k.length));
  for (const [k, v] of Object.entries(result))
    out(`${k.padEnd(width)}  ${typeof v === 'number' && !Number.isInteger(v) ? v.toExponential(4) : String(v)}`);
}

/** `--positions`: the long-response diagnostics as a table, or as the extra keys of the JSON object. */
function positionsReport(
  d: LengthDiagnostics,
  json: boolean | undefined,
): { fields: Record<string, unknown>; lines: string[] } {
  const bucket = (b: MismatchBucket): Record<string, unknown> => ({ ...b, hi: b.hi === Infinity ? null : b.hi });
  const scalars = {
    sequences: d.sequences,
    seqLogRatioMean: d.seqLogRatioMean,
    seqLogRatioAbsMean: d.seqLogRatioAbsMean,
    seqLogRatioAbsMax: d.seqLogRatioAbsMax,
    errorTokenFrac: d.errorTokenFrac,
    repetitionRate: d.repetitionRate,
  };
  if (json) {
    return {
      fields: {
        positions: d.positions.map((c, t) => ({ position: t, ...c })),
        byPosition: d.byPosition.map(bucket),
        byLength: d.byLength.map(bucket),
        ...scalars,
      },
      lines: [],
    };
  }
  const e = (x: number): string => x.toExponential(3);
  const row = (label: string, b: { tokens: number; k3: number; meanAbsDelta: number }): string =>
    `${label.padEnd(16)}${String(b.tokens).padStart(7)}  ${e(b.k3).padStart(10)}  ${e(b.meanAbsDelta).padStart(10)}`;
  const range = (b: MismatchBucket): string => `[${b.lo},${b.hi === Infinity ? '∞' : b.hi})`;
  const lines = [`${'position'.padEnd(16)}${'tokens'.padStart(7)}  ${'k3'.padStart(10)}  ${'mean|δ|'.padStart(10)}`];
  d.positions.forEach((c, t) => lines.push(row(String(t), c)));
  for (const b of d.byPosition) lines.push(row(`pos ${range(b)}`, b));
  for (const b of d.byLength) lines.push(row(`len ${range(b)}`, b));
  for (const [k, v] of Object.entries(scalars))
    lines.push(`${k.padEnd(18)}  ${Number.isInteger(v) ? String(v) : e(v)}`);
  return { fields: {}, lines };
}

/** `--channels`: per-layer outlier ratio, the top channels and the per-channel mean |x|; then, per linear-layer input, the median |x| and the top channels with their ratio to it. */
function printChannels(
  policy: ArPolicy,
  tokens: ArrayLike<number>,
  B: number,
  T: number,
  json: boolean | undefined,
  out: (line: string) => void,
): void {
  for (const s of residualChannelStats(policy, tokens, B, T)) {
    const top = s.meanAbs
      .map((m, c) => [m, c] as const)
      .sort((a, b) => b[0] - a[0])
      .slice(0, 4);
    if (json) {
      out(JSON.stringify({ layer: s.layer, outlierRatio: s.outlierRatio, meanAbs: s.meanAbs, maxAbs: s.maxAbs }));
      continue;
    }
    out(
      `residual ${s.layer}  outlierRatio ${s.outlierRatio.toExponential(3)}  top ${top.map(([m, c]) => `c${c}=${m.toExponential(2)}`).join(' ')}`,
    );
    out(`  mean|x| ${s.meanAbs.map((m) => m.toExponential(1)).join(' ')}`);
  }
  for (const s of linearInputChannelStats(policy, tokens, B, T, 4)) {
    if (json) {
      out(JSON.stringify({ linearInput: s.name, median: s.median, top: s.top, meanAbs: s.meanAbs }));
      continue;
    }
    out(
      `input ${s.name.padEnd(8)}  median|x| ${s.median.toExponential(2)}  top ${s.top.map((t) => `c${t.channel}=${t.meanAbs.toExponential(2)} (${t.ratio.toFixed(1)}x)`).join(' ')}`,
    );
  }
}

/** The plan's rollout engine settings with the command-line ones on top (undefined when there are none). */
function engineOf(
  plan: PrecisionPlan,
  values: { 'max-batch'?: string; 'prefill-chunk'?: string; 'batch-invariant'?: boolean },
): EngineExecution | undefined {
  const flags: EngineExecution = {
    ...(values['max-batch'] !== undefined
      ? { maxBatch: integerOption(values['max-batch'], 'max-batch', 0, 1, MISMATCH_LIMITS.batch) }
      : {}),
    ...(values['prefill-chunk'] !== undefined
      ? { prefillChunk: integerOption(values['prefill-chunk'], 'prefill-chunk', 0, 1, MISMATCH_LIMITS.length) }
      : {}),
    ...(values['batch-invariant'] === true ? { batchInvariant: true } : {}),
  };
  if (plan.rollout.engine === undefined && Object.keys(flags).length === 0) return undefined;
  return { ...plan.rollout.engine, ...flags };
}

/** `maxBatch 8, prefillChunk 2, batchInvariant, tp 4 ring bf16, trainer tp 4 ring bf16`, or '' without engine settings. */
function engineDescription(plan: PrecisionPlan): string {
  const tp = (t: TensorParallel | undefined): string =>
    t === undefined ? '' : `tp ${t.ranks} ${t.reduce ?? 'ring'} ${t.dtype ?? 'bf16'}`;
  const r = plan.rollout.engine ?? {};
  const parts = [
    r.maxBatch !== undefined ? `maxBatch ${r.maxBatch}` : '',
    r.prefillChunk !== undefined ? `prefillChunk ${r.prefillChunk}` : '',
    r.batchInvariant === true ? 'batchInvariant' : '',
    tp(r.tensorParallel),
    plan.trainer.engine?.tensorParallel !== undefined ? `trainer ${tp(plan.trainer.engine.tensorParallel)}` : '',
    plan.trainer.microBatch !== undefined ? `trainer microBatch ${plan.trainer.microBatch}` : '',
    plan.trainer.padding !== undefined ? `trainer padding ${plan.trainer.padding}` : '',
  ];
  return parts.filter((p) => p !== '').join(', ');
}

/** The `mismatch` subcommand. */
export const mismatchCommand: Command = {
  summary: 'rollout–trainer log-prob mismatch of a toy policy under a precision plan (k1, k3, |δ|, ESS)',
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, {
      ...strings(
        'policy',
        'plan',
        'length',
        'seed',
        'batch',
        'temperature',
        'checkpoint',
        'estimator',
        'top-k',
        'top-p',
        'max-batch',
        'prefill-chunk',
        'min-length',
        'trainer-micro-batch',
        'trainer-padding',
      ),
      ...MODEL_OPTIONS,
      ...booleans('json', 'channels', 'positions', 'batch-invariant'),
    });
    const policyName = required(values.policy, 'policy');
    if (policyName !== 'ar' && policyName !== 'diffusion')
      throw new UsageError(`--policy: expected ar or diffusion, got '${policyName}'`);
    const plan: PrecisionPlan = planOption(required(values.plan, 'plan'));
    if (policyName === 'diffusion' && (values['top-k'] !== undefined || values['top-p'] !== undefined))
      throw new UsageError(`--${values['top-k'] !== undefined ? 'top-k' : 'top-p'}: only for --policy ar`);
    if (policyName === 'diffusion') {
      refuseIgnored(
        values,
        [
          'preset',
          'outliers',
          'moe',
          'channels',
          'max-batch',
          'prefill-chunk',
          'batch-invariant',
          'min-length',
          'trainer-micro-batch',
          'trainer-padding',
        ],
        'with --policy diffusion (ar only)',
      );
      if (planNeedsWeights(plan))
        throw new UsageError(
          `--plan: refit chains, precision overrides, engine execution, temperatureAt, microBatch and padding are for --policy ar only, got one in plan '${plan.name}'`,
        );
      return runDiffusion(values, plan, io.out);
    }
    if (values.estimator !== undefined)
      throw new UsageError(`--estimator: only for --policy diffusion, got '${values.estimator}' with --policy ar`);
    const model = modelOption(values);
    if (values.preset !== undefined && values.checkpoint !== undefined)
      throw new UsageError(`--preset: not with --checkpoint (the checkpoint fixes the model)`);
    if (values.moe !== undefined && values.checkpoint !== undefined)
      throw new UsageError(`--moe: not with --checkpoint (the checkpoint fixes the model)`);
    const length = integerOption(values.length, 'length', 16, 1, MISMATCH_LIMITS.length);
    const seed = seedOption(values.seed);
    const batch = integerOption(values.batch, 'batch', 16, 1, MISMATCH_LIMITS.batch);
    const temperature = parseTemperature(values.temperature);
    const minLength = integerOption(values['min-length'], 'min-length', length, 1, length);
    const engine = engineOf(plan, values);
    if (
      engine !== undefined &&
      (plan.rollout.decode ?? 'incremental') !== 'incremental' &&
      (engine.maxBatch !== undefined || engine.prefillChunk !== undefined)
    ) {
      throw new UsageError(
        `--plan: engine.maxBatch and engine.prefillChunk need decode "incremental", plan '${plan.name}' decodes by ${plan.rollout.decode}`,
      );
    }
    const microBatch =
      values['trainer-micro-batch'] === undefined
        ? plan.trainer.microBatch
        : integerOption(values['trainer-micro-batch'], 'trainer-micro-batch', 0, 1, MISMATCH_LIMITS.batch);
    const padding = parsePadding(values['trainer-padding']) ?? plan.trainer.padding;
    const probePlan: PrecisionPlan = {
      ...plan,
      rollout: engine === undefined ? plan.rollout : { ...plan.rollout, engine },
      trainer: {
        ...plan.trainer,
        ...(microBatch === undefined ? {} : { microBatch }),
        ...(padding === undefined ? {} : { padding }),
      },
    };

    let policy: ArPolicy;
    let task: Task;
    if (values.checkpoint !== undefined) {
      ({ policy, task } = checkpointOption(values.checkpoint, loadArProbeCheckpoint));
      if (task.promptLength + length > policy.config.maxLen) {
        throw new UsageError(
          `--length: prompt length ${task.promptLength} + ${length} exceeds the checkpoint's maxLen ${policy.config.maxLen}`,
        );
      }
    } else {
      task = makeTask('reverse');
      policy = freshArPolicy(model, task, length, seed);
    }
    const topK =
      values['top-k'] === undefined ? 0 : integerOption(values['top-k'], 'top-k', 0, 1, policy.config.vocabSize);
    const topP = parseTopP(values['top-p']);
    const prompts = task.trainProblems(batch, seed).map((p) => [...p.prompt]);
    const lengthRng = createRng(seed).fork(rngStreams.cli.probeLengths);
    const requestLengths =
      minLength < length
        ? Array.from({ length: batch }, () => minLength + lengthRng.int(length - minLength + 1))
        : undefined;
    const probe = arMismatchProbe(policy, {
      plan: probePlan,
      length,
      prompts,
      seed,
      temperature,
      ...(topK > 0 ? { topK } : {}),
      ...(topP < 1 ? { topP } : {}),
      ...(requestLengths ? { requestLengths } : {}),
    });
    const sampler = { temperature, topK, topP };
    const diffs = semanticsDifferences(
      logprobSemantics(plan.rollout, 'rollout', sampler),
      logprobSemantics(plan.trainer, 'trainer', sampler),
    );
    const semantics = diffs.length > 0 ? { semantics: semanticsLine(diffs) } : {};
    const pos = values.positions ? positionsReport(probe.lengths, values.json) : { fields: {}, lines: [] };
    const engineLine = engineDescription(probePlan);
    print(
      {
        policy: 'ar',
        plan: plan.name,
        length,
        ...probe.diagnostics,
        ...moeFieldsOf(probe.moe),
        ...semantics,
        ...(engineLine === '' ? {} : { engine: engineLine }),
        ...pos.fields,
      },
      values.json,
      io.out,
    );
    pos.lines.forEach((l) => io.out(l));
    if (values.channels)
      printChannels(policy, probe.rollout.tokens, batch, task.promptLength + length, values.json, io.out);
    return 0;
  },
};

/** `--policy diffusion`: {@link diffusionMismatch} with the plan's two sides. */
function runDiffusion(
  values: {
    length?: string;
    seed?: string;
    batch?: string;
    temperature?: string;
    checkpoint?: string;
    estimator?: string;
    json?: boolean;
    positions?: boolean;
  },
  plan: PrecisionPlan,
  out: (line: string) => void,
): number {
  const estimator = parseEstimator(values.estimator);
  const seed = seedOption(values.seed);
  const sequences = integerOption(values.batch, 'batch', 16, 1, MISMATCH_LIMITS.batch);
  const loaded =
    values.checkpoint !== undefined ? checkpointOption(values.checkpoint, loadDiffusionProbeCheckpoint) : undefined;
  const length = integerOption(values.length, 'length', loaded?.sampler?.genLength ?? 24, 1, MISMATCH_LIMITS.length);
  // The checkpoint's own sampler schedule applies at its generation length; any other length uses the probe's defaults.
  let sampler = loaded?.sampler !== undefined && length === loaded.sampler.genLength ? { ...loaded.sampler } : {};
  if (values.temperature !== undefined) sampler = { ...sampler, temperature: parseTemperature(values.temperature) };
  else if (loaded?.sampler?.temperature !== undefined)
    sampler = { ...sampler, temperature: loaded.sampler.temperature };
  const task = makeTaskFromConfig({ name: loaded?.task ?? 'sudoku4', options: loaded?.taskOptions });
  const maxLen = loaded?.model?.config.maxLen;
  if (maxLen !== undefined && task.promptLength + length > maxLen) {
    throw new UsageError(
      `--length: prompt length ${task.promptLength} + ${length} exceeds the checkpoint's maxLen ${maxLen}`,
    );
  }
  const { diagnostics, lengths, moe } = diffusionMismatchProbe({
    ...loaded,
    rollout: numericsFor(plan.rollout),
    trainer: numericsFor(plan.trainer),
    length,
    seed,
    estimator,
    sequences,
    sampler,
  });
  const pos = values.positions ? positionsReport(lengths, values.json) : { fields: {}, lines: [] };
  print(
    { policy: 'diffusion', plan: plan.name, estimator, length, ...diagnostics, ...moeFieldsOf(moe), ...pos.fields },
    values.json,
    out,
  );
  pos.lines.forEach((l) => out(l));
  return 0;
}
