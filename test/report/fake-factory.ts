// Test helper: a tiny deterministic PolicyFactory (a table of per-position logits, no network) for
// sweep tests; loaded by the sweep's worker threads. Not a policy of the project.

import { appendFileSync } from 'node:fs';
import { UsageError } from '../../src/core/errors.js';
import { createParamStore } from '../../src/nn/index.js';
import type { RunConfig } from '../../src/rl/grpo/config.js';
import type { EngineBatch as RolloutBatch, EngineLogprobs, RlEngine } from '../../src/policies/engine.js';
import type { ValidatingPolicyFactory } from '../../src/runs/factory.js';
import type { Rng } from '../../src/core/rng.js';
import type { Task } from '../../src/tasks/index.js';

/** log-softmax of row `t` of a (T, V) table. */
function logSoftmax(table: ArrayLike<number>, t: number, V: number): Float64Array {
  const out = new Float64Array(V);
  let max = -Infinity;
  for (let v = 0; v < V; v++) max = Math.max(max, table[t * V + v] as number);
  let z = 0;
  for (let v = 0; v < V; v++) z += Math.exp((table[t * V + v] as number) - max);
  const lz = max + Math.log(z);
  for (let v = 0; v < V; v++) out[v] = (table[t * V + v] as number) - lz;
  return out;
}

function createEngine(config: RunConfig, task: Task): RlEngine {
  const T = Math.min(task.responseLength, 6);
  const V = task.vocabSize;
  const params = createParamStore([{ name: 'logits', shape: [T, V], init: { kind: 'normal', std: 0.5 } }], config.seed);
  // the "quantized" rollout side rounds logits to 1/4 unless the plan is bf16 on both sides
  const step = config.plan === 'bf16' || config.plan === 'fp32' ? 0 : 0.25;
  let rolloutTable = Float64Array.from(params.data);
  let cache: { rows: number[]; tokens: Int32Array; probs: Float64Array[] } | null = null;
  const tableFor = (side: 'rollout' | 'trainer'): ArrayLike<number> =>
    side === 'rollout' ? rolloutTable : params.data;
  return {
    params,
    sync() {
      rolloutTable = Float64Array.from(params.data, (x) => (step === 0 ? x : Math.round(x / step) * step));
    },
    generate(
      prompts: readonly (readonly number[])[],
      rng: Rng,
      options?: { greedy?: boolean; side?: 'rollout' | 'trainer' },
    ): RolloutBatch {
      const B = prompts.length;
      const table = tableFor(options?.side ?? 'rollout');
      const responses = new Int32Array(B * T);
      const mask = new Float64Array(B * T).fill(1);
      const logpRollout = new Float64Array(B * T);
      for (let i = 0; i < B; i++) {
        for (let t = 0; t < T; t++) {
          const lp = logSoftmax(table, t, V);
          let tok = 0;
          if (options?.greedy === true) {
            for (let v = 1; v < V; v++) if ((lp[v] as number) > (lp[tok] as number)) tok = v;
          } else {
            let u = rng.uniform();
            for (tok = 0; tok < V - 1; tok++) {
              u -= Math.exp(lp[tok] as number);
              if (u < 0) break;
            }
          }
          responses[i * T + t] = tok;
          logpRollout[i * T + t] = lp[tok] as number;
        }
      }
      return { B, T, prompts, responses, mask, logpRollout };
    },
    logprobs(
      batch: RolloutBatch,
      rows: readonly number[],
      options: { grad: boolean; weights?: Float32Array },
    ): EngineLogprobs {
      const table = options.weights ?? params.data;
      const logp = new Float64Array(rows.length * T);
      const entropy = new Float64Array(rows.length * T);
      const probs: Float64Array[] = [];
      const tokens = new Int32Array(rows.length * T);
      rows.forEach((r, i) => {
        for (let t = 0; t < T; t++) {
          const lp = logSoftmax(table, t, V);
          const tok = batch.responses[r * batch.T + t] as number;
          tokens[i * T + t] = tok;
          logp[i * T + t] = lp[tok] as number;
          let h = 0;
          for (let v = 0; v < V; v++) h -= Math.exp(lp[v] as number) * (lp[v] as number);
          entropy[i * T + t] = h;
          probs.push(lp.map(Math.exp));
        }
      });
      if (options.grad) cache = { rows: [...rows], tokens, probs };
      return { logp, entropy };
    },
    backward(gradLogp: Float64Array) {
      if (cache === null) throw new Error('fake engine: backward without logprobs(grad)');
      const grads = params.grad('logits');
      for (let i = 0; i < cache.rows.length; i++) {
        for (let t = 0; t < T; t++) {
          const g = gradLogp[i * T + t] as number;
          const p = cache.probs[i * T + t] as Float64Array;
          const tok = cache.tokens[i * T + t] as number;
          for (let v = 0; v < V; v++)
            grads[t * V + v] = (grads[t * V + v] as number) + g * ((v === tok ? 1 : 0) - (p[v] as number));
        }
      }
    },
    state: () => ({}),
    restore: () => undefined,
  };
}

/** The fake factory: `policy.model.explode: true` fails at create (a runtime failure), `policy.model.width` must be a positive integer when given. */
export const fakeFactory: ValidatingPolicyFactory = {
  create(config, task) {
    if ((config.policy.model as Record<string, unknown>)['explode'] === true)
      throw new Error('fake engine exploded on purpose');
    return createEngine(config, task);
  },
  warmStart: async (_engine, config) => {
    // Each warm start appends a line to $QRL_FAKE_WARMSTART_LOG (worker threads inherit the env).
    const log = process.env['QRL_FAKE_WARMSTART_LOG'];
    if (log !== undefined) appendFileSync(log, `${config.plan}\n`);
    return {};
  },
  validate(config) {
    const width = (config.policy.model as Record<string, unknown>)['width'];
    if (width !== undefined && !(Number.isInteger(width) && (width as number) > 0)) {
      throw new UsageError(`config.policy.model.width: expected a positive integer (got ${JSON.stringify(width)})`);
    }
  },
};

/** Same factory through the `(kind) => factory` form. */
export function fakePolicyFactory(_kind: string): ValidatingPolicyFactory {
  return fakeFactory;
}
