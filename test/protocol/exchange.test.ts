// A recorded stdio exchange of a short real run (test/fixtures/exchange/run.jsonl: `qrl-sim run` with
// run.json against `qrl-sim serve --stdio`, recorded by record-proxy.ts) replayed by the driver: the
// run sends exactly the recorded requests (a replay backend answers with the recorded responses and
// stops at the first request that differs) and writes the metrics of the in-process run. The Python
// SDK replays the same file through its codec (python/tests/test_exchange.py).

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-exchange-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const fixture = join(process.cwd(), 'test/fixtures/exchange');

describe('the recorded exchange', () => {
  it('is what the driver sends today, and replaying it gives the in-process metrics', async () => {
    const replay = `node --import tsx ${join(fixture, 'replay-backend.ts')} ${join(fixture, 'run.jsonl')}`;
    const r = await runCli([
      'run',
      '--config',
      join(fixture, 'run.json'),
      '--out',
      join(root, 'replayed'),
      '--backend',
      replay,
      '--timeout',
      '60000',
    ]);
    expect(r.code, r.err).toBe(0);
    const inproc = await runCli(['run', '--config', join(fixture, 'run.json'), '--out', join(root, 'inproc')]);
    expect(inproc.code, inproc.err).toBe(0);
    expect(readFileSync(join(root, 'replayed', 'metrics.jsonl'), 'utf8')).toBe(
      readFileSync(join(root, 'inproc', 'metrics.jsonl'), 'utf8'),
    );
    expect(readFileSync(join(root, 'replayed', 'eval.jsonl'), 'utf8')).toBe(
      readFileSync(join(root, 'inproc', 'eval.jsonl'), 'utf8'),
    );
  }, 120_000);
});
