// megatron-int4-fake-qat against the cited forward (radixark/Megatron-LM@2e64d78 transformer_engine.py lines
// 1508–1547) transcribed into torch and run on CPU on this tensor: per 1×4 group s = max(fl(amax/7), fl(1e-5)),
// codes rne(x/s) clamped to ±7, dequantized q·s. A padded last group, tiny values under the scale floor, a zero group.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { arConfig } from '../../src/policies/ar/config.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { arMismatchProbe } from '../../src/policies/ar/probe.js';
import { resolvePlan, type PlanData } from '../../src/policies/plans.js';
import { makeTask } from '../../src/tasks/registry.js';
import { quantPreset } from '../../src/numerics/presets.js';
import { dequantize, quantize } from '../../src/numerics/quantize.js';

const hex32 = (a: Float32Array): string[] =>
  [...new Uint32Array(a.buffer, a.byteOffset, a.length)].map((v) => `0x${v.toString(16)}`);

describe('megatron-int4-fake-qat', () => {
  const x = Float32Array.from([
    0.7, -0.35, 0.05, 0.1, 0.25, -0.7000001, 1e-6, -2e-6, 0, 0, 3e-5, 0.5, 0, 0, 0, 0, 1.5, -1.25,
  ]);
  it('dequantized values equal torch bit for bit (the sign of a zero aside: torch keeps −0 from round(−0.2))', () => {
    const q = quantize(quantPreset('megatron-int4-fake-qat', { block: 4 }), x, [3, 6]);
    const got = hex32(dequantize(q));
    const torch = [
      '3f333333',
      'becccccd',
      '0',
      '3dcccccd',
      '3e4ccccf',
      'bf333335',
      '0',
      '80000000',
      '0',
      '0',
      '0',
      '3f000000',
      '0',
      '0',
      '0',
      '0',
      '3fc00000',
      'bfa49249',
    ].map((c) => `0x${c}`);
    expect(got.map((h) => (h === '0x80000000' ? '0x0' : h))).toEqual(
      torch.map((h) => (h === '0x80000000' ? '0x0' : h)),
    );
    expect(hex32(q.scales)).toEqual(
      ['3dcccccd', '3dcccccf', '3727c5ac', '3d924925', '3727c5ac', '3e5b6db7'].map((c) => `0x${c}`),
    );
  });

  it('the plan int4-fake-qat-megatron: trainer and rollout compute with the same fake-quantized weights (k3 exactly 0)', () => {
    const task = makeTask('reverse');
    const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + 4 }), 2);
    const plan = resolvePlan(JSON.parse(readFileSync('sims/plans/int4-fake-qat-megatron.json', 'utf8')) as PlanData);
    const prompts = task.trainProblems(3, 1).map((p) => [...p.prompt]);
    const d = arMismatchProbe(policy, { plan, length: 4, prompts, seed: 0 }).diagnostics;
    expect([d.k1, d.k3, d.maxAbsDelta]).toEqual([0, 0, 0]);
  });
});
