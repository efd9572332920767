// `qrl-sim mismatch` in-process: JSON keys, reproducibility, zero mismatch for identical sides, usage errors.
// Not the probe's numerics (test/policies/ar covers those).

import { describe, expect, it } from 'vitest';
import { runCli } from './io.js';

describe('qrl-sim mismatch', () => {
  it('prints the diagnostics as JSON with the documented keys; same seed ⇒ same output', async () => {
    const a = await runCli(['mismatch', '--policy', 'ar', '--plan', 'bf16-splitk', '--length', '12', '--seed', '3', '--json']);
    expect(a.code).toBe(0);
    const r = JSON.parse(a.out);
    expect(Object.keys(r)).toEqual(['policy', 'plan', 'length', 'tokens', 'k1', 'k3', 'meanAbsDp', 'meanAbsDelta', 'maxAbsDelta', 'ess', 'fracAbsDeltaGt1e-3']);
    expect(r).toMatchObject({ policy: 'ar', plan: 'bf16-splitk', length: 12, tokens: 16 * 12 });
    expect(r.meanAbsDelta).toBeGreaterThan(0);
    expect(r.k3).toBeGreaterThanOrEqual(0);
    expect((await runCli(['mismatch', '--policy', 'ar', '--plan', 'bf16-splitk', '--length', '12', '--seed', '3', '--json'])).out).toBe(a.out);
    for (const plan of ['fp32', 'bf16', 'fp16']) {
      const z = JSON.parse((await runCli(['mismatch', '--policy', 'ar', '--plan', plan, '--length', '6', '--batch', '4', '--json'])).out);
      expect([z.k1, z.k3, z.maxAbsDelta, z.ess]).toEqual([0, 0, 0, 1]);
    }
  });

  it('prints a table without --json', async () => {
    const t = await runCli(['mismatch', '--policy', 'ar', '--plan', 'fp32', '--length', '4', '--batch', '2']);
    expect(t.code).toBe(0);
    expect(t.out).toMatch(/^tokens\s+8$/m);
  });

  it('bad input exits 2 with one line naming the flag', async () => {
    const cases: [string[], RegExp][] = [
      [['--plan', 'bf16'], /--policy/],
      [['--policy', 'diffusion', '--plan', 'bf16'], /--policy: 'diffusion' is not available yet/],
      [['--policy', 'gpt', '--plan', 'bf16'], /--policy/],
      [['--policy', 'ar'], /--plan/],
      [['--policy', 'ar', '--plan', 'fp7'], /--plan: expected one of fp32, bf16, bf16-splitk, fp16/],
      [['--policy', 'ar', '--plan', 'bf16', '--length', '0'], /--length/],
      [['--policy', 'ar', '--plan', 'bf16', '--temperature', 'hot'], /--temperature/],
      [['--policy', 'ar', '--plan', 'bf16', '--checkpoint', '/nonexistent/x.json'], /--checkpoint/],
    ];
    for (const [args, re] of cases) {
      const r = await runCli(['mismatch', ...args]);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(re);
      expect(r.err.trim().split('\n')).toHaveLength(1);
    }
  });
});
