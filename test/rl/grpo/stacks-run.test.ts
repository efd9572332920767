// The GRPO loop with the stacks' options: AReaL's log-linear proximal policy, slime's OPSM form (per
// mini-batch on ℓθ), TOPR (row rewards) and the stacks' metric names.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readJsonl } from '../../../src/core/files.js';
import { resolveRunConfig } from '../../../src/rl/index.js';
import type { MetricRecord } from '../../../src/rl/types.js';
import { applyOverrides, policyFactory, runGrpo } from '../../../src/runs/index.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-grpo-stacks-'));
const cacheDir = join(root, 'sft-cache');
afterAll(() => rmSync(root, { recursive: true, force: true }));

function config(overrides: string[]) {
  const raw = {
    seed: 5,
    steps: 2,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
    plan: 'bf16',
    sft: { steps: 20, batchSize: 16 },
    rollout: { prompts: 4, groupSize: 4 },
    eval: { every: 0, problems: 8 },
    checkpoint: { every: 2 },
  };
  return resolveRunConfig(applyOverrides(raw, overrides));
}
const run = (dir: string, overrides: string[]) =>
  runGrpo({ config: config(overrides), outDir: join(root, dir), factory: policyFactory('ar'), cacheDir });
const weights = (dir: string) =>
  JSON.parse(readFileSync(join(root, dir, 'checkpoints', 'step-000002', 'backend.json'), 'utf8')).weights;

describe('GRPO loop with the stacks options', () => {
  it('loglinear proximal policy with no version lag is ℓold := ℓroll: the same update as bypass mode, without a recompute', async () => {
    await run('byp', ['estimators.mode=bypass']);
    await run('loglin', ['estimators.proxLogp={"method":"loglinear"}']);
    expect(weights('loglin')).toEqual(weights('byp'));
    expect(readJsonl<{ old: number }>(join(root, 'loglin', 'timings.jsonl')).map((r) => r.old)).toEqual([0, 0]);
    expect(() => config(['estimators.proxLogp={"method":"loglinear"}', 'estimators.mode=bypass'])).toThrow(
      /config\.estimators\.proxLogp/,
    );
  }, 300_000);

  it("slime's OPSM form, TOPR and every stack's metric set run deterministically and log the stacks' names", async () => {
    const o = [
      'estimators.correction={"name":"opsm","form":"slime","delta":0}',
      'estimators.loss={"name":"topr"}',
      'estimators.diagnostics={"stacks":["slime","skyrl","roll","trl","areal","prime-rl","nemo-rl","openrlhf","verl"]}',
    ];
    await run('s1', o);
    await run('s2', o);
    expect(readFileSync(join(root, 's2', 'metrics.jsonl'), 'utf8')).toBe(
      readFileSync(join(root, 's1', 'metrics.jsonl'), 'utf8'),
    );
    const line = readJsonl<MetricRecord>(join(root, 's1', 'metrics.jsonl'))[0]!;
    for (const k of [
      'train/train_rollout_logprob_abs_diff',
      'actor/train_infer_ratio_token_mean',
      'sampling/sampling_logp_difference/mean',
      'vllm_kl',
      'rollout_corr/opsm/masked_fraction',
      'actor/topr_positive_ratio',
    ]) {
      expect(line[k], k).toBeTypeOf('number');
    }
  }, 300_000);
});
