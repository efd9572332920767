// Import direction of src/: dependency-cruiser with .dependency-cruiser.cjs passes on the sources,
// fails on planted violations (upward imports, an import of cli/, an import through a package entry,
// an import of policies/ar/ from outside policies/ that bypasses its façade),
// and its layer table covers every file of src/ exactly once. Not a style check.

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(repo, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');
const config = join(repo, '.dependency-cruiser.cjs');
const tmp = mkdtempSync(join(tmpdir(), 'qrl-layers-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function cruise(cwd: string): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [cli, 'src', '--config', config, '--output-type', 'err'], {
    cwd,
    encoding: 'utf8',
  });
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
    writeFileSync(
      join(tmp, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext' } }),
    );
    const r = cruise(tmp);
    expect(r.status).not.toBe(0);
    expect(r.out).toMatch(/rl-no-upward-imports/);
    expect(r.out).toMatch(/src\/rl\/r\.ts → src\/policies\/p\.ts/);
    expect(r.out).toMatch(/no-import-through-entry/);
    expect(r.out).toMatch(/src\/policies\/q\.ts → src\/rl\/index\.ts/);
  }, 120_000);

  it('numerics/ importing rl/, golden/ importing cli/ and report/ importing numerics/ fail, each under its rule', () => {
    const dir = join(tmp, 'planted');
    const files: Record<string, string> = {
      'src/rl/types.ts': 'export type Advantage = number;\n',
      'src/numerics/up.ts': "import type { Advantage } from '../rl/types.js';\nexport const a: Advantage = 1;\n",
      'src/numerics/values.ts': 'export const v = 1;\n',
      'src/cli/cast.ts': 'export const castCommand = 1;\n',
      'src/golden/methods.ts': "import { castCommand } from '../cli/cast.js';\nexport const m = castCommand;\n",
      'src/report/table.ts': "import { v } from '../numerics/values.js';\nexport const t = v;\n",
      'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext' } }),
    };
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const r = cruise(dir);
    expect(r.status).not.toBe(0);
    expect(r.out).toMatch(/numerics-no-upward-imports: src\/numerics\/up\.ts → src\/rl\/types\.ts/);
    expect(r.out).toMatch(/golden-no-upward-imports: src\/golden\/methods\.ts → src\/cli\/cast\.ts/);
    expect(r.out).toMatch(/report-no-imports-beyond-ground: src\/report\/table\.ts → src\/numerics\/values\.ts/);
    expect(r.out).toMatch(/x 3 dependency violations/);
  }, 120_000);

  it('a file outside policies/ importing policies/ar/ directly fails; through the façade ar-api.ts, or from inside policies/, it passes', () => {
    const dir = join(tmp, 'facade');
    const files: Record<string, string> = {
      'src/policies/ar/model.ts': 'export const createArPolicy = 1;\n',
      'src/policies/ar-api.ts': "export { createArPolicy } from './ar/model.js';\n",
      'src/policies/engine.ts': "import { createArPolicy } from './ar/model.js';\nexport const e = createArPolicy;\n",
      'src/runs/direct.ts':
        "import { createArPolicy } from '../policies/ar/model.js';\nexport const d = createArPolicy;\n",
      'src/runs/facade.ts':
        "import { createArPolicy } from '../policies/ar-api.js';\nexport const f = createArPolicy;\n",
      'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext' } }),
    };
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const r = cruise(dir);
    expect(r.status).not.toBe(0);
    expect(r.out).toMatch(/ar-only-through-facade: src\/runs\/direct\.ts → src\/policies\/ar\/model\.ts/);
    expect(r.out).not.toMatch(/src\/runs\/facade\.ts/);
    expect(r.out).not.toMatch(/src\/policies\/engine\.ts/);
    expect(r.out).toMatch(/x 1 dependency violations/);
  }, 120_000);
});

interface Rule {
  readonly name: string;
  readonly from: { readonly path?: string | string[] };
  readonly to: { readonly path?: string | string[] };
}

/** The rows of the layer table: the paths named by the `*-no-upward-imports` rules, as source and as target. */
function layerRows(): string[] {
  const { forbidden } = createRequire(import.meta.url)(config) as { forbidden: Rule[] };
  const rows = new Set<string>();
  for (const rule of forbidden.filter((r) => r.name.endsWith('-no-upward-imports'))) {
    for (const p of [rule.from.path ?? [], rule.to.path ?? []].flat()) rows.add(p);
  }
  return [...rows];
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)],
  );
}

describe('the layer table', () => {
  it('has one row per layer, the root entry and cli/ among them', () => {
    const rows = layerRows();
    expect(rows.length).toBe(14);
    expect(rows.filter((p) => new RegExp(p).test('src/cli/main.ts'))).toHaveLength(1);
    expect(rows.filter((p) => new RegExp(p).test('src/index.ts'))).toHaveLength(1);
  });

  it('puts every file of src/ in exactly one row', () => {
    const rows = layerRows().map((p) => new RegExp(p));
    const files = filesUnder(join(repo, 'src')).map((f) => relative(repo, f).split('\\').join('/'));
    expect(files.length).toBeGreaterThan(100);
    const misplaced = files
      .map((f) => ({ f, rows: rows.filter((re) => re.test(f)).map(String) }))
      .filter(({ rows }) => rows.length !== 1);
    expect(misplaced).toEqual([]);
  });

  it('is the README table, row for row and in the same order', () => {
    const readme = readFileSync(join(repo, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Layout of the sources'));
    const table = section
      .slice(0, section.indexOf('\n## '))
      .split('\n')
      .filter((l) => l.startsWith('| `src/'));
    const first = table.map((l) => (/^\| `(src\/[^`]*)`/.exec(l) as RegExpExecArray)[1] as string);
    const rows = layerRows().map((p) => new RegExp(p));
    expect(first).toHaveLength(rows.length);
    first.forEach((path, i) =>
      expect(
        rows.findIndex((re) => re.test(path)),
        path,
      ).toBe(i),
    );
  });

  it('each row is exactly one folder of src/ (or the root entry), and every folder is a row', () => {
    const rows = layerRows();
    const folder = /^\^src\/([a-z-]+)\/$/;
    for (const row of rows) expect(folder.test(row) || row === '^src/index\\.ts$', row).toBe(true);
    const folders = readdirSync(join(repo, 'src'), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
    expect(
      rows
        .map((r) => folder.exec(r)?.[1])
        .filter((x) => x !== undefined)
        .sort(),
    ).toEqual(folders);
    expect(readdirSync(join(repo, 'src')).filter((name) => name.endsWith('.ts'))).toEqual(['index.ts']);
  });

  it('would catch a file outside every row', () => {
    const rows = layerRows().map((p) => new RegExp(p));
    expect(rows.filter((re) => re.test('src/extra.ts'))).toHaveLength(0);
    expect(rows.filter((re) => re.test('src/core/backend-contract.ts'))).toHaveLength(1);
  });
});
