// What a first Ctrl-C says is asked when it comes: a run in its backend's own warm start says it
// waits for that call (the driver cannot interrupt it), later ones that they stop after the step.

import { afterEach, describe, expect, it } from 'vitest';
import { handleStopSignals, resetStop, stopReason } from '../../src/cli/stop.js';

afterEach(() => resetStop());

describe('handleStopSignals with a message function', () => {
  it('prints the message of the moment the signal arrives', () => {
    const err: string[] = [];
    let phase = 'warm start';
    const un = handleStopSignals({ out: () => undefined, err: (t: string) => err.push(t) } as never, 'run', () =>
      phase === 'warm start'
        ? "waiting for the backend's warm start to answer, then stopping before step 1"
        : 'stopping after this step',
    );
    try {
      process.emit('SIGINT');
      expect(err).toEqual([
        "qrl-sim run: SIGINT: waiting for the backend's warm start to answer, then stopping before step 1 (Ctrl-C again to stop at once)",
      ]);
      expect(stopReason()).toBe('SIGINT');
      phase = 'step 3';
      resetStop();
    } finally {
      un();
    }
    const again = handleStopSignals({ out: () => undefined, err: (t: string) => err.push(t) } as never, 'run', () =>
      phase === 'warm start' ? 'x' : 'stopping after this step',
    );
    try {
      process.emit('SIGTERM');
      expect(err[1]).toBe('qrl-sim run: SIGTERM: stopping after this step (SIGTERM again to stop at once)');
    } finally {
      again();
    }
  });
});
