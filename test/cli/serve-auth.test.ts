// `qrl-sim serve --port` with a token and a state root, and `qrl-sim run --backend http://…` against
// it: refused at start beyond loopback without a token (exit 2, before binding), refused requests
// without the token, and a run that sends it through --token-file or QRL_BACKEND_TOKEN. Loopback only.

import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { runCli } from './io.js';

const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'qrl-serve-auth-')));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const tokenFile = join(scratch, 'token');
writeFileSync(tokenFile, 'tok-cli-7c2e\n');
const config = join(scratch, 'small.json');
writeFileSync(
  config,
  JSON.stringify({
    steps: 1,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
    sft: { steps: 2, batchSize: 8, cache: false },
    rollout: { prompts: 2, groupSize: 4 },
    eval: { every: 0, problems: 4 },
  }),
);

/** Starts `qrl-sim serve` in-process; resolves with its URL, its stderr lines and its exit. */
async function serve(flags: string[]): Promise<{ url: string; err: string[]; exit: Promise<number> }> {
  const err: string[] = [];
  let listening: (url: string) => void = () => undefined;
  const url = new Promise<string>((resolve) => (listening = resolve));
  const io = {
    out: () => undefined,
    err: (t: string) => {
      err.push(t);
      const m = /listening on (http:\/\/\S+)/.exec(t);
      if (m) listening(m[1]!);
    },
    readStdin: async () => '',
  };
  const exit = main(['serve', '--policy', 'ar', '--port', '0', ...flags], io);
  return {
    url: await Promise.race([
      url,
      exit.then((code) => Promise.reject(new Error(`serve exited ${code}: ${err.join('\n')}`))),
    ]),
    err,
    exit,
  };
}

describe('qrl-sim serve: start-up refusals (exit 2, one line)', () => {
  it.each([
    [
      ['--port', '0', '--host', '0.0.0.0'],
      /--host 0\.0\.0\.0: not loopback, so a token is required: pass --token-file FILE or set QRL_BACKEND_TOKEN/,
    ],
    [['--port', '0', '--host', '::'], /--host ::: not loopback/],
    [['--token-file', tokenFile], /--token-file: not used without --port/],
    [['--state-root', scratch, '--stdio'], /--state-root: not used without --port/],
    [['--port', '0', '--state-root', join(scratch, 'nope')], /--state-root: '.*nope' is not a directory/],
    [['--port', '0', '--token-file', join(scratch, 'nope')], /--token-file: cannot read '.*nope' \(ENOENT\)/],
  ])('%j', async (flags, message) => {
    expect(process.env.QRL_BACKEND_TOKEN).toBeUndefined();
    // Refused before listening: an in-process main that bound the port would never return.
    const r = await runCli(['serve', '--policy', 'ar', ...flags]);
    expect(r.code, r.err).toBe(2);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toMatch(message);
  });
});

describe('qrl-sim run --backend http:// against a token-protected serve', () => {
  it('is refused without the token; runs with --token-file, and with QRL_BACKEND_TOKEN', async () => {
    const root = join(scratch, 'state');
    mkdirSync(root);
    const server = await serve(['--host', '127.0.0.1', '--token-file', tokenFile, '--state-root', root]);
    expect(server.err[0]).toMatch(/state root .*state; token required/);

    const refused = await runCli(['run', '--config', config, '--out', join(root, 'refused'), '--backend', server.url]);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(
      /info refused: unauthorized: missing token .*; set QRL_BACKEND_TOKEN or pass --token-file/,
    );
    expect(server.err.some((l) => /^refused request from \S+: missing token$/.test(l))).toBe(true);

    const out = join(root, 'run');
    const r = await runCli([
      'run',
      '--config',
      config,
      '--out',
      out,
      '--backend',
      server.url,
      '--token-file',
      tokenFile,
    ]);
    expect(r.code, r.err).toBe(0);
    expect(readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n')).toHaveLength(1);
    // a run does not shut down an HTTP backend it did not start: the same server serves the next run
    process.env.QRL_BACKEND_TOKEN = 'tok-cli-7c2e';
    try {
      const viaEnv = await runCli(['run', '--config', config, '--out', join(root, 'env'), '--backend', server.url]);
      expect(viaEnv.code, viaEnv.err).toBe(0);
    } finally {
      delete process.env.QRL_BACKEND_TOKEN;
    }
    const bye = await fetch(`${server.url}/rpc`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${readFileSync(tokenFile, 'utf8').trim()}`,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'shutdown', params: {} }),
    });
    expect(bye.status).toBe(200);
    expect(await server.exit).toBe(0);
    expect(existsSync(join(root, 'env', 'metrics.jsonl'))).toBe(true);
  }, 120_000);
});
