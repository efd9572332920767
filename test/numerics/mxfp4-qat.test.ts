// The MXFP4 QAT presets against hand vectors from their cited lines (ModelOpt@a2fbac7 mxfp4_tensor.py lines 38–81;
// tensor_quant_mx.cu lines 36–55, 105–137 and tensor_quant_mx.h lines 104–141; ISEEKYAN/Megatron-LM@22b9a50
// mxfp4.py lines 43–89), which scripts/mxfp4-qat-check.ts also checks against ModelOpt's own file run in torch;
// and the routed-expert QAT plans: matched rules give k3 exactly 0, the OCP floor rule on the trainer k3 > 0, and
// ModelOpt's CUDA fake quant against its export k3 > 0 once the masters are BF16-valued (E2M1 ties).

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import { quantPreset } from '../../src/numerics/presets.js';
import { dequantize, quantize } from '../../src/numerics/quantize.js';
import { quantizeReference } from '../../src/numerics/quantize-reference.js';
import { round } from '../../src/numerics/round.js';
import { arConfig } from '../../src/policies/ar/config.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { arMismatchProbe } from '../../src/policies/ar/probe.js';
import { resolvePlan, type PlanData } from '../../src/policies/plans.js';
import { makeTask } from '../../src/tasks/registry.js';

const bits = (v: number): number => new Uint32Array(new Float32Array([v]).buffer)[0] as number;
const fromBits = (b: number): number => new Float32Array(new Uint32Array([b]).buffer)[0] as number;

/** Block A (amax 6, e = 0): every E2M1 midpoint, signed zeros, values rounding to ±0, one above 5. */
const blockA = [6, 0.75, -1.75, 3.5, 0.25, 1.25, 2.5, 5, 0, -0, 0.2, -0.2, 5.5, ...Array<number>(19).fill(0)];
/** Block B: amax one ulp above 6·2^-7, so fl(amax/6) = 2^-7·(1 + 2^-23) and fl(log2) rounds to −7 exactly. */
const amaxB = fromBits(bits(6 * 2 ** -7) + 1);
const blockB = [amaxB, 0.01, -0.02, ...Array<number>(29).fill(0.005)];
const x = Float32Array.from([...blockA, ...blockB]);

const quant = (name: string) => quantize(quantPreset(name), x, [2, 32]);

describe('MXFP4 QAT presets: hand vectors from the cited lines', () => {
  it('modelopt-mxfp4-qtensor: ties toward zero, an exact zero stored as −0, the float32-log2 scale saturates block B', () => {
    const q = quant('modelopt-mxfp4-qtensor');
    // cast_fp4: ord = #(bounds < |x|), sign_bit = (2 − sign(x)) // 2 (1 for ±0)
    expect(Array.from(q.codes.slice(0, 13))).toEqual([7, 1, 11, 5, 0, 2, 4, 6, 8, 8, 0, 8, 7]);
    expect(Array.from(q.codes.slice(13, 32))).toEqual(Array<number>(19).fill(8));
    // s = 2^-7(1 + 2^-23): ceil(fl(log2 s)) = −7, byte 120; amax·2^7 > 5 → 6 (code 7), the block max clipped
    expect(Array.from(q.scaleCodes!)).toEqual([127, 120]);
    expect(q.codes[32]).toBe(7);
    expect(dequantize(q)[32]).toBe(6 * 2 ** -7);
    expect(dequantize(q)[32]).toBeLessThan(amaxB);
  });

  it('megatron-lite-mxfp4-qat: the same values, the zero keeps its sign (sign(x)·level)', () => {
    const q = quant('megatron-lite-mxfp4-qat');
    const ref = quant('modelopt-mxfp4-qtensor');
    expect(Array.from(q.codes.slice(0, 13))).toEqual([7, 1, 11, 5, 0, 2, 4, 6, 0, 8, 0, 8, 7]);
    expect(Array.from(q.scaleCodes!)).toEqual([127, 120]);
    const a = dequantize(q);
    const b = dequantize(ref);
    for (let i = 0; i < a.length; i++) expect(a[i] === b[i], `element ${i}`).toBe(true); // −0 === 0
    expect(Object.is(a[8], 0) && Object.is(b[8], -0)).toBe(true);
  });

  it('modelopt-mxfp4-fake-cuda: round to nearest even, the exact ceiling of log2 fl(amax/6) from its bits', () => {
    const q = quant('modelopt-mxfp4-fake-cuda');
    expect(Array.from(q.codes.slice(0, 13))).toEqual([7, 2, 12, 6, 0, 2, 4, 6, 0, 8, 0, 8, 7]);
    // compute_scale_e8m0_NV: mantissa of s nonzero → field − 126 = −6; amax·2^6 = 3.0000002 → 3 (code 5)
    expect(Array.from(q.scaleCodes!)).toEqual([127, 121]);
    expect(q.codes[32]).toBe(5);
  });

  it('the OCP rule (mxfp4, floor(log2 amax) − 2) on block B: the same byte 120 and a clipped maximum, RNE ties', () => {
    const q = quant('mxfp4');
    expect(Array.from(q.scaleCodes!)).toEqual([127, 120]);
    expect(Array.from(q.codes.slice(0, 8))).toEqual([7, 2, 12, 6, 0, 2, 4, 6]);
  });

  it('E8M0 bytes over random amaxes: qtensor ceil(fl(log2 fl(amax/6))), fake-cuda from the bits of fl(amax/6) (division)', () => {
    const rng = createRng('mxfp4-qat-scales');
    const n = 4000;
    const w = new Float32Array(n * 32);
    for (let b = 0; b < n; b++) {
      const k = Math.floor(rng.uniform() * 60) - 30;
      const j = Math.floor(rng.uniform() * 6);
      // amaxes near 6·2^k (a few ulps above: where the two rules part) and anywhere
      w[b * 32] = b % 2 === 0 ? fromBits(bits(6 * 2 ** k) + j) : Math.fround(rng.uniform() * 2 ** k);
    }
    const qt = quantize(quantPreset('modelopt-mxfp4-qtensor'), w, [n, 32]).scaleCodes!;
    const cuda = quantize(quantPreset('modelopt-mxfp4-fake-cuda'), w, [n, 32]).scaleCodes!;
    let parted = 0;
    for (let b = 0; b < n; b++) {
      const s = Math.fround((w[b * 32] as number) / 6);
      const field = bits(s) >>> 23;
      const mant = bits(s) & 0x7fffff;
      expect(cuda[b], `block ${b}`).toBe(mant > 0 ? field + 1 : field); // e + 127
      expect(qt[b], `block ${b}`).toBe(Math.ceil(Math.fround(Math.log2(s))) + 127);
      if (qt[b] !== cuda[b]) parted++;
    }
    expect(parted).toBeGreaterThan(0);
  });

  it('fast quantize equals the reference on BF16-valued weights (ties), every preset', () => {
    const rng = createRng('mxfp4-qat-ref');
    const w = Float32Array.from({ length: 64 * 96 }, () =>
      round('bf16', Math.fround(0.02 * rng.normal()), { profile: 'ieee' }),
    );
    for (const name of ['modelopt-mxfp4-qtensor', 'megatron-lite-mxfp4-qat', 'modelopt-mxfp4-fake-cuda']) {
      const a = quantize(quantPreset(name), w, [64, 96]);
      const b = quantizeReference(quantPreset(name), w, [64, 96]);
      expect(Array.from(a.codes), name).toEqual(Array.from(b.codes));
      expect(Array.from(a.scaleCodes!), name).toEqual(Array.from(b.scaleCodes!));
    }
  });
});

describe('routed-expert MXFP4 QAT plans', () => {
  const task = makeTask('reverse');
  const policy = createArPolicy(
    arConfig({
      vocabSize: task.vocabSize,
      maxLen: task.promptLength + 6,
      moe: { experts: 4, topK: 2, auxCoeff: 0.01 },
    }),
    6,
  );
  const probe = (name: string) =>
    arMismatchProbe(policy, {
      plan: resolvePlan(JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData),
      length: 6,
      prompts: task.trainProblems(4, 6).map((q) => [...q.prompt]),
      seed: 6,
    }).diagnostics;

  it('mxfp4-qat-experts-matched: Megatron Lite fake quant against the ModelOpt export, k3 exactly 0', () => {
    const d = probe('mxfp4-qat-experts-matched');
    expect([d.k1, d.k3, d.maxAbsDelta]).toEqual([0, 0, 0]);
  });

  it('mxfp4-qat-experts-verl-cuda: float32 masters meet no tie and no log2-rounded scale, k3 exactly 0', () => {
    const d = probe('mxfp4-qat-experts-verl-cuda');
    expect([d.k1, d.k3, d.maxAbsDelta]).toEqual([0, 0, 0]);
  });

  it('mxfp4-qat-experts-ocp-floor: the OCP scale rule on the trainer, k3 > 0', () => {
    expect(probe('mxfp4-qat-experts-ocp-floor').k3).toBeGreaterThan(0);
  });

  it('BF16-valued masters (as verl trains them): the E2M1 ties appear, verl-cuda k3 > 0, matched still exactly 0', () => {
    const bf16Policy = createArPolicy(
      arConfig({
        vocabSize: task.vocabSize,
        maxLen: task.promptLength + 6,
        moe: { experts: 4, topK: 2, auxCoeff: 0.01 },
      }),
      6,
    );
    const d = bf16Policy.params.data;
    for (let i = 0; i < d.length; i++) d[i] = round('bf16', d[i] as number, { profile: 'ieee' });
    const run = (name: string) =>
      arMismatchProbe(bf16Policy, {
        plan: resolvePlan(JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData),
        length: 6,
        prompts: task.trainProblems(4, 6).map((q) => [...q.prompt]),
        seed: 6,
      }).diagnostics;
    const matched = run('mxfp4-qat-experts-matched');
    expect([matched.k1, matched.k3, matched.maxAbsDelta]).toEqual([0, 0, 0]);
    expect(run('mxfp4-qat-experts-verl-cuda').k3).toBeGreaterThan(0);
  });
});
