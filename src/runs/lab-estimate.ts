// The lab's duration estimate as arithmetic: a run's CPU seconds extrapolated from the CPU seconds
// of its phases, and a sweep's wall time as runSweep schedules its runs on N cores. Not the measurement (scripts/lab-timings.ts).

/** CPU seconds of one occurrence of each phase of a run, measured in a short run of the same config. */
export interface PhaseSeconds {
  /** Building the run (task, model, backend) until its first supervised step. */
  readonly setup: number;
  /** One supervised warm-start step. */
  readonly warmStartStep: number;
  /** One GRPO step (rollout, scoring, updates). */
  readonly grpoStep: number;
  /** One evaluation (greedy on the held-out problems, by the rollout engine and by the trainer). */
  readonly evaluation: number;
  /** Writing one checkpoint. */
  readonly checkpoint: number;
}

/** The part of a run config the extrapolation reads (a `RunConfig` has it). */
export interface RunSchedule {
  readonly steps: number;
  readonly sft: { readonly steps: number };
  readonly eval: { readonly every: number };
  readonly checkpoint: { readonly every: number };
}

/**
 * Evaluations of a run of `steps` GRPO steps, as the run driver does them: at step 0 and every
 * `every` steps when `every > 0`, and always after the last step (once).
 *
 * @example
 * ```ts
 * evaluationCount(60, 20); // 4: steps 0, 20, 40, 60
 * evaluationCount(10, 0);  // 1: after step 10
 * evaluationCount(10, 4);  // 4: steps 0, 4, 8, 10
 * ```
 */
export function evaluationCount(steps: number, every: number): number {
  if (every <= 0) return 1;
  return 1 + Math.floor(steps / every) + (steps % every === 0 ? 0 : 1);
}

/**
 * Checkpoints of a run of `steps` GRPO steps: every `every` steps when `every > 0`, and always
 * after the last step (once).
 *
 * @example
 * ```ts
 * checkpointCount(60, 5); // 12
 * checkpointCount(10, 0); // 1
 * checkpointCount(12, 5); // 3: steps 5, 10, 12
 * ```
 */
export function checkpointCount(steps: number, every: number): number {
  if (every <= 0) return 1;
  return Math.floor(steps / every) + (steps % every === 0 ? 0 : 1);
}

/**
 * CPU seconds of one run without its warm start:
 * `setup + steps · grpoStep + evaluations · evaluation + checkpoints · checkpoint`
 * (counts from {@link evaluationCount} and {@link checkpointCount}).
 */
export function runCpuSeconds(config: RunSchedule, phases: PhaseSeconds): number {
  return (
    phases.setup +
    config.steps * phases.grpoStep +
    evaluationCount(config.steps, config.eval.every) * phases.evaluation +
    checkpointCount(config.steps, config.checkpoint.every) * phases.checkpoint
  );
}

/** CPU seconds of one uncached warm start: `sft.steps · warmStartStep`. */
export function warmStartCpuSeconds(config: RunSchedule, phases: PhaseSeconds): number {
  return config.sft.steps * phases.warmStartStep;
}

/** One run of a sweep as the schedule sees it. */
export interface ScheduledRun {
  /** Seconds the run occupies a core (its warm start included when it trains one). */
  readonly seconds: number;
  /**
   * Index (in the same list) of the run this one waits for: the first run of its warm-start key,
   * which trains and caches the warm start; `undefined` for that first run and for runs that share
   * no warm start.
   */
  readonly after?: number;
}

/**
 * Wall seconds of a sweep whose runs take the given seconds each on `slots` parallel cores, under
 * runSweep's schedule: runs start in list order as slots free up, except that a run sharing a
 * warm start is queued only once the run that trains it has finished (then in list order). A list
 * scheduling simulation, exact for these rules; no overhead of the pool or the report is added.
 *
 * @example
 * ```ts
 * // one warm start shared by three runs, two cores: 10 + 5 alone, then two runs in parallel, then one
 * sweepWallSeconds([{ seconds: 15 }, { seconds: 5, after: 0 }, { seconds: 5, after: 0 }, { seconds: 5, after: 0 }], 2); // 25
 * ```
 */
export function sweepWallSeconds(runs: readonly ScheduledRun[], slots: number): number {
  const n = runs.length;
  if (n === 0) return 0;
  const cores = Math.max(1, Math.floor(slots));
  const end: number[] = new Array<number>(n).fill(Number.NaN);
  const queue: number[] = runs.map((r, i) => (r.after === undefined ? i : -1)).filter((i) => i >= 0);
  const free: number[] = new Array<number>(cores).fill(0); // time each core is next free
  let started = 0;
  let head = 0;
  // Runs are queued at time `queuedAt[i]`: 0, or when the run they wait for ends.
  const queuedAt: number[] = new Array<number>(n).fill(0);
  while (started < n) {
    if (head >= queue.length)
      throw new Error('sweepWallSeconds: a run waits for a run that never ends (bad `after` index)');
    const i = queue[head++] as number;
    // The earliest free core; the run starts when both it and the run are ready.
    let c = 0;
    for (let k = 1; k < cores; k++) if ((free[k] as number) < (free[c] as number)) c = k;
    const start = Math.max(free[c] as number, queuedAt[i] as number);
    end[i] = start + (runs[i] as ScheduledRun).seconds;
    free[c] = end[i] as number;
    started++;
    // Its followers join the queue (in list order) at its end, kept sorted by queue time.
    const followers = runs.map((r, j) => (r.after === i ? j : -1)).filter((j) => j >= 0);
    for (const j of followers) {
      queuedAt[j] = end[i] as number;
      let at = queue.length;
      while (at > head && (queuedAt[queue[at - 1] as number] as number) > (queuedAt[j] as number)) at--;
      queue.splice(at, 0, j);
    }
  }
  return Math.max(...end);
}
