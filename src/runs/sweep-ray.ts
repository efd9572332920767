// The Ray executor of a sweep: runs start as Ray tasks through python/qrl_sweep/ray_driver.py, each
// task running `qrl-sim run` into the run's directory. Not the sweep (sweep.ts owns the plan, the
// directories, the summary and the report) and not Ray itself (the driver is the only Python here).

import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UsageError } from '../core/errors.js';
import type { RunConfig } from '../rl/grpo/config.js';
import type { SweepTaskResult } from './sweep-worker.js';

/** Where the runs of a sweep run. */
export type SweepExecutor = { readonly kind: 'threads' } | RaySweepExecutor;

/** Runs each grid point × seed as a Ray task (`sweep --executor ray`). */
export interface RaySweepExecutor {
  readonly kind: 'ray';
  /** A running cluster (`HOST:PORT`, `ray://HOST:PORT`, `auto`); without one Ray starts a local cluster of `workers` CPUs. */
  readonly address?: string;
  /** The Python that runs the driver. @defaultValue `$QRL_PYTHON`, else `python3` */
  readonly python?: string;
}

/** Retries of a task whose Ray worker died (the retry resumes the run from its checkpoint). */
export const RAY_MAX_RETRIES = 3;
/** Longest wait for the driver's `ready` (a local cluster's start, or the address check). */
const READY_TIMEOUT_MS = 120_000;
/** Longest wait for the driver to shut Ray down once every run has ended. */
const CLOSE_TIMEOUT_MS = 60_000;

/** One run as the Ray driver receives it. */
export interface RayRun {
  /** Absolute run directory. */
  readonly dir: string;
  readonly config: RunConfig;
}

/** A started Ray driver: runs go in, results come back; see python/qrl_sweep/ray_driver.py. */
export interface RayPool {
  /** CPUs of the cluster the driver is on. */
  readonly cpus: number;
  /** Runs one run (a Ray task, retried when its worker dies); never rejects for the run's own failure. */
  run(run: RayRun): Promise<SweepTaskResult>;
  /** No further run starts; running ones stop after their current step (with a checkpoint). */
  stop(): void;
  /** Shuts Ray down (the local cluster with it) and waits for the driver to exit. */
  close(): Promise<void>;
}

/** Options of {@link startRayPool}. */
export interface RayPoolOptions {
  readonly executor: RaySweepExecutor;
  /** CPUs of a local cluster (no address). */
  readonly numCpus: number;
  /** Most runs at once on a given cluster (none: as many as it has CPUs). */
  readonly maxInFlight?: number;
  /** Working directory of every run (where its `.cache/sft` warm-start cache is). */
  readonly cwd: string;
}

/** This package's root: bin/qrl-sim.js and python/qrl_sweep/ray_driver.py are under it (src/ or dist/ is one level down). */
function packageRoot(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
}

interface DriverEvent {
  readonly event: 'ready' | 'done' | 'closed' | 'error';
  readonly cpus?: number;
  readonly index?: number;
  readonly ok?: boolean;
  readonly stopped?: boolean;
  readonly error?: string | null;
  readonly seconds?: number;
  readonly field?: string;
  readonly message?: string;
}

/**
 * Starts the Ray driver and waits (bounded) for its cluster: a local one of `numCpus` CPUs, or the
 * one at `executor.address`. Bad input — Ray not importable, an address that does not answer —
 * throws a UsageError naming the option and the value.
 */
export async function startRayPool(options: RayPoolOptions): Promise<RayPool> {
  const python = options.executor.python ?? process.env['QRL_PYTHON'] ?? 'python3';
  const root = packageRoot();
  const script = join(root, 'python', 'qrl_sweep', 'ray_driver.py');
  // Each task runs this CLI at these paths where they exist on its node, else `qrl-sim` on PATH.
  const cli = [process.execPath, join(root, 'bin', 'qrl-sim.js')];
  // A group of its own: a terminal's Ctrl-C reaches qrl-sim alone, which asks the driver to stop.
  const child = spawn(python, [script], {
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
  });
  let stderrTail = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderrTail = (stderrTail + chunk.toString('utf8')).slice(-4000);
  });
  child.stdin.on('error', () => {}); // a driver that died is reported by its exit
  const pending = new Map<number, (result: SweepTaskResult) => void>();
  let readyResolve: (cpus: number) => void = () => {};
  let readyReject: (error: Error) => void = () => {};
  const ready = new Promise<number>((res, rej) => {
    readyResolve = res;
    readyReject = rej;
  });
  let exited: ((code: number | null) => void) | undefined;
  const exit = new Promise<number | null>((res) => {
    exited = res;
  });
  const failAll = (why: string): void => {
    for (const [index, settle] of pending) {
      pending.delete(index);
      settle({ ok: false, error: `ray driver: ${why}`, seconds: 0 });
    }
  };
  createInterface({ input: child.stdout }).on('line', (line) => {
    let event: DriverEvent;
    try {
      event = JSON.parse(line) as DriverEvent;
    } catch {
      return; // not an event (a library that printed on stdout)
    }
    if (event.event === 'ready') readyResolve(event.cpus ?? 0);
    else if (event.event === 'error') readyReject(new UsageError(`${event.field}: ${event.message}`));
    else if (event.event === 'done' && event.index !== undefined) {
      const settle = pending.get(event.index);
      pending.delete(event.index);
      settle?.({
        ok: event.ok === true,
        error: event.error ?? null,
        seconds: event.seconds ?? 0,
        ...(event.stopped === true ? { stopped: true } : {}),
      });
    }
  });
  child.on('error', (error: NodeJS.ErrnoException) => {
    readyReject(
      new UsageError(
        `--executor: ray: cannot start ${python} (${error.code ?? error.message}); set QRL_PYTHON to a Python with Ray installed`,
      ),
    );
    exited?.(null);
  });
  child.on('exit', (code, signal) => {
    const settle = (): void => {
      const why = `exited with ${signal ?? `status ${code}`}${stderrTail.trim() === '' ? '' : `: ${stderrTail.trim().split('\n').slice(-1)[0]}`}`;
      readyReject(new Error(`--executor ray: the Ray driver ${why}`));
      failAll(why);
      exited?.(code);
    };
    // Its last events first (an error event, the last runs' results): 'exit' can come before stdout's end,
    // and a process Ray left holding the pipe must not keep us waiting.
    if (child.stdout.readableEnded) return settle();
    const late = setTimeout(settle, 2000);
    child.stdout.once('close', () => {
      clearTimeout(late);
      settle();
    });
  });
  const send = (command: unknown): void => {
    if (child.stdin.writable) child.stdin.write(`${JSON.stringify(command)}\n`);
  };
  send({
    address: options.executor.address ?? null,
    numCpus: options.numCpus,
    maxInFlight: options.maxInFlight ?? null,
    maxRetries: RAY_MAX_RETRIES,
    cli,
    cwd: options.cwd,
  });
  let cpus: number;
  const timer = setTimeout(
    () =>
      readyReject(
        new UsageError(
          `${options.executor.address === undefined ? '--executor: ray: no local cluster' : `--ray-address: no Ray cluster at '${options.executor.address}'`} within ${READY_TIMEOUT_MS / 1000} s`,
        ),
      ),
    READY_TIMEOUT_MS,
  );
  try {
    cpus = await ready;
  } catch (error) {
    killGroup(child);
    await exit;
    throw error;
  } finally {
    clearTimeout(timer);
  }
  let next = 0;
  return {
    cpus,
    run(run) {
      const index = next++;
      if (child.exitCode !== null || child.signalCode !== null)
        return Promise.resolve({ ok: false, error: 'ray driver: not running', seconds: 0 });
      return new Promise((settle) => {
        pending.set(index, settle);
        send({ run: { index, dir: run.dir, config: run.config } });
      });
    },
    stop() {
      send({ stop: true });
    },
    async close() {
      send({ close: true });
      const late = setTimeout(() => killGroup(child), CLOSE_TIMEOUT_MS);
      try {
        await exit;
      } finally {
        clearTimeout(late);
      }
    },
  };
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
