// Tests of `qrl-sim golden`: every suite generated once, byte-identical on a second run with the
// same seed, read back and checked by the Python reader (python/tests). Not the suites' numerics.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { readGolden } from '../../src/golden/read.js';
import { goldenSuites } from '../../src/golden/suites/index.js';
import { writeGolden } from '../../src/golden/write.js';
import { runCli } from '../cli/io.js';

const suites = Object.values(goldenSuites);
let dir = '';

function listFiles(root: string): string[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => join(d.parentPath, d.name).slice(root.length + 1))
    .sort();
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'qrl-golden-'));
  writeGolden(dir, suites, { seed: 7, command: 'test' });
});

describe('golden', () => {
  it('writes a manifest that lists every case file with its tensors', () => {
    const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
    expect(manifest.schema).toBe('qrl-golden/1');
    expect(Object.keys(manifest.suites)).toEqual(suites.map((s) => s.name));
    const files = listFiles(dir).filter((f) => f !== 'manifest.json');
    const listed = Object.values(manifest.suites).flatMap((s) =>
      (s as { cases: { file: string }[] }).cases.map((c) => c.file),
    );
    expect(files).toEqual([...listed].sort());
    const golden = readGolden(dir);
    for (const c of golden.cases('casts').slice(0, 5)) {
      expect(c.tensors.codes!.role).toBe('expected');
      expect(c.tensors.input!.array.shape).toEqual(c.tensors.codes!.array.shape);
    }
  });

  it('is byte-identical for the same seed and differs for another', () => {
    const again = mkdtempSync(join(tmpdir(), 'qrl-golden-'));
    writeGolden(again, suites, { seed: 7, command: 'test' });
    for (const f of listFiles(dir))
      expect(readFileSync(join(again, f)).equals(readFileSync(join(dir, f))), f).toBe(true);
    const other = mkdtempSync(join(tmpdir(), 'qrl-golden-'));
    writeGolden(other, [goldenSuites.casts!], { seed: 8, command: 'test' });
    const f = 'casts/e4m3fn.satfinite.rne.safetensors';
    expect(readFileSync(join(other, f)).equals(readFileSync(join(dir, f)))).toBe(false);
  });

  it('is read and checked by the Python reader (independent numpy casts, ml_dtypes where installed, numpy estimators)', () => {
    const probe = spawnSync('python3', ['-c', 'import numpy, pytest'], { encoding: 'utf8' });
    expect(probe.status, `python3 with numpy and pytest is required (.ci/run installs them): ${probe.stderr}`).toBe(0);
    // qrl_golden's own tests (the SDK's run in test/python/sdk.test.ts without a golden directory).
    const files = [
      'test_casts_independent.py',
      'test_examples.py',
      'test_grpo_step.py',
      'test_numpy_example.py',
      'test_serve.py',
    ].map((f) => `python/tests/${f}`);
    const run = spawnSync('python3', ['-m', 'pytest', ...files, '-q', '-p', 'no:cacheprovider'], {
      encoding: 'utf8',
      env: { ...process.env, QRL_GOLDEN_DIR: dir },
      timeout: 300_000,
    });
    expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/passed/);
  });

  it('CLI: unknown suite exits 2 naming it; a run writes the manifest', async () => {
    const bad = await runCli(['golden', '--suite', 'nope', '--out', join(dir, 'x')]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--suite: unknown suite 'nope'/);
    const out = mkdtempSync(join(tmpdir(), 'qrl-golden-cli-'));
    expect((await runCli(['golden', '--suite', 'gemm', '--out', out, '--seed', '3'])).code).toBe(0);
    expect(JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8')).command).toBe(
      `qrl-sim golden --suite gemm --out ${out} --seed 3`,
    );
  });
});
