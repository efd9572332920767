// The live progress line of a sweep (`sweep`, `demo`): runs done, running, failed, elapsed, ETA.
// Not the per-run lines (the commands print those) and not the sweep itself.

import type { CliIo } from './command.js';
import { eta, formatSeconds, progressLine } from './progress.js';

/** Progress of a sweep of `total` runs on `workers` threads; `stop` clears the line. */
export interface SweepProgress {
  /** A run finished (`done` of `total`), successfully or not. */
  runDone(done: number, total: number, ok: boolean): void;
  /** Clears the line and stops refreshing it. */
  stop(): void;
}

/**
 * Shows `sweep: D/T done, R running, F failed, elapsed …, ETA …` on standard error: live and
 * refreshed every second on a terminal, else one plain line at most every 10 s (and at each run's end).
 */
export function sweepProgress(io: CliIo, workers: number, runs: number, now: () => number = Date.now): SweepProgress {
  const line = progressLine(io);
  const t0 = now();
  let done = 0;
  let total = runs;
  let failed = 0;
  const render = (): void => {
    const elapsed = (now() - t0) / 1000;
    const running = Math.min(workers, total - done);
    line.update(
      `sweep: ${done}/${total} done, ${running} running${failed > 0 ? `, ${failed} failed` : ''}, elapsed ${formatSeconds(elapsed)}, ETA ${eta(done, total, elapsed)}`,
    );
  };
  const timer = io.status ? setInterval(render, 1000) : null;
  timer?.unref();
  render();
  return {
    runDone(d, t, ok) {
      done = d;
      total = t;
      if (!ok) failed++;
      render();
    },
    stop() {
      if (timer) clearInterval(timer);
      line.done();
    },
  };
}
