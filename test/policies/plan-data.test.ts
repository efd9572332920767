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

const asData = (name: string) => JSON.parse(JSON.stringify({ rollout: precisionPlan(name).rollout, trainer: precisionPlan(name).trainer })) as Record<string, unknown>;

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
    ['missing trainer', { rollout: asData('bf16')['rollout'] }, /config\.plan\.trainer: expected an object, got undefined/],
    ['bad kind', { rollout: { gemm: { kind: 'int3' } }, trainer: asData('bf16')['trainer'] }, /config\.plan\.rollout\.gemm\.kind: expected "fp32", "rounding" or "quantized", got "int3"/],
    ['unknown gemm key', { rollout: { gemm: { kind: 'rounding', operands: 'bf16', speed: 2 } }, trainer: asData('bf16')['trainer'] }, /config\.plan\.rollout\.gemm: unknown field 'speed'/],
    ['bad decode', { rollout: { gemm: { kind: 'fp32' }, decode: 'fast' }, trainer: asData('bf16')['trainer'] }, /config\.plan\.rollout\.decode: expected "incremental" or "recompute", got "fast"/],
    ['bad quantizer preset', { rollout: { gemm: { kind: 'quantized', weights: { preset: 'nope' }, activations: 'bf16' } }, trainer: asData('bf16')['trainer'] }, /config\.plan\.rollout\.gemm: .*weights.*nope/],
    ['unknown preset name', 'fp9', /config\.plan: must be one of .*got "fp9"/],
    ['empty name', { ...asData('bf16'), name: '' }, /config\.plan\.name: expected a non-empty string, got ""/],
    ['bad logprob', { rollout: { gemm: { kind: 'fp32' }, logprob: 'log' }, trainer: asData('bf16')['trainer'] }, /config\.plan\.rollout\.logprob: expected "processed" or "raw", got "log"/],
    ['misspelt key before the missing one', { rollout: asData('bf16')['rollout'], trainr: asData('bf16')['trainer'] }, /config\.plan: unknown field 'trainr' \(expected one of name, description, rollout, trainer\)/],
    ['gemm not an object', { rollout: { gemm: 'bf16' }, trainer: asData('bf16')['trainer'] }, /config\.plan\.rollout\.gemm: expected an object, got "bf16"/],
  ])('%s is refused naming the path', (_name, plan, message) => {
    expect(() => planOfConfig(plan as never)).toThrow(message);
  });

  it('a run with the fp8-rollout plan as data writes the same metrics.jsonl and eval.jsonl as the preset name', async () => {
    const base = {
      seed: 0,
      steps: 2,
      task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
      policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
      sft: { steps: 4, batchSize: 8, cache: false },
      rollout: { prompts: 2, groupSize: 4 },
      eval: { every: 1, problems: 4 },
    };
    const files: string[][] = [];
    for (const [name, plan] of [['named', 'fp8-rollout'], ['data', asData('fp8-rollout')]] as const) {
      const out = join(root, name);
      await runGrpo({ config: resolveRunConfig({ ...base, plan }), outDir: out });
      files.push([readFileSync(join(out, 'metrics.jsonl'), 'utf8'), readFileSync(join(out, 'eval.jsonl'), 'utf8')]);
    }
    expect(files[1]).toEqual(files[0]);
    expect(files[0]![0]).toMatch(/rollout_corr\/k3_kl/);
  });
});
