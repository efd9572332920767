// One line instead of a traceback (issue 40, item 7–8): the Python commands that miss a suite name it
// and the command that writes it (exit 2); numpy_cast.py --help answers without reading stdin; a run
// with one sample per group and a group-mean advantage warns that every advantage is 0.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from './io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-one-line-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const env = { ...process.env, PYTHONPATH: join(process.cwd(), 'python') };

describe('one line, not a traceback', () => {
  it('torch_check on a golden directory without library-casts names the suite and exits 2', () => {
    const dir = join(root, 'golden');
    const w = spawnSync(process.execPath, ['bin/qrl-sim.js', 'golden', '--suite', 'gemm', '--out', dir], {
      encoding: 'utf8',
    });
    expect(w.status, w.stderr).toBe(0);
    const r = spawnSync('python3', ['-m', 'qrl_golden.torch_check', '--device', 'cpu', dir], {
      encoding: 'utf8',
      env,
      timeout: 120_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).not.toMatch(/Traceback/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/library-casts/);
  }, 120_000);

  it('numpy_cast.py --help answers at once (stdin is not read)', () => {
    const r = spawnSync('python3', ['python/examples/numpy_cast.py', '--help'], {
      encoding: 'utf8',
      env,
      timeout: 30_000,
    });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/usage/i);
  });

  it('run with groupSize 1 and a group-mean advantage warns in one line, then runs', async () => {
    const config = join(root, 'g1.json');
    writeFileSync(
      config,
      JSON.stringify({
        steps: 1,
        task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
        policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 16 } },
        sft: { steps: 2, batchSize: 8, cache: false },
        rollout: { prompts: 2, groupSize: 1 },
        eval: { every: 0 },
      }),
    );
    const r = await runCli(['run', '--config', config, '--out', join(root, 'g1')]);
    expect(r.code, r.err).toBe(0);
    expect(r.err.split('\n').filter((l) => /warning: rollout\.groupSize is 1/.test(l))).toHaveLength(1);
  }, 120_000);
});
