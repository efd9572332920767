// Processes that end: a backend (or a `check --impl`) that hangs, stays silent, babbles or does not
// exist ends `run`, `backend-check` and `check` within the timeout plus a few seconds, exit ≠ 0, with
// its whole process group (a child of its shell included) killed; Ctrl-C reaches only the driver,
// which stops after the step with a checkpoint and then ends the backend.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-lifetime-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const silent = (name: string): { command: string; pidFile: string } => {
  const pidFile = join(root, `${name}.pid`);
  return { command: `sh ${join(process.cwd(), 'test/fixtures/backends/silent.sh')} ${pidFile}`, pidFile };
};
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
/** The child of the silent backend's shell, by the pid it wrote; dead once the group was ended. */
async function childDead(pidFile: string): Promise<boolean> {
  expect(existsSync(pidFile)).toBe(true);
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  for (let i = 0; i < 50 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
  return !alive(pid);
}
const config = join(root, 'small.json');
writeFileSync(
  config,
  JSON.stringify({
    steps: 200,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
    sft: { steps: 2, batchSize: 8, cache: false },
    rollout: { prompts: 2, groupSize: 2 },
    eval: { every: 0, problems: 2 },
    checkpoint: { every: 0 },
  }),
);

describe('backends that never end', () => {
  it('run: a silent backend (a child of its shell) times out on the first info and its group is killed', async () => {
    const { command, pidFile } = silent('run');
    const r = await runCli([
      'run',
      '--config',
      config,
      '--out',
      join(root, 'run-silent'),
      '--backend',
      command,
      '--timeout',
      '2000',
    ]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/no answer to info within 2000 ms/);
    expect(await childDead(pidFile)).toBe(true);
  }, 60_000);

  it('backend-check: a silent backend times out on the first info and its group is killed', async () => {
    const { command, pidFile } = silent('check');
    const r = await runCli(['backend-check', '--backend', command, '--timeout', '2000']);
    expect(r.code).toBe(2); // a backend that cannot start: not a verdict on its behaviour
    expect(r.err).toMatch(/no answer to info within 2000 ms/);
    expect(await childDead(pidFile)).toBe(true);
  }, 60_000);

  it.each([['backend-check'], ['run']])(
    '%s: a babbling backend (yes) ends with one line',
    async (cmd) => {
      const args =
        cmd === 'run'
          ? ['run', '--config', config, '--out', join(root, 'run-yes'), '--backend', 'yes']
          : ['backend-check', '--backend', 'yes'];
      const r = await runCli(args);
      expect(r.code).toBe(cmd === 'run' ? 1 : 2);
      expect(r.err).toMatch(/sent a line that is not JSON: "y"/);
    },
    60_000,
  );

  it('a backend command that does not exist says so', async () => {
    const r = await runCli(['backend-check', '--backend', 'qrl-no-such-backend-command']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/exit code 127 \(command not found\)/);
    expect(r.err).not.toMatch(/still running/);
  }, 60_000);

  it('check --impl: a silent implementation times out and its group is killed', async () => {
    const { command, pidFile } = silent('impl');
    const r = await runCli(['check', '--impl', command, '--suite', 'casts', '--runs', '3', '--timeout', '2000']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/no answer to cast within 2000 ms/);
    expect(await childDead(pidFile)).toBe(true);
  }, 60_000);
});

describe('Ctrl-C on a terminal', () => {
  it('reaches only the driver: the run stops after the step with a checkpoint and ends the backend', async () => {
    const out = join(root, 'sigint');
    const serve = `node ${join(process.cwd(), 'bin/qrl-sim.js')} serve --policy ar --stdio`;
    // the driver in a process group of its own, as a terminal's foreground job: SIGINT goes to the group
    const driver = spawn('node', ['bin/qrl-sim.js', 'run', '--config', config, '--out', out, '--backend', serve], {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    driver.stderr.on('data', (t: Buffer) => (err += t.toString()));
    driver.stdout.resume();
    const code = await new Promise<number | null>((resolve) => {
      driver.on('exit', (c) => resolve(c));
      const poll = setInterval(() => {
        if (existsSync(join(out, 'metrics.jsonl')) && readFileSync(join(out, 'metrics.jsonl'), 'utf8').length > 0) {
          clearInterval(poll);
          process.kill(-driver.pid!, 'SIGINT');
        }
      }, 100);
    });
    expect(err).not.toMatch(/killed by SIGINT/);
    expect(err).toMatch(/stopping after this step/);
    expect(code).toBe(130);
    const steps = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').length;
    expect(steps).toBeLessThan(200);
    expect(existsSync(join(out, 'checkpoints', `step-${String(steps).padStart(6, '0')}`, 'checkpoint.json'))).toBe(
      true,
    );
  }, 120_000);
});

describe('no process outlives the driver', () => {
  const waitFor = async (cond: () => boolean, ms: number): Promise<boolean> => {
    for (let i = 0; i < ms / 100 && !cond(); i++) await new Promise((r) => setTimeout(r, 100));
    return cond();
  };
  const pidOf = (file: string): number => Number(readFileSync(file, 'utf8').trim());

  it.each([
    [
      'qrl-sim serve',
      (pidFile: string) =>
        `sh -c 'echo $$ > ${pidFile}; exec node ${join(process.cwd(), 'bin/qrl-sim.js')} serve --policy ar --stdio'`,
    ],
    [
      'the Python SDK (numpy_ar)',
      (pidFile: string) =>
        `sh -c 'echo $$ > ${pidFile}; PYTHONPATH=${join(process.cwd(), 'python')} exec python3 -m qrl_backend.numpy_ar'`,
    ],
  ])(
    'a driver killed with SIGKILL mid-run takes %s with it',
    async (_name, command) => {
      const pidFile = join(root, `kill9-${_name.replace(/\W+/g, '-')}.pid`);
      const out = join(root, `kill9-${_name.replace(/\W+/g, '-')}`);
      const driver = spawn(
        'node',
        ['bin/qrl-sim.js', 'run', '--config', config, '--out', out, '--backend', command(pidFile)],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let err = '';
      driver.stderr.on('data', (t: Buffer) => (err += t.toString()));
      const started = await waitFor(
        () => existsSync(join(out, 'metrics.jsonl')) && readFileSync(join(out, 'metrics.jsonl'), 'utf8').length > 0,
        60_000,
      );
      expect(started, err).toBe(true);
      const backend = pidOf(pidFile);
      expect(alive(backend)).toBe(true);
      driver.kill('SIGKILL');
      expect(await waitFor(() => !alive(backend), 10_000)).toBe(true);
    },
    120_000,
  );

  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const)(
    '%s while waiting for the first info ends the backend group and says so',
    async (signal, code) => {
      const { command, pidFile } = silent(`first-info-${signal}`);
      const driver = spawn(
        'node',
        [
          'bin/qrl-sim.js',
          'run',
          '--config',
          config,
          '--out',
          join(root, `first-info-${signal}`),
          '--backend',
          command,
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let err = '';
      driver.stderr.on('data', (t: Buffer) => (err += t.toString()));
      expect(await waitFor(() => existsSync(pidFile), 20_000)).toBe(true);
      const exited = new Promise<number | null>((resolve) => driver.on('exit', (c) => resolve(c)));
      driver.kill(signal);
      expect(await exited).toBe(code);
      expect(err).toMatch(new RegExp(`qrl-sim run: ${signal} while waiting for the backend's first info`));
      expect(await childDead(pidFile)).toBe(true);
    },
    60_000,
  );
});
