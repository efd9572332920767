// Pre-quantized transport in the refit chain: each linear weight reaches the engine as the dequantized blockwise
// E4M3 cast of the BF16 export; packed power-of-two scales are lossless; a sender/loader layout mismatch fails
// the sync naming both layouts; bad transport fields name the field.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { blockwiseCastToFp8, dequantBlockwiseFp8 } from '../../src/numerics/fp8-transport.js';
import { floatFormats } from '../../src/numerics/formats.js';
import { fakeQuant } from '../../src/numerics/vector.js';
import { arConfig } from '../../src/policies/ar/config.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { arMismatchProbe } from '../../src/policies/ar/probe.js';
import { resolvePlan, type PlanData, type PrecisionPlan } from '../../src/policies/plans.js';
import { refitWeights } from '../../src/policies/refit.js';
import { makeTask } from '../../src/tasks/registry.js';

const file = (name: string): PrecisionPlan =>
  resolvePlan(JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData);

describe('refit.transport: blockwise FP8 with a scale layout', () => {
  const task = makeTask('reverse');
  const L = 4;
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + L }), 5);
  const prompts = task.trainProblems(4, 3).map((q) => [...q.prompt]);
  const probe = (plan: PrecisionPlan) => arMismatchProbe(policy, { plan, length: L, prompts, seed: 1 });

  it('a weight reaches the engine as dequant(cast(bf16(W))); excluded sites (lmHead, router) as bf16(W)', () => {
    const chain = file('fp8-transport-vllm').rollout.refit!;
    const map = refitWeights(policy.weights, chain);
    const C = policy.weights.lnf.length;
    const wq = policy.weights.blocks[0]!.wq;
    const bf = fakeQuant(floatFormats.bf16, Float32Array.from(wq), { profile: 'ieee' });
    const sent = blockwiseCastToFp8(bf, C, C, { block: 16 });
    const want = dequantBlockwiseFp8(sent.codes, sent.scaleInv, C, C, 16);
    expect([...map.get(wq)!]).toEqual([...want]);
    expect([...map.get(wq)!]).not.toEqual([...bf]);
    const head = policy.weights.lmHead;
    expect([...map.get(head)!]).toEqual([
      ...fakeQuant(floatFormats.bf16, Float32Array.from(head), { profile: 'ieee' }),
    ]);
  });

  it('packed power-of-two scales give the raw transport of the same scales bit for bit; k3 > 0 against BF16', () => {
    const sglang = file('fp8-transport-sglang');
    const raw: PrecisionPlan = {
      ...sglang,
      rollout: {
        ...sglang.rollout,
        refit: {
          ...sglang.rollout.refit!,
          transport: { ...sglang.rollout.refit!.transport!, scaleLayout: 'raw', engineScaleLayout: 'raw' },
        },
      },
    };
    const a = probe(sglang);
    const b = probe(raw);
    expect([...a.rollout.logpRollout]).toEqual([...b.rollout.logpRollout]);
    expect(a.diagnostics.k3).toBeGreaterThan(0);
    expect(probe(file('fp8-transport-vllm')).diagnostics.k3).toBeGreaterThan(0);
  });

  it('a packed sender into a raw loader fails the sync, naming the site and both layouts', () => {
    const fault = file('fp8-transport-fault-scale-layout');
    expect(() => probe(fault)).toThrow(
      /refit\.transport: q \(32×32\): scale layout: the engine's loader expects raw scales \(float32 \[2, 2\], numel 4\), got mn-major-packed \(int32 \[32, 1\], numel 32\)/,
    );
  });

  it('bad transport fields name the field', () => {
    const side = { gemm: { kind: 'rounding', operands: 'bf16' } };
    const withTransport = (transport: object) => () =>
      resolvePlan({ rollout: { ...side, refit: { transport } }, trainer: side });
    expect(withTransport({ kind: 'blockwise-fp8', scaleLayout: 'swizzled' })).toThrow(
      /plan\.rollout\.refit\.transport\.scaleLayout: expected "raw" or "mn-major-packed"/,
    );
    expect(withTransport({ kind: 'mxfp8' })).toThrow(/plan\.rollout\.refit\.transport\.kind: expected "blockwise-fp8"/);
    expect(withTransport({ kind: 'blockwise-fp8', block: 0 })).toThrow(
      /plan\.rollout\.refit\.transport\.block: expected a positive integer/,
    );
  });
});
