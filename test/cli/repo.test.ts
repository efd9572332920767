// Project hygiene the CLI's users see (issue #16): no npm warning from a project .npmrc, the CUDA
// download of the test oracle kept off in CI, and a README command table without duplicates.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const repo = resolve(__dirname, '..', '..');
const read = (p: string): string => readFileSync(join(repo, p), 'utf8');

describe('repository', () => {
  it('has no project .npmrc key that npm does not know (npm 11 warns on every npx call)', () => {
    if (existsSync(join(repo, '.npmrc'))) expect(read('.npmrc')).not.toMatch(/onnxruntime-node-install/);
  });

  it('package.json denies the onnxruntime-node install script (its CUDA download) through allowScripts', () => {
    expect(JSON.parse(read('package.json')).allowScripts?.['onnxruntime-node']).toBe(false);
  });

  it('CI keeps the onnxruntime-node CUDA download off through its environment variable', () => {
    expect(read('.ci/run')).toMatch(/^export ONNXRUNTIME_NODE_INSTALL=skip$/m);
  });

  it('the README command table lists each command once, and every command', async () => {
    const { commands } = await import('../../src/cli/main.js');
    const rows = read('README.md')
      .split('\n')
      .filter((l) => /^\| `[a-z-]+` \|/.test(l))
      .map((l) => /^\| `([a-z-]+)`/.exec(l)![1]!);
    const cli = rows.filter((r) => r in commands);
    expect(new Set(cli).size).toBe(cli.length);
    expect([...new Set(cli)].sort()).toEqual(Object.keys(commands).sort());
  });
});
