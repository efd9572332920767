// Durable run files under concurrency: writeJsonAtomic from several worker threads of one process
// (they share a pid) never collides on its temp file. Not a test of JSONL appends.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { removeStaleTemps, tempName } from '../../src/core/files.js';

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
    const workers = Array.from(
      { length: 8 },
      (_, id) => new Worker(code, { eval: true, workerData: { path, writes: 20, id } }),
    );
    const errors = (
      await Promise.all(
        workers.map(
          (w) =>
            new Promise<string[]>((resolve, reject) => {
              w.once('message', resolve);
              w.once('error', reject);
            }),
        ),
      )
    ).flat();
    expect(errors).toEqual([]);
    const value = JSON.parse(readFileSync(path, 'utf8')) as { id: number; i: number };
    expect(value.i).toBe(19);
    expect(readdirSync(dir).filter((f) => f.includes('.tmp-'))).toEqual([]);
  }, 120_000);
});

describe('removeStaleTemps', () => {
  it.skipIf(process.platform !== 'linux')(
    'removes the temp of a zombie (killed, never reaped: signal 0 still reaches it) and keeps a live one',
    async () => {
      // `sleep 0 &` exits at once and stays a zombie: its parent execs `sleep 5`, which never waits for it
      const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 5'], { stdio: ['ignore', 'pipe', 'ignore'] });
      try {
        const pid = await new Promise<number>((resolve) =>
          parent.stdout!.once('data', (d: Buffer) => resolve(Number(String(d).trim()))),
        );
        let state = '';
        for (let i = 0; i < 100 && state !== 'Z'; i++) {
          await new Promise((r) => setTimeout(r, 20));
          const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
          state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
        }
        expect(state).toBe('Z');
        expect(() => process.kill(pid, 0)).not.toThrow();
        const dir = mkdtempSync(join(tmpdir(), 'qrl-stale-'));
        const zombieTemp = join(dir, `step-000005.tmp-${pid}-0-6`);
        const liveTemp = join(dir, `step-000005.tmp-${parent.pid}-0-7`);
        mkdirSync(zombieTemp);
        mkdirSync(liveTemp);
        expect(removeStaleTemps(dir)).toEqual([`step-000005.tmp-${pid}-0-6`]);
        expect([existsSync(zombieTemp), existsSync(liveTemp)]).toEqual([false, true]);
        rmSync(dir, { recursive: true, force: true });
      } finally {
        parent.kill('SIGKILL');
      }
    },
  );
});
