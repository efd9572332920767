// Every command's --help has at least one example, and each example runs as written (issue #16):
// spawned through bin/qrl-sim.js in a scratch directory that links the repository's sims/, docs/ and python/.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { commands } from '../../src/cli/main.js';

const repo = resolve(__dirname, '..', '..');
const scratch = mkdtempSync(join(tmpdir(), 'qrl-help-examples-'));
const bin = join(scratch, '.bin');
spawnSync('mkdir', ['-p', bin]);
writeFileSync(join(bin, 'qrl-sim'), `#!/bin/sh\nexec node ${JSON.stringify(join(repo, 'bin', 'qrl-sim.js'))} "$@"\n`);
chmodSync(join(bin, 'qrl-sim'), 0o755);
symlinkSync(join(repo, 'sims'), join(scratch, 'sims'));
symlinkSync(join(repo, 'docs'), join(scratch, 'docs'));
symlinkSync(join(repo, 'python'), join(scratch, 'python')); // examples that start a Python backend (PYTHONPATH=python)
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The command lines of a help text's `example:`/`examples:` section (up to the next blank line). */
export function helpExamples(help: string): string[] {
  const lines = help.split('\n');
  const start = lines.findIndex((l) => /^examples?:/.test(l));
  if (start < 0) return [];
  const out: string[] = [];
  const first = lines[start]!.replace(/^examples?:/, '').trim();
  if (first) out.push(first);
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === '') break;
    if (/(^|\| )qrl-sim /.test(line.trim())) out.push(line.trim());
  }
  return out;
}

describe('--help examples', () => {
  it.each(Object.keys(commands))('%s --help has an example', (name) => {
    expect(helpExamples(commands[name]!.help).length).toBeGreaterThan(0);
  });

  it.each(Object.keys(commands))(
    'the examples of %s run as written',
    (name) => {
      for (const example of helpExamples(commands[name]!.help)) {
        const r = spawnSync('bash', ['-c', example], {
          cwd: scratch,
          encoding: 'utf8',
          env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
        });
        expect(r.status, `${example}\n${r.stderr}`).toBe(0);
        expect(r.stdout.length).toBeGreaterThan(0);
      }
    },
    240_000,
  );
});
