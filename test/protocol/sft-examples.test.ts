// `warmStart.examples` (capabilities.sftExamples, docs/adapter.md §3): the pairs the driver sends are the
// ones qrl-sim's own warm start trains on (training on them step by step gives the toy's weights bit for
// bit), their wire form, the client that refuses to send them to a backend without the capability
// (before any call), and qrl-sim's own server, which refuses the field since it does not declare it.

import { describe, expect, it } from 'vitest';
import { connectBackend, encodeSupervisedPairs } from '../../src/protocol/remote.js';
import { backendHandlers } from '../../src/protocol/serve.js';
import { answerRpcLine } from '../../src/protocol/jsonrpc.js';
import { decodeTensor } from '../../src/protocol/tensor.js';
import { ProtocolError } from '../../src/protocol/errors.js';
import { arConfig, createArPolicy, sftStep, supervisedExamples, trainSupervised } from '../../src/policies/index.js';
import { policyStore } from '../../src/policies/ar/supervised.js';
import { AdamW } from '../../src/nn/adamw.js';
import { makeTask } from '../../src/tasks/index.js';
import { resolveRunConfig } from '../../src/rl/index.js';
import { SFT_EXAMPLE_TOKEN_LIMIT, warmStartExamples } from '../../src/runs/sft-examples.js';
import { FakeBackend } from './fake-backend.js';

const task = makeTask('reverse');
const small = () =>
  createArPolicy(
    arConfig({
      vocabSize: task.vocabSize,
      maxLen: task.promptLength + task.responseLength,
      C: 16,
      H: 2,
      layers: 1,
      hidden: 32,
    }),
    3,
  );

describe('warmStart.examples', () => {
  it('are the pairs trainSupervised trains on, in its order', () => {
    const steps = 3;
    const batchSize = 4;
    const a = small();
    trainSupervised(a, task, { steps, batchSize, optimizer: { lr: 3e-3, weightDecay: 0.01 }, seed: 7 });
    const b = small();
    const opt = new AdamW(policyStore(b), { lr: 3e-3, weightDecay: 0.01 });
    const pairs = supervisedExamples(task, 7, steps, batchSize);
    expect(pairs).toHaveLength(steps * batchSize);
    for (let s = 0; s < steps; s++)
      sftStep(b, opt, pairs.slice(s * batchSize, (s + 1) * batchSize), { maxGradNorm: 1 });
    expect(Buffer.from(policyStore(b).data.buffer)).toEqual(Buffer.from(policyStore(a).data.buffer));
    const config = resolveRunConfig({ seed: 7, task: { name: 'reverse' }, sft: { steps, batchSize } });
    expect(warmStartExamples(config, task)).toEqual(pairs);
  });

  it('refuse a request over the token limit naming sft.steps', () => {
    const config = resolveRunConfig({ task: { name: 'reverse' }, sft: { steps: 100_000, batchSize: 4096 } });
    expect(() => warmStartExamples(config, task)).toThrow(
      new RegExp(`^config\\.sft\\.steps: .* exceed the ${SFT_EXAMPLE_TOKEN_LIMIT} tokens`),
    );
  });

  it('travel as I32 prompts (N, P), PAD-padded responses (N, L) and lengths (N)', () => {
    const wire = encodeSupervisedPairs([
      { prompt: [1, 5, 3], response: [5, 2] },
      { prompt: [1, 6, 3], response: [6, 7, 2] },
    ]);
    expect(wire.prompts.shape).toEqual([2, 3]);
    expect([...decodeTensor(wire.responses)]).toEqual([5, 2, 0, 6, 7, 2]);
    expect([...decodeTensor(wire.lengths)]).toEqual([2, 3]);
    expect(() =>
      encodeSupervisedPairs([
        { prompt: [1], response: [2] },
        { prompt: [1, 3], response: [2] },
      ]),
    ).toThrow(/every prompt must have length 1, example 1 has 2/);
  });

  it('are not sent to a backend without capabilities.sftExamples (refused before any call)', async () => {
    const backend = await connectBackend(
      { command: 'node --import tsx test/protocol/fake-backend.ts' },
      { timeoutMs: 30_000 },
    );
    try {
      const request = { task: { name: 'reverse', options: {} }, steps: 1, batchSize: 1, lr: 1e-3, seed: 0 };
      const error = await backend
        .warmStart({ ...request, examples: [{ prompt: [1, 5, 3], response: [5, 2] }] })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProtocolError);
      expect((error as ProtocolError).field).toBe('capabilities.sftExamples');
      expect(await backend.sync()).toEqual({ weightVersion: 0 }); // still serving
    } finally {
      await backend.close();
    }
  }, 60_000);

  it('are refused naming the field by qrl-sim serve, which does not declare the capability', async () => {
    const handlers = backendHandlers(new FakeBackend(), () => undefined);
    const examples = encodeSupervisedPairs([{ prompt: [1, 5, 3], response: [5, 2] }]);
    const params = { task: { name: 'reverse', options: {} }, steps: 1, batchSize: 1, lr: 1e-3, seed: 0, examples };
    const a = (await answerRpcLine(
      handlers,
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'warmStart', params }),
    )) as {
      error: { code: number; data: { field: string } };
    };
    expect(a.error.code).toBe(-32602);
    expect(a.error.data.field).toBe('examples');
  });
});
