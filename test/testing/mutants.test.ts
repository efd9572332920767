// Mutation testing of the conformance battery: every mutant of the reference backend
// (test/testing/mutants.ts) is caught, under a plan with identical sides (bf16) and one whose sides
// differ (fp8-rollout), by a check that names its bug class in `namedChecks`; the unmutated
// reference backend passes both. The table printed at the end is the mutation table of docs/adapter.md.

import { afterAll, describe, expect, it } from 'vitest';
import { ReferenceBackend } from '../../src/backend/reference.js';
import { arPolicyFactory } from '../../src/policies/ar/engine.js';
import { resolveRunConfig, type RunConfig } from '../../src/rl/index.js';
import { isCheck, namedChecks } from '../../src/testing/request-checks.js';
import { makeTaskFromConfig } from '../../src/tasks/registry.js';
import { mutants } from './mutants.js';
import { servedConformance } from './served.js';

const plans = ['bf16', 'fp8-rollout'] as const;
function configOf(plan: string, sampler?: RunConfig['policy']['sampler']): RunConfig {
  return resolveRunConfig({
    seed: 0,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 16 }, ...(sampler ? { sampler } : {}) },
    plan,
  });
}

const table: string[] = [];
afterAll(() => {
  if (process.env.QRL_MUTATION_TABLE)
    console.log(['| bug class | plan | caught by |', '| --- | --- | --- |', ...table].join('\n'));
});

describe.each(plans)('backend-check against mutants, plan %s', (plan) => {
  it('passes the unmutated reference backend', async () => {
    const config = configOf(plan);
    const rows = await servedConformance(
      new ReferenceBackend(config, arPolicyFactory, makeTaskFromConfig(config.task)),
    );
    expect(
      rows.filter((r) => r.status === 'FAIL'),
      JSON.stringify(rows, null, 1),
    ).toEqual([]);
  }, 120_000);

  // The samplers whose ℓroll is (processed τ 0.5, a cut support replayed) and is not (raw τ 0.5, top-k not
  // replayed, raw with a replayed support) the trainer's quantity: the ℓroll = ℓ rows compare the first and
  // only report the others (a raw ℓroll at τ ≠ 1 once failed them).
  it.each([
    ['processed τ 0.5', { temperature: 0.5, topK: 0, topP: 1, logprob: 'processed', supportReplay: false }, true],
    ['raw τ 0.5', { temperature: 0.5, topK: 0, topP: 1, logprob: 'raw', supportReplay: false }, false],
    ['top-k 4', { temperature: 1, topK: 4, topP: 1, logprob: 'processed', supportReplay: false }, false],
    [
      'top-k 4, support replayed',
      { temperature: 1, topK: 4, topP: 1, logprob: 'processed', supportReplay: true },
      true,
    ],
    [
      'τ 0.7 top-p 0.9, support replayed',
      { temperature: 0.7, topK: 0, topP: 0.9, logprob: 'processed', supportReplay: true },
      true,
    ],
    ['raw top-k 4, support replayed', { temperature: 1, topK: 4, topP: 1, logprob: 'raw', supportReplay: true }, false],
  ] as const)(
    'passes the unmutated reference backend with the sampler %s',
    async (_, sampler, compared) => {
      const config = configOf(plan, sampler);
      const rows = await servedConformance(
        new ReferenceBackend(config, arPolicyFactory, makeTaskFromConfig(config.task)),
        { config },
      );
      expect(
        rows.filter((r) => r.status === 'FAIL'),
        JSON.stringify(rows, null, 1),
      ).toEqual([]);
      const ok = (check: string) => rows.some((r) => isCheck(r.check, check) && r.status === 'ok');
      expect(ok('ℓroll vs ℓ (same sides, max|δ| ≤ tolerance)')).toBe(compared && plan === 'bf16');
      expect(ok('trainer-side generate scored by the trainer')).toBe(compared);
      expect(ok('AR temperature recorded and honoured')).toBe(true);
    },
    120_000,
  );

  it.each(Object.keys(mutants))(
    'catches %s',
    async (name) => {
      const mutant = mutants[name]!;
      const config = configOf(plan, mutant.sampler);
      const identical = plan === 'bf16';
      const harmless =
        (mutant.harmlessWhen === 'identical sides' && identical) ||
        (mutant.harmlessWhen === 'different sides' && !identical);
      const rows = await servedConformance(mutant.make(config), mutant.checkedWithConfig ? { config } : {});
      const failed = rows.filter((r) => r.status === 'FAIL').map((r) => r.check);
      const claimed = namedChecks.filter((c) => c.catches.includes(mutant.bug)).map((c) => c.check);
      const catching = failed.filter((f) => claimed.some((c) => isCheck(f, c)));
      table.push(
        `| ${mutant.bug} | ${plan} | ${harmless ? '— (harmless under this plan)' : catching.map((c) => `\`${c}\``).join(', ')} |`,
      );
      if (harmless) return;
      expect(
        catching,
        `${name} under ${plan}: failed ${JSON.stringify(failed)}, claimed ${JSON.stringify(claimed)}`,
      ).not.toEqual([]);
    },
    120_000,
  );
});
