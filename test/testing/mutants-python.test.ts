// Mutation testing of backend-check against the Python SDK's backends: each mutant of
// test/fixtures/backends/sdk_mutant.py — over numpy_ar, and (four of them) over the transformers
// backend hf — is caught by a check that names its bug class in `namedChecks`, through the real CLI
// and process boundary; the unmutated numpy_ar passes (the unmutated hf: test/python/hf-backend.test.ts).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import type { ConformanceRow } from '../../src/testing/conformance.js';
import { type BugClass, isCheck, namedChecks } from '../../src/testing/request-checks.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-mutants-numpy-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const config = join(root, 'run.json');
writeFileSync(
  config,
  JSON.stringify({
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
    plan: 'fp32',
  }),
);
// the same run with a top-k 4 sampler whose kept set is replayed (policy.sampler.supportReplay)
const replayConfig = join(root, 'replay.json');
writeFileSync(
  replayConfig,
  JSON.stringify({
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 }, sampler: { topK: 4, supportReplay: true } },
    plan: 'fp32',
  }),
);
const fixture = join(process.cwd(), 'test/fixtures/backends/sdk_mutant.py');

async function check(
  backend: string,
  withConfig: boolean | string = true,
): Promise<{ code: number; rows: ConformanceRow[] }> {
  const out: string[] = [];
  const io = { out: (t: string) => out.push(t), err: () => undefined };
  const configArgs = withConfig === false ? [] : ['--config', withConfig === true ? config : withConfig];
  const code = await main(
    ['backend-check', '--backend', backend, ...configArgs, '--batch', '4', '--json'],
    io as never,
  );
  return { code, rows: (JSON.parse(out.join('')) as { rows: ConformanceRow[] }).rows };
}

const mutants: Readonly<Record<string, BugClass>> = {
  'rows-ignored': 'rows ignored',
  'random-greedy': 'random greedy',
  'max-new-tokens-ignored': 'maxNewTokens ignored',
  'sync-keeps-old-weights': 'sync keeps old weights',
  'off-by-one-logprobs': 'off-by-one log-probs',
  'gradient-sign': 'gradient sign',
  'unfrozen-reference': 'unfrozen reference',
  'version-not-advanced': 'version not advanced',
  'seed-ignored': 'seed ignored',
  'topk-second-first': 'top-k not the most likely',
  'topk-drops-sampled': 'sampled token outside the top-k support',
  'temperature-ignored': 'temperature ignored',
};
/** Mutants that only a run with a replayed top-k support exposes (checked with `replayConfig`). */
const replayMutants: Readonly<Record<string, BugClass>> = { 'support-ignored': 'support replay ignored' };

describe('backend-check against mutants of numpy_ar', () => {
  it('passes the unmutated numpy_ar', async () => {
    const { code, rows } = await check(`PYTHONPATH=${join(process.cwd(), 'python')} python3 -m qrl_backend.numpy_ar`);
    expect(rows.filter((r) => r.status === 'FAIL')).toEqual([]);
    expect(code).toBe(0);
  }, 120_000);

  it('passes the unmutated numpy_ar under a replayed top-k support, comparing ℓroll with ℓ', async () => {
    const { code, rows } = await check(
      `PYTHONPATH=${join(process.cwd(), 'python')} python3 -m qrl_backend.numpy_ar`,
      replayConfig,
    );
    expect(rows.filter((r) => r.status === 'FAIL')).toEqual([]);
    expect(rows.find((r) => r.check.startsWith('ℓroll vs ℓ (same sides'))?.status).toBe('ok');
    expect(code).toBe(0);
  }, 120_000);

  it.each([
    ...Object.entries(mutants).map(([name, bug]) => [name, bug, config] as const),
    ...Object.entries(replayMutants).map(([name, bug]) => [name, bug, replayConfig] as const),
  ])(
    'catches %s',
    async (name, bug, runConfig) => {
      const { code, rows } = await check(`python3 ${fixture} --mutant ${name}`, runConfig);
      const failed = rows.filter((r) => r.status === 'FAIL').map((r) => r.check);
      const claimed = namedChecks.filter((c) => c.catches.includes(bug)).map((c) => c.check);
      expect(
        failed.filter((f) => claimed.some((c) => isCheck(f, c))),
        `${name}: failed ${JSON.stringify(failed)}`,
      ).not.toEqual([]);
      expect(code).toBe(1);
    },
    120_000,
  );
});

const model = JSON.stringify({
  hidden_size: 32,
  intermediate_size: 64,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
});
describe('backend-check against mutants of the transformers backend (hf)', () => {
  it.each(['sync-keeps-old-weights', 'rows-ignored', 'off-by-one-logprobs', 'gradient-sign'])(
    'catches %s',
    async (name) => {
      const bug = mutants[name]!;
      const { code, rows } = await check(
        `python3 ${fixture} --mutant ${name} --hf --model '${model}' --plan hf-bf16 --vocab-size 13 --max-new-tokens 6`,
        false,
      );
      const failed = rows.filter((r) => r.status === 'FAIL').map((r) => r.check);
      const claimed = namedChecks.filter((c) => c.catches.includes(bug)).map((c) => c.check);
      expect(
        failed.filter((f) => claimed.some((c) => isCheck(f, c))),
        `${name}: failed ${JSON.stringify(failed)}`,
      ).not.toEqual([]);
      expect(code).toBe(1);
    },
    180_000,
  );
});
