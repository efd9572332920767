// The run driver: warm start, GRPO steps, evaluation, checkpoints, resume and the run's files.
// Not a step of the algorithm (loop.ts) and not the command-line parsing (src/cli/run.ts).

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AdamW, type AdamWState } from '../../nn/index.js';
import { createRng } from '../../rng.js';
import { type Task, makeTask } from '../../tasks/index.js';
import type { MetricRecord } from '../types.js';
import type { RunConfig } from './config.js';
import type { RlEngine } from './engine.js';
import { JsonlWriter, readJsonl, writeJsonAtomic } from './files.js';
import { type PhaseTimings, evaluate, grpoStep } from './loop.js';

/** A policy factory: builds the engine for a config and warm-starts it (supervised). */
export interface PolicyFactory {
  /** Checks the policy-specific fields of a config (model, sampler, plan) before anything runs. */
  validate(config: RunConfig): void;
  /** A fresh engine with seeded initial weights. */
  create(config: RunConfig, task: Task): RlEngine;
  /**
   * Supervised warm start of `engine` in place (deterministic for a given config); `onProgress`
   * (optional) is called with (steps done, total) for display only.
   */
  warmStart(engine: RlEngine, config: RunConfig, task: Task, onProgress?: (done: number, total: number) => void): MetricRecord;
}

/** A checkpoint file's contents. */
export interface Checkpoint {
  readonly version: 1;
  /** Last completed step. */
  readonly step: number;
  /** FP32 master weights. */
  readonly weights: number[];
  /** Reference (warm-started) weights. */
  readonly referenceWeights: number[];
  readonly optimizer: AdamWState;
  /** Engine state beyond the weights. */
  readonly engine: unknown;
}

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
}

/** Options of {@link runGrpo}. */
export interface RunOptions {
  readonly config: RunConfig;
  readonly outDir: string;
  readonly factory: PolicyFactory;
  /** Resume from the last checkpoint in `outDir` (its config.json must equal `config`). */
  readonly resume?: boolean;
  readonly observer?: RunObserver;
  /** Directory of cached warm-start checkpoints. @defaultValue `.cache/sft` under the working directory */
  readonly cacheDir?: string;
  /** Set by a SIGINT handler: the run stops after the current step with a checkpoint. */
  readonly shouldStop?: () => boolean;
}

/** What a finished (or stopped) run reports. */
export interface RunSummary {
  readonly lastStep: number;
  readonly stopped: boolean;
  readonly outDir: string;
}

const CHECKPOINTS = 'checkpoints';

function checkpointPath(outDir: string, step: number): string {
  return join(outDir, CHECKPOINTS, `step-${String(step).padStart(6, '0')}.json`);
}

/** The newest checkpoint of a run directory, or null. */
export function latestCheckpoint(outDir: string): string | null {
  const dir = join(outDir, CHECKPOINTS);
  if (!existsSync(dir)) return null;
  const files = readdirSync(dir).filter((f) => /^step-\d{6}\.json$/.test(f)).sort();
  const last = files[files.length - 1];
  return last === undefined ? null : join(dir, last);
}

/** Cache key of the warm start: everything that determines its result. */
function warmStartKey(config: RunConfig): string {
  // The plan is not part of the key: warm starts are precision-independent (fp32), so every plan of
  // a sweep starts from the same policy.
  const material = JSON.stringify({ seed: config.seed, task: config.task, policy: config.policy, sft: { ...config.sft, cache: undefined } });
  return createHash('sha256').update(material).digest('hex').slice(0, 20);
}

function warmStart(engine: RlEngine, config: RunConfig, task: Task, factory: PolicyFactory, cacheDir: string, observer?: RunObserver): void {
  const path = join(cacheDir, `${config.policy.kind}-${config.task.name}-${warmStartKey(config)}.json`);
  if (config.sft.cache && existsSync(path)) {
    const cached = JSON.parse(readFileSync(path, 'utf8')) as { weights: number[] };
    if (cached.weights.length === engine.params.data.length) {
      engine.params.data.set(cached.weights);
      observer?.onMessage?.(`warm start: loaded ${path}`);
      return;
    }
  }
  const metrics = factory.warmStart(engine, config, task, observer?.onWarmStart?.bind(observer));
  observer?.onMessage?.(`warm start: ${config.sft.steps} supervised steps (${Object.entries(metrics).map(([k, v]) => `${k}=${v.toFixed(4)}`).join(' ')})`);
  if (config.sft.cache) writeJsonAtomic(path, { config: { seed: config.seed, task: config.task, policy: config.policy, sft: config.sft }, weights: Array.from(engine.params.data) });
}

/**
 * Runs (or resumes) GRPO as configured, writing `config.json`, `metrics.jsonl` (deterministic),
 * `timings.jsonl` (wall clock), `eval.jsonl` and `checkpoints/step-NNNNNN.json` into `outDir`.
 */
export async function runGrpo(options: RunOptions): Promise<RunSummary> {
  const { config, outDir, factory, observer } = options;
  const cacheDir = options.cacheDir ?? join(process.cwd(), '.cache', 'sft');
  const task = makeTask(config.task.name, config.task.options as never) as unknown as Task;
  const engine = factory.create(config, task);
  const root = createRng(config.seed);
  const optimizer = new AdamW(engine.params, {
    lr: config.optim.lr,
    beta1: config.optim.beta1,
    beta2: config.optim.beta2,
    eps: config.optim.eps,
    weightDecay: config.optim.weightDecay,
  });
  let firstStep = 1;
  let referenceWeights: Float32Array;
  let restoredOptimizer: AdamW | null = null;

  if (options.resume) {
    const path = latestCheckpoint(outDir);
    if (path === null) throw new Error(`resume: no checkpoint in ${join(outDir, CHECKPOINTS)}`);
    const ck = JSON.parse(readFileSync(path, 'utf8')) as Checkpoint;
    engine.params.data.set(ck.weights);
    referenceWeights = Float32Array.from(ck.referenceWeights);
    engine.restore(ck.engine);
    restoredOptimizer = new AdamW(engine.params, optimizer.config, ck.optimizer);
    firstStep = ck.step + 1;
    // Lines written after the checkpoint are recomputed identically: drop them.
    for (const file of ['metrics.jsonl', 'eval.jsonl', 'timings.jsonl']) {
      const p = join(outDir, file);
      const kept = readJsonl<{ step: number }>(p).filter((r) => r.step <= ck.step);
      writeFileSync(p, kept.map((r) => `${JSON.stringify(r)}\n`).join(''));
    }
    observer?.onMessage?.(`resumed from ${path} (step ${ck.step})`);
  } else {
    mkdirSync(outDir, { recursive: true });
    for (const file of ['metrics.jsonl', 'eval.jsonl', 'timings.jsonl']) rmSync(join(outDir, file), { force: true });
    rmSync(join(outDir, CHECKPOINTS), { recursive: true, force: true });
    writeJsonAtomic(join(outDir, 'config.json'), config);
    warmStart(engine, config, task, factory, cacheDir, observer);
    referenceWeights = Float32Array.from(engine.params.data);
  }
  const opt = restoredOptimizer ?? optimizer;

  const metricsFile = new JsonlWriter(join(outDir, 'metrics.jsonl'));
  const timingsFile = new JsonlWriter(join(outDir, 'timings.jsonl'));
  const evalFile = new JsonlWriter(join(outDir, 'eval.jsonl'));
  const evalProblems = task.evalProblems(config.eval.problems, config.seed);
  const saveCheckpoint = (step: number): void => {
    const ck: Checkpoint = {
      version: 1,
      step,
      weights: Array.from(engine.params.data),
      referenceWeights: Array.from(referenceWeights),
      optimizer: opt.state(),
      engine: engine.state(),
    };
    writeJsonAtomic(checkpointPath(outDir, step), ck);
  };
  const runEval = (step: number): void => {
    observer?.onEvalStart?.(step);
    engine.sync();
    const evalRng = root.fork('eval').fork(String(step));
    const record: MetricRecord = {
      step,
      ...evaluate(engine, task, evalProblems, 'rollout', evalRng.fork('rollout')),
      ...evaluate(engine, task, evalProblems, 'trainer', evalRng.fork('trainer')),
    };
    evalFile.write(record);
    observer?.onEval?.(step, record);
  };

  observer?.onStart?.({ totalSteps: config.steps, firstStep });
  let last = firstStep - 1;
  let stopped = false;
  try {
    if (firstStep === 1 && config.eval.every > 0) runEval(0);
    for (let step = firstStep; step <= config.steps; step++) {
      const ctx = { config, task, engine, optimizer: opt, referenceWeights };
      const { metrics, timings } = grpoStep(ctx, step, root.fork('step').fork(String(step)));
      metricsFile.write(metrics);
      timingsFile.write({ step, ...timings });
      observer?.onStep?.(step, metrics, timings);
      last = step;
      // Let signal handlers (Ctrl-C) run between steps.
      await new Promise((resolve) => setImmediate(resolve));
      const isLast = step === config.steps;
      if ((config.eval.every > 0 && step % config.eval.every === 0) || isLast) runEval(step);
      const stopNow = options.shouldStop?.() ?? false;
      if ((config.checkpoint.every > 0 && step % config.checkpoint.every === 0) || isLast || stopNow) saveCheckpoint(step);
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
