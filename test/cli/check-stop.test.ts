// check's stopping discipline: SIGINT/SIGTERM start no further case, end the --impl process group,
// print what passed and exit 128 + the signal.
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const repo = resolve(__dirname, '..', '..');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('check stops on a signal', () => {
  it.each([
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)(
    '%s: exit %i, the implementation ended, the cases that passed printed',
    async (signal, code) => {
      // The implementation says its pid on standard error (check passes it through): the progress marker.
      const impl = `sh -c 'echo impl-pid=$$ >&2; exec python3 docs/examples/check_numpy_estimators.py'`;
      const child = spawn(
        process.execPath,
        [
          join(repo, 'bin', 'qrl-sim.js'),
          'check',
          '--impl',
          impl,
          '--suite',
          'estimators',
          '--config',
          'docs/examples/check-tis-ppo.json',
          '--runs',
          '100000',
        ],
        {
          cwd: repo,
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stdout = '';
      let stderr = '';
      let pid = 0;
      child.stdout.setEncoding('utf8').on('data', (t: string) => (stdout += t));
      child.stderr.setEncoding('utf8').on('data', (t: string) => {
        stderr += t;
        const m = /impl-pid=(\d+)/.exec(stderr);
        if (m && pid === 0) {
          pid = Number(m[1]);
          child.kill(signal);
        }
      });
      const status = await new Promise<number | null>((res) => child.on('exit', (c) => res(c)));
      expect(pid, stderr).toBeGreaterThan(0);
      expect(status, `${stdout}\n${stderr}`).toBe(code);
      expect(stdout).toMatch(new RegExp(`check estimators: stopped \\(${signal}\\) after \\d+ of 100000 cases passed`));
      expect(alive(pid)).toBe(false);
    },
    120_000,
  );
});
