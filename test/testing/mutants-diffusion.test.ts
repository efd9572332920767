// Mutation testing of backend-check's diffusion rows: each mutant of
// test/fixtures/backends/sdk_diffusion_mutant.py (qrl_backend.numpy_diffusion with one planted bug) is
// refused by a diffusion row that names its bug class in `namedChecks`, through the real CLI and process
// boundary; the unmutated numpy_diffusion and the in-process engine (`qrl-sim serve --policy diffusion`)
// pass every row.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import type { ConformanceRow } from '../../src/testing/conformance.js';
import { type BugClass, isCheck, namedChecks } from '../../src/testing/request-checks.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-mutants-diffusion-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const config = (estimator: string, sampler?: object): string => {
  const path = join(root, `${estimator}${sampler ? '-sampler' : ''}.json`);
  writeFileSync(
    path,
    JSON.stringify({
      task: { name: 'reverse', options: {} },
      policy: {
        kind: 'diffusion',
        model: { C: 16, H: 2, layers: 1, hidden: 32 },
        ...(sampler ? { sampler } : {}),
        diffusion: { generationLength: 8, blockLength: 4, steps: 4, estimator },
      },
      plan: 'bf16',
      sft: { steps: 0 },
    }),
  );
  return path;
};
const fixture = join(process.cwd(), 'test/fixtures/backends/sdk_diffusion_mutant.py');
const numpy = `PYTHONPATH=${join(process.cwd(), 'python')} python3 -m qrl_backend.numpy_diffusion`;

async function check(backend: string, cfg: string): Promise<{ code: number; rows: ConformanceRow[] }> {
  const out: string[] = [];
  const io = { out: (t: string) => out.push(t), err: () => undefined };
  const code = await main(
    ['backend-check', '--backend', backend, '--config', cfg, '--batch', '4', '--json'],
    io as never,
  );
  return { code, rows: (JSON.parse(out.join('')) as { rows: ConformanceRow[] }).rows };
}

const diffusionRows = namedChecks.filter((c) =>
  Object.values(c.when ?? {}).some((w) => w?.startsWith('policy diffusion')),
);

describe('backend-check against mutants of numpy_diffusion', () => {
  it.each([
    ['numpy_diffusion', numpy, 'trajectory'],
    ['numpy_diffusion', numpy, 'd1'],
    ['the in-process engine', 'node bin/qrl-sim.js serve --policy diffusion', 'elbo'],
  ])(
    'passes %s (%s) on every diffusion row',
    async (_name, backend, estimator) => {
      const { code, rows } = await check(backend, config(estimator));
      expect(rows.filter((r) => r.status === 'FAIL')).toEqual([]);
      for (const c of diffusionRows) expect(rows.find((r) => r.check === c.check)?.status, c.check).toBe('ok');
      expect(code).toBe(0);
    },
    120_000,
  );

  const mutants: readonly (readonly [string, BugClass, string])[] = [
    ['block-leak', 'diffusion schedule broken', 'd1'],
    ['front-loaded-schedule', 'diffusion schedule broken', 'd1'],
    ['stale-record', 'diffusion record not replayed', 'trajectory'],
    ['fixed-views', 'diffusion record not replayed', 'd1'],
    ['estimator-ignored', 'estimator ignored', 'trajectory'],
    ['temperature-recorded-as-1', 'temperature recorded as 1', 'd1'],
    ['temperature-ignored', 'temperature ignored', 'elbo'],
  ];
  it.each(mutants)(
    'catches %s (%s) by a diffusion row',
    async (name, bug, estimator) => {
      const { code, rows } = await check(`python3 ${fixture} --mutant ${name}`, config(estimator));
      const failed = rows.filter((r) => r.status === 'FAIL').map((r) => r.check);
      const claimed = diffusionRows.filter((c) => c.catches.includes(bug)).map((c) => c.check);
      expect(
        failed.filter((f) => claimed.some((c) => isCheck(f, c))),
        `${name}: failed ${JSON.stringify(failed)}`,
      ).not.toEqual([]);
      expect(code).toBe(1);
    },
    120_000,
  );

  // A cut support replayed (top-k 4, supportReplay): ℓroll and the trainer's ℓ are the same quantity, so the
  // ℓroll = ℓ rows compare them, and a trainer that drops record.support (scores the whole vocabulary) fails;
  // a record that does not carry it fails the record row.
  const replay = { topK: 4, supportReplay: true };
  const replayRows = namedChecks.filter((c) => c.catches.includes('support replay ignored')).map((c) => c.check);
  it.each(['trajectory', 'd1', 'elbo'])(
    'top-k with supportReplay (%s): numpy_diffusion compared and passes, support-ignored caught',
    async (estimator) => {
      const ok = await check(numpy, config(estimator, replay));
      expect(ok.rows.filter((r) => r.status === 'FAIL')).toEqual([]);
      for (const c of replayRows) expect(ok.rows.find((r) => isCheck(r.check, c))?.status, c).toBe('ok');
      const bad = await check(`python3 ${fixture} --mutant support-ignored`, config(estimator, replay));
      const failed = bad.rows.filter((r) => r.status === 'FAIL').map((r) => r.check);
      expect(failed.filter((f) => replayRows.some((c) => isCheck(f, c))).length, JSON.stringify(failed)).toBe(2);
      expect(bad.code).toBe(1);
      // a record without the kept set: the trainer cannot replay it, and the record row says so
      const unrecorded = await check(`python3 ${fixture} --mutant support-not-recorded`, config(estimator, replay));
      const row = unrecorded.rows.find((r) => r.check === 'diffusion record well-formed');
      expect(row?.status).toBe('FAIL');
      expect(row?.detail).toMatch(/^record\.support is absent, but the config replays/);
      expect(unrecorded.code).toBe(1);
    },
    120_000,
  );
});
