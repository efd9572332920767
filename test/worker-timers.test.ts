// test/worker-timers.mjs (preloaded into vitest's workers): a reply that reaches a process while
// its event loop is busy past a long timer is read before that timer's callback runs — the cause
// of "Timeout calling onTaskUpdate" under load. Measured on a child process with a 200 ms "long" timer.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const preload = fileURLToPath(new URL('./worker-timers.mjs', import.meta.url));

// The child asks its parent over IPC, arms a 200 ms timeout as birpc does, then stays busy for 2 s:
// the reply arrives during the busy stretch. It prints which came first.
const child = `
let done = false;
const finish = (what) => { if (!done) { done = true; process.stdout.write(what); process.disconnect(); } };
process.on('message', () => finish('reply'));
process.send('ping');
setTimeout(() => finish('timeout'), 200);
const t0 = Date.now();
while (Date.now() - t0 < 2000);
`;

function race(execArgv: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [...execArgv, '-e', child], {
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
      env: { ...process.env, QRL_LONG_TIMER_MS: '200' },
    });
    let out = '';
    p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    p.on('message', () => p.send('pong'));
    p.on('error', reject);
    p.on('close', () => resolve(out));
  });
}

describe('worker timers', () => {
  it('without the preload the expired timer wins over the waiting reply; with it the reply is read first', async () => {
    expect(await race([])).toBe('timeout');
    expect(await race(['--import', preload])).toBe('reply');
  });
});
