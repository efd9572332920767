// Durable run files under concurrency: writeJsonAtomic from several worker threads of one process
// (they share a pid) never collides on its temp file. Not a test of JSONL appends.

import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { tempName } from '../../src/core/files.js';

const dir = mkdtempSync(join(tmpdir(), 'qrl-atomic-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('writeJsonAtomic', () => {
  it('temp names differ per call (pid + threadId + counter)', () => {
    expect(tempName('/x/a.json')).not.toBe(tempName('/x/a.json'));
    expect(tempName('/x/a.json')).toMatch(new RegExp(`^/x/a\\.json\\.tmp-${process.pid}-\\d+-\\d+$`));
  });

  it('8 worker threads × 20 writes of the same file: no failed rename, the file is whole, no temp left', async () => {
    const path = join(dir, 'shared.json');
    // The worker loads the TypeScript sources through tsx's require hook (its ESM hooks do not reach worker threads in Node 20).
    const tsxCjs = createRequire(import.meta.url).resolve('tsx/cjs/api');
    const entry = fileURLToPath(new URL('./atomic-worker.ts', import.meta.url));
    const code = `require(${JSON.stringify(tsxCjs)}).register(); require(${JSON.stringify(entry)});`;
    const workers = Array.from({ length: 8 }, (_, id) => new Worker(code, { eval: true, workerData: { path, writes: 20, id } }));
    const errors = (await Promise.all(workers.map((w) => new Promise<string[]>((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    })))).flat();
    expect(errors).toEqual([]);
    const value = JSON.parse(readFileSync(path, 'utf8')) as { id: number; i: number };
    expect(value.i).toBe(19);
    expect(readdirSync(dir).filter((f) => f.includes('.tmp-'))).toEqual([]);
  }, 120_000);
});
