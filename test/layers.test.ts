// Import direction of src/: dependency-cruiser with .dependency-cruiser.cjs passes on the sources
// and fails on a violating import (rl/ importing policies/, src/ importing through a package entry).
// Not a style check.

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(repo, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');
const config = join(repo, '.dependency-cruiser.cjs');
const tmp = mkdtempSync(join(tmpdir(), 'qrl-layers-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function cruise(cwd: string): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [cli, 'src', '--config', config, '--output-type', 'err'], { cwd, encoding: 'utf8' });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('layers import only downward', () => {
  it('the sources pass', () => {
    const r = cruise(repo);
    expect(r.status, r.out).toBe(0);
  }, 120_000);

  it('an upward import and an import through a package entry fail, naming the rule and both files', () => {
    mkdirSync(join(tmp, 'src', 'rl'), { recursive: true });
    mkdirSync(join(tmp, 'src', 'policies'), { recursive: true });
    writeFileSync(join(tmp, 'src', 'policies', 'p.ts'), 'export const p = 1;\n');
    writeFileSync(join(tmp, 'src', 'rl', 'r.ts'), "import { p } from '../policies/p.js';\nexport const r = p;\n");
    writeFileSync(join(tmp, 'src', 'rl', 'k.ts'), 'export const k = 1;\n');
    writeFileSync(join(tmp, 'src', 'rl', 'index.ts'), "export { k } from './k.js';\n");
    writeFileSync(join(tmp, 'src', 'policies', 'q.ts'), "import { k } from '../rl/index.js';\nexport const q = k;\n");
    writeFileSync(join(tmp, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext' } }));
    const r = cruise(tmp);
    expect(r.status).not.toBe(0);
    expect(r.out).toMatch(/rl-imports-downward/);
    expect(r.out).toMatch(/src\/rl\/r\.ts → src\/policies\/p\.ts/);
    expect(r.out).toMatch(/no-import-through-entry/);
    expect(r.out).toMatch(/src\/policies\/q\.ts → src\/rl\/index\.ts/);
  }, 120_000);
});
