// Bad input that hung, failed with a raw error and exit 1, or was silently ignored: each case
// exits 2 with one line naming the flag or field, and writes nothing.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from './io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-inputs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const small = {
  steps: 1,
  task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
  policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
  sft: { steps: 2, batchSize: 8, cache: false },
  rollout: { prompts: 2, groupSize: 4 },
  eval: { every: 0, problems: 4 },
};
const config = join(root, 'small.json');
writeFileSync(config, JSON.stringify(small));

async function refused(argv: string[], message: RegExp, outDir?: string): Promise<void> {
  const r = await runCli(argv);
  expect(r.code, r.err).toBe(2);
  expect(r.err.trim().split('\n')).toHaveLength(1);
  expect(r.err).toMatch(message);
  if (outDir !== undefined) expect(existsSync(outDir)).toBe(false);
}

describe('sizes beyond their limit', () => {
  it.each([
    ['policy.model.C=1000000000', /config\.policy\.model\.C: at most 1024, got 1000000000/],
    ['policy.model.layers=100000', /config\.policy\.model\.layers: at most 64, got 100000/],
    ['policy.model.hidden=1000000', /config\.policy\.model\.hidden: at most 8192, got 1000000/],
    [
      'policy.model={"C":1024,"H":8,"layers":64,"hidden":8192}',
      /config\.policy\.model: layers 64 .* block weights, at most 33554432/,
    ],
  ])('run --set %s exits 2 before writing', async (set, message) => {
    const out = join(root, `size-${set.length}`);
    await refused(['run', '--config', config, '--out', out, '--set', set], message, out);
  });

  it('a sweep refuses the same sizes before writing', async () => {
    const out = join(root, 'size-sweep');
    await refused(
      ['sweep', '--config', config, '--out', out, '--grid', 'policy.model.layers=1,100000'],
      /grid point .*config\.policy\.model\.layers: at most 64/,
      out,
    );
  });
});

describe('raw errors become one line with exit 2', () => {
  it('golden --out /proc/x fails at once; a file as --out; seeds beyond 32 bits', async () => {
    await refused(['golden', '--suite', 'gemm', '--out', '/proc/x'], /--out: cannot create directory '\/proc\/x'/);
    const file = join(root, 'a-file');
    writeFileSync(file, '');
    await refused(['golden', '--suite', 'casts', '--out', file], /--out: '.*a-file' is a file, not a directory/);
    await refused(
      ['golden', '--suite', 'casts', '--out', join(root, 'g'), '--seed', '4294967296'],
      /--seed: expected an integer in 0\.\.4294967295/,
      join(root, 'g'),
    );
  });

  it('serve --port beyond 65535; --host without --port', async () => {
    await refused(
      ['serve', '--policy', 'ar', '--port', '70000'],
      /--port: expected an integer in 0\.\.65535, got '70000'/,
    );
    await refused(['serve', '--policy', 'ar', '--host', '0.0.0.0'], /--host: not used without --port/);
  });

  it('report into a directory it cannot write names the directory', async () => {
    const dir = join(root, 'report-blocked');
    const r0 = await runCli(['run', '--config', config, '--out', dir]);
    expect(r0.code, r0.err).toBe(0);
    rmSync(join(dir, 'summary.json'), { force: true });
    mkdirSync(join(dir, 'summary.json')); // writing the file fails (EISDIR) as an unwritable directory would
    await refused(['report', dir], /DIR: cannot write the report into '.*report-blocked' \(E[A-Z]+/);
  });

  it('check: a config of another suite, a negative seed, too many runs', async () => {
    const est = join(root, 'est.json');
    writeFileSync(est, JSON.stringify({ advantage: { name: 'grpo' } }));
    await refused(['check', '--impl', 'true', '--suite', 'casts', '--config', est], /--config: not a casts config/);
    await refused(
      ['check', '--impl', 'true', '--suite', 'casts', '--seed', '-1'],
      /--seed: expected an integer in 0\.\.4294967295, got '-1'/,
    );
    await refused(
      ['check', '--impl', 'true', '--suite', 'casts', '--runs', '1e9'],
      /--runs: expected an integer in 1\.\.100000, got '1e9'/,
    );
  });

  it('estimate with results that overflow says which, instead of printing null', async () => {
    const batch = JSON.parse(readFileSync('docs/examples/estimate-ais.json', 'utf8')) as { rewards: number[] };
    batch.rewards = batch.rewards.map((_, i) => (i % 2 === 0 ? 1e308 : -1e308));
    const file = join(root, 'huge.json');
    writeFileSync(file, JSON.stringify(batch));
    await refused(['estimate', '--input', file], /result .* is (-?Infinity|NaN) \(not finite/);
  });

  it('JSON errors of estimate and quantize name the file; quantize refuses an empty array', async () => {
    const bad = join(root, 'bad.json');
    writeFileSync(bad, '[1,');
    await refused(['estimate', '--input', bad], /--input '.*bad\.json' is not valid JSON/);
    await refused(['quantize', '--preset', 'mxfp4', '--input', bad], /--input '.*bad\.json' is not valid JSON/);
    const empty = join(root, 'empty.json');
    writeFileSync(empty, '[]');
    await refused(['quantize', '--preset', 'mxfp4', '--input', empty], /--input: empty array/);
  });

  it('a torn metrics.jsonl line is placed by its column, not "line 1"', async () => {
    const dir = join(root, 'torn');
    const r0 = await runCli(['run', '--config', config, '--out', dir]);
    expect(r0.code, r0.err).toBe(0);
    writeFileSync(join(dir, 'metrics.jsonl'), `${readFileSync(join(dir, 'metrics.jsonl'), 'utf8')}{"step": 2, x}\n`);
    await refused(['report', dir], /metrics\.jsonl line 2 is not valid JSON at column \d+/);
  });
});

describe('flags that were silently ignored', () => {
  it.each([
    [
      ['mismatch', '--policy', 'diffusion', '--plan', 'bf16', '--preset', 'small'],
      /--preset: not used with --policy diffusion/,
    ],
    [
      ['mismatch', '--policy', 'diffusion', '--plan', 'bf16', '--moe', '4,2'],
      /--moe: not used with --policy diffusion/,
    ],
    [
      ['mismatch', '--policy', 'diffusion', '--plan', 'bf16', '--channels'],
      /--channels: not used with --policy diffusion/,
    ],
    [['run', '--config', config, '--timeout', '5'], /--timeout: not used without --backend/],
    [['run', '--config', config, '--set', 'steps=1', '--set', 'steps=2'], /--set: 'steps' given twice/],
    [
      ['run', '--config', config, '--set', 'task.options={bad'],
      /--set 'task\.options=\{bad': the value is not valid JSON/,
    ],
    [['sweep', '--config', config, '--grid', 'optim.lr=1e400'], /--grid: optim\.lr=1e400: 1e400 overflows float64/],
    [['sweep', '--config', config, '--grid', 'task.options={"a":1,b}'], /not valid JSON/],
  ])('%j', async (argv, message) => {
    await refused(argv as string[], message);
  });

  it('run --resume DIR --out X is refused', async () => {
    const dir = join(root, 'resume-out');
    expect((await runCli(['run', '--config', config, '--out', dir])).code).toBe(0);
    await refused(
      ['run', '--resume', dir, '--out', join(root, 'elsewhere')],
      /--out: not used with --resume/,
      join(root, 'elsewhere'),
    );
  });
});

describe('smaller ones', () => {
  it('no arguments: usage on standard error, exit 2', async () => {
    const r = await runCli([]);
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(r.err).toMatch(/usage: qrl-sim <command>/);
  });

  it('the command name once: "qrl-sim lab: unknown experiment"', async () => {
    await refused(['lab', 'run', 'nosuch'], /^qrl-sim lab: unknown experiment 'nosuch'/);
  });

  it("golden prints the manifest's path without a double slash, and removes a killed golden's temp files", async () => {
    const out = join(root, 'golden');
    // a golden directory of the same seed (an existing manifest must be one: test/cli/golden-merge.test.ts)
    expect((await runCli(['golden', '--suite', 'casts', '--out', out])).code).toBe(0);
    const { spawnSync } = await import('node:child_process');
    const dead = Number(
      spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout,
    );
    const stale = join(out, 'casts', `x.safetensors.tmp-${dead}-0-3`);
    writeFileSync(stale, 'half');
    const r = await runCli(['golden', '--suite', 'casts', '--out', `${out}/`]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/wrote .*golden\/manifest\.json/);
    expect(r.out).not.toMatch(/\/\/manifest/);
    expect(existsSync(stale)).toBe(false);
  });
});
