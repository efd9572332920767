// `qrl-sim run --backend CMD` where CMD is not found (the shell exits 127) is bad input: exit 2 and one
// line naming --backend and the command; a backend that starts and then fails still exits 1.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from './io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-backend-missing-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const config = join(root, 'config.json');
writeFileSync(config, JSON.stringify({ steps: 2, task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } }, policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } }, sft: { steps: 2, batchSize: 8, cache: false }, rollout: { prompts: 2, groupSize: 4 } }));

describe('run --backend with a command that is not there', () => {
  it('exits 2 with one line naming --backend and the command', async () => {
    const command = 'qrl-no-such-backend-command --stdio';
    const r = await runCli(['run', '--config', config, '--out', join(root, 'missing'), '--backend', command]);
    expect(r.code, r.err).toBe(2);
    const ours = r.err.split('\n').filter((l) => l.startsWith('qrl-sim'));
    expect(ours).toEqual([`qrl-sim run: --backend: command not found: '${command}' (the shell exited with 127)`]);
  });

  it('a command that runs and exits with another status is a backend failure (exit 1), not bad input', async () => {
    const r = await runCli(['run', '--config', config, '--out', join(root, 'fails'), '--backend', 'sh -c "exit 3"']);
    expect(r.code, r.err).toBe(1);
    expect(r.err).toMatch(/qrl-sim run: backend 'sh -c "exit 3"': .*exit code 3/);
  });
});
