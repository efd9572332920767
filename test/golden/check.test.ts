// Tests of `qrl-sim check`: the numpy example passes, its planted bugs give small shrunk
// counterexamples (exit 1), and the reference methods equal the CLI's JSON.

import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { castJson, quantizeJson } from '../../src/golden/methods.js';
import { runCli } from '../cli/io.js';

const impl = 'python3 python/examples/numpy_estimators.py --serve';
const config = 'python/examples/configs/tis-ppo.json';
const hasNumpy = spawnSync('python3', ['-c', 'import numpy'], { encoding: 'utf8' }).status === 0;

describe('check', () => {
  it('cast and quantize methods return exactly the CLI JSON', async () => {
    const cli = await runCli([
      'cast',
      '--format',
      'e4m3fn',
      '--profile',
      'satfinite',
      '--json',
      '--',
      '464',
      '-0',
      'NaN',
      '1e6',
    ]);
    expect(castJson({ format: 'e4m3fn', profile: 'satfinite', inputs: ['464', '-0', 'NaN', '1e6'] })).toEqual(
      JSON.parse(cli.out),
    );
    const input = [
      [1, -2, 3.5, 0],
      [0.1, 0.2, 'NaN', 400],
    ];
    const q = await runCli(
      ['quantize', '--preset', 'mxfp4', '--block', '2', '--input', '-', '--json'],
      JSON.stringify(input),
    );
    expect(quantizeJson({ preset: 'mxfp4', block: 2, input })).toEqual(JSON.parse(q.out));
  });

  it.runIf(hasNumpy)('passes a correct numpy implementation and lists the fields compared', async () => {
    const r = await runCli(['check', '--impl', impl, '--suite', 'estimators', '--config', config, '--runs', '40']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(
      /40 cases passed .*fields compared: advantages, gradLogpTheta, loss, mask, tokenLoss, weights/,
    );
  });

  it.runIf(hasNumpy)('finds the planted bugs with a small counterexample', async () => {
    for (const [bug, field] of [
      ['no-cap', /weights|loss|tokenLoss|gradLogpTheta/],
      ['wrong-mask', /loss|gradLogpTheta/],
    ] as const) {
      process.env.QRL_BUG = bug;
      try {
        const r = await runCli(['check', '--impl', impl, '--suite', 'estimators', '--config', config, '--runs', '100']);
        expect(r.code).toBe(1);
        expect(r.out).toMatch(field);
        const json = JSON.parse(r.out.slice(r.out.indexOf('\n{') + 1));
        expect(json.mask.length).toBeLessThanOrEqual(2);
        expect(json.mask[0].length).toBeLessThanOrEqual(2);
      } finally {
        delete process.env.QRL_BUG;
      }
    }
  });

  it.runIf(hasNumpy)('casts: the numpy bf16 cast passes; its truncating variant fails on one value', async () => {
    const cast = [
      'check',
      '--impl',
      'python3 python/examples/numpy_cast.py',
      '--suite',
      'casts',
      '--config',
      'python/examples/configs/bf16-ieee.json',
      '--runs',
      '60',
    ];
    expect((await runCli(cast)).code).toBe(0);
    process.env.QRL_BUG = 'truncate';
    try {
      const r = await runCli(cast);
      expect(r.code).toBe(1);
      expect(JSON.parse(r.out.slice(r.out.indexOf('\n{') + 1)).inputs).toHaveLength(1);
    } finally {
      delete process.env.QRL_BUG;
    }
  });

  it('an unknown suite or a missing --impl exits 2', async () => {
    expect((await runCli(['check', '--impl', 'true', '--suite', 'nope'])).code).toBe(2);
    expect((await runCli(['check', '--suite', 'casts'])).code).toBe(2);
  });
});

describe('check against qrl-sim itself (every method, configurations drawn too)', () => {
  const self = 'node --import tsx test/golden/fixtures/self-impl.ts';
  it.each(['estimators', 'casts', 'quantizers'])('%s passes', async (suite) => {
    const r = await runCli(['check', '--impl', self, '--suite', suite, '--runs', '25', '--seed', '3']);
    expect(r.code, r.out + r.err).toBe(0);
  });

  it('a quantizer with scales one ulp off is caught on a small input', async () => {
    process.env.QRL_BUG = 'scale';
    try {
      const r = await runCli(['check', '--impl', self, '--suite', 'quantizers', '--runs', '50']);
      expect(r.code).toBe(1);
      expect(r.out).toMatch(/first difference: scales/);
    } finally {
      delete process.env.QRL_BUG;
    }
  });
});
