// The transformers backend warm-started by qrl-sim (capabilities.sftExamples, docs/adapter.md §3): the
// driver sends the task's supervised pairs with `warmStart`, the backend trains on them (python/qrl_backend/hf/sft.py)
// and comes out solving `reverse` (held-out greedy accuracy at step 0); the second run loads the
// warm start from the cache, whose key holds the backend's identity, and gives the same files.
// The full-size measurement (the default reverse task, 300 steps) is docs/adapter.md's; this one is
// a shorter task so that it stays fast.

import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveRunConfig } from '../../src/rl/grpo/config.js';
import { warmStartCacheDir } from '../../src/runs/run.js';

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, '..', '..');
const root = mkdtempSync(join(tmpdir(), 'qrl-hf-sft-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const backend = `PYTHONPATH=${repo}/python python3 -m qrl_backend.hf --plan hf-bf16`;
const config = {
  seed: 0,
  steps: 1,
  task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
  policy: { kind: 'ar' },
  plan: 'backend',
  sft: { steps: 100, batchSize: 32, lr: 0.003, cache: true },
  rollout: { prompts: 2, groupSize: 2 },
  optim: { lr: 0.003 },
  eval: { every: 1, problems: 16 },
};

/** `qrl-sim run` in `root` (so the warm-start cache is root/.cache/sft). */
async function qrlRun(out: string): Promise<string> {
  const { stdout, stderr } = await run(
    process.execPath,
    [join(repo, 'bin', 'qrl-sim.js'), 'run', '--config', 'c.json', '--out', out, '--backend', backend, '--no-report'],
    { cwd: root, maxBuffer: 1 << 24 },
  );
  return stdout + stderr;
}

describe('a warm start on the transformers backend (capabilities.sftExamples)', () => {
  it('solves reverse at step 0 and is cached under a key holding the backend identity', async () => {
    writeFileSync(join(root, 'c.json'), JSON.stringify(config));
    const first = await qrlRun('a');
    expect(first).toMatch(/warm start: 100 supervised steps \(sft\/steps=100\.0000 sft\/loss_first=/);
    const eval0 = JSON.parse(readFileSync(join(root, 'a', 'eval.jsonl'), 'utf8').split('\n')[0]!) as Record<string, number>;
    expect(eval0['step']).toBe(0);
    expect(eval0['eval/rollout/greedy_accuracy']).toBeGreaterThanOrEqual(0.5);
    expect(eval0['eval/trainer/greedy_accuracy']).toBeGreaterThanOrEqual(0.5);
    // one cache entry, not the key the toy's warm start of the same config has
    const entries = readdirSync(join(root, '.cache', 'sft'));
    expect(entries).toHaveLength(1);
    const toyKey = warmStartCacheDir(join(root, '.cache', 'sft'), resolveRunConfig(config));
    expect(join(root, '.cache', 'sft', entries[0]!)).not.toBe(toyKey);
    const second = await qrlRun('b');
    expect(second).toMatch(/warm start: loaded .*\.cache\/sft\//);
    expect(second).not.toMatch(/supervised steps/);
    for (const file of ['eval.jsonl', 'metrics.jsonl'])
      expect(readFileSync(join(root, 'b', file), 'utf8')).toBe(readFileSync(join(root, 'a', file), 'utf8'));
  }, 600_000);
});
