// `pip install ./python` gives its packages (qrl_backend with its reference backends, qrl_golden, qrl_sweep)
// and registers the pytest plugin as an entry point; building leaves nothing untracked in the
// checkout. Builds a wheel into a temporary directory (never installs into the shared .venv).

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

describe('the python/ distribution', () => {
  it('builds one wheel with qrl_backend, qrl_golden, qrl_sweep and the pytest11 entry point, leaving the checkout clean', () => {
    const out = mkdtempSync(join(tmpdir(), 'qrl-wheel-'));
    try {
      const before = execFileSync('git', ['status', '--porcelain', '--untracked-files=all', 'python'], { encoding: 'utf8' });
      execFileSync('python3', ['-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-q', '-w', out, './python'], { encoding: 'utf8', stdio: 'pipe' });
      const wheel = readdirSync(out).find((f) => f.endsWith('.whl'));
      expect(wheel).toBeDefined();
      const listing = execFileSync('python3', ['-c', 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); print("\\n".join(z.namelist())); print(z.read([n for n in z.namelist() if n.endswith("entry_points.txt")][0]).decode())', join(out, wheel!)], { encoding: 'utf8' });
      for (const f of ['qrl_backend/__init__.py', 'qrl_backend/server.py', 'qrl_backend/numpy_ar/__main__.py', 'qrl_backend/torch_ar/__main__.py', 'qrl_backend/hf/__main__.py', 'qrl_backend/hf/names.py', 'qrl_backend/hf_diffusion/__main__.py', 'qrl_backend/deps.py', 'qrl_golden/__init__.py', 'qrl_golden/pytest_plugin.py', 'qrl_sweep/ray_driver.py']) {
        expect(listing).toContain(f);
      }
      // registered under its module name, so a conftest `pytest_plugins` line finds it already loaded (issue 40, item 2)
      expect(listing).toMatch(/\[pytest11\]\s*\nqrl_golden\.pytest_plugin = qrl_golden\.pytest_plugin/);
      // every package directory of python/ is in the wheel (the pyproject lists them by name)
      const dirs = execFileSync('git', ['ls-files', 'python/qrl_backend', 'python/qrl_golden', 'python/qrl_sweep'], { encoding: 'utf8' }).split('\n').filter((f) => f.endsWith('/__init__.py'));
      for (const d of dirs) expect(listing).toContain(d.slice('python/'.length));
      expect(execFileSync('git', ['status', '--porcelain', '--untracked-files=all', 'python'], { encoding: 'utf8' })).toBe(before);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 120_000);
});
