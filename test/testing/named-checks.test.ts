// `namedChecks` is the battery's one list: every row runConformance writes that can fail is in it,
// and every entry is a row the battery writes (on the reference backend, dense, MoE and diffusion, with a
// config, with and without probSqSum), so the docs table and the mutation tests cannot drift from it.

import { describe, expect, it } from 'vitest';
import { ReferenceBackend } from '../../src/backend/reference.js';
import { arPolicyFactory } from '../../src/policies/ar/engine.js';
import { diffusionPolicyFactory } from '../../src/policies/diffusion/engine.js';
import { resolveRunConfig } from '../../src/rl/index.js';
import { isCheck, namedChecks } from '../../src/testing/request-checks.js';
import { makeTaskFromConfig } from '../../src/tasks/registry.js';
import { servedConformance } from './served.js';

const rowsOf = (config: ReturnType<typeof resolveRunConfig>, withConfig: boolean) =>
  servedConformance(
    new ReferenceBackend(
      config,
      config.policy.kind === 'diffusion' ? diffusionPolicyFactory : arPolicyFactory,
      makeTaskFromConfig(config.task),
    ),
    withConfig ? { config } : {},
  );

describe('namedChecks', () => {
  it('names every check the battery can fail, and nothing it never writes', async () => {
    const task = { name: 'reverse', options: { minLength: 3, maxLength: 4 } };
    const dense = resolveRunConfig({
      seed: 0,
      task,
      policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 16 } },
      plan: 'fp8-rollout',
    });
    const moe = resolveRunConfig({
      seed: 0,
      task,
      policy: {
        kind: 'ar',
        model: { C: 16, H: 2, layers: 1, hidden: 16, moe: { experts: 4, topK: 2, auxCoeff: 0.01 } },
      },
      plan: 'bf16',
    });
    const diffusion = resolveRunConfig({
      seed: 0,
      task,
      policy: {
        kind: 'diffusion',
        model: { C: 16, H: 2, layers: 1, hidden: 16 },
        diffusion: { generationLength: 8, blockLength: 4, steps: 4 },
      },
      plan: 'bf16',
      sft: { steps: 0 },
    });
    const rows = [...(await rowsOf(dense, true)), ...(await rowsOf(moe, false)), ...(await rowsOf(diffusion, true))];
    const canFail = rows.filter((r) => r.status !== 'info').map((r) => r.check);
    expect(canFail.filter((c) => !namedChecks.some((n) => isCheck(c, n.check)))).toEqual([]);
    // every entry is written by some run above, but for the rows that need a flag or another plan side
    // (a row written only when its call fails, a flag, the other kind of plan sides, a backend that serves a sampler other than its configured one)
    const elsewhere = new Set([
      'setReference',
      'kill → resume: files byte-identical',
      'ℓroll vs ℓ (same sides, max|δ| ≤ tolerance)',
      'ℓroll is the engine’s',
      'processed ℓroll at τ ≠ 1 is not the raw one',
    ]);
    const written = rows.map((r) => r.check);
    expect(
      namedChecks
        .filter((n) => !elsewhere.has(n.check) && !written.some((w) => isCheck(w, n.check)))
        .map((n) => n.check),
    ).toEqual([]);
  }, 120_000);
});
