// The HTTP server's guards (docs/adapter.md, Security): a request without the token or with a wrong
// one gets 401 and runs nothing; save/load outside the state root (.., an absolute path, a symlink
// out) are refused with −32602 naming dir and write nothing; the client's token gets through.
// Only loopback addresses are used.

import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackendCallError } from '../../src/protocol/errors.js';
import { isLoopbackHost, tokenProblem } from '../../src/protocol/http-guard.js';
import { connectBackend } from '../../src/protocol/remote.js';
import { serveBackend, type BackendServer } from '../../src/protocol/serve.js';
import { FakeBackend } from './fake-backend.js';

const TOKEN = 'tok-3f9a-secret';
const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'qrl-guard-')));
const root = join(scratch, 'root');
const outside = join(scratch, 'outside');
mkdirSync(root);
mkdirSync(outside);
symlinkSync(outside, join(root, 'link'));
const refusedLines: string[] = [];
let server: BackendServer;
let url: string;

beforeAll(async () => {
  server = await serveBackend(new FakeBackend(), {
    port: 0,
    host: '127.0.0.1',
    token: TOKEN,
    stateRoot: root,
    onRefused: (l) => refusedLines.push(l),
  });
  url = `http://127.0.0.1:${server.port}`;
});
afterAll(async () => {
  await server.close();
  rmSync(scratch, { recursive: true, force: true });
});

async function post(
  method: string,
  params: unknown,
  authorization?: string,
): Promise<{
  status: number;
  body: { id?: unknown; result?: unknown; error?: { code: number; message: string; data?: { field?: string } } };
}> {
  const response = await fetch(`${url}/rpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authorization === undefined ? {} : { authorization }) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return { status: response.status, body: (await response.json()) as never };
}

describe('the token', () => {
  it.each([
    ['missing', undefined, /missing token/],
    ['not a bearer', `Basic ${TOKEN}`, /missing token/],
    ['wrong', 'Bearer tok-3f9a-secreT', /wrong token/],
  ])(
    '%s: 401 with a JSON-RPC error that does not echo the token, one stderr line, nothing saved',
    async (_what, authorization, message) => {
      const before = refusedLines.length;
      const dir = join(root, `saved-${_what.replace(/ /g, '-')}`);
      const r = await post('save', { dir }, authorization);
      expect(r.status).toBe(401);
      expect(r.body.id).toBeNull();
      expect(r.body.error!.code).toBe(-32001);
      expect(r.body.error!.message).toMatch(message);
      expect(JSON.stringify(r.body)).not.toContain(TOKEN);
      expect(refusedLines.slice(before)).toHaveLength(1);
      expect(refusedLines.at(-1)).toMatch(new RegExp(`^refused request from \\S*127\\.0\\.0\\.1: ${message.source}$`));
      expect(existsSync(dir)).toBe(false);
    },
  );

  it('the right token runs the request', async () => {
    const r = await post('save', { dir: join(root, 'saved') }, `Bearer ${TOKEN}`);
    expect(r.status).toBe(200);
    expect(r.body.result).toBeNull();
    expect(existsSync(join(root, 'saved', 'fake.json'))).toBe(true);
  });

  it('the client sends its token; without one it is refused naming the missing token', async () => {
    const backend = await connectBackend({ url }, { token: TOKEN, timeoutMs: 30_000 });
    expect(await backend.sync()).toEqual({ weightVersion: 0 });
    const e = await connectBackend({ url }, { timeoutMs: 30_000 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(BackendCallError);
    expect((e as BackendCallError).code).toBe(-32001);
    expect((e as Error).message).toMatch(/info refused: unauthorized: missing token.*QRL_BACKEND_TOKEN/);
    const wrong = (await connectBackend({ url }, { token: 'nope', timeoutMs: 30_000 }).catch(
      (x: unknown) => x,
    )) as Error;
    expect(wrong.message).toMatch(/wrong token/);
    expect(wrong.message).not.toContain(TOKEN);
  });

  it('compares the whole header value', () => {
    expect(tokenProblem(undefined, TOKEN)).toBe('missing token');
    expect(tokenProblem('Bearer ', TOKEN)).toBe('missing token');
    expect(tokenProblem(`Bearer ${TOKEN}x`, TOKEN)).toBe('wrong token');
    expect(tokenProblem(`bearer ${TOKEN}`, TOKEN)).toBeNull();
  });
});

describe('the state root', () => {
  const bearer = `Bearer ${TOKEN}`;
  it.each([
    // written out, not join()ed: join would resolve the .. before the server sees it
    ['.. out of the root', 'save', () => `${root}/new/../../escaped`],
    ['an absolute path outside', 'save', () => join(outside, 'abs')],
    ['a symlink out', 'save', () => join(root, 'link', 'through')],
    ['.. after a symlink (the OS applies it to the target)', 'save', () => `${root}/link/../after-link`],
    ['load through a symlink out', 'load', () => join(root, 'link')],
    ['dumpEngine to an absolute path outside', 'dumpEngine', () => join(outside, 'abs')],
  ])('%s: −32602 naming dir and the path, nothing written', async (_what, method, dirOf) => {
    const dir = dirOf();
    const r = await post(method, { dir }, bearer);
    expect(r.status).toBe(200);
    expect(r.body.error!.code).toBe(-32602);
    expect(r.body.error!.data!.field).toBe('dir');
    expect(r.body.error!.message).toContain(dir);
    expect(r.body.error!.message).toMatch(/outside the state root/);
    for (const name of ['escaped', 'after-link']) expect(existsSync(join(scratch, name))).toBe(false);
    for (const name of ['abs', 'through']) expect(existsSync(join(outside, name))).toBe(false);
  });

  it('a directory not yet made below the root, and .. that stays inside, are allowed', async () => {
    expect((await post('save', { dir: join(root, 'new', 'deep') }, bearer)).body.result).toBeNull();
    expect(existsSync(join(root, 'new', 'deep', 'fake.json'))).toBe(true);
    expect((await post('load', { dir: `${root}/new/../new/deep` }, bearer)).body.result).toBeNull();
  });
});

describe('binding', () => {
  it('loopback is 127.0.0.0/8, ::1 and localhost', () => {
    for (const h of ['127.0.0.1', '127.5.6.7', '::1', 'localhost']) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', '128.0.0.1', 'example.org', ''])
      expect(isLoopbackHost(h), h).toBe(false);
  });

  it('serveBackend refuses a non-loopback host without a token before listening', async () => {
    const backend = new FakeBackend();
    await expect(serveBackend(backend, { port: 0, host: '0.0.0.0' })).rejects.toThrow(
      /host 0\.0\.0\.0 is not loopback: a token is required/,
    );
  });
});
