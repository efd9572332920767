// The package as a user gets it: `npm pack`, installed into a fresh project (no repo around it), runs
// the README's commands, takes a bundled config by name, type-checks with skipLibCheck false, and
// says ESM-only to require(); the wheel of the shipped python/ installs into a fresh venv, where
// `python -m qrl_backend.hf --help` answers without torch and the pytest plugin loads once both ways.
// About a minute: one pack, one npm install (the npm cache first), one wheel.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repo = resolve(__dirname, '..', '..');
const work = mkdtempSync(join(tmpdir(), 'qrl-install-'));
const project = join(work, 'project');
const installed = join(project, 'node_modules', 'qrl-sim');
let installLog = '';
afterAll(() => rmSync(work, { recursive: true, force: true }));

function sh(cmd: string, args: string[], cwd = project): string {
  const r = spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: exit ${r.status}\n${r.stdout}\n${r.stderr}`);
  return r.stdout + r.stderr;
}

beforeAll(() => {
  sh('npm', ['pack', '--silent', '--pack-destination', work], repo);
  const tarball = join(work, readdirSync(work).find((f) => f.endsWith('.tgz'))!);
  mkdirSync(project);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'user-project', version: '1.0.0', private: true, type: 'module' }),
  );
  // --offline cannot resolve ranges (npm ci caches tarballs, not packuments): the cache first, the registry for the rest.
  installLog = sh('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball]);
}, 180_000);

describe('the npm tarball installed into a fresh project', () => {
  it('holds the runtime files only, and installs without an install-script warning', () => {
    const top = readdirSync(installed).sort();
    expect(top).toEqual(['LICENSE', 'README.md', 'bin', 'cjs', 'dist', 'docs', 'package.json', 'python', 'sims']);
    expect(readdirSync(join(installed, 'python')).sort()).toEqual([
      'examples',
      'pyproject.toml',
      'qrl_backend',
      'qrl_golden',
      'qrl_sweep',
      'requirements.lock',
    ]);
    expect(installLog).not.toMatch(/install-scripts|prepare/);
  });

  it("runs the README's commands, a bundled config by name, and prints docs paths that exist", () => {
    expect(sh('npx', ['qrl-sim', '--version']).trim()).toBe('0.1.0');
    const numerics = sh('npx', ['qrl-sim', 'demo', '--numerics']);
    expect(numerics).toContain('More: qrl-sim cast --help, node_modules/qrl-sim/docs/numerics.md');
    expect(readdirSync(join(installed, 'docs'))).toContain('numerics.md');
    expect(sh('npx', ['qrl-sim', 'run', '--help'])).toMatch(/bundled configs \(--config NAME\):\n.*smoke-reverse/);
    // --help names the installed package's pages and configs, not the checkout's docs/ and sims/
    const sweepHelp = sh('npx', ['qrl-sim', 'sweep', '--help']);
    expect(sweepHelp).toContain('node_modules/qrl-sim/docs/reports.md');
    expect(sweepHelp).toContain('--config node_modules/qrl-sim/sims/smoke-reverse.json');
    sh('npx', ['qrl-sim', 'run', '--config', 'smoke-reverse', '--steps', '1', '--out', 'runs/smoke']);
    expect(readdirSync(join(project, 'runs', 'smoke'))).toContain('metrics.jsonl');
    writeFileSync(join(project, 'my.json'), sh('npx', ['qrl-sim', 'run', '--print-config', 'smoke-reverse']));
    expect(
      sh('node', ['-e', 'console.log(JSON.parse(require("fs").readFileSync("my.json","utf8")).steps)']).trim(),
    ).toBe('3');
  });

  it('type-checks an import of every entry with skipLibCheck false; require() says ESM only', () => {
    // @types/node from the repo (a Node project has it); nothing else of the repo's node_modules
    mkdirSync(join(project, 'node_modules', '@types'), { recursive: true });
    symlinkSync(join(repo, 'node_modules', '@types', 'node'), join(project, 'node_modules', '@types', 'node'));
    const entries = [
      'qrl-sim',
      'qrl-sim/numerics',
      'qrl-sim/nn',
      'qrl-sim/tasks',
      'qrl-sim/rl',
      'qrl-sim/policies',
      'qrl-sim/backend',
      'qrl-sim/runs',
      'qrl-sim/report',
      'qrl-sim/protocol',
      'qrl-sim/testing',
    ];
    writeFileSync(
      join(project, 'index.ts'),
      entries
        .map((e, i) => `import * as m${i} from '${e}';\nexport const n${i} = Object.keys(m${i}).length;`)
        .join('\n'),
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          skipLibCheck: false,
          noEmit: true,
          types: ['node'],
        },
        files: ['index.ts'],
      }),
    );
    sh(process.execPath, [join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.']);
    const r = spawnSync(process.execPath, ['-e', "require('qrl-sim')"], { cwd: project, encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('qrl-sim is an ES module package (ESM only) and cannot be require()d');
  });

  it('the shipped python/ builds a wheel that works in a fresh venv without torch: hf --help, qrl_golden, the pytest plugin once', () => {
    const wheels = join(work, 'wheels');
    // the project's python builds (it has setuptools' wheel); the venv is of its base interpreter
    sh('python3', [
      '-m',
      'pip',
      'wheel',
      '--no-deps',
      '--no-index',
      '--no-build-isolation',
      '-q',
      '-w',
      wheels,
      join(installed, 'python'),
    ]);
    const base = execFileSync('python3', ['-c', 'import sys; print(sys.base_prefix)'], { encoding: 'utf8' }).trim();
    const venv = join(work, 'venv');
    sh(join(base, 'bin', 'python3'), ['-m', 'venv', '--system-site-packages', venv]);
    const py = join(venv, 'bin', 'python');
    sh(py, ['-m', 'pip', 'install', '-q', '--no-deps', '--no-index', join(wheels, readdirSync(wheels)[0]!)]);
    const env = { ...process.env, PYTHONPATH: '' };
    const help = spawnSync(py, ['-m', 'qrl_backend.hf', '--help'], { cwd: work, encoding: 'utf8', env });
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toContain('usage: python -m qrl_backend.hf');
    expect(sh(py, ['-c', 'import qrl_golden, qrl_backend.numpy_ar; print(qrl_golden.__file__)'], work)).toContain(venv);
    if (spawnSync(py, ['-c', 'import torch'], { env }).status !== 0) {
      const run = spawnSync(py, ['-m', 'qrl_backend.hf', '--plan', 'hf-bf16'], {
        cwd: work,
        encoding: 'utf8',
        env,
        input: '',
      });
      expect([run.status, run.stderr.trim()]).toEqual([
        1,
        "qrl_backend.hf: needs torch, which is not installed: pip install 'qrl-sim-python[hf]' (or pip install torch transformers safetensors)",
      ]);
    }
    if (spawnSync(py, ['-c', 'import pytest'], { env }).status !== 0) return;
    // the entry point alone, the conftest line of docs/golden.md §2 as well, and -p: loaded once each way
    for (const [dir, conftest, extra] of [
      ['entry', null, []],
      ['conftest', 'pytest_plugins = ["qrl_golden.pytest_plugin"]\n', []],
      ['dash-p', null, ['-p', 'qrl_golden.pytest_plugin']],
    ] as const) {
      const d = join(work, `pytest-${dir}`);
      mkdirSync(d);
      if (conftest !== null) writeFileSync(join(d, 'conftest.py'), conftest);
      writeFileSync(
        join(d, 'test_golden.py'),
        'import pytest\n\n@pytest.mark.qrl_golden("casts")\ndef test_cast(golden_case):\n    pass\n',
      );
      const r = spawnSync(py, ['-m', 'pytest', '-q', '-rs', '-p', 'no:cacheprovider', ...extra], {
        cwd: d,
        encoding: 'utf8',
        env: { ...env, QRL_GOLDEN_DIR: '' },
      });
      expect(r.status, `${dir}: ${r.stdout}${r.stderr}`).toBe(0);
      expect(r.stdout, dir).toContain('no golden directory');
    }
  });
});
