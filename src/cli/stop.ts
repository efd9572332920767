// One stopping discipline for every long command (run, sweep, lab, demo, golden, check): the first
// SIGINT or SIGTERM asks the work to stop at its next safe point (after the current step, or
// between warm-start steps) with its files whole; a second one exits at once. A standard output
// that is cut (`| head`) asks for the same clean stop. Not the work itself: commands poll
// `stopRequested()` or hand it to the run driver as `shouldStop`.

import type { CliIo } from './command.js';

/** Why a stop was asked for. */
export type StopReason = 'SIGINT' | 'SIGTERM' | 'EPIPE';

/** Exit codes of a stopped command: 128 + the signal number (SIGPIPE for a cut standard output). */
export const STOP_EXIT: Readonly<Record<StopReason, number>> = { SIGINT: 130, SIGTERM: 143, EPIPE: 141 };

let reason: StopReason | null = null;
let signals = 0;
const listeners = new Set<(reason: StopReason) => void>();

/** The reason of the first stop request of this process, or null. */
export function stopReason(): StopReason | null {
  return reason;
}

/** True once a stop was asked for. */
export function stopRequested(): boolean {
  return reason !== null;
}

/** Asks the work to stop at its next safe point (the first request wins; later ones are ignored here). */
export function requestStop(why: StopReason): void {
  if (reason !== null) return;
  reason = why;
  for (const l of listeners) l(why);
}

/** Calls `listener` on the first stop request (at once when one was already made); returns its removal. */
export function onStop(listener: (reason: StopReason) => void): () => void {
  if (reason !== null) {
    listener(reason);
    return () => {};
  }
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** @internal Forgets a stop request (tests that run several commands in one process). */
export function resetStop(): void {
  reason = null;
  signals = 0;
  listeners.clear();
}

/** Installs `make(signal)` for SIGINT and SIGTERM; returns the function that removes both. */
function onStopSignals(make: (signal: 'SIGINT' | 'SIGTERM') => () => void): () => void {
  const onInt = make('SIGINT');
  const onTerm = make('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  return () => {
    process.off('SIGINT', onInt);
    process.off('SIGTERM', onTerm);
  };
}

/**
 * Installs SIGINT and SIGTERM handlers for a long command: the first signal calls
 * {@link requestStop} and prints `what` ("stopping after this step"; a function: asked at the signal) on standard error; a second
 * signal exits at once with 128 + its number (files stay whole: every file is written by one
 * write call or renamed into place, and temp files left behind are removed by the next command
 * that opens the directory). Returns the function that removes the handlers.
 */
export function handleStopSignals(
  io: CliIo,
  command: string,
  what: string | (() => string) = 'stopping after this step',
): () => void {
  const make = (signal: 'SIGINT' | 'SIGTERM') => (): void => {
    if (++signals > 1) {
      try {
        io.err(`qrl-sim ${command}: ${signal} again: stopping now`);
      } finally {
        process.exit(STOP_EXIT[signal]);
      }
    }
    requestStop(signal);
    try {
      io.err(
        `qrl-sim ${command}: ${signal}: ${typeof what === 'function' ? what() : what} (${signal === 'SIGINT' ? 'Ctrl-C' : 'SIGTERM'} again to stop at once)`,
      );
    } catch {
      // standard error closed: the stop goes on silently
    }
  };
  return onStopSignals(make);
}

/**
 * Installs SIGINT and SIGTERM handlers for a phase that has nothing to save (connecting to a
 * backend, waiting for its first `info`): a signal prints one line saying what was being waited for
 * and exits at once with 128 + its number, so the process's exit hook ends every backend process
 * group it spawned (instead of Node's default death, which leaves them running). Returns the
 * function that removes the handlers.
 */
export function exitOnStopSignal(io: CliIo, command: string, waitingFor: string): () => void {
  const make = (signal: 'SIGINT' | 'SIGTERM') => (): void => {
    try {
      io.err(`qrl-sim ${command}: ${signal} while waiting for ${waitingFor}: ending the backend and stopping`);
    } finally {
      process.exit(STOP_EXIT[signal]);
    }
  };
  return onStopSignals(make);
}
