// `qrl-sim golden` into an existing golden directory merges: the suites named are (re)written, the
// others stay listed, the recorded command regenerates the whole directory, and a different seed is
// refused (exit 2, naming it) before any file is touched. qrl_golden then reads every suite.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from './io.js';

const repo = resolve(__dirname, '..', '..');
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const manifestOf = (dir: string) =>
  JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as {
    command: string;
    seed: number;
    suites: Record<string, unknown>;
  };

describe('golden into an existing golden directory', () => {
  it('adds the new suites to the manifest, keeps the others listed, and equals one combined generation', async () => {
    const out = mkdtempSync(join(tmpdir(), 'qrl-golden-merge-'));
    const combined = mkdtempSync(join(tmpdir(), 'qrl-golden-merge-'));
    dirs.push(out, combined);
    expect((await runCli(['golden', '--suite', 'gemm,estimators', '--out', out])).code).toBe(0);
    const first = manifestOf(out);
    expect((await runCli(['golden', '--suite', 'quantizers,gemm', '--out', out])).code).toBe(0);
    const merged = manifestOf(out);
    expect(Object.keys(merged.suites)).toEqual(['gemm', 'estimators', 'quantizers']);
    expect(merged.suites['estimators']).toEqual(first.suites['estimators']);
    expect(merged.command).toBe(`qrl-sim golden --suite gemm,estimators,quantizers --out ${out} --seed 0`);
    expect(readdirSync(out).filter((f) => f.includes('.tmp-'))).toEqual([]);
    // the recorded command, run into an empty directory, gives the same manifest
    expect((await runCli(['golden', '--suite', 'gemm,estimators,quantizers', '--out', combined])).code).toBe(0);
    expect(readFileSync(join(combined, 'manifest.json'), 'utf8')).toBe(
      readFileSync(join(out, 'manifest.json'), 'utf8').replaceAll(out, combined),
    );
    // the Python reader finds every suite (the KeyError of issue 40 was 'no suite estimators')
    const counts = execFileSync(
      'python3',
      [
        '-c',
        'import sys, qrl_golden; g = qrl_golden.load(sys.argv[1]); print(*(len(list(g.cases(s))) for s in ("gemm", "estimators", "quantizers")))',
        out,
      ],
      { encoding: 'utf8', env: { ...process.env, PYTHONPATH: join(repo, 'python') } },
    );
    expect(
      counts
        .trim()
        .split(' ')
        .every((n) => Number(n) > 0),
    ).toBe(true);
  });

  it('refuses another seed with exit 2 naming both seeds, leaving the manifest as it was', async () => {
    const out = mkdtempSync(join(tmpdir(), 'qrl-golden-merge-'));
    dirs.push(out);
    expect((await runCli(['golden', '--suite', 'gemm', '--out', out, '--seed', '3'])).code).toBe(0);
    const before = readFileSync(join(out, 'manifest.json'), 'utf8');
    const r = await runCli(['golden', '--suite', 'casts', '--out', out]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(
      /--seed: .*manifest\.json holds suites of seed 3, got 0; merging needs the same seed \(pass --seed 3/,
    );
    expect(readFileSync(join(out, 'manifest.json'), 'utf8')).toBe(before);
    writeFileSync(join(out, 'manifest.json'), '{"schema":"other"}');
    const bad = await runCli(['golden', '--suite', 'gemm', '--out', out]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/is not a qrl-golden\/1 manifest/);
  });
});
