// The MoE routing record of an AR rollout crosses the qrl-backend/1 boundary unchanged: a reference
// backend with an MoE policy served over HTTP, driven by RemoteBackend; the trainer scores the batch,
// with and without routing replay (the request's `routing`, the result's `routing` and flip rates).

import { describe, expect, it } from 'vitest';
import { ReferenceBackend } from '../../src/backend/reference.js';
import { arPolicyFactory } from '../../src/policies/ar/engine.js';
import { connectBackend, parseBackendAddress } from '../../src/protocol/remote.js';
import { serveBackend } from '../../src/protocol/serve.js';
import { resolveRunConfig } from '../../src/rl/index.js';
import { makeTask } from '../../src/tasks/index.js';

describe('MoE routing record through serve/remote', () => {
  it('arrives as Int32Array per layer, equal to the local batch, and scores like it', async () => {
    const config = resolveRunConfig({
      seed: 0,
      task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
      policy: {
        kind: 'ar',
        model: { C: 16, H: 2, layers: 2, hidden: 16, moe: { experts: 4, topK: 2, auxCoeff: 0.01 } },
      },
      plan: 'fp8-rollout',
    });
    const task = makeTask('reverse', { minLength: 3, maxLength: 4 });
    const local = new ReferenceBackend(config, arPolicyFactory, task);
    const served = new ReferenceBackend(config, arPolicyFactory, task);
    const server = await serveBackend(served, { port: 0 });
    const remote = await connectBackend(parseBackendAddress(`http://127.0.0.1:${server.port}`), { timeoutMs: 30_000 });
    try {
      const prompts = task.trainProblems(3, 1).map((p) => [...p.prompt]);
      const want = await local.generate({ prompts, seed: '0/step/1/rollout' });
      const got = await remote.generate({ prompts, seed: '0/step/1/rollout' });
      const routing = got.record.moeRouting as Int32Array[];
      expect(routing).toHaveLength(2);
      routing.forEach((r) => expect(r).toBeInstanceOf(Int32Array));
      expect(got).toEqual(want);
      const lpLocal = await local.logprobs({ batch: want, rows: [0, 1, 2], policy: 'current', grad: false });
      const lpRemote = await remote.logprobs({ batch: got, rows: [0, 1, 2], policy: 'current', grad: false });
      expect(Array.from(lpRemote.logp)).toEqual(Array.from(lpLocal.logp));
      // routing replay crosses too: R3 by name, R2 as per-layer Int32Arrays, the returned routing and flip rates
      const r3Local = await local.logprobs({
        batch: want,
        rows: [0, 2],
        policy: 'current',
        routing: 'rollout',
        returnRouting: true,
      });
      const r3Remote = await remote.logprobs({
        batch: got,
        rows: [0, 2],
        policy: 'current',
        routing: 'rollout',
        returnRouting: true,
      });
      expect(r3Remote).toEqual(r3Local);
      r3Remote.routing!.forEach((r) => expect(r).toBeInstanceOf(Int32Array));
      expect(r3Remote.routingFlipRate).toEqual([0, 0]);
      const r2Local = await local.logprobs({ batch: want, rows: [0, 2], policy: 'current', routing: r3Local.routing! });
      const r2Remote = await remote.logprobs({
        batch: got,
        rows: [0, 2],
        policy: 'current',
        routing: r3Remote.routing!,
      });
      expect(r2Remote).toEqual(r2Local);
      expect(Array.from(r2Remote.logp)).toEqual(Array.from(r3Local.logp));
    } finally {
      await remote.close();
      await server.close();
    }
  });
});
