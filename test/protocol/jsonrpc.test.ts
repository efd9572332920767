// Tests of the newline-delimited JSON-RPC framing: round trips through a server loop, the spec's
// error answers, and every way a peer can fail (exit, garbage, silence). Not the backend methods.

import { PassThrough } from 'node:stream';
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { RpcCallError, RpcError } from '../../src/protocol/errors.js';
import {
  NdjsonRpcClient,
  RPC_ERRORS,
  answerRpcLine,
  serveNdjsonRpc,
  spawnRpcClient,
} from '../../src/protocol/jsonrpc.js';

function pair(handlers: Parameters<typeof serveNdjsonRpc>[0]): {
  client: NdjsonRpcClient;
  toServer: PassThrough;
  served: Promise<void>;
} {
  const toServer = new PassThrough();
  const toClient = new PassThrough();
  const served = serveNdjsonRpc(handlers, toServer, toClient);
  return { client: new NdjsonRpcClient(toClient, toServer, { name: 'test peer' }), toServer, served };
}

describe('ndjson JSON-RPC', () => {
  it('round-trips results in order and maps handler errors to error objects naming the field', async () => {
    const { client, toServer, served } = pair({
      add: (p) => (p as { a: number; b: number }).a + (p as { a: number; b: number }).b,
      bad: () => {
        throw new RpcError(RPC_ERRORS.invalidParams, 'rows[2]: out of range', { field: 'rows[2]' });
      },
      boom: () => {
        throw new Error('kaput');
      },
    });
    await expect(client.call('add', { a: 1, b: 2 })).resolves.toBe(3);
    const bad = await client.call('bad', {}).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(RpcCallError);
    expect((bad as RpcCallError).kind).toBe('remote');
    expect((bad as RpcCallError).error?.code).toBe(RPC_ERRORS.invalidParams);
    expect((bad as RpcCallError).message).toBe('test peer: bad failed: rows[2]: out of range (field rows[2])');
    await expect(client.call('boom')).rejects.toThrow('boom failed: kaput');
    await expect(client.call('nope')).rejects.toThrow('method not found: nope');
    toServer.end();
    await served;
  });

  it('answers malformed lines as the JSON-RPC 2.0 spec says', async () => {
    const parse = (await answerRpcLine({}, '{not json')) as { error: { code: number }; id: null };
    expect(parse.error.code).toBe(RPC_ERRORS.parseError);
    expect(parse.id).toBeNull();
    const invalid = (await answerRpcLine({}, '{"jsonrpc":"1.0","id":4,"method":"x"}')) as {
      error: { code: number };
      id: number;
    };
    expect(invalid.error.code).toBe(RPC_ERRORS.invalidRequest);
    expect(invalid.id).toBe(4);
    expect(await answerRpcLine({ x: () => 1 }, '{"jsonrpc":"2.0","method":"x"}')).toBeNull();
  });

  it('fails every pending call, naming the method, when the peer sends garbage', async () => {
    const toClient = new PassThrough();
    const toServer = new PassThrough();
    const client = new NdjsonRpcClient(toClient, toServer, { name: 'peer' });
    const call = client.call('generate', {});
    toClient.write('hello\n');
    await expect(call).rejects.toMatchObject({ kind: 'malformed', method: 'generate' });
    await expect(client.call('info')).rejects.toThrow('before info');
  });

  it('times out a call that gets no answer', async () => {
    const client = new NdjsonRpcClient(new PassThrough(), new PassThrough(), { name: 'peer', timeoutMs: 50 });
    await expect(client.call('step', {})).rejects.toMatchObject({ kind: 'timeout', method: 'step' });
  });

  it('reports a child that dies with its exit code and last stderr line', async () => {
    const script = "process.stdin.once('data', () => { console.error('out of memory'); process.exit(3); })";
    const spawned = spawnRpcClient(`${JSON.stringify(process.execPath)} -e ${JSON.stringify(script)}`);
    const error = (await spawned.client.call('info').catch((e: unknown) => e)) as RpcCallError;
    expect(error.kind).toBe('exit');
    expect(error.message).toMatch(/during info/);
    expect(error.message).toMatch(/exit code 3; stderr: out of memory/);
    await spawned.close();
  });
});

/** Whether `v` answers one of the pending ids 1 … n as JSON-RPC 2.0 says (a result, or a well-formed error). */
function isResponseTo(v: unknown, n: number): boolean {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const m = v as Record<string, unknown>;
  if (m['jsonrpc'] !== '2.0' || typeof m['id'] !== 'number' || !Number.isInteger(m['id']) || m['id'] < 1 || m['id'] > n)
    return false;
  if ('result' in m === 'error' in m) return false;
  if (!('error' in m)) return true;
  const e = m['error'];
  return (
    e !== null &&
    typeof e === 'object' &&
    !Array.isArray(e) &&
    typeof (e as Record<string, unknown>)['code'] === 'number' &&
    typeof (e as Record<string, unknown>)['message'] === 'string'
  );
}

/** Feeds one line to a client with `n` pending calls, then ends its input; what each call came to. */
async function feedLine(
  line: string,
  n: number,
): Promise<{ settled: PromiseSettledResult<unknown>[]; thrown: unknown[] }> {
  const input = new PassThrough();
  const client = new NdjsonRpcClient(input, new PassThrough(), { name: 'peer' });
  const calls = Array.from({ length: n }, (_, i) => client.call(`m${i}`, {}));
  const thrown: unknown[] = [];
  const onUncaught = (e: unknown): void => {
    thrown.push(e);
  };
  process.on('uncaughtException', onUncaught);
  try {
    input.write(`${line}\n`);
    input.end();
    return { settled: await Promise.allSettled(calls), thrown };
  } finally {
    process.off('uncaughtException', onUncaught);
  }
}

describe('spawnRpcClient stderr', () => {
  it("relays the child's stderr one whole line at a time, joining a line written in pieces", async () => {
    const chunks: string[] = [];
    const script =
      "const w=(t)=>process.stderr.write(t);w('ab');setTimeout(()=>{w('c\\nde');setTimeout(()=>{w('f\\ng');},60);},60);";
    const spawned = spawnRpcClient(`node -e "${script}"`, { onStderr: (t) => chunks.push(t) });
    const closed = new Promise((resolve) => spawned.child.stderr.on('close', resolve));
    await new Promise((resolve) => spawned.child.on('exit', resolve));
    await closed;
    await spawned.close();
    expect(chunks).toEqual(['abc\n', 'def\n', 'g']);
  }, 30_000);
});

describe('NdjsonRpcClient line handling (property)', () => {
  const noNewline = (s: string): boolean => !/[\r\n]/.test(s);
  const lines = fc.oneof(
    fc.jsonValue().map((v) => JSON.stringify(v)),
    fc.constantFrom(
      'null',
      '0',
      '-1.5e3',
      '"x"',
      '[]',
      '[1,{"id":1}]',
      'true',
      '{}',
      '{"jsonrpc":"2.0","id":1}',
      '{"jsonrpc":"2.0","id":1,"error":null}',
      '{"jsonrpc":"2.0","id":1,"error":[1]}',
      '{"jsonrpc":"2.0","id":1,"result":0,"error":{}}',
    ),
    fc.string({ unit: 'binary' }).filter(noNewline),
  );

  test.prop([lines, fc.integer({ min: 1, max: 3 })])(
    'never throws; a line that is not a response fails every pending call as malformed, naming the line',
    async (line, n) => {
      const { settled, thrown } = await feedLine(line, n);
      expect(thrown).toEqual([]);
      if (line.trim() === '') return; // blank lines are skipped: the calls end with the input
      let value: unknown;
      let json = true;
      try {
        value = JSON.parse(line);
      } catch {
        json = false;
      }
      if (json && isResponseTo(value, n)) return;
      for (const s of settled) {
        expect(s.status).toBe('rejected');
        const e = (s as PromiseRejectedResult).reason as RpcCallError;
        expect(e).toBeInstanceOf(RpcCallError);
        expect(e.kind).toBe('malformed');
        expect(e.message).toContain(JSON.stringify(line.slice(0, 120)));
      }
    },
  );

  it.each(['null', '3', '"a string"', '[]', '[{"jsonrpc":"2.0","id":1,"result":0}]'])(
    'fails pending calls on the non-object line %s instead of throwing',
    async (line) => {
      const { settled, thrown } = await feedLine(line, 2);
      expect(thrown).toEqual([]);
      for (const s of settled)
        expect((s as PromiseRejectedResult).reason).toMatchObject({
          kind: 'malformed',
          message: expect.stringContaining('not a response to a pending request'),
        });
    },
  );
});
