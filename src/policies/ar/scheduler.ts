// The AR rollout engine's request scheduler: continuous batching (requests join and leave the running
// batch) and chunked prefill, each engine step's linear kernels chosen for the step's token count.
// Not the sampler (sampler.ts) and not the lockstep path (rollout.ts).

import type { FloatArray } from '../../nn/array.js';
import { withKernelRows, type PolicyNumerics } from '../numerics.js';
import { arDecodeStep, arPrefill, createDecodeState, type ArDecodeState, type ArPolicy } from './model.js';
import { createStepScales, settleNextSite, withStepScales } from '../step-scales.js';

/** One engine step of {@link scheduleRequests}: its tokens and the requests it ran. */
export interface EngineStep {
  /** Tokens of the step (prefill-chunk tokens plus one per decoding request): the rows of its GEMMs. */
  readonly tokens: number;
  /** The requests of the step, in running order. */
  readonly requests: readonly number[];
}

/** Input of {@link scheduleRequests}. */
export interface ScheduleOptions {
  /** The policy. */
  readonly policy: ArPolicy;
  /** (B, P) prompt tokens. */
  readonly prompts: Int32Array;
  /** Number of requests. */
  readonly B: number;
  /** Prompt length. */
  readonly P: number;
  /** P + most response tokens (the KV-cache capacity of each request). */
  readonly T: number;
  /** The engine's numerics. */
  readonly numerics: PolicyNumerics;
  /** MoE only: layers × (B, T, k) routing to fill (rows of request b at b·T·k), or null. */
  readonly routing: readonly Int32Array[] | null;
  /**
   * Samples response slot k of request b from `logits` row `off` and records it; returns the token
   * and whether the request has ended (EOS or its length).
   */
  readonly sample: (b: number, k: number, logits: FloatArray, off: number) => { token: number; ended: boolean };
  /** Most requests running at once. @defaultValue B */
  readonly maxBatch?: number;
  /** Prompt tokens per request per step. @defaultValue P (one prefill) */
  readonly prefillChunk?: number;
  /** Every linear layer runs the large-batch kernel, whatever the step's tokens. @defaultValue false */
  readonly batchInvariant?: boolean;
}

interface Running {
  readonly b: number;
  readonly state: ArDecodeState;
  readonly routing: Int32Array[] | undefined;
  /** Prompt tokens processed. */
  fed: number;
  /** Response tokens sampled. */
  k: number;
  last: number;
}

/** What one engine step changes in a running request: its KV caches, position, prompt progress and routing. */
interface RunningSnapshot {
  readonly kv: { readonly k: FloatArray; readonly v: FloatArray }[];
  readonly t: number;
  readonly fed: number;
  readonly routing: Int32Array[] | undefined;
}

function snapshot(r: Running): RunningSnapshot {
  return {
    kv: r.state.kv.map((c) => ({ k: c.k.slice(), v: c.v.slice() })),
    t: r.state.t,
    fed: r.fed,
    routing: r.routing?.map((a) => a.slice()),
  };
}

function restore(r: Running, s: RunningSnapshot): void {
  r.state.kv.forEach((c, l) => {
    c.k.set(s.kv[l]!.k);
    c.v.set(s.kv[l]!.v);
  });
  r.state.t = s.t;
  r.fed = s.fed;
  s.routing?.forEach((a, l) => r.routing![l]!.set(a));
}

/**
 * Runs one engine step so that every per-tensor dynamic activation scale is the amax over all the step's
 * calls of its site, as one GEMM over the step's rows would have it: the step runs once per such site
 * (restored in between), settling one more site each time in call order (`step-scales.ts`), and once more
 * with all settled. A step whose numerics have no per-tensor dynamic activation scale runs once, unchanged.
 */
function runSharingTensorScales(running: readonly Running[], runStep: () => void): void {
  const saved = running.map(snapshot);
  const scales = createStepScales();
  for (;;) {
    withStepScales(scales, runStep);
    if (!settleNextSite(scales)) return;
    running.forEach((r, i) => restore(r, saved[i]!));
  }
}

/**
 * Runs B requests through a deterministic continuous-batching scheduler and returns its steps. Each
 * step: waiting requests join (in order) while fewer than `maxBatch` run; every running request
 * contributes its next prefill chunk (`prefillChunk` prompt tokens; the whole prompt by default) or
 * one decode token; the step's linear kernels are chosen for its token count (`withKernelRows`;
 * `Infinity` with `batchInvariant`); a request whose prompt is complete samples a token; ended
 * requests leave at the end of the step. Tokens are drawn in running order, so with `maxBatch` ≥ B,
 * one prefill and requests of equal length this is the lockstep rollout draw for draw.
 *
 * Each request has its own KV caches and its step runs as its own calls (a chunk after the first is
 * decoded token by token over the cache): per-row kernels give what one GEMM over the step's rows
 * would; a per-tensor dynamic activation scale is made the amax over the whole step's rows of its site
 * by re-running the step site by site (docs/engine-paths.md).
 */
export function scheduleRequests(o: ScheduleOptions): EngineStep[] {
  const { policy, prompts, B, P, T, numerics } = o;
  const maxBatch = o.maxBatch ?? B;
  const chunk = o.prefillChunk ?? P;
  const k = policy.blockConfig.moe?.topK ?? 0;
  const steps: EngineStep[] = [];
  let running: Running[] = [];
  let next = 0;
  const logits = new Map<Running, FloatArray>();
  const one = new Int32Array(1);
  const decode = (r: Running, token: number): FloatArray => {
    one[0] = token;
    return arDecodeStep(policy, r.state, one, numerics, r.routing);
  };
  const finish = (r: Running): void => {
    if (o.routing && r.routing) r.routing.forEach((a, l) => o.routing![l]!.set(a, r.b * T * k));
  };
  while (next < B || running.length > 0) {
    while (running.length < maxBatch && next < B) {
      const b = next++;
      const routing = o.routing ? o.routing.map(() => new Int32Array(T * k).fill(-1)) : undefined;
      running.push({ b, state: createDecodeState(policy, 1, T), routing, fed: 0, k: 0, last: 0 });
    }
    const work = running.map((r) => (r.fed < P ? Math.min(chunk, P - r.fed) : 1));
    const tokens = work.reduce((a, n) => a + n, 0);
    steps.push({ tokens, requests: running.map((r) => r.b) });
    const runStep = (): void => {
      logits.clear();
      withKernelRows(o.batchInvariant === true ? Infinity : tokens, () => {
        running.forEach((r, i) => {
          const n = work[i]!;
          if (r.fed >= P) {
            logits.set(r, decode(r, r.last));
            return;
          }
          const prompt = prompts.subarray(r.b * P, (r.b + 1) * P);
          let z: FloatArray;
          if (r.fed === 0 && n === P) z = arPrefill(policy, r.state, prompt, P, numerics, r.routing);
          else for (let t = r.fed; t < r.fed + n; t++) z = decode(r, prompt[t]!);
          r.fed += n;
          if (r.fed === P) logits.set(r, z!);
        });
      });
    };
    if (tokens === 1) runStep();
    else runSharingTensorScales(running, runStep);
    const ended = new Set<Running>();
    for (const r of running) {
      const z = logits.get(r);
      if (z === undefined) continue;
      const d = o.sample(r.b, r.k, z, 0);
      r.k += 1;
      r.last = d.token;
      if (d.ended) ended.add(r);
    }
    for (const r of ended) finish(r);
    running = running.filter((r) => !ended.has(r));
  }
  return steps;
}
