// `qrl-sim backend-check`: passes on the numpy AR backend (fp32 and bf16) and on the in-test fake,
// fails (exit 1, the row named) on a backend whose step does not advance the weight version, and on
// one that answers garbage.

import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';

function capture(): { io: Parameters<typeof main>[1]; out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (t) => out.push(t), err: (t) => err.push(t), readStdin: async () => '' }, out, err };
}

const numpy = (plan: string): string =>
  `PYTHONPATH=python python3 -m qrl_backend.numpy_ar --config '{"vocabSize":13,"maxLen":12,"C":16,"H":2,"layers":1,"hidden":32}' --max-new-tokens 6 --plan ${plan}`;
const fake = (flags = ''): string => `node --import tsx test/protocol/fake-backend.ts ${flags}`;

describe('qrl-sim backend-check', () => {
  it.each(['fp32', 'bf16'])('passes on the numpy AR backend (%s)', async (plan) => {
    const c = capture();
    const code = await main(['backend-check', '--backend', numpy(plan), '--batch', '4'], c.io);
    const table = c.out.join('\n');
    expect(code, table).toBe(0);
    expect(table).toMatch(/conformance: all \d+ checks passed/);
    expect(table).toMatch(/ℓroll vs ℓ \(same sides.*ok +tokens \d+, k1 /);
  }, 120_000);

  it('passes on the in-test fake backend', async () => {
    const c = capture();
    expect(await main(['backend-check', '--backend', fake()], c.io), c.out.join('\n')).toBe(0);
  }, 120_000);

  it('exits 1 naming the violated check', async () => {
    const c = capture();
    const code = await main(['backend-check', '--backend', fake('--stale-version'), '--json'], c.io);
    expect(code).toBe(1);
    const { rows } = JSON.parse(c.out.join('')) as { rows: { check: string; status: string; detail: string }[] };
    const failed = rows.filter((r) => r.status === 'FAIL').map((r) => r.check);
    expect(failed).toContain('weight version advances after step');
    expect(failed).toContain('sync serves the new version');
  }, 120_000);

  it('exits 1 on a backend that answers garbage', async () => {
    const c = capture();
    const code = await main(['backend-check', '--backend', fake('--garbage-on logprobs')], c.io);
    expect(code).toBe(1);
    expect(c.out.join('\n')).toMatch(/logprobs shapes +FAIL .*not JSON/);
  }, 120_000);

  it('exits 2 without --backend', async () => {
    const c = capture();
    expect(await main(['backend-check'], c.io)).toBe(2);
    expect(c.err.join('')).toMatch(/--backend/);
  });
});
