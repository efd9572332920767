// A spawned command that is not found (the shell exits 127) is bad input: `run --backend CMD` and
// `check --impl CMD` exit 2 with one line naming the option and the command; a command that starts and
// then fails is still a failure of the backend or implementation (exit 1).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from './io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-backend-missing-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const config = join(root, 'config.json');
writeFileSync(
  config,
  JSON.stringify({
    steps: 2,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
    sft: { steps: 2, batchSize: 8, cache: false },
    rollout: { prompts: 2, groupSize: 4 },
  }),
);

describe('a spawned command that is not there', () => {
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

  it('check --impl: exit 2 with one line naming --impl and the command', async () => {
    const command = 'qrl-no-such-impl-command --serve';
    const r = await runCli(['check', '--impl', command, '--suite', 'casts', '--runs', '2']);
    expect(r.code, r.err).toBe(2);
    expect(r.err.split('\n').filter((l) => l.startsWith('qrl-sim'))).toEqual([
      `qrl-sim check: --impl: command not found: '${command}' (the shell exited with 127)`,
    ]);
    const fails = await runCli(['check', '--impl', 'sh -c "exit 3"', '--suite', 'casts', '--runs', '2']);
    expect(fails.code, fails.err).toBe(1);
  });
});
