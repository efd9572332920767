// Yielding to the Node event loop between steps of a long synchronous computation (warm starts).
// Not a scheduler: no timing, no concurrency; callers keep their arithmetic and order unchanged.

/** Resolves on the next turn of the event loop (after pending I/O and timers), so RPC and signals are served. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Runs a step generator (suspended after every step) to its end in one go and returns its result. */
export function runSteps<R>(steps: Generator<void, R, void>): R {
  for (;;) {
    const next = steps.next();
    if (next.done === true) return next.value;
  }
}

/** {@link runSteps} that yields to the event loop after every step: same steps, same result. */
export async function runStepsYielding<R>(steps: Generator<void, R, void>): Promise<R> {
  for (;;) {
    const next = steps.next();
    if (next.done === true) return next.value;
    await yieldToEventLoop();
  }
}
