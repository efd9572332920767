// A backend command's leading `qrl-sim` runs this CLI: the help examples that serve qrl-sim inside
// --backend work under `node bin/qrl-sim.js` with no `qrl-sim` on PATH (docs/getting-started.md
// calls the two equivalent).
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveBackendAddress, SELF_BIN } from '../../src/cli/self-command.js';

const repo = resolve(__dirname, '..', '..');

describe('resolveBackendAddress', () => {
  it('replaces a leading qrl-sim word with node and bin/qrl-sim.js, and nothing else', () => {
    expect(SELF_BIN).toBe(join(repo, 'bin', 'qrl-sim.js'));
    expect(
      resolveBackendAddress('qrl-sim serve --policy ar --stdio', '/opt/node bin/node', '/r/bin/qrl-sim.js'),
    ).toEqual({ command: `'/opt/node bin/node' /r/bin/qrl-sim.js serve --policy ar --stdio` });
    expect(resolveBackendAddress('  qrl-sim', '/n', '/b.js')).toEqual({ command: '/n /b.js' });
    expect(resolveBackendAddress('qrl-simulator serve', '/n', '/b.js')).toEqual({ command: 'qrl-simulator serve' });
    expect(resolveBackendAddress('PYTHONPATH=python python3 -m qrl_backend.numpy_ar', '/n', '/b.js')).toEqual({
      command: 'PYTHONPATH=python python3 -m qrl_backend.numpy_ar',
    });
    expect(resolveBackendAddress('http://127.0.0.1:8000', '/n', '/b.js')).toEqual({ url: 'http://127.0.0.1:8000' });
  });

  it('node bin/qrl-sim.js backend-check --backend "qrl-sim serve …" runs without qrl-sim on PATH', () => {
    const PATH = `${dirname(process.execPath)}:/usr/bin:/bin`;
    expect(spawnSync('sh', ['-c', 'command -v qrl-sim'], { env: { PATH } }).status).not.toBe(0);
    const r = spawnSync(
      process.execPath,
      [
        join(repo, 'bin', 'qrl-sim.js'),
        'backend-check',
        '--backend',
        'qrl-sim serve --policy ar --stdio',
        '--batch',
        '4',
      ],
      {
        cwd: repo,
        encoding: 'utf8',
        env: { ...process.env, PATH },
      },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/conformance: all \d+ checks passed/);
  }, 120_000);
});
