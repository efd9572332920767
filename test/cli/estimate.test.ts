// Tests of the qrl-sim estimate command in-process: JSON contract, stdin/files, determinism, exit code 2 errors.
// Not a source of expected numbers: every expected value is derived in the test itself.

import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../src/cli/command.js';
import { main } from '../../src/cli/main.js';

function capture(stdin = ''): CliIo & { outText: () => string; errLines: () => string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out: (t) => out.push(t),
    err: (t) => err.push(t),
    readStdin: async () => stdin,
    outText: () => out.join(''),
    errLines: () =>
      err
        .join('')
        .split('\n')
        .filter((l) => l.length > 0),
  };
}

const batch = {
  logpTheta: [
    [-1.0, -0.5, -2.0],
    [-0.3, -1.2, 0],
  ],
  logpOld: [
    [-1.1, -0.5, -2.1],
    [-0.3, -1.0, 0],
  ],
  logpRollout: [
    [-1.2, -0.4, -2.0],
    [-0.35, -1.1, 0],
  ],
  logpRef: [
    [-1.0, -0.6, -2.0],
    [-0.3, -1.1, 0],
  ],
  mask: [
    [1, 1, 1],
    [1, 1, 0],
  ],
  rewards: [1, 0],
  groups: [0, 0],
  config: {
    advantage: { name: 'drgrpo' },
    correction: { name: 'ais' },
    loss: { name: 'ppo-clip' },
    kl: { name: 'k3', coef: 0.1 },
  },
};
const dir = mkdtempSync(join(tmpdir(), 'qrl-estimate-'));

describe('qrl-sim estimate', () => {
  it('reads a file and prints the output contract', async () => {
    const file = join(dir, 'batch.json');
    writeFileSync(file, JSON.stringify(batch));
    const io = capture();
    expect(await main(['estimate', '--input', file], io)).toBe(0);
    const out = JSON.parse(io.outText()) as Record<string, unknown>;
    expect(Object.keys(out).sort()).toEqual([
      'advantages',
      'gradLogpTheta',
      'loss',
      'mask',
      'metrics',
      'tokenLoss',
      'weights',
    ]);
    expect(out['mask']).toEqual([
      [1, 1, 1],
      [1, 1, 0],
    ]);
    expect(typeof out['loss']).toBe('number');
    const m = out['metrics'] as Record<string, number>;
    expect(m['rollout_corr/ais/alpha']).toBeGreaterThan(0);
    expect(m['rollout_corr/ais/alpha_mis']).toBe(1); // d̄ = 0.09 > δ = 0.02
    // AIS: advantages are rectified, Ã = w̃·A (drgrpo: A = ±0.5)
    const w = out['weights'] as number[][];
    const a = out['advantages'] as number[][];
    expect(a[0]![0]).toBeCloseTo(0.5 * w[0]![0]!, 15);
    expect(a[1]![2]).toBe(0);
    expect((out['gradLogpTheta'] as number[][])[1]![2]).toBe(0);
  });

  it('reads standard input with --input - and writes --output', async () => {
    const file = join(dir, 'out.json');
    const io = capture(JSON.stringify(batch));
    expect(await main(['estimate', '--input', '-', '--output', file], io)).toBe(0);
    expect(io.outText()).toBe('');
    const viaFile = JSON.parse(readFileSync(file, 'utf8')) as { loss: number };
    const io2 = capture(JSON.stringify(batch));
    await main(['estimate', '--input', '-'], io2);
    expect(viaFile).toEqual(JSON.parse(io2.outText()));
  });

  it('is deterministic byte for byte', async () => {
    const a = capture(JSON.stringify(batch));
    const b = capture(JSON.stringify(batch));
    await main(['estimate', '--input', '-'], a);
    await main(['estimate', '--input', '-'], b);
    expect(a.outText()).toBe(b.outText());
  });

  const bad: [string, unknown, string][] = [
    [
      'ragged rows',
      {
        ...batch,
        logpOld: [
          [-1, -2, -3],
          [-1, -2],
        ],
      },
      'logpOld[1]: expected 3 entries, got 2',
    ],
    [
      'NaN where not allowed',
      {
        ...batch,
        logpTheta: [
          [-1, 'NaN', -3],
          [-1, -2, 0],
        ],
      },
      'logpTheta[0][1]: expected a finite number, got "NaN"',
    ],
    [
      'unknown estimator',
      { ...batch, config: { correction: { name: 'tis2' } } },
      'config.correction.name: unknown estimator "tis2"',
    ],
    [
      'bad hyper-parameter',
      { ...batch, config: { correction: { name: 'tis', C: -1 } } },
      'config.correction.C: must be > 0, got -1',
    ],
    [
      'bad loss parameter',
      { ...batch, config: { loss: { name: 'tbpo', C: 0.5 } } },
      'config.loss.C: must be >= 1, got 0.5',
    ],
  ];
  for (const [what, input, expected] of bad) {
    it(`exits 2 with one line naming the field: ${what}`, async () => {
      const io = capture(JSON.stringify(input));
      expect(await main(['estimate', '--input', '-'], io)).toBe(2);
      expect(io.errLines()).toHaveLength(1);
      expect(io.errLines()[0]).toContain(`qrl-sim estimate: ${expected}`);
      expect(io.outText()).toBe('');
    });
  }

  it('usage errors: missing --input, unknown option, unreadable file, invalid JSON', async () => {
    for (const [args, stdin, expected] of [
      [['estimate'], '', '--input: required'],
      [['estimate', '--input', '-', '--frobnicate'], '{}', "Unknown option '--frobnicate'"],
      [['estimate', '--input', join(dir, 'missing.json')], '', '--input: cannot read'],
      [['estimate', '--input', '-'], '{"logpTheta": [', 'input is not valid JSON'],
    ] as [string[], string, string][]) {
      const io = capture(stdin);
      expect(await main(args, io)).toBe(2);
      expect(io.errLines()).toHaveLength(1);
      expect(io.errLines()[0]).toContain(expected);
    }
  });

  it('the worked example of docs/estimators.md reproduces the documented loss', async () => {
    const io = capture();
    expect(await main(['estimate', '--input', 'docs/examples/estimate-ais.json'], io)).toBe(0);
    const out = JSON.parse(io.outText()) as { loss: number; metrics: Record<string, number> };
    const doc = readFileSync('docs/estimators.md', 'utf8');
    expect(doc).toContain(`loss          ${out.loss}`);
    expect(doc).toContain(`rollout_corr/ais/alpha              ${out.metrics['rollout_corr/ais/alpha']}`);
  });

  it('--help prints the contract', async () => {
    const io = capture();
    expect(await main(['estimate', '--help'], io)).toBe(0);
    expect(io.outText()).toContain('gradLogpTheta');
    expect(io.outText()).toContain('--input FILE|-');
  });
});
