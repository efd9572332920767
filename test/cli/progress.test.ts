// Progress reporting (issue #16): the progress line on standard error, the sweep line, and the
// warm-start callbacks, which must not change any result.
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../src/cli/command.js';
import { eta, formatSeconds, progressLine } from '../../src/cli/progress.js';
import { sweepProgress } from '../../src/cli/sweep-progress.js';
import { arConfig, createArPolicy, trainSupervised } from '../../src/policies/index.js';
import { diffusionWarmStart } from '../../src/policies/diffusion/warmstart.js';
import { makeTask } from '../../src/tasks/index.js';
import { smallModel } from '../policies/diffusion/helpers.js';

function fakeIo(tty: boolean): CliIo & { lines: string[]; statuses: string[]; outs: string[] } {
  const lines: string[] = [];
  const statuses: string[] = [];
  const outs: string[] = [];
  return {
    lines,
    statuses,
    outs,
    out: (t) => outs.push(t),
    err: (t) => lines.push(t),
    readStdin: async () => '',
    ...(tty ? { status: (t: string) => statuses.push(t) } : {}),
  };
}

describe('progress line', () => {
  it('on a terminal every update replaces the status line; done clears it', () => {
    const io = fakeIo(true);
    const p = progressLine(io);
    p.update('a');
    p.update('b');
    p.done();
    expect(io.statuses).toEqual(['a', 'b', '']);
    expect(io.lines).toEqual([]);
    expect(io.outs).toEqual([]);
  });

  it('without a terminal: plain lines on stderr, at most one per period', () => {
    const io = fakeIo(false);
    let t = 0;
    const p = progressLine(io, 10_000, () => t);
    p.update('first');
    t = 5_000;
    p.update('skipped');
    t = 10_000;
    p.update('second');
    expect(io.lines).toEqual(['first', 'second']);
    expect(io.outs).toEqual([]);
  });

  it('formats durations and the ETA', () => {
    expect(formatSeconds(42)).toBe('42 s');
    expect(formatSeconds(185)).toBe('3 min 05 s');
    expect(formatSeconds(3720)).toBe('1 h 02 min');
    expect(eta(0, 10, 5)).toBe('—');
    expect(eta(2, 10, 10)).toBe('40 s');
  });

  it('the sweep line shows runs done, running, failed and the ETA', () => {
    const io = fakeIo(true);
    let t = 0;
    const s = sweepProgress(io, 2, 6, () => t);
    t = 20_000;
    s.runDone(2, 6, true);
    t = 30_000;
    s.runDone(3, 6, false);
    s.stop();
    expect(io.statuses[0]).toBe('sweep: 0/6 done, 2 running, elapsed 0 s, ETA —');
    expect(io.statuses).toContain('sweep: 2/6 done, 2 running, elapsed 20 s, ETA 40 s');
    expect(io.statuses).toContain('sweep: 3/6 done, 2 running, 1 failed, elapsed 30 s, ETA 30 s');
    expect(io.statuses.at(-1)).toBe('');
  });
});

describe('warm-start progress callbacks', () => {
  it('trainSupervised calls onProgress once per step and its result is unchanged', () => {
    const task = makeTask('reverse', { minLength: 3, maxLength: 4 });
    const config = arConfig({
      vocabSize: task.vocabSize,
      maxLen: task.promptLength + task.responseLength,
      C: 16,
      H: 2,
      layers: 1,
      hidden: 32,
    } as never);
    const a = trainSupervised(createArPolicy(config, 1), task, { steps: 4, batchSize: 4, seed: 3 });
    const calls: [number, number][] = [];
    const b = trainSupervised(createArPolicy(config, 1), task, {
      steps: 4,
      batchSize: 4,
      seed: 3,
      onProgress: (d, t) => calls.push([d, t]),
    });
    expect(calls).toEqual([
      [1, 4],
      [2, 4],
      [3, 4],
      [4, 4],
    ]);
    expect(b.losses).toEqual(a.losses);
  });

  it('diffusionWarmStart calls onProgress once per update and its result is unchanged', () => {
    const task = makeTask('reverse', { maxLength: 4 });
    const model = smallModel(task.vocabSize, { C: 16, H: 2, hidden: 32, layers: 1, maxLen: 12 });
    const a = diffusionWarmStart(model, task, { steps: 3, batchSize: 4, genLength: 5, seed: 2 });
    const calls: number[] = [];
    const b = diffusionWarmStart(model, task, {
      steps: 3,
      batchSize: 4,
      genLength: 5,
      seed: 2,
      onProgress: (d) => calls.push(d),
    });
    expect(calls).toEqual([1, 2, 3]);
    expect(b.losses).toEqual(a.losses);
    expect(Array.from(b.store.data)).toEqual(Array.from(a.store.data));
  });
});

describe('run progress', () => {
  it('warm start and evaluation report progress on stderr, never on stdout or into the run files', async () => {
    const { mkdtempSync, readFileSync, rmSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { runCli } = await import('./io.js');
    const dir = mkdtempSync(join(tmpdir(), 'qrl-progress-'));
    try {
      const config = join(dir, 'c.json');
      writeFileSync(
        config,
        JSON.stringify({
          steps: 1,
          task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
          policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
          sft: { steps: 3, batchSize: 4, cache: false },
          rollout: { prompts: 2, groupSize: 2 },
          eval: { every: 1, problems: 2 },
        }),
      );
      const r = await runCli(['run', '--config', config, '--out', join(dir, 'run')]);
      expect(r.code, r.err).toBe(0);
      expect(r.err).toMatch(/warm start: 1\/3 supervised steps/);
      expect(r.err).toMatch(/evaluating at step 0/);
      expect(r.out).not.toMatch(/warm start: 1\/3|evaluating/);
      for (const f of ['metrics.jsonl', 'eval.jsonl', 'config.json'])
        expect(readFileSync(join(dir, 'run', f), 'utf8')).not.toMatch(/warm start:|evaluating/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
