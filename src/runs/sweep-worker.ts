// The piscina worker of a sweep: runs one GRPO run into its own directory and reports success or
// the error. Not the scheduler (sweep.ts); it never touches another run's files.

import { performance } from 'node:perf_hooks';
import type { RunConfig } from '../rl/grpo/config.js';
import { runGrpo } from './run.js';
import { type FactorySource, loadPolicyFactory } from './factory.js';
import { runGrpoOnBackend, type SweepBackendRun } from './sweep-backend.js';

/** One run of a sweep, as sent to a worker thread (structured-cloneable). */
export interface SweepTask {
  readonly config: RunConfig;
  /** Absolute run directory. */
  readonly outDir: string;
  readonly factory: FactorySource;
  /** Warm-start cache directory (absolute). */
  readonly cacheDir: string;
  /** Continue the run in `outDir` (from its checkpoint, or from step 0 when it has none). */
  readonly resume?: boolean;
  /** A shared Int32 flag: once non-zero, the run stops after its current step (with a checkpoint). */
  readonly stop?: SharedArrayBuffer;
  /** Run on this spawned backend instead of in-process (`lab run --backend`). */
  readonly backend?: SweepBackendRun;
}

/** What a worker reports back. */
export interface SweepTaskResult {
  readonly ok: boolean;
  /** The error message when `ok` is false. */
  readonly error: string | null;
  /** Wall-clock seconds of the run (warm start and evaluation included). */
  readonly seconds: number;
  /** Stopped part-way by the stop flag (resumable). */
  readonly stopped?: boolean;
}

/** Runs one task; never throws (a failure is returned). */
export default async function runSweepTask(task: SweepTask): Promise<SweepTaskResult> {
  const t0 = performance.now();
  try {
    const factory = await loadPolicyFactory(task.factory, task.config.policy.kind);
    const flag = task.stop === undefined ? undefined : new Int32Array(task.stop);
    const options = {
      config: task.config,
      outDir: task.outDir,
      factory,
      cacheDir: task.cacheDir,
      resume: task.resume === true,
      ...(flag === undefined ? {} : { shouldStop: () => Atomics.load(flag, 0) !== 0 }),
    };
    const summary =
      task.backend === undefined
        ? await runGrpo(options)
        : await runGrpoOnBackend({ ...options, backend: task.backend });
    return { ok: true, error: null, seconds: (performance.now() - t0) / 1000, stopped: summary.stopped };
  } catch (error) {
    const message =
      error instanceof Error ? `${error.name === 'Error' ? '' : `${error.name}: `}${error.message}` : String(error);
    return { ok: false, error: message, seconds: (performance.now() - t0) / 1000 };
  }
}
