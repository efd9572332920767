// `--kill-resume` of `qrl-sim backend-check`: a short run killed mid-way (SIGKILL of the backend's process
// group) and resumed must write the same metrics.jsonl and eval.jsonl as the uninterrupted run, byte for
// byte. Not the battery of single requests (conformance.ts) and not the run driver (src/runs/run.ts).

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackendCallError } from '../protocol/errors.js';
import { type parseBackendAddress, type RemoteBackend } from '../protocol/remote.js';
import type { RunConfig } from '../rl/grpo/config.js';
import { backendSetup } from '../runs/backend-expect.js';
import { runGrpo } from '../runs/run.js';
import { makeTaskFromConfig } from '../tasks/registry.js';
import type { ConformanceRow } from './conformance.js';

/** The first field in which two JSONL lines differ, as `field: resumed vs uninterrupted`. */
function firstDifference(whole: string, resumed: string): string {
  try {
    const a = JSON.parse(whole) as Record<string, unknown>;
    const b = JSON.parse(resumed) as Record<string, unknown>;
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
      if (JSON.stringify(a[key]) !== JSON.stringify(b[key]))
        return `${key} ${JSON.stringify(b[key])} resumed vs ${JSON.stringify(a[key])} uninterrupted`;
    }
  } catch {
    // not JSON (a torn line): quote both
  }
  return `${JSON.stringify(resumed.slice(0, 100))} resumed vs ${JSON.stringify(whole.slice(0, 100))} uninterrupted`;
}

/**
 * `--kill-resume`: runs the config (3 steps at most, a checkpoint every step, no warm-start cache)
 * uninterrupted on one backend instance; then again on a fresh one whose process group is killed
 * (SIGKILL) as step 2 starts, resumed on another fresh instance; metrics.jsonl and eval.jsonl of the
 * two must be byte-identical. One row, naming the first differing file and line.
 */
export async function killResumeCheck(
  address: ReturnType<typeof parseBackendAddress>,
  config: RunConfig,
  connect: (setup: unknown) => Promise<RemoteBackend>,
): Promise<ConformanceRow> {
  const check = 'kill → resume: files byte-identical';
  if (!('command' in address))
    return { check, status: 'info', detail: 'an HTTP backend cannot be killed from here: not exercised' };
  const steps = Math.min(config.steps, 3);
  if (steps < 2) return { check, status: 'info', detail: `config.steps ${config.steps} < 2: nothing to interrupt` };
  const run: RunConfig = {
    ...config,
    steps,
    checkpoint: { ...config.checkpoint, every: 1 },
    sft: { ...config.sft, cache: false },
  };
  const task = makeTaskFromConfig(run.task);
  const setup = backendSetup(run, task);
  const root = mkdtempSync(join(tmpdir(), 'qrl-kill-resume-'));
  const cacheDir = join(root, 'cache');
  const drive = async (outDir: string, options: { resume?: boolean; killAt?: number }): Promise<string | null> => {
    const backend = await connect(setup);
    try {
      await runGrpo({
        config: run,
        outDir,
        backend,
        cacheDir,
        ...(options.resume ? { resume: true } : {}),
        ...(options.killAt === undefined
          ? {}
          : { observer: { onStepStart: (s: number) => void (s === options.killAt && backend.kill()) } }),
      });
      return null;
    } catch (error) {
      if (error instanceof BackendCallError) return error.message;
      throw error;
    } finally {
      await backend.close();
    }
  };
  try {
    const whole = join(root, 'whole');
    const cut = join(root, 'cut');
    const first = await drive(whole, {});
    if (first !== null) return { check, status: 'FAIL', detail: `the uninterrupted run failed: ${first}` };
    const killed = await drive(cut, { killAt: 2 });
    if (killed === null)
      return { check, status: 'FAIL', detail: 'the backend kept answering after its process group was killed' };
    const resumed = await drive(cut, { resume: true });
    if (resumed !== null) return { check, status: 'FAIL', detail: `the resumed run failed: ${resumed}` };
    for (const f of ['metrics.jsonl', 'eval.jsonl']) {
      const a = readFileSync(join(whole, f), 'utf8').split('\n');
      const b = readFileSync(join(cut, f), 'utf8').split('\n');
      const i = a.findIndex((line, k) => line !== b[k]);
      if (i >= 0 || a.length !== b.length) {
        const k = i >= 0 ? i : Math.min(a.length, b.length);
        return {
          check,
          status: 'FAIL',
          detail: `${f} differs at line ${k + 1} after the kill at step 2 and the resume: ${firstDifference(a[k] ?? '', b[k] ?? '')} (does load restore everything save wrote, the optimizer state included?)`,
        };
      }
    }
    return {
      check,
      status: 'ok',
      detail: `killed at step 2 of ${steps}, resumed from the checkpoint of step 1: metrics.jsonl and eval.jsonl byte-identical`,
    };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
