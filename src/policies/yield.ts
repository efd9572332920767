// Yielding to the Node event loop between steps of a long synchronous computation (warm starts).
// Not a scheduler: no timing, no concurrency; callers keep their arithmetic and order unchanged.

/** Resolves on the next turn of the event loop (after pending I/O and timers), so RPC and signals are served. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
