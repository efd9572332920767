// Issue #11 and #16 regressions: output directories that must not be overwritten or cannot be
// created, bounded sizes, strict JSON input, flag parsing and resuming a finished run.
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from './io.js';
import { findOverflowingNumber, parseJsonInput } from '../../src/core/json.js';
import { defaultRunDir } from '../../src/cli/run.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-guards-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const small = {
  steps: 2,
  task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
  policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
  sft: { steps: 3, batchSize: 8, cache: false },
  rollout: { prompts: 2, groupSize: 4 },
  eval: { every: 0, problems: 4 },
};

function file(name: string, content: unknown): string {
  const path = join(root, name);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

/** Every file under `dir` with its size and mtime, to show that nothing changed. */
function snapshot(dir: string): string {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d).sort()) {
      const p = join(d, e);
      const s = statSync(p);
      if (s.isDirectory()) walk(p);
      else out.push(`${p} ${s.size} ${s.mtimeMs}`);
    }
  };
  walk(dir);
  return out.join('\n');
}

describe('output directories (issue #11)', () => {
  const config = file('small.json', small);
  const runDir = join(root, 'run-a');

  it('refuses to overwrite an existing run and tells to --resume; resuming a finished run changes nothing', async () => {
    const first = await runCli(['run', '--config', config, '--out', runDir]);
    expect(first.code, first.err).toBe(0);
    const before = snapshot(runDir);
    const again = await runCli(['run', '--config', config, '--out', runDir, '--seed', '3']);
    expect(again.code).toBe(2);
    expect(again.err.trim().split('\n')).toHaveLength(1);
    expect(again.err).toMatch(/already holds a run.*--resume/);
    const resumed = await runCli(['run', '--resume', runDir]);
    expect(resumed.code, resumed.err).toBe(0);
    expect(resumed.out).toMatch(/already finished at step 2/);
    expect(snapshot(runDir)).toBe(before);
  });

  it('refuses a sweep directory and a directory inside one for run --out', async () => {
    const sweep = join(root, 'sweep-like');
    mkdirSync(sweep);
    writeFileSync(join(sweep, 'sweep.json'), '{}');
    for (const out of [sweep, join(sweep, 'extra')]) {
      const r = await runCli(['run', '--config', config, '--out', out]);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/sweep/);
    }
    expect(readdirSync(sweep)).toEqual(['sweep.json']);
  });

  it('sweep refuses an existing run directory before running anything', async () => {
    const r = await runCli(['sweep', '--config', config, '--out', runDir, '--steps', '1']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/already holds a run/);
  });

  it('an uncreatable --out (/proc/x) or a file as --out exits 2 with one line', async () => {
    const proc = await runCli(['run', '--config', config, '--out', '/proc/qrl-sim-x/y']);
    expect(proc.code).toBe(2);
    expect(proc.err).toMatch(/--out: cannot create directory '\/proc\/qrl-sim-x'/);
    const plain = file('plain.txt', 'x');
    for (const out of [plain, join(plain, 'sub')]) {
      const r = await runCli(['run', '--config', config, '--out', out]);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/is a file, not a directory/);
      expect(r.err.trim().split('\n')).toHaveLength(1);
    }
    const sweep = await runCli(['sweep', '--config', config, '--out', '/proc/qrl-sim-x', '--steps', '1']);
    expect(sweep.code).toBe(2);
  });

  it('the default run directory differs when --set differs', () => {
    expect(defaultRunDir('sims/ar-reverse.json', 0, [])).toBe(join('runs', 'ar-reverse-seed0'));
    const a = defaultRunDir('sims/ar-reverse.json', 0, ['plan=bf16']);
    const b = defaultRunDir('sims/ar-reverse.json', 0, ['plan=fp8-rollout']);
    expect(a).not.toBe(b);
    expect(a).toMatch(/^runs.ar-reverse-seed0-set[0-9a-f]{8}$/);
  });
});

describe('report input (issue #11)', () => {
  it('a malformed metrics.jsonl line or config.json exits 2 naming the file and line', async () => {
    const dir = join(root, 'bad-metrics');
    mkdirSync(dir);
    writeFileSync(join(dir, 'config.json'), JSON.stringify(small));
    writeFileSync(join(dir, 'metrics.jsonl'), '{"step":1,"reward/mean":0.5}\n{"step":2,"reward/mean":\n');
    const r = await runCli(['report', dir]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/metrics\.jsonl line 2 is not valid JSON/);
    writeFileSync(join(dir, 'metrics.jsonl'), '{"step":1,"reward/mean":1e400}\n');
    expect((await runCli(['report', dir])).err).toMatch(/metrics\.jsonl line 1: 1e400 .*overflows float64/);
    writeFileSync(join(dir, 'config.json'), '{"steps": 2,,}');
    const c = await runCli(['report', dir]);
    expect(c.code).toBe(2);
    expect(c.err).toMatch(/config\.json is not valid JSON at line 1/);
  });

  it('an empty run says so instead of writing an empty report', async () => {
    const dir = join(root, 'empty-run');
    mkdirSync(dir);
    writeFileSync(join(dir, 'config.json'), JSON.stringify(small));
    writeFileSync(join(dir, 'metrics.jsonl'), '');
    const r = await runCli(['report', dir]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/no steps recorded yet/);
    expect(existsSync(join(dir, 'report.html'))).toBe(false);
  });
});

describe('size limits (issue #11)', () => {
  it.each([
    [
      ['run', '--config', 'CONFIG', '--set', 'rollout.groupSize=1e9', '--out', 'OUT'],
      /config\.rollout\.groupSize: must be at most 1024, got 1000000000/,
    ],
    [
      ['run', '--config', 'CONFIG', '--set', 'rollout.prompts=1024', '--set', 'rollout.groupSize=1024', '--out', 'OUT'],
      /prompts × groupSize = 1048576.*at most 16384/,
    ],
    [
      ['mismatch', '--policy', 'ar', '--plan', 'bf16', '--length', '1e8'],
      /--length: expected an integer in 1\.\.1024, got '1e8'/,
    ],
    [
      ['mismatch', '--policy', 'diffusion', '--plan', 'bf16', '--batch', '100000'],
      /--batch: expected an integer in 1\.\.4096/,
    ],
    [
      ['sweep', '--config', 'CONFIG', '--seeds', '1e6', '--out', 'OUT'],
      /--seeds: expected an integer in 1\.\.1000, got '1e6'/,
    ],
  ])('%j is refused up front', async (args, message) => {
    const out = join(root, 'never');
    const argv = args.map((a) => (a === 'CONFIG' ? file('limits.json', small) : a === 'OUT' ? out : a));
    const r = await runCli(argv);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(existsSync(out)).toBe(false);
  });
});

describe('JSON input (issue #16)', () => {
  it('finds overflowing literals outside strings only', () => {
    expect(findOverflowingNumber('[1, 2e308, "1e400"]')).toEqual({ literal: '2e308', line: 1, column: 5 });
    expect(findOverflowingNumber('{"a": "1e999", "b": -1.5e3}')).toBeNull();
    expect(findOverflowingNumber('{\n "x": -1e400}')).toEqual({ literal: '-1e400', line: 2, column: 7 });
    expect(() => parseJsonInput('{"lr": 1e400}', 'cfg')).toThrow(/cfg: 1e400 at line 1 column 8 overflows float64/);
  });

  it.each([
    [['quantize', '--preset', 'mxfp8', '--input', '-'], '[1, 1e400]', /--input: 1e400 .*overflows float64/],
    [['estimate', '--input', '-'], '{"logpTheta": [[1e400]]}', /input: 1e400 .*overflows float64/],
    [['run', '--config', 'OVERFLOW'], '', /--config '.*overflow\.json': 1e400 .*overflows float64/],
    [['run', '--config', 'CONFIG', '--set', 'optim.lr=1e400'], '', /--set 'optim\.lr=1e400': 1e400 overflows float64/],
    [['sweep', '--config', 'OVERFLOW'], '', /overflows float64/],
  ])('%j reports an overflow, not null', async (args, stdin, message) => {
    const argv = args.map((a) =>
      a === 'OVERFLOW' ? file('overflow.json', '{"optim": {"lr": 1e400}}') : a === 'CONFIG' ? file('c.json', small) : a,
    );
    const r = await runCli(argv, stdin);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(r.err).not.toMatch(/null/);
  });
});

describe('flags (issue #16)', () => {
  it('--version prints the package version', async () => {
    const r = await runCli(['--version']);
    expect(r.code).toBe(0);
    expect(r.out.trim()).toBe(JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version);
  });

  it('--seed -1 reaches the validator, which states the range', async () => {
    const r = await runCli([
      'cast',
      '--format',
      'e4m3fn',
      '--profile',
      'satfinite',
      '--mode',
      'stochastic',
      '--seed',
      '-1',
      '1.5',
    ]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--seed: expected an integer in 0\.\.4294967295, got '-1'/);
    const max = await runCli([
      'cast',
      '--format',
      'e4m3fn',
      '--profile',
      'satfinite',
      '--mode',
      'stochastic',
      '--seed',
      '4294967295',
      '1.5',
    ]);
    expect(max.code, max.err).toBe(0);
  });

  it('a negative number after a string option is its value', async () => {
    const r = await runCli(['mismatch', '--policy', 'ar', '--plan', 'bf16', '--length', '-3']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--length: expected an integer in 1\.\.1024, got '-3'/);
  });

  it('1e1 is an integer, 1.5 is not', async () => {
    const ok = await runCli([
      'mismatch',
      '--policy',
      'ar',
      '--plan',
      'bf16',
      '--length',
      '1e1',
      '--batch',
      '2',
      '--json',
    ]);
    expect(ok.code, ok.err).toBe(0);
    expect(JSON.parse(ok.out).length).toBe(10);
    expect((await runCli(['mismatch', '--policy', 'ar', '--plan', 'bf16', '--length', '1.5'])).code).toBe(2);
  });

  it('a flag given twice is an error', async () => {
    const r = await runCli(['mismatch', '--policy', 'ar', '--plan', 'bf16', '--plan', 'fp32']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--plan: given twice/);
  });

  it('flags a mode ignores are errors', async () => {
    const demo = await runCli(['demo', '--numerics', '--seeds', '3']);
    expect(demo.code).toBe(2);
    expect(demo.err).toMatch(/--seeds: not used with --numerics/);
    const cast = await runCli(['cast', '--format', 'e4m3fn', '--profile', 'satfinite', '--seed', '2', '1.5']);
    expect(cast.code).toBe(2);
    expect(cast.err).toMatch(/--seed: only used with --mode stochastic/);
  });
});
