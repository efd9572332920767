// Output directories: claimOutDir creates what is missing and says what it created; releaseOutDir takes
// back exactly that, only while empty; and a run refused at its backend's info leaves no directory
// behind (before, the refused run left its new, empty output directory).

import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { claimOutDir, releaseOutDir } from '../../src/cli/outdir.js';
import { runCli } from './io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-outdir-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('claimOutDir and releaseOutDir', () => {
  it('returns the directories it created, outermost first, and releases them innermost first', () => {
    const out = join(root, 'a', 'b', 'c');
    expect(claimOutDir(out, 'run')).toEqual([join(root, 'a'), join(root, 'a', 'b'), out]);
    releaseOutDir([join(root, 'a'), join(root, 'a', 'b'), out]);
    expect(existsSync(join(root, 'a'))).toBe(false);
  });

  it('creates nothing for an existing empty directory, and keeps it', () => {
    const out = join(root, 'empty');
    mkdirSync(out);
    expect(claimOutDir(out, 'run')).toEqual([]);
    releaseOutDir([]);
    expect(existsSync(out)).toBe(true);
  });

  it('keeps a created directory that is no longer empty, and its parents', () => {
    const out = join(root, 'p', 'q');
    const created = claimOutDir(out, 'run');
    writeFileSync(join(out, 'config.json'), '{}');
    releaseOutDir(created);
    expect(readdirSync(out)).toEqual(['config.json']);
  });
});

describe('qrl-sim run refused at the backend', () => {
  const config = join(root, 'run.json');
  writeFileSync(
    config,
    JSON.stringify({
      steps: 1,
      task: { name: 'reverse', options: { minLength: 2, maxLength: 3 } },
      policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 16 } },
      sft: { steps: 0 },
      rollout: { prompts: 2, groupSize: 2 },
      plan: 'bf16',
    }),
  );
  const numpy = `PYTHONPATH=${join(process.cwd(), 'python')} python3 -m qrl_backend.numpy_ar`;

  it('leaves no output directory when the backend does not serve the config (exit 2)', async () => {
    const out = join(root, 'refused', 'run');
    const model = JSON.stringify({ vocabSize: 13, maxLen: 9, C: 16, H: 2, layers: 1, hidden: 16 });
    const r = await runCli([
      'run',
      '--config',
      config,
      '--out',
      out,
      '--backend',
      `${numpy} --config '${model}' --plan fp32`,
    ]);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/plan\.name: the backend serves plan 'fp32', config\.plan is 'bf16'/);
    expect(existsSync(join(root, 'refused'))).toBe(false);
  }, 60_000);

  it('leaves no output directory when the backend fails to start (exit 1), and keeps one that existed', async () => {
    const out = join(root, 'crashed');
    const r = await runCli([
      'run',
      '--config',
      config,
      '--out',
      out,
      '--backend',
      'python3 -c "import sys; sys.exit(3)"',
    ]);
    expect(r.code, r.err).toBe(1);
    expect(existsSync(out)).toBe(false);
    mkdirSync(out);
    const again = await runCli([
      'run',
      '--config',
      config,
      '--out',
      out,
      '--backend',
      'python3 -c "import sys; sys.exit(3)"',
    ]);
    expect(again.code).toBe(1);
    expect(readdirSync(out)).toEqual([]);
  }, 60_000);
});
