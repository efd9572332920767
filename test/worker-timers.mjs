// Preloaded into every vitest worker process (vitest.config.ts, poolOptions.forks.execArgv) before
// vitest's own modules. vitest 3.2's worker calls the main process over birpc (`onTaskUpdate`
// every 100 ms while tests run, among others) with a 60 s timeout timer that no setting changes.
// When a test keeps the worker's event loop busy past that timer (a long synchronous stretch on a
// loaded machine), the reply is already waiting on the IPC channel when the loop resumes, but Node
// runs expired timers before it reads I/O: the call "times out" and the run fails although every
// test passed ("Timeout calling onTaskUpdate"). birpc takes `setTimeout` from globalThis when it
// loads; here, timers of 60 s or more run their callback two event-loop turns after they expire,
// so a reply that arrived during the busy stretch is read first. A reply that never comes still
// times out, two turns later. Shorter timers are untouched.
const realSetTimeout = globalThis.setTimeout;
const realSetImmediate = globalThis.setImmediate;
// QRL_LONG_TIMER_MS lowers the threshold for test/worker-timers.test.ts only.
const LONG_MS = Number(process.env.QRL_LONG_TIMER_MS ?? 60_000);

function deferredSetTimeout(callback, ms, ...args) {
  if (typeof callback !== 'function' || !(Number(ms) >= LONG_MS)) return realSetTimeout(callback, ms, ...args);
  return realSetTimeout(() => realSetImmediate(() => realSetImmediate(() => callback(...args))), ms);
}
Object.defineProperty(deferredSetTimeout, 'name', { value: 'setTimeout' });
globalThis.setTimeout = deferredSetTimeout;
