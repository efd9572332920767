// The run driver: warm start (cached), GRPO steps, evaluation, checkpoints, resume and the run's
// files, driving any PolicyBackend; the in-process ReferenceBackend is the default backend and
// the one that warm-starts a backend that has no warm start of its own. Not a step of the algorithm
// (rl/grpo/loop.ts) and not the command-line parsing (src/cli/run.ts).

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { PolicyBackend } from '../core/backend-contract.js';
import { ReferenceBackend } from '../backend/reference.js';
import { PLAN_FROM_BACKEND } from './backend-expect.js';
import { UsageError } from '../core/errors.js';
import type { PolicyFactory } from '../policies/engine.js';
import { generationOf, type RunConfig } from '../rl/grpo/config.js';
import { type PhaseTimings, StaleRollouts, evaluate, grpoStep } from '../rl/grpo/loop.js';
import { batchFromJson, batchToJson } from '../protocol/schema.js';
import type { MetricRecord } from '../rl/types.js';
import { createRng } from '../core/rng.js';
import type { Task } from '../tasks/task.js';
import { makeTaskFromConfig } from '../tasks/registry.js';
import { JsonlWriter, readJsonl, removeStaleTemps, tempName, writeJsonAtomic } from '../core/files.js';
import { policyFactory } from './policies.js';
import { createParamStore, type ParamSpec } from '../nn/params.js';
import { DIFFUSION_CONFIG_METADATA, diffusionWeightsLayout } from '../policies/diffusion/weights.js';
import { AR_CONFIG_METADATA, arConfigFor, arParamSpecs } from '../policies/ar-api.js';
import { planOfConfig } from '../policies/plans.js';
import { semanticsMetrics } from '../policies/semantics.js';
import { writeSafetensors, type SafetensorsEntry } from '../protocol/safetensors.js';
import { evalStream, rngStreams, stepStream } from '../core/rng-streams.js';
import { warmStartExamples } from './sft-examples.js';

/** What the driver writes next to the backend's state in a checkpoint directory. */
export interface CheckpointMeta {
  readonly version: 2;
  /** Last completed step. */
  readonly step: number;
  /** The deterministic run files as they stood at this step: complete lines and their sha256. */
  readonly files: Readonly<Record<'metrics.jsonl' | 'eval.jsonl', { readonly lines: number; readonly sha256: string }>>;
  /** With `rollout.staleness` > 0: the batches generated ahead of the steps after this one (batches as protocol JSON). */
  readonly pending?: readonly { readonly step: number; readonly generatedAt: number; readonly batch: unknown }[];
}

/** File name of {@link CheckpointMeta} inside a checkpoint directory. */
export const CHECKPOINT_META = 'checkpoint.json';

/** Names in a checkpoint directory that belong to the driver: a backend's `save` must not write them. */
export const RESERVED_CHECKPOINT_NAMES: readonly string[] = Object.freeze([CHECKPOINT_META]);

/** Progress callbacks (the CLI draws a bar or prints lines). */
export interface RunObserver {
  onStart?(info: { totalSteps: number; firstStep: number }): void;
  onStep?(step: number, metrics: MetricRecord, timings: PhaseTimings): void;
  onEval?(step: number, metrics: MetricRecord): void;
  onMessage?(text: string): void;
  /** Supervised warm-start progress (not called when the warm start comes from the cache). */
  onWarmStart?(done: number, total: number): void;
  /** An evaluation at `step` is about to run (it can take a while). */
  onEvalStart?(step: number): void;
  /** Step `step` is about to run (its rollout, scoring and updates). */
  onStepStart?(step: number): void;
  /** The checkpoint of `step` is about to be written. */
  onCheckpointStart?(step: number): void;
}

/** Options of {@link runGrpo}. */
export interface RunOptions {
  readonly config: RunConfig;
  readonly outDir: string;
  /**
   * The policy backend to drive (the caller keeps it open afterwards). When absent, the driver
   * builds the in-process {@link ReferenceBackend} over `factory` and closes it at the end.
   */
  readonly backend?: PolicyBackend;
  /** Identity of an external backend (address, name, version, protocol, plan), written as `backend` in config.json. */
  readonly backendIdentity?: Readonly<Record<string, unknown>>;
  /** In-process policy for the reference backend. @defaultValue the registry's policy of `config.policy.kind` */
  readonly factory?: PolicyFactory;
  /** Resume from the newest whole checkpoint in `outDir` that agrees with its files. */
  readonly resume?: boolean;
  readonly observer?: RunObserver;
  /** Directory of cached warm starts. @defaultValue `.cache/sft` under the working directory */
  readonly cacheDir?: string;
  /**
   * Polled at every safe point: after each step (the run then stops with a checkpoint), between
   * warm-start steps of the in-process reference (the run then stops before step 1 and has no
   * checkpoint: `resume` starts it over from step 0, byte-identically) and after the warm start.
   */
  readonly shouldStop?: () => boolean;
}

/** What a finished (or stopped) run reports. */
export interface RunSummary {
  /** The last completed step (0: stopped before the first). */
  readonly lastStep: number;
  readonly stopped: boolean;
  readonly outDir: string;
}

/** Thrown from a warm-start progress callback to stop the warm start between two of its steps. */
class WarmStartStopped extends Error {
  constructor() {
    super('stopped during the warm start');
  }
}

/** A warm-start progress callback that also stops the warm start when `shouldStop` says so. */
function stoppingProgress(
  observer: RunObserver | undefined,
  shouldStop: (() => boolean) | undefined,
): ((done: number, total: number) => void) | undefined {
  if (observer?.onWarmStart === undefined && shouldStop === undefined) return undefined;
  return (done, total) => {
    observer?.onWarmStart?.(done, total);
    if (done < total && shouldStop?.() === true) throw new WarmStartStopped();
  };
}

const CHECKPOINTS = 'checkpoints';
const PINNED_FILES = ['metrics.jsonl', 'eval.jsonl'] as const;
const RUN_FILES = ['metrics.jsonl', 'eval.jsonl', 'timings.jsonl'] as const;

/** Checkpoint directory of `step`. */
export function checkpointDir(outDir: string, step: number): string {
  return join(outDir, CHECKPOINTS, `step-${String(step).padStart(6, '0')}`);
}

/** Checkpoint directories of a run, newest first. */
export function checkpointDirs(outDir: string): string[] {
  const dir = join(outDir, CHECKPOINTS);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => /^step-\d{6}$/.test(f))
    .sort()
    .reverse()
    .map((f) => join(dir, f));
}

/** The newest checkpoint directory of a run, or null (whole or not: see {@link runGrpo}'s resume). */
export function latestCheckpoint(outDir: string): string | null {
  return checkpointDirs(outDir)[0] ?? null;
}

/** `backend.save` into a temp directory, then a rename: the directory at `dir` is whole or absent. */
export async function saveAtomic(backend: PolicyBackend, dir: string, meta?: unknown): Promise<void> {
  const tmp = tempName(dir);
  mkdirSync(tmp, { recursive: true });
  try {
    await backend.save(tmp);
    const taken = RESERVED_CHECKPOINT_NAMES.filter((f) => existsSync(join(tmp, f)));
    if (taken.length > 0)
      throw new Error(
        `save: the backend wrote ${taken.join(', ')} into ${tmp}, a name reserved for the driver (docs/adapter.md §3, Checkpoints)`,
      );
    if (meta !== undefined) writeFileSync(join(tmp, CHECKPOINT_META), `${JSON.stringify(meta, null, 2)}\n`);
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  } catch (error) {
    rmSync(tmp, { recursive: true, force: true });
    throw error;
  }
  // A run killed mid-save whose process was still dying when this run resumed (a second Ctrl-C, a
  // killed Ray worker) left a temp the start-up cleaning had to keep; by now its process is gone.
  removeStaleTemps(dirname(dir));
}

/**
 * Cache key of a warm start: everything that determines its result (seed, task, policy, SFT
 * settings). The plan and `policy.routingReplay` are not part of it: warm starts are precision-independent (fp32), so every
 * plan of a sweep starts from the same policy. The sweep's "who trains first" uses the same key.
 */
export function warmStartKey(
  config: RunConfig,
  backend?: { readonly name: string; readonly version: string; readonly address?: string },
): string {
  // routingReplay only acts in the RL phase; dropped (as undefined) so every mode shares the warm start
  // An external backend that warm-starts itself saves its own format: its full identity — name, version
  // and the command line or URL it was reached at, whose flags (an init seed, a model) can change what it
  // trains — is part of the key (the reference backend, in-process or served, keeps the key it always had).
  const owner =
    backend === undefined || backend.name === REFERENCE_NAME
      ? undefined
      : {
          name: backend.name,
          version: backend.version,
          ...(backend.address === undefined ? {} : { address: backend.address }),
        };
  const material = JSON.stringify({
    seed: config.seed,
    task: config.task,
    policy: { ...config.policy, routingReplay: undefined },
    sft: { ...config.sft, cache: undefined },
    backend: owner,
  });
  return createHash('sha256').update(material).digest('hex').slice(0, 20);
}

/** Cache directory of a config's warm start. */
export function warmStartCacheDir(
  cacheDir: string,
  config: RunConfig,
  backend?: { readonly name: string; readonly version: string; readonly address?: string },
): string {
  return join(cacheDir, `${config.policy.kind}-${config.task.name}-${warmStartKey(config, backend)}`);
}

const REFERENCE_NAME = 'qrl-sim reference';

/**
 * Warm start for a backend without `capabilities.warmStart`: the in-process reference backend
 * warm-starts (or loads the cached warm start), and its weights are handed over as a directory
 * holding `weights.safetensors` (ParamStore names, F32, the ArConfig — or for the diffusion policy
 * the model's shape under `qrl-sim.diffusion-config` — in the metadata; docs/adapter.md) that the
 * backend `load`s.
 */
async function handOverWarmStart(
  backend: PolicyBackend,
  config: RunConfig,
  task: Task,
  cacheDir: string,
  observer?: RunObserver,
  shouldStop?: () => boolean,
): Promise<void> {
  if (config.policy.kind !== 'ar' && config.policy.kind !== 'diffusion')
    throw new UsageError(
      `--backend: the backend has no warm start and weights can be handed over for policies ar and diffusion only, got '${config.policy.kind}'`,
    );
  // The warm start is precision-independent (fp32); a plan taken from the backend is no qrl-sim plan.
  const local = new ReferenceBackend(
    config.plan === 'backend' ? { ...config, plan: 'fp32' } : config,
    policyFactory(config.policy.kind),
    task,
  );
  local.onWarmStartProgress = stoppingProgress(observer, shouldStop);
  try {
    await warmStart(local, config, { cacheDir, observer });
    if (shouldStop?.() === true) throw new WarmStartStopped();
    const { specs, metadata } = handOverLayout(config, task);
    const layout = createParamStore(specs, 0).layout;
    const tensors: Record<string, SafetensorsEntry> = {};
    for (const e of layout.entries)
      tensors[e.name] = { data: Float32Array.from(layout.view(local.weights, e.name)), shape: e.shape };
    const dir = tempName(join(cacheDir, 'handover'));
    mkdirSync(dir, { recursive: true });
    try {
      writeSafetensors(join(dir, 'weights.safetensors'), tensors, metadata);
      await backend.load(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    observer?.onMessage?.('warm start: in-process, weights handed over to the backend (weights.safetensors)');
  } finally {
    await local.close();
  }
}

/** The parameter layout and metadata of the hand-over weights file of a run's policy. */
function handOverLayout(
  config: RunConfig,
  task: Task,
): { specs: readonly ParamSpec[]; metadata: Record<string, string> } {
  if (config.policy.kind === 'diffusion') {
    const { specs, configJson } = diffusionWeightsLayout(config, task);
    return { specs, metadata: { [DIFFUSION_CONFIG_METADATA]: configJson } };
  }
  const arConfig = arConfigFor(config, task);
  return { specs: arParamSpecs(arConfig), metadata: { [AR_CONFIG_METADATA]: JSON.stringify(arConfig) } };
}

/** Where a warm start runs: its cache, its observer, the task (hand-over and examples), a stop test, the backend's address. */
interface WarmStartSite {
  readonly cacheDir: string;
  readonly observer?: RunObserver | undefined;
  /** The task: given, a backend without its own warm start is handed qrl-sim's weights. */
  readonly task?: Task | undefined;
  readonly shouldStop?: (() => boolean) | undefined;
  /** The backend's address, part of the cache key. */
  readonly address?: string | undefined;
}

async function warmStart(backend: PolicyBackend, config: RunConfig, site: WarmStartSite): Promise<void> {
  const { cacheDir, observer, task, shouldStop, address } = site;
  const info = await backend.info();
  if (task !== undefined && !info.capabilities.warmStart) {
    if (info.capabilities.handOver !== false)
      return handOverWarmStart(backend, config, task, cacheDir, observer, shouldStop);
    // The backend declines qrl-sim's weights (its policy is not qrl-sim's transformer) and cannot warm-start itself.
    if (config.sft.steps > 0)
      throw new UsageError(
        `config.sft.steps: the backend neither warm-starts (capabilities.warmStart) nor takes qrl-sim's weights (capabilities.handOver), so sft.steps must be 0, got ${config.sft.steps}`,
      );
    observer?.onMessage?.("warm start: none (sft.steps 0); the backend's own initial weights");
    return;
  }
  const path = warmStartCacheDir(cacheDir, config, address === undefined ? info.backend : { ...info.backend, address });
  if (config.sft.cache && existsSync(path)) {
    try {
      await backend.load(path);
      observer?.onMessage?.(`warm start: loaded ${path}`);
      return;
    } catch (error) {
      observer?.onMessage?.(`warm start: ignoring cached ${path} (${(error as Error).message}); retraining`);
    }
  }
  // A backend that does not know qrl-sim's tasks gets the pairs themselves (capabilities.sftExamples).
  const sendExamples = task !== undefined && info.capabilities.sftExamples === true && config.sft.steps > 0;
  const metrics = await backend.warmStart({
    task: { name: config.task.name, options: config.task.options as never },
    steps: config.sft.steps,
    batchSize: config.sft.batchSize,
    lr: config.sft.lr,
    seed: config.seed,
    ...(sendExamples ? { examples: warmStartExamples(config, task) } : {}),
  });
  observer?.onMessage?.(
    `warm start: ${config.sft.steps} supervised steps (${Object.entries(metrics)
      .map(([k, v]) => `${k}=${v.toFixed(4)}`)
      .join(' ')})`,
  );
  if (config.sft.cache && !existsSync(path)) await saveAtomic(backend, path);
}

/** Complete lines of a JSONL file (a torn last line is not one). */
function completeLines(path: string): string[] {
  if (!existsSync(path)) return [];
  const text = readFileSync(path, 'utf8');
  const lines = text.split('\n');
  lines.pop(); // after the last '\n': empty, or a torn line
  return lines;
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
const joinLines = (lines: readonly string[]): string => lines.map((l) => `${l}\n`).join('');

function fileState(outDir: string): CheckpointMeta['files'] {
  const out: Record<string, { lines: number; sha256: string }> = {};
  for (const f of PINNED_FILES) {
    const lines = completeLines(join(outDir, f));
    out[f] = { lines: lines.length, sha256: sha256(joinLines(lines)) };
  }
  return out as CheckpointMeta['files'];
}

/** Why checkpoint `dir` cannot be resumed from, or null when it is whole and agrees with the files. */
function checkpointProblem(outDir: string, dir: string): { problem: string } | { meta: CheckpointMeta } {
  let meta: CheckpointMeta;
  try {
    meta = JSON.parse(readFileSync(join(dir, CHECKPOINT_META), 'utf8')) as CheckpointMeta;
  } catch (error) {
    return { problem: `${CHECKPOINT_META} unreadable (${(error as Error).message})` };
  }
  if (meta?.version !== 2 || !Number.isInteger(meta.step) || typeof meta.files !== 'object')
    return { problem: `${CHECKPOINT_META} is not a version-2 checkpoint` };
  for (const f of PINNED_FILES) {
    const want = meta.files[f];
    const lines = completeLines(join(outDir, f));
    if (
      want === undefined ||
      lines.length < want.lines ||
      sha256(joinLines(lines.slice(0, want.lines))) !== want.sha256
    ) {
      return { problem: `${f} does not hold the ${want?.lines ?? '?'} lines it had at step ${meta.step}` };
    }
  }
  return { meta };
}

/**
 * Restores the newest usable checkpoint into `backend`, truncates the files to it; returns its
 * step, or null when the run has no checkpoint yet (stopped or killed before its first one: it
 * starts over from step 0).
 */
async function resumeFrom(
  backend: PolicyBackend,
  outDir: string,
  observer?: RunObserver,
  stale?: StaleRollouts,
): Promise<number | null> {
  const dirs = checkpointDirs(outDir);
  if (dirs.length === 0) {
    observer?.onMessage?.(`resume: no checkpoint yet in ${join(outDir, CHECKPOINTS)}; starting over from step 0`);
    return null;
  }
  const skipped: string[] = [];
  for (const dir of dirs) {
    const check = checkpointProblem(outDir, dir);
    if ('problem' in check) {
      skipped.push(`${dir}: ${check.problem}`);
      continue;
    }
    try {
      await backend.load(dir);
      if (stale !== undefined) {
        stale.pending.clear();
        for (const p of check.meta.pending ?? [])
          stale.pending.set(p.step, {
            step: p.step,
            generatedAt: p.generatedAt,
            batch: batchFromJson(p.batch as never, 'resume', 'pending.batch'),
          });
      }
    } catch (error) {
      skipped.push(`${dir}: ${(error as Error).message}`);
      continue;
    }
    for (const s of skipped) observer?.onMessage?.(`resume: skipped ${s}`);
    const { meta } = check;
    for (const f of PINNED_FILES)
      writeFileSync(join(outDir, f), joinLines(completeLines(join(outDir, f)).slice(0, meta.files[f].lines)));
    const timings = readJsonl<{ step: number }>(join(outDir, 'timings.jsonl')).filter((r) => r.step <= meta.step);
    writeFileSync(join(outDir, 'timings.jsonl'), timings.map((r) => `${JSON.stringify(r)}\n`).join(''));
    observer?.onMessage?.(`resumed from ${dir} (step ${meta.step})`);
    return meta.step;
  }
  throw new UsageError(
    `resume: no usable checkpoint in ${join(outDir, CHECKPOINTS)} (${skipped.join('; ')}); start over with \`qrl-sim run --config ${join(outDir, 'config.json')}\` into a new directory`,
  );
}

/**
 * Runs (or resumes) GRPO as configured through a {@link PolicyBackend}, writing `config.json`,
 * `metrics.jsonl` (deterministic), `timings.jsonl` (wall clock), `eval.jsonl` and one directory per
 * checkpoint (`checkpoints/step-NNNNNN/`: the backend's `save` plus `checkpoint.json`) into `outDir`.
 *
 * Resume restarts from the newest checkpoint that is whole and agrees with metrics.jsonl and
 * eval.jsonl (a torn or truncated file makes older checkpoints the candidates), naming each one it
 * skips; the files then continue byte-identical to an uninterrupted run.
 */
export async function runGrpo(options: RunOptions): Promise<RunSummary> {
  const { config, outDir } = options;
  const cacheDir = options.cacheDir ?? join(process.cwd(), '.cache', 'sft');
  const task = makeTaskFromConfig(config.task);
  const ownBackend = options.backend === undefined;
  const backend =
    options.backend ?? new ReferenceBackend(config, options.factory ?? policyFactory(config.policy.kind), task);
  if (backend instanceof ReferenceBackend)
    backend.onWarmStartProgress = stoppingProgress(options.observer, options.shouldStop);
  // Temp files of a process killed between writing and renaming (checkpoints, cached warm starts, JSON files).
  for (const dir of [outDir, join(outDir, CHECKPOINTS), cacheDir]) removeStaleTemps(dir);
  try {
    return await drive(backend, task, config, outDir, cacheDir, options);
  } finally {
    if (ownBackend) await backend.close();
  }
}

async function drive(
  backend: PolicyBackend,
  task: Task,
  config: RunConfig,
  outDir: string,
  cacheDir: string,
  options: RunOptions,
): Promise<RunSummary> {
  const { observer } = options;
  const root = createRng(config.seed);
  const stale =
    config.rollout.staleness > 0 ? new StaleRollouts(config.rollout.staleness, (s) => stepStream(root, s)) : undefined;
  let firstStep = 1;
  const resumedAt = options.resume ? await resumeFrom(backend, outDir, observer, stale) : null;
  if (resumedAt !== null) {
    firstStep = resumedAt + 1;
  } else {
    mkdirSync(outDir, { recursive: true });
    for (const file of RUN_FILES) rmSync(join(outDir, file), { force: true });
    rmSync(join(outDir, CHECKPOINTS), { recursive: true, force: true });
    writeJsonAtomic(
      join(outDir, 'config.json'),
      options.backendIdentity === undefined ? config : { ...config, backend: options.backendIdentity },
    );
    try {
      const address = options.backendIdentity?.address;
      await warmStart(backend, config, {
        cacheDir,
        observer,
        task,
        shouldStop: options.shouldStop,
        address: typeof address === 'string' ? address : undefined,
      });
    } catch (error) {
      if (error instanceof WarmStartStopped) return { lastStep: 0, stopped: true, outDir };
      throw error;
    }
    // A stop asked for during a warm start that could not be cut (cached, or an external backend's).
    if (options.shouldStop?.() === true) return { lastStep: 0, stopped: true, outDir };
    await backend.setReference();
  }

  // The log-prob semantics diagnostic (docs/logprob-semantics.md): keys only when the sides differ.
  // Fixed by the config's plan and sampler, which an external backend was checked to serve
  // (backendMismatches); nothing where the plan is the backend's own.
  const semantics =
    config.policy.kind === 'ar' && config.plan !== PLAN_FROM_BACKEND
      ? semanticsMetrics(planOfConfig(config.plan), config.policy.sampler)
      : {};
  const metricsFile = new JsonlWriter(join(outDir, 'metrics.jsonl'));
  const timingsFile = new JsonlWriter(join(outDir, 'timings.jsonl'));
  const evalFile = new JsonlWriter(join(outDir, 'eval.jsonl'));
  const evalProblems = task.evalProblems(config.eval.problems, config.seed);
  const generation = generationOf(config, task);
  const saveCheckpoint = async (step: number): Promise<void> => {
    const pending =
      stale === undefined
        ? undefined
        : [...stale.pending.values()].map((p) => ({
            step: p.step,
            generatedAt: p.generatedAt,
            batch: batchToJson(p.batch),
          }));
    const meta: CheckpointMeta = {
      version: 2,
      step,
      files: fileState(outDir),
      ...(pending === undefined ? {} : { pending }),
    };
    observer?.onCheckpointStart?.(step);
    await saveAtomic(backend, checkpointDir(outDir, step), meta);
  };
  const runEval = async (step: number): Promise<void> => {
    observer?.onEvalStart?.(step);
    await backend.sync();
    const evalRng = evalStream(root, step);
    let record: MetricRecord = { step };
    for (const side of ['rollout', 'trainer'] as const) {
      const rng = evalRng.fork(rngStreams.run.side(side));
      record = { ...record, ...(await evaluate(backend, task, evalProblems, side, rng, generation)) };
    }
    evalFile.write(record);
    observer?.onEval?.(step, record);
  };

  observer?.onStart?.({ totalSteps: config.steps, firstStep });
  let last = firstStep - 1;
  let stopped = false;
  try {
    if (firstStep === 1 && config.eval.every > 0) await runEval(0);
    for (let step = firstStep; step <= config.steps; step++) {
      observer?.onStepStart?.(step);
      const result = await grpoStep({ config, task, backend, stale }, step, stepStream(root, step));
      const { timings } = result;
      const metrics = Object.keys(semantics).length === 0 ? result.metrics : { ...result.metrics, ...semantics };
      metricsFile.write(metrics);
      timingsFile.write({ step, ...timings });
      observer?.onStep?.(step, metrics, timings);
      last = step;
      // Let signal handlers (Ctrl-C) run between steps.
      await new Promise((resolve) => setImmediate(resolve));
      const isLast = step === config.steps;
      if ((config.eval.every > 0 && step % config.eval.every === 0) || isLast) await runEval(step);
      const stopNow = options.shouldStop?.() ?? false;
      if ((config.checkpoint.every > 0 && step % config.checkpoint.every === 0) || isLast || stopNow)
        await saveCheckpoint(step);
      if (stopNow && !isLast) {
        stopped = true;
        break;
      }
    }
  } finally {
    metricsFile.close();
    timingsFile.close();
    evalFile.close();
  }
  return { lastStep: last, stopped, outDir };
}
