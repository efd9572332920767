// Progress of long work (warm start, evaluation, sweeps) on standard error: a live line on a
// terminal, a plain line at most every few seconds otherwise. Never written to result files or stdout.
// Not the per-step bar of `run` (cli-progress, in run.ts).

import type { CliIo } from './command.js';

/** A progress line: `update` replaces it, `done` clears it (on a terminal). */
export interface ProgressLine {
  /** Shows `text` as the current state (throttled to one line per period when not on a terminal). */
  update(text: string): void;
  /** Ends the line: clears it on a terminal, prints `text` when given; the next update shows at once. */
  done(text?: string): void;
}

/** Seconds as `42 s`, `3 min 05 s` or `1 h 02 min`. */
export function formatSeconds(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '—';
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

/** Remaining time of `done` out of `total` units after `elapsed` seconds, at the average rate so far. */
export function eta(done: number, total: number, elapsed: number): string {
  return done <= 0 ? '—' : formatSeconds((elapsed / done) * (total - done));
}

/**
 * A progress line on `io`: live (`io.status`) when standard error is a terminal, else plain lines
 * through `io.err`, the first at once and then at most one per `periodMs`.
 */
export function progressLine(io: CliIo, periodMs = 10_000, now: () => number = Date.now): ProgressLine {
  let last = Number.NEGATIVE_INFINITY;
  let shown = false;
  return {
    update(text) {
      if (io.status) {
        io.status(text);
        shown = true;
        return;
      }
      const t = now();
      if (t - last >= periodMs) {
        io.err(text);
        last = t;
      }
    },
    done(text) {
      if (io.status && shown) io.status('');
      shown = false;
      last = Number.NEGATIVE_INFINITY; // the next phase shows its first line at once
      if (text !== undefined) io.err(text);
    },
  };
}
