// `--config NAME` takes the package's sims/NAME.json when no such file is in the working directory,
// `run --print-config NAME` prints it to copy, and docs pages are printed as paths that resolve from
// the working directory (the installed package's docs/ outside a checkout).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bundledConfigNames, docRef, packagePathsIn, resolveConfigPath } from '../../src/cli/bundled.js';
import { existsSync } from 'node:fs';
import { runCli } from './io.js';

const repo = resolve(__dirname, '..', '..');
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('bundled configs', () => {
  it('lists sims/*.json by name and resolves a bare name there unless a file of that name exists', () => {
    expect(bundledConfigNames(repo)).toContain('smoke-reverse');
    expect(bundledConfigNames(repo)).not.toContain('lab');
    expect(resolveConfigPath('smoke-reverse', '--config', repo)).toBe(join(repo, 'sims', 'smoke-reverse.json'));
    expect(resolveConfigPath('sims/smoke-reverse.json', '--config', repo)).toBe('sims/smoke-reverse.json');
    expect(resolveConfigPath('other.json', '--config', repo)).toBe('other.json');
    expect(() => resolveConfigPath('nope', '--config', repo)).toThrow(
      /--config: no file 'nope' and no bundled config of that name \(bundled: .*smoke-reverse/,
    );
    const cwd = process.cwd();
    const dir = mkdtempSync(join(tmpdir(), 'qrl-bundled-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'smoke-reverse'), '{}');
    try {
      process.chdir(dir);
      expect(resolveConfigPath('smoke-reverse', '--config', repo)).toBe('smoke-reverse');
    } finally {
      process.chdir(cwd);
    }
  });

  it('run --help lists the bundled names; --print-config prints the file and takes no other option', async () => {
    const help = await runCli(['run', '--help']);
    expect(help.out).toMatch(/bundled configs \(--config NAME\):\n {2}.*smoke-reverse/);
    const printed = await runCli(['run', '--print-config', 'smoke-reverse']);
    expect(printed.code).toBe(0);
    expect(printed.out).toBe(readFileSync(join(repo, 'sims', 'smoke-reverse.json'), 'utf8'));
    expect((await runCli(['run', '--print-config', 'nope'])).err).toMatch(/unknown bundled config 'nope' \(bundled: /);
    const both = await runCli(['run', '--print-config', 'smoke-reverse', '--seed', '1']);
    expect([both.code, both.err.trim()]).toEqual([
      2,
      'qrl-sim run: --print-config prints a config and runs nothing; it takes no --seed',
    ]);
  });

  it('a docs page is docs/… in the package root, the path into the package from elsewhere', () => {
    expect(docRef('docs/numerics.md', repo, repo)).toBe('docs/numerics.md');
    const project = mkdtempSync(join(tmpdir(), 'qrl-bundled-'));
    dirs.push(project);
    const installed = join(project, 'node_modules', 'qrl-sim');
    mkdirSync(installed, { recursive: true });
    expect(docRef('docs/lab/top-p.md', project, installed)).toBe(
      join('node_modules', 'qrl-sim', 'docs', 'lab', 'top-p.md'),
    );
    expect(docRef('docs/numerics.md', join(project, 'elsewhere'), installed)).toBe(
      join(installed, 'docs', 'numerics.md'),
    );
  });

  it("every command's --help names docs/ and sims/ paths that exist from where it runs", async () => {
    const project = mkdtempSync(join(tmpdir(), 'qrl-bundled-'));
    dirs.push(project);
    const usage = await runCli(['--help']);
    const names = [...usage.out.matchAll(/^ {2}([a-z-]+) {2,}/gm)].map((m) => m[1]!);
    expect(names).toContain('sweep');
    let rewritten = 0;
    for (const name of names) {
      const help = (await runCli([name, '--help'])).out;
      expect(packagePathsIn(help, repo, repo), name).toBe(help); // in a checkout: as written
      const outside = packagePathsIn(help, project, repo);
      for (const m of help.matchAll(/(?<![\w./-])(?:docs|sims)\/[\w./-]*[\w/]/g)) {
        if (!existsSync(join(repo, m[0]))) continue; // a pattern (sims/NAME.json), not a path
        expect(outside, `${name}: ${m[0]}`).toContain(join(repo, m[0]));
        rewritten++;
      }
    }
    expect(rewritten).toBeGreaterThan(10);
  });
});
