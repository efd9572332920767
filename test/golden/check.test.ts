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
    const cli = await runCli(['cast', '--format', 'e4m3fn', '--profile', 'satfinite', '--json', '--', '464', '-0', 'NaN', '1e6']);
    expect(castJson({ format: 'e4m3fn', profile: 'satfinite', inputs: ['464', '-0', 'NaN', '1e6'] })).toEqual(JSON.parse(cli.out));
    const input = [[1, -2, 3.5, 0], [0.1, 0.2, 'NaN', 400]];
    const q = await runCli(['quantize', '--preset', 'mxfp4', '--block', '2', '--input', '-', '--json'], JSON.stringify(input));
    expect(quantizeJson({ preset: 'mxfp4', block: 2, input })).toEqual(JSON.parse(q.out));
  });

  it.runIf(hasNumpy)('passes a correct numpy implementation and lists the fields compared', async () => {
    const r = await runCli(['check', '--impl', impl, '--suite', 'estimators', '--config', config, '--runs', '40']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/40 cases passed .*fields compared: advantages, gradLogpTheta, loss, mask, tokenLoss, weights/);
  });

  it.runIf(hasNumpy)('finds the planted bugs with a small counterexample', async () => {
    for (const [bug, field] of [['no-cap', /weights|loss|tokenLoss|gradLogpTheta/], ['wrong-mask', /loss|gradLogpTheta/]] as const) {
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

  it('an unknown suite or a missing --impl exits 2', async () => {
    expect((await runCli(['check', '--impl', 'true', '--suite', 'nope'])).code).toBe(2);
    expect((await runCli(['check', '--suite', 'casts'])).code).toBe(2);
  });
});
