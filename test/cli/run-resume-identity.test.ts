// `run --resume DIR --backend X` continues only on the backend the run ran on: another
// implementation, version, protocol, policy or served plan than config.json's `backend` is refused
// with exit 2 naming both (two backends' steps never mix under one run name).

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from './io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-resume-identity-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const serve = `node ${join(process.cwd(), 'bin/qrl-sim.js')} serve --policy ar --stdio`;
const small = {
  steps: 2,
  task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
  policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 16 } },
  sft: { steps: 2, batchSize: 8, cache: false },
  rollout: { prompts: 2, groupSize: 2 },
  eval: { every: 1, problems: 2 },
  checkpoint: { every: 1 },
  plan: 'bf16',
};

describe('run --resume onto another backend', () => {
  it('is refused with exit 2 naming the recorded and the served identity; the same backend resumes', async () => {
    const configPath = join(root, 'small.json');
    writeFileSync(configPath, JSON.stringify({ ...small, steps: 1 }));
    const out = join(root, 'run');
    const first = await runCli(['run', '--config', configPath, '--out', out, '--backend', serve]);
    expect(first.code, first.err).toBe(0);
    // the run as if it had been made by another release of the backend
    const file = join(out, 'config.json');
    const recorded = JSON.parse(readFileSync(file, 'utf8')) as { backend: Record<string, unknown> };
    writeFileSync(file, JSON.stringify({ ...recorded, backend: { ...recorded.backend, version: '0' } }));
    const refused = await runCli(['run', '--resume', out, '--steps', '2', '--backend', serve]);
    expect(refused.code).toBe(2);
    expect(refused.err.trim().split('\n')).toHaveLength(1);
    expect(refused.err).toMatch(/--backend: the run in '.*' ran on version "0"; this backend serves version "1"/);
    writeFileSync(file, JSON.stringify(recorded));
    const resumed = await runCli(['run', '--resume', out, '--steps', '2', '--backend', serve]);
    expect(resumed.code, resumed.err).toBe(0);
  }, 300_000);
});
