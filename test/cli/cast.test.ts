import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli } from './io.js';

describe('qrl-sim cast', () => {
  it('prints code, hex and value per input', async () => {
    const r = await runCli(['cast', '--format', 'e4m3fn', '--profile', 'satfinite', '448', '464', '465', '1e6']);
    expect(r.code).toBe(0);
    const rows = r.out
      .trim()
      .split('\n')
      .slice(2)
      .map((l) => l.trim().split(/\s+/));
    expect(rows).toEqual([
      ['448', '126', '0x7e', '448'],
      ['464', '126', '0x7e', '448'],
      ['465', '126', '0x7e', '448'],
      ['1000000', '126', '0x7e', '448'],
    ]);
  });

  it('--json keeps NaN, ±Infinity and −0 as strings; negatives after --', async () => {
    const r = await runCli([
      'cast',
      '--format',
      'e5m2',
      '--profile',
      'ieee',
      '--json',
      '--',
      'NaN',
      '-Infinity',
      '-0',
      '-61440',
      '0.1',
    ]);
    expect(r.code).toBe(0);
    const j = JSON.parse(r.out);
    expect(j).toMatchObject({ format: 'e5m2', profile: 'ieee', mode: 'rne' });
    expect(j.results).toEqual([
      { input: 'NaN', code: 0x7e, hex: '0x7e', value: 'NaN' },
      { input: '-Infinity', code: 0xfc, hex: '0xfc', value: '-Infinity' },
      { input: '-0', code: 0x80, hex: '0x80', value: '-0' },
      { input: '-61440', code: 0xfc, hex: '0xfc', value: '-Infinity' },
      // 0.1 is first rounded to float32 (0.10000000149…), then to e5m2: 0x2e = 1.5·2^-4 = 0.09375
      { input: String(Math.fround(0.1)), code: 0x2e, hex: '0x2e', value: '0.09375' },
    ]);
  });

  it('stochastic mode is reproducible from --seed', async () => {
    const args = ['cast', '--format', 'e2m1', '--profile', 'satfinite', '--mode', 'stochastic', '--json'];
    const a = await runCli([...args, '--seed', '3', ...Array(16).fill('2.5')]);
    const b = await runCli([...args, '--seed', '3', ...Array(16).fill('2.5')]);
    expect(a.out).toBe(b.out);
    const values = new Set(JSON.parse(a.out).results.map((x: { value: string }) => x.value));
    expect(values).toEqual(new Set(['2', '3']));
  });

  it.each([
    [['--format', 'e9m9', '--profile', 'ieee', '1'], /--format: unknown format 'e9m9'/],
    [['--format', 'e4m3fn', '--profile', 'nope', '1'], /--profile: unknown profile 'nope'/],
    [['--format', 'e2m1', '--profile', 'ieee', '1'], /profile 'ieee' does not apply to format 'e2m1'/],
    [['--format', 'e4m3fn', '--profile', 'ieee', 'abc'], /value 'abc' is not a number/],
    [['--format', 'e4m3fn', '--profile', 'ieee', '-1'], /put '--' before negative values/],
    [['--format', 'e4m3fn', '--profile', 'ieee', '--mode', 'up', '1'], /--mode: unknown mode 'up'/],
    [['--profile', 'ieee', '1'], /missing required option --format/],
    [['--format', 'e4m3fn', '--profile', 'ieee'], /no VALUES/],
  ])('bad input %j exits 2 with one line', async (args, message) => {
    const r = await runCli(['cast', ...args]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(r.err.trim().split('\n')).toHaveLength(1);
  });

  it('the installed bin works (built by npm run build, which npm start and npm test run first)', () => {
    if (!existsSync('dist/cli/main.js'))
      throw new Error('dist/ missing: run npm run build (npm ci does it through prepare)');
    const ok = spawnSync(
      process.execPath,
      ['bin/qrl-sim.js', 'cast', '--format', 'e4m3fn', '--profile', 'ieee', '470'],
      { encoding: 'utf8' },
    );
    expect(ok.status).toBe(0);
    expect(ok.stdout).toMatch(/0x7f\s+NaN/);
    const bad = spawnSync(process.execPath, ['bin/qrl-sim.js', 'cast', '--format', 'x', '--profile', 'ieee', '1'], {
      encoding: 'utf8',
    });
    expect(bad.status).toBe(2);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
  });
});
