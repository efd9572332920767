// qrl-backend/1 end to end: schema round trips, and RemoteBackend against serveBackend over stdio
// (a spawned process) and HTTP, with an in-test fake backend; malformed answers and faults.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fc, test } from '@fast-check/vitest';
import { afterAll, describe, expect, it } from 'vitest';
import { BackendCallError, ProtocolError } from '../../src/protocol/errors.js';
import { connectBackend, parseBackendAddress } from '../../src/protocol/remote.js';
import { serveBackend } from '../../src/protocol/serve.js';
import { batchFromJson, batchToJson, parseMessage, tensorFromJson } from '../../src/protocol/schema.js';
import { writeSafetensors } from '../../src/protocol/safetensors.js';
import { answerRpcLine } from '../../src/protocol/jsonrpc.js';
import { backendHandlers } from '../../src/protocol/serve.js';
import { FakeBackend } from './fake-backend.js';
import { createArEngine } from '../../src/policies/index.js';
import { resolveRunConfig } from '../../src/rl/index.js';
import { makeTask } from '../../src/tasks/index.js';
import { createRng } from '../../src/core/rng.js';
import type { ReplayRecord } from '../../src/core/backend-contract.js';

const fake = (flags = ''): string => `node --import tsx test/protocol/fake-backend.ts ${flags}`;
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('schema', () => {
  it('round-trips a rollout batch exactly, typed arrays in the record included', async () => {
    const batch = await new FakeBackend().generate({
      prompts: [
        [1, 5],
        [1, 6],
      ],
      seed: '0/step/1/rollout',
    });
    const json = JSON.parse(JSON.stringify(batchToJson(batch)));
    const back = batchFromJson(parseMessage('generate', 'result', json), 'generate', 'result');
    expect(back).toEqual(batch);
    expect(back.record.lengths).toBeInstanceOf(Int32Array);
  });

  it('carries the AR kept sets of support replay: after the round trip the trainer ℓ still equals ℓroll bit for bit under top-p', () => {
    const config = resolveRunConfig({
      task: { name: 'reverse' },
      policy: {
        model: { C: 16, H: 2, layers: 1, hidden: 32 },
        sampler: { topP: 0.6, temperature: 0.8, supportReplay: true },
      },
      plan: 'bf16',
    });
    const task = makeTask('reverse');
    const engine = createArEngine(config, task as never);
    const prompts = task.trainProblems(3, 1).map((p) => [...p.prompt]);
    const gen = engine.generate(prompts, createRng(5));
    const batch = { weightVersion: 0, ...gen, record: gen.record as ReplayRecord };
    expect(batch.record.support).toBeInstanceOf(Uint8Array);
    const back = batchFromJson(
      parseMessage('generate', 'result', JSON.parse(JSON.stringify(batchToJson(batch)))),
      'generate',
      'result',
    );
    expect(back).toEqual(batch);
    const rows = [0, 1, 2];
    const lp = engine.logprobs(back, rows, { grad: false }).logp;
    for (let i = 0; i < lp.length; i++) expect(Object.is(lp[i], back.logpRollout[i])).toBe(true);
    // the same batch without its kept sets is scored over the full vocabulary: ℓ < ℓroll somewhere
    const { support: _s, ...bare } = back.record;
    const full = engine.logprobs({ ...back, record: bare }, rows, { grad: false }).logp;
    expect(full.some((x, i) => x < back.logpRollout[i]! - 1e-9)).toBe(true);
  });

  test.prop([
    fc.integer({ min: 1, max: 4 }),
    fc.integer({ min: 0, max: 5 }),
    fc.double({ noNaN: true, max: 0 }),
    fc.nat({ max: 9 }),
  ])('round-trips any batch bit-exactly through JSON', (B, T, logp, v) => {
    const mask = Float64Array.from({ length: B * T }, (_, i) => (i % T < (i + v) % (T + 1) ? 1 : 0));
    const batch = {
      weightVersion: v,
      B,
      T,
      prompts: Array.from({ length: B }, (_, b) => [1, b + 5, 3]),
      responses: Int32Array.from({ length: B * T }, (_, i) => (i * 7 + v) % 13),
      mask,
      logpRollout: Float64Array.from(mask, (m, i) => (m ? logp / (i + 1) : 0)),
      record: {
        kind: 'ar',
        promptLength: 3,
        temperature: 0.7,
        nested: { ids: Int32Array.from([v, -v]), list: [1, 'a', null] },
      },
    };
    const back = batchFromJson(
      parseMessage('generate', 'result', JSON.parse(JSON.stringify(batchToJson(batch)))),
      'generate',
      'result',
    );
    expect(back).toEqual(batch);
    for (let i = 0; i < B * T; i++) expect(Object.is(back.logpRollout[i], batch.logpRollout[i])).toBe(true);
  });

  it('names the method and the field of a malformed message', () => {
    expect(() => parseMessage('step', 'params', { maxGradNorm: 'x' })).toThrow(/^step: maxGradNorm: /);
    expect(() => parseMessage('generate', 'params', { prompts: [[1, -2]], seed: 's' })).toThrow(
      /generate: prompts\.0\.1/,
    );
    expect(() => parseMessage('sync', 'result', { weightVersion: -1 })).toThrow(/sync: result\.weightVersion/);
    try {
      parseMessage('step', 'result', { gradNorm: 1 });
    } catch (error) {
      expect(error).toBeInstanceOf(ProtocolError);
      expect((error as ProtocolError).field).toBe('result.weightVersion');
    }
  });

  it('reads a tensor given by safetensors reference, checking dtype and shape', () => {
    const dir = mkdtempSync(join(tmpdir(), 'qrl-proto-ref-'));
    dirs.push(dir);
    const file = join(dir, 'payload.safetensors');
    writeSafetensors(file, { logp: { data: new Float64Array([-0.5, -1.25, 0, -3]), shape: [2, 2] } });
    const got = tensorFromJson({ safetensors: file, name: 'logp' }, 'logprobs', 'result.logp', {
      dtypes: ['F64'],
      shape: [2, 2],
    });
    expect(Array.from(got)).toEqual([-0.5, -1.25, 0, -3]);
    expect(() =>
      tensorFromJson({ safetensors: file, name: 'nope' }, 'logprobs', 'result.logp', { dtypes: ['F64'] }),
    ).toThrow(/result\.logp: no tensor "nope"/);
    expect(() =>
      tensorFromJson({ safetensors: file, name: 'logp' }, 'logprobs', 'result.logp', { dtypes: ['F64'], shape: [4] }),
    ).toThrow(/result\.logp\.shape must be \[4\]/);
  });

  it('rejects a batch whose tensors do not have shape (B, T)', async () => {
    const json = batchToJson(await new FakeBackend().generate({ prompts: [[1]], seed: 's' }));
    expect(() => batchFromJson({ ...json, T: 4 }, 'generate', 'result')).toThrow(/result\.responses/);
  });
});

describe('server', () => {
  it('answers invalid params with -32602 and data.field', async () => {
    const handlers = backendHandlers(new FakeBackend(), () => undefined);
    const a = (await answerRpcLine(
      handlers,
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'step', params: { maxGradNorm: -1 } }),
    )) as { error: { code: number; data: { field: string } } };
    expect(a.error.code).toBe(-32602);
    expect(a.error.data.field).toBe('maxGradNorm');
    const b = (await answerRpcLine(
      handlers,
      JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'info', params: { protocols: ['qrl-backend/9'] } }),
    )) as { error: { code: number; message: string } };
    expect(b.error.code).toBe(-32000);
    expect(b.error.message).toMatch(/no common protocol version/);
  });
});

async function exercise(backend: Awaited<ReturnType<typeof connectBackend>>): Promise<void> {
  const local = new FakeBackend();
  expect(backend.lastInfo?.protocol).toBe('qrl-backend/1');
  expect(await backend.sync()).toEqual(await local.sync());
  const request = {
    prompts: [
      [1, 5],
      [1, 6],
      [1, 7],
    ],
    seed: '3/step/0/rollout',
  };
  const batch = await backend.generate(request);
  expect(batch).toEqual(await local.generate(request));
  const lp = await backend.logprobs({ batch, rows: [2, 0], policy: 'current', grad: true });
  expect(lp.logp).toEqual((await local.logprobs({ batch, rows: [2, 0], policy: 'current' })).logp);
  await backend.backward(lp.handle!, new Float64Array(lp.logp.length).fill(0.25));
  const step = await backend.step({ maxGradNorm: 1 });
  expect(step.weightVersion).toBe(1);
  // ∂(Σ g·ℓ)/∂w with ℓ = −(1 + w)/(t + 2) at w = 0: Σ g·ℓ
  expect(step.gradNorm).toBeCloseTo(Math.abs(lp.logp.reduce((a, x) => a + 0.25 * x, 0)), 12);
  await backend.setReference();
  const dir = mkdtempSync(join(tmpdir(), 'qrl-proto-'));
  dirs.push(dir);
  await backend.save(join(dir, 'ckpt'));
  await backend.load(join(dir, 'ckpt'));
  expect((await backend.sync()).weightVersion).toBe(1);
  await expect(backend.backward('nope', new Float64Array(1))).rejects.toThrow(/backward failed: unknown handle nope/);
  await expect(
    backend.warmStart({ task: { name: 'reverse', options: {} }, steps: 1, batchSize: 1, lr: 1e-3, seed: 0 }),
  ).rejects.toBeInstanceOf(BackendCallError);
}

describe('RemoteBackend', () => {
  it('drives a backend in a spawned process over stdio', async () => {
    const backend = await connectBackend({ command: fake() }, { timeoutMs: 30_000 });
    try {
      await exercise(backend);
    } finally {
      await backend.close();
    }
  });

  it('drives a backend over HTTP', async () => {
    const served = new FakeBackend();
    const server = await serveBackend(served, { port: 0, stateRoot: tmpdir() });
    const backend = await connectBackend(parseBackendAddress(`http://127.0.0.1:${server.port}`), { timeoutMs: 30_000 });
    await exercise(backend);
    await backend.close();
    await server.close();
    expect(served.closed).toBe(true);
  });

  it('refuses a backend that speaks another protocol version', async () => {
    await expect(connectBackend({ command: fake('--protocol qrl-backend/2') }, { timeoutMs: 30_000 })).rejects.toThrow(
      /no common protocol version/,
    );
  });

  it('names the backend and the method when the process dies, hangs or sends garbage', async () => {
    const dead = await connectBackend({ command: fake('--die-after 2') }, { timeoutMs: 30_000 });
    await dead.sync();
    const e1 = await dead.generate({ prompts: [[1]], seed: 's' }).catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(BackendCallError);
    expect((e1 as BackendCallError).kind).toBe('exit');
    expect((e1 as Error).message).toMatch(/fake-backend\.ts --die-after 2.*exit code 3.*generate/);
    await dead.close();

    const hung = await connectBackend(
      { command: fake('--hang-on step') },
      { timeoutMs: 1500, startupTimeoutMs: 30_000 },
    );
    const e2 = await hung.step({ maxGradNorm: 1 }).catch((e: unknown) => e);
    expect((e2 as BackendCallError).kind).toBe('timeout');
    expect((e2 as Error).message).toMatch(/no answer to step within 1500 ms/);
    await hung.close();

    const garbled = await connectBackend({ command: fake('--garbage-on sync') }, { timeoutMs: 30_000 });
    const e3 = await garbled.sync().catch((e: unknown) => e);
    expect((e3 as BackendCallError).kind).toBe('malformed');
    expect((e3 as Error).message).toMatch(/not JSON.*sync/);
    await garbled.close();
  });

  it('reports a well-formed answer with a bad field as malformed, naming the field', async () => {
    const inner = new FakeBackend();
    inner.sync = async () => ({ weightVersion: -3 });
    const server = await serveBackend(inner, { port: 0 });
    const backend = await connectBackend({ url: `http://127.0.0.1:${server.port}` });
    const e = (await backend.sync().catch((x: unknown) => x)) as BackendCallError;
    expect(e.kind).toBe('malformed');
    expect(e.field).toBe('result.weightVersion');
    expect(e.message).toMatch(/malformed answer to sync: result\.weightVersion/);
    await backend.close();
  });
});
