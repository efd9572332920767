// `qrl-sim diverge` in-process: the AR plan mode (JSON report, reproducible), the dumps it writes read
// back by --dump to the same report, a plan file, and usage errors (exit 2, one line naming the option).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { precisionPlan } from '../../src/policies/plans.js';
import { runCli } from './io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-diverge-cli-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('qrl-sim diverge', () => {
  it('--policy ar --plan fp8-rollout: rows in forward order, the first FP8 GEMM flagged; same seed ⇒ same output', async () => {
    const args = ['diverge', '--policy', 'ar', '--plan', 'fp8-rollout', '--length', '4', '--json'];
    const a = await runCli(args);
    expect(a.code).toBe(0);
    const r = JSON.parse(a.out);
    expect(r).toMatchObject({
      policy: 'ar',
      plan: 'fp8-rollout',
      format: 'bf16',
      tolerance: 4,
      firstDiffer: 'h0.q',
      firstDivergence: 'h0.q',
    });
    expect(r.rows[0].name).toBe('embed');
    expect(r.rows.at(-1).name).toBe('logp');
    expect((await runCli(args)).out).toBe(a.out);
    const table = await runCli(['diverge', '--policy', 'ar', '--plan', 'fp8-rollout', '--length', '4']);
    expect(table.out).toMatch(/^h0\.q .*← exceeds$/m);
    expect(table.out).toMatch(/^firstDivergence +h0\.q$/m);
  });

  it('--write-dumps then --dump twice reproduces the report; a plan .json file works like the preset', async () => {
    const dir = join(root, 'dumps');
    const direct = JSON.parse(
      (
        await runCli([
          'diverge',
          '--policy',
          'ar',
          '--plan',
          'bf16-splitk',
          '--length',
          '3',
          '--write-dumps',
          dir,
          '--json',
        ])
      ).out,
    );
    const viaDumps = JSON.parse(
      (
        await runCli([
          'diverge',
          '--dump',
          join(dir, 'trainer.safetensors'),
          '--dump',
          join(dir, 'rollout.safetensors'),
          '--json',
        ])
      ).out,
    );
    expect(viaDumps.rows).toEqual(direct.rows);
    expect(viaDumps.firstDivergence).toBe(direct.firstDivergence);
    const file = join(root, 'plan.json');
    const p = precisionPlan('bf16-splitk');
    writeFileSync(file, JSON.stringify({ name: 'mine', rollout: p.rollout, trainer: p.trainer }));
    const fromFile = JSON.parse(
      (await runCli(['diverge', '--policy', 'ar', '--plan', file, '--length', '3', '--json'])).out,
    );
    expect(fromFile.plan).toBe('mine');
    expect(fromFile.rows).toEqual(direct.rows);
  });

  it.each([
    [['diverge', '--policy', 'ar'], /missing required option --plan/],
    [
      ['diverge', '--policy', 'ar', '--plan', 'nope'],
      /--plan: expected one of fp32, .* or a plan \.json file, got 'nope'/,
    ],
    [['diverge', '--policy', 'ar', '--plan', 'bf16', '--format', 'e8m0'], /--format: expected one of/],
    [
      ['diverge', '--policy', 'ar', '--plan', 'bf16', '--tolerance', '-1'],
      /--tolerance: expected a finite number ≥ 0, got '-1'/,
    ],
    [['diverge', '--dump', 'a.safetensors'], /--dump: give exactly two files/],
    [['diverge', '--dump', 'a', '--dump', 'b', '--plan', 'bf16'], /--plan: not used with --dump/],
    [
      ['diverge', '--dump', join(root, 'missing.safetensors'), '--dump', join(root, 'missing.safetensors')],
      /--dump reference: /,
    ],
    [['diverge', '--policy', 'diffusion', '--plan', 'bf16'], /--policy: expected ar/],
  ])('%j exits 2 with one line', async (argv, message) => {
    const r = await runCli(argv as string[]);
    expect(r.code).toBe(2);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toMatch(message);
  });
});
