// `sweep --emit-jobs`: the emitted commands, run by a plain scheduler (xargs -P), then
// `qrl-sim report DIR`, give the in-process sweep's runs and summary.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from './io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-jobs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const config = join(root, 'base.json');
writeFileSync(
  config,
  JSON.stringify({
    steps: 3,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
    sft: { steps: 20, batchSize: 8 },
    rollout: { prompts: 2, groupSize: 4 },
    eval: { every: 2, problems: 4 },
  }),
);
const sweepArgs = [
  '--config',
  config,
  '--grid',
  'correction=none,tis',
  '--seeds',
  '2',
  '--baseline',
  'correction=none',
];

describe('sweep --emit-jobs', () => {
  it('jobs run with xargs -P 2, then report DIR, equal the in-process sweep', async () => {
    if (!existsSync('dist/cli/main.js')) throw new Error('dist/ missing: run npm run build');
    const inProcess = join(root, 'in-process');
    const a = await runCli(['sweep', ...sweepArgs, '--workers', '2', '--out', inProcess]);
    expect(a.code, a.err).toBe(0);

    const out = join(root, 'jobs-out');
    const jobsFile = join(root, 'jobs.txt');
    const e = await runCli(['sweep', ...sweepArgs, '--out', out, '--emit-jobs', jobsFile]);
    expect(e.code, e.err).toBe(0);
    expect(e.out).toMatch(/wrote 4 jobs/);
    const lines = readFileSync(jobsFile, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(4);
    for (const l of lines)
      expect(l).toMatch(/ run --config .*jobs\/\d{4}\.json --out .*jobs-out\/correction-(none|tis)\/seed-[01]$/);
    // Nothing ran yet.
    expect(readdirSync(out).sort()).toEqual(['jobs', 'sweep.json']);

    const x = spawnSync('xargs', ['-d', '\n', '-P', '2', '-n', '1', 'sh', '-c'], {
      input: readFileSync(jobsFile),
      encoding: 'utf8',
      cwd: process.cwd(),
    });
    expect(x.status, x.stderr).toBe(0);
    const r = execFileSync(process.execPath, ['bin/qrl-sim.js', 'report', out], { encoding: 'utf8' });
    expect(r).toMatch(/report: /);

    expect(readFileSync(join(out, 'sweep.json'), 'utf8')).toBe(readFileSync(join(inProcess, 'sweep.json'), 'utf8'));
    for (const run of [
      'correction-none/seed-0',
      'correction-none/seed-1',
      'correction-tis/seed-0',
      'correction-tis/seed-1',
    ]) {
      for (const f of ['config.json', 'metrics.jsonl', 'eval.jsonl'])
        expect(readFileSync(join(out, run, f), 'utf8'), `${run}/${f}`).toBe(
          readFileSync(join(inProcess, run, f), 'utf8'),
        );
    }
    // The summaries agree byte for byte once wall-clock time (ms per step) is set aside.
    const deterministic = (dir: string): string =>
      JSON.stringify(
        JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8'), (k, v) =>
          /time|seconds/i.test(k) ? undefined : v,
        ),
        null,
        1,
      );
    expect(deterministic(out)).toBe(deterministic(inProcess));
  });

  it('refuses --workers and an existing jobs file', async () => {
    const jobsFile = join(root, 'exists.txt');
    writeFileSync(jobsFile, '');
    expect((await runCli(['sweep', ...sweepArgs, '--out', join(root, 'x'), '--emit-jobs', jobsFile])).err).toMatch(
      /--emit-jobs: .* exists/,
    );
    expect(
      (
        await runCli([
          'sweep',
          ...sweepArgs,
          '--out',
          join(root, 'y'),
          '--emit-jobs',
          join(root, 'j.txt'),
          '--workers',
          '2',
        ])
      ).err,
    ).toMatch(/--workers: not used with --emit-jobs/);
  });
});
