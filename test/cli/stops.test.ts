// Every way a long command stops: SIGINT and SIGTERM stop after the current step (or inside the
// warm start) with whole files, a second signal stops at once, a cut standard output stops the
// same way; --resume then gives the files of an uninterrupted run byte for byte. The CLI is
// spawned and signalled when it prints a progress marker (never after a sleep).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from './io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-stops-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(() => {
  if (!existsSync('dist/cli/main.js')) throw new Error('dist/ missing: run npm run build');
});

const base = {
  steps: 12,
  task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
  policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
  sft: { steps: 150, batchSize: 8, cache: false },
  rollout: { prompts: 2, groupSize: 4 },
  eval: { every: 4, problems: 4 },
  checkpoint: { every: 0 },
};
function configFile(name: string, config: unknown): string {
  const path = join(root, `${name}.json`);
  writeFileSync(path, JSON.stringify(config));
  return path;
}
const runConfig = configFile('run', base);

interface Spawned {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  /** Resolves when stdout or stderr matches `re`. */
  waitFor(re: RegExp): Promise<void>;
  exit: Promise<number | null>;
}

function qrl(args: string[]): Spawned {
  const child = spawn(process.execPath, ['bin/qrl-sim.js', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: process.cwd(),
  });
  let out = '';
  let err = '';
  const waiters: { re: RegExp; resolve: () => void }[] = [];
  const check = (): void => {
    for (const w of [...waiters])
      if (w.re.test(out) || w.re.test(err)) (waiters.splice(waiters.indexOf(w), 1), w.resolve());
  };
  child.stdout!.on('data', (d: Buffer) => ((out += d.toString()), check()));
  child.stderr!.on('data', (d: Buffer) => ((err += d.toString()), check()));
  // A process ended by a signal reads as the shell shows it: 128 + the signal's number.
  const exit = new Promise<number | null>((resolve) =>
    child.on('close', (c, signal) => resolve(c ?? (signal === 'SIGINT' ? 130 : signal === 'SIGTERM' ? 143 : null))),
  );
  return {
    child,
    out: () => out,
    err: () => err,
    waitFor: (re) =>
      new Promise<void>((resolve, reject) => {
        waiters.push({ re, resolve });
        check();
        void exit.then(() => reject(new Error(`exited before ${re}: ${out}\n${err}`)));
      }),
    exit,
  };
}

const DETERMINISTIC = ['config.json', 'metrics.jsonl', 'eval.jsonl'];
function expectSameRun(a: string, b: string): void {
  for (const f of DETERMINISTIC)
    expect(readFileSync(join(a, f), 'utf8'), `${a}/${f}`).toBe(readFileSync(join(b, f), 'utf8'));
}

/** A pid that no process has now (a child that already exited). */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

const reference = join(root, 'reference');
beforeAll(async () => {
  const r = await runCli(['run', '--config', runConfig, '--out', reference]);
  expect(r.code, r.err).toBe(0);
});

describe('run', () => {
  it('SIGTERM stops after the current step with a checkpoint; a stale temp is cleaned; --resume is byte-identical', async () => {
    const out = join(root, 'term');
    const p = qrl(['run', '--config', runConfig, '--out', out]);
    await p.waitFor(/step 2 reward/);
    p.child.kill('SIGTERM');
    expect(await p.exit, p.err()).toBe(143);
    expect(p.err()).toMatch(/stopped \(SIGTERM\) at step \d+ with a checkpoint; continue with: qrl-sim run --resume/);
    const steps = readdirSync(join(out, 'checkpoints'));
    expect(steps).toHaveLength(1);
    // What a process killed while saving leaves: a temp checkpoint directory.
    const stale = join(out, 'checkpoints', `step-000099.tmp-${deadPid()}-0-1`);
    mkdirSync(stale);
    const resumed = await runCli(['run', '--resume', out]);
    expect(resumed.code, resumed.err).toBe(0);
    expect(existsSync(stale)).toBe(false);
    expectSameRun(out, reference);
  });

  it('SIGINT during the warm start stops there; --resume starts over from step 0, byte-identical', async () => {
    const out = join(root, 'warm');
    const p = qrl(['run', '--config', runConfig, '--out', out]);
    await p.waitFor(/warm start: \d+\/150/);
    p.child.kill('SIGINT');
    expect(await p.exit, p.err()).toBe(130);
    if (/before step 1/.test(p.err())) {
      expect(readdirSync(out)).toEqual(['config.json']);
      expect(p.out()).not.toMatch(/step 1 reward/);
    }
    const resumed = await runCli(['run', '--resume', out]);
    expect(resumed.code, resumed.err).toBe(0);
    expectSameRun(out, reference);
  });

  it('a second signal stops at once, with every file whole, and --resume still finishes the run', async () => {
    const out = join(root, 'twice');
    const p = qrl(['run', '--config', runConfig, '--out', out]);
    await p.waitFor(/step 1 reward/);
    p.child.kill('SIGINT');
    await p.waitFor(/Ctrl-C again/);
    p.child.kill('SIGINT');
    expect(await p.exit).toBe(130);
    for (const f of ['metrics.jsonl', 'eval.jsonl']) {
      const text = existsSync(join(out, f)) ? readFileSync(join(out, f), 'utf8') : '';
      for (const line of text.split('\n').filter((l) => l !== '')) expect(() => JSON.parse(line)).not.toThrow();
    }
    JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
    const resumed = await runCli(['run', '--resume', out]);
    expect(resumed.code, resumed.err).toBe(0);
    expectSameRun(out, reference);
  });

  it('a cut standard output (| head) stops cleanly instead of aborting; --resume is byte-identical', async () => {
    const out = join(root, 'pipe');
    const p = qrl(['run', '--config', runConfig, '--out', out]);
    await p.waitFor(/step 1 reward/);
    p.child.stdout!.destroy();
    expect(await p.exit, p.err()).toBe(141);
    expect(p.err()).toMatch(/stopped \(EPIPE\)/);
    const resumed = await runCli(['run', '--resume', out]);
    expect(resumed.code, resumed.err).toBe(0);
    expectSameRun(out, reference);
  });
});

describe('sweep', () => {
  it('SIGINT stops every run whole; sweep --resume DIR gives the uninterrupted sweep', async () => {
    const config = configFile('sweep-config', { ...base, steps: 8 });
    // One worker: when the first run reports done, the second has just started, so the signal
    // always finds work left (with two workers both runs end together and the stop can miss).
    const args = ['--config', config, '--grid', 'correction=none,tis', '--workers', '1'];
    const whole = join(root, 'sweep-whole');
    const w = await runCli(['sweep', ...args, '--out', whole]);
    expect(w.code, w.err).toBe(0);
    const out = join(root, 'sweep-cut');
    const p = qrl(['sweep', ...args, '--out', out]);
    await p.waitFor(/\[1\/2\]/);
    p.child.kill('SIGINT');
    expect(await p.exit, p.err()).toBe(130);
    expect(p.err()).toMatch(/stopped \(SIGINT\): \d of 2 runs finished.*continue with: qrl-sim sweep --resume/);
    expect(existsSync(join(out, 'summary.json'))).toBe(false);
    const resumed = await runCli(['sweep', '--resume', out]);
    expect(resumed.code, resumed.err).toBe(0);
    for (const run of ['correction-none/seed-0', 'correction-tis/seed-0'])
      expectSameRun(join(out, run), join(whole, run));
    expect(readFileSync(join(out, 'sweep.json'), 'utf8')).toBe(
      readFileSync(join(whole, 'sweep.json'), 'utf8').split(whole).join(out),
    );
    // The summary agrees except for wall-clock time per step.
    const strip = (dir: string): unknown =>
      JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8'), (k, v) => (/time|seconds/i.test(k) ? undefined : v));
    expect(strip(out)).toEqual(strip(whole));
  });

  it('--resume refuses other options and a directory without a sweep', async () => {
    const empty = join(root, 'no-sweep');
    mkdirSync(empty);
    expect((await runCli(['sweep', '--resume', empty, '--seeds', '2'])).err).toMatch(/--seeds: not used with --resume/);
    expect((await runCli(['sweep', '--resume', empty])).err).toMatch(/holds no sweep/);
  });
});
