// A precision plan given as data in the run config: validated field by field with the path named,
// and a plan equal to a preset runs byte-identically to the preset's name. Not the presets' numerics
// (test/policies/plans*.test.ts and quantized.test.ts).

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { precisionPlan, resolvePlan } from '../../src/policies/index.js';
import { planOfConfig } from '../../src/policies/plans.js';
import { resolveRunConfig } from '../../src/rl/index.js';
import { runGrpo } from '../../src/runs/index.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-plan-data-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A run of a few seconds: two steps of a one-block AR policy on short reverse problems. */
const TINY_RUN = {
  seed: 0,
  steps: 2,
  task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
  policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
  sft: { steps: 4, batchSize: 8, cache: false },
  rollout: { prompts: 2, groupSize: 4 },
  eval: { every: 1, problems: 4 },
};

const asData = (name: string) =>
  JSON.parse(JSON.stringify({ rollout: precisionPlan(name).rollout, trainer: precisionPlan(name).trainer })) as Record<
    string,
    unknown
  >;

describe('plan as data', () => {
  it('resolves to the same sides as the preset it copies, named "custom" unless named', () => {
    const p = resolvePlan(asData('fp8-rollout') as never);
    expect(p.name).toBe('custom');
    expect(p.rollout).toEqual(precisionPlan('fp8-rollout').rollout);
    expect(p.trainer).toEqual(precisionPlan('fp8-rollout').trainer);
    expect(resolvePlan({ ...asData('bf16'), name: 'mine' } as never).name).toBe('mine');
  });

  it.each([
    ['unknown top-level key', { ...asData('bf16'), extra: 1 }, /config\.plan: unknown field 'extra'/],
    [
      'missing trainer',
      { rollout: asData('bf16')['rollout'] },
      /config\.plan\.trainer: expected an object, got undefined/,
    ],
    [
      'bad kind',
      { rollout: { gemm: { kind: 'int3' } }, trainer: asData('bf16')['trainer'] },
      /config\.plan\.rollout\.gemm\.kind: expected "fp32", "rounding" or "quantized", got "int3"/,
    ],
    [
      'unknown gemm key',
      { rollout: { gemm: { kind: 'rounding', operands: 'bf16', speed: 2 } }, trainer: asData('bf16')['trainer'] },
      /config\.plan\.rollout\.gemm: unknown field 'speed'/,
    ],
    [
      'bad decode',
      { rollout: { gemm: { kind: 'fp32' }, decode: 'fast' }, trainer: asData('bf16')['trainer'] },
      /config\.plan\.rollout\.decode: expected "incremental" or "recompute", got "fast"/,
    ],
    [
      'bad quantizer preset',
      {
        rollout: { gemm: { kind: 'quantized', weights: { preset: 'nope' }, activations: 'bf16' } },
        trainer: asData('bf16')['trainer'],
      },
      /config\.plan\.rollout\.gemm: .*weights.*nope/,
    ],
    ['unknown preset name', 'fp9', /config\.plan: must be one of .*got "fp9"/],
    ['empty name', { ...asData('bf16'), name: '' }, /config\.plan\.name: expected a non-empty string, got ""/],
    [
      'bad logprob',
      { rollout: { gemm: { kind: 'fp32' }, logprob: 'log' }, trainer: asData('bf16')['trainer'] },
      /config\.plan\.rollout\.logprob: expected "processed" or "raw", got "log"/,
    ],
    [
      'misspelt key before the missing one',
      { rollout: asData('bf16')['rollout'], trainr: asData('bf16')['trainer'] },
      /config\.plan: unknown field 'trainr' \(expected one of name, description, rollout, trainer\)/,
    ],
    [
      'gemm not an object',
      { rollout: { gemm: 'bf16' }, trainer: asData('bf16')['trainer'] },
      /config\.plan\.rollout\.gemm: expected an object, got "bf16"/,
    ],
  ])('%s is refused naming the path', (_name, plan, message) => {
    expect(() => planOfConfig(plan as never)).toThrow(message);
  });

  it('a run with the fp8-rollout plan as data writes the same metrics.jsonl and eval.jsonl as the preset name', async () => {
    const base = TINY_RUN;
    const files: string[][] = [];
    for (const [name, plan] of [
      ['named', 'fp8-rollout'],
      ['data', asData('fp8-rollout')],
    ] as const) {
      const out = join(root, name);
      await runGrpo({ config: resolveRunConfig({ ...base, plan }), outDir: out });
      files.push([readFileSync(join(out, 'metrics.jsonl'), 'utf8'), readFileSync(join(out, 'eval.jsonl'), 'utf8')]);
    }
    expect(files[1]).toEqual(files[0]);
    expect(files[0]![0]).toMatch(/rollout_corr\/k3_kl/);
  });
});

describe('engine settings and log-prob semantics in a run', () => {
  const base = { ...TINY_RUN, steps: 1, sft: { ...TINY_RUN.sft, steps: 2 }, eval: { every: 0, problems: 2 } };
  const metricsOf = async (name: string, extra: Record<string, unknown>) => {
    const out = join(root, name);
    await runGrpo({ config: resolveRunConfig({ ...base, ...extra }), outDir: out });
    return readFileSync(join(out, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number>);
  };

  it('names a semantics mismatch in metrics.jsonl (mismatch/semantics/<field>); matched sides write no such key', async () => {
    const matched = await metricsOf('sem-matched', { plan: 'bf16' });
    expect(Object.keys(matched[0]!).some((k) => k.startsWith('mismatch/semantics/'))).toBe(false);
    const topP = await metricsOf('sem-top-p', { plan: 'bf16', policy: { ...base.policy, sampler: { topP: 0.9 } } });
    expect(topP[0]!['mismatch/semantics/support']).toBe(1);
    const after = await metricsOf('sem-after', {
      plan: {
        rollout: { gemm: { kind: 'rounding', operands: 'bf16' } },
        trainer: { gemm: { kind: 'rounding', operands: 'bf16' }, temperatureAt: 'after-log-softmax' },
      },
      policy: { ...base.policy, sampler: { temperature: 0.7 } },
    });
    expect(after[0]!['mismatch/semantics/temperatureAt']).toBe(1);
  });

  it('a run with the batch-invariant switch on a batch-variant engine: k3 exactly 0 whatever the schedule', async () => {
    const side = { gemm: { kind: 'rounding', operands: 'bf16', accumulator: 'split-k', splitK: 4, splitKMaxRows: 16 } };
    const plan = {
      rollout: { ...side, engine: { batchInvariant: true, maxBatch: 3, prefillChunk: 2 } },
      trainer: { gemm: { kind: 'rounding', operands: 'bf16' } },
    };
    const m = await metricsOf('engine-invariant', { plan });
    expect([m[0]!['rollout_corr/k3_kl'], m[0]!['rollout_corr/logp_abs_diff_max']]).toEqual([0, 0]);
    const variant = await metricsOf('engine-variant', {
      plan: { ...plan, rollout: { ...side, engine: { maxBatch: 3, prefillChunk: 2 } } },
    });
    expect(variant[0]!['rollout_corr/logp_abs_diff_max']).toBeGreaterThan(0); // |δ| ~ 1e-9: k3 rounds to 0 there
  });
});
