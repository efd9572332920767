// Per-module precision overrides: name patterns (glob, first:N., last:N.), the first match winning,
// the overridden sites computing exactly what the override's GEMM plan computes and the others what
// the side's does, plan-data checks, and a matched override on both sides giving k3 = 0.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { arConfig } from '../../src/policies/ar/config.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { arForwardOps } from '../../src/policies/ar/diverge.js';
import { arMismatchProbe } from '../../src/policies/ar/probe.js';
import {
  numericsFor,
  precisionPlan,
  resolvePlan,
  sideNumerics,
  type PlanData,
  type PlanSide,
} from '../../src/policies/plans.js';
import { overriddenNumerics, siteNames } from '../../src/policies/overrides.js';
import { fp32Numerics, roundingNumerics } from '../../src/policies/numerics.js';
import { gemmSequential } from '../../src/nn/gemm.js';
import { makeTask } from '../../src/tasks/registry.js';

const fp8 = precisionPlan('fp8-rollout');
const moePolicy = createArPolicy(
  arConfig({ vocabSize: 13, maxLen: 24, layers: 3, moe: { experts: 4, topK: 2, auxCoeff: 0 } }),
  2,
);
const tokens = Int32Array.from({ length: 2 * 12 }, (_, i) => (i * 5 + 2) % 13);
const ops = (side: PlanSide) =>
  new Map(
    arForwardOps(moePolicy, tokens, 2, 12, sideNumerics(side, moePolicy.weights)).map((o) => [o.name, o.data] as const),
  );
const same = (a: Float32Array, b: Float32Array) => a.every((v, i) => Object.is(v, b[i]));

describe('overriddenNumerics', () => {
  const fp32 = fp32Numerics();
  const bf16 = roundingNumerics({ operands: 'bf16' });
  const pick = (match: string | string[]) => overriddenNumerics(bf16, [{ match, gemm: null }], [fp32], 3);

  it('matches globs, first:N. and last:N. against h<l>.<site>, h<l>.attn and lmHead; the first match wins', () => {
    expect(pick('lmHead').lmHead()).toBe(fp32.lmHead());
    expect(pick('lmHead').block(0).q).toBe(bf16.block(0).q);
    expect(pick('h*.router').block(2).router).toBe(fp32.block(2).router);
    expect(pick('h*.router').block(2).q).toBe(bf16.block(2).q);
    const first = pick('first:1.*');
    expect(first.block(0).mlp.down).toBe(fp32.block(0).mlp.down);
    expect(first.block(0).attention).toBe(fp32.block(0).attention);
    expect(first.block(1).mlp.down).toBe(bf16.block(1).mlp.down);
    expect(first.lmHead()).toBe(bf16.lmHead());
    const last = pick('last:2.q');
    expect([0, 1, 2].map((l) => last.block(l).q === fp32.block(l).q)).toEqual([false, true, true]);
    const both = overriddenNumerics(
      bf16,
      [
        { match: ['h0.q', 'lmHead'], gemm: null },
        { match: 'h*', gemm: null },
      ],
      [fp32, numericsFor({ gemm: { kind: 'rounding', operands: 'fp16' } })],
      3,
    );
    expect(both.block(0).q).toBe(fp32.block(0).q);
    expect(both.block(0).k).not.toBe(bf16.block(0).k);
    expect(siteNames(1)).toEqual([
      'h0.q',
      'h0.k',
      'h0.v',
      'h0.o',
      'h0.up',
      'h0.gate',
      'h0.down',
      'h0.router',
      'h0.attn',
      'lmHead',
    ]);
  });
});

describe('overrides in plans', () => {
  it('an fp32 router on the rollout: router logits equal the fp32 plan’s in layer 0, q stays FP8', () => {
    const side: PlanSide = { ...fp8.rollout, overrides: [{ match: 'h*.router', gemm: { kind: 'fp32' } }] };
    const o = ops(side);
    const base = ops(fp8.rollout);
    // the router GEMM in exact fp32 (sequential) on this forward's own norm2 output
    const ln2 = o.get('h0.ln2')!;
    const router = moePolicy.weights.blocks[0]!.moe!.router;
    const want = new Float32Array(o.get('h0.router')!.length);
    gemmSequential(want, ln2, router, 24, 4, moePolicy.config.C);
    expect(same(o.get('h0.router')!, want)).toBe(true);
    expect(same(o.get('h0.q')!, base.get('h0.q')!)).toBe(true);
    expect(same(o.get('h0.router')!, base.get('h0.router')!)).toBe(false);
  });

  it('the same override on both sides of a bf16 plan leaves k3 at exactly 0; on one side only it does not', () => {
    const task = makeTask('reverse');
    const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + 6 }), 4);
    const prompts = task.trainProblems(4, 4).map((q) => [...q.prompt]);
    const bf16 = precisionPlan('bf16');
    const ov = [{ match: 'lmHead', gemm: { kind: 'fp32' as const } }];
    const probe = (plan: PlanData) =>
      arMismatchProbe(policy, { plan: resolvePlan(plan), length: 6, prompts, seed: 4 }).diagnostics;
    expect(
      probe({ rollout: { ...bf16.rollout, overrides: ov }, trainer: { ...bf16.trainer, overrides: ov } } as PlanData)
        .k3,
    ).toBe(0);
    expect(
      probe({ rollout: { ...bf16.rollout, overrides: ov }, trainer: bf16.trainer } as PlanData).k3,
    ).toBeGreaterThan(0);
  });

  it('every override plan under sims/plans resolves', () => {
    for (const name of [
      'fp8-rollout-lmhead-bf16-logits',
      'fp8-rollout-lmhead-fp32',
      'fp8-rollout-lmhead-fp32-both',
      'fp8-rollout-router-bf16',
      'fp8-rollout-router-fp32',
      'fp8-rollout-router-fp32-both',
      'fp8-rollout-first1-bf16',
      'fp8-rollout-last1-bf16',
    ]) {
      expect(resolvePlan(JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData).name).toBe(name);
    }
  });

  it.each([
    [{ match: 'lmHead' }, /plan\.rollout\.overrides\[0\]\.gemm: expected an object, got undefined/],
    [
      { match: 'lmHead', gemm: { kind: 'rounding', operands: 'fp7' } },
      /plan\.rollout\.overrides\[0\]\.gemm: .*operands/,
    ],
    [{ match: '', gemm: { kind: 'fp32' } }, /plan\.rollout\.overrides\[0\]\.match: expected a non-empty name pattern/],
    [{ match: 'first:0.*', gemm: { kind: 'fp32' } }, /first:N needs N ≥ 1/],
    [
      { match: 'lmHead', gemm: { kind: 'fp32' }, extra: 1 },
      /plan\.rollout\.overrides\[0\]: unknown field 'extra' \(expected one of match, gemm\)/,
    ],
    [
      { match: [], gemm: { kind: 'fp32' } },
      /plan\.rollout\.overrides\[0\]\.match: expected a pattern or a non-empty list of patterns, got \[\]/,
    ],
    [
      { match: ['lmHead', 3], gemm: { kind: 'fp32' } },
      /plan\.rollout\.overrides\[0\]\.match: expected a pattern or a non-empty list of patterns, got \["lmHead",3\]/,
    ],
    [
      { match: 7, gemm: { kind: 'fp32' } },
      /plan\.rollout\.overrides\[0\]\.match: expected a pattern or a non-empty list of patterns, got 7/,
    ],
    [
      { match: 'lmHead', gemm: { kind: 'int3' } },
      /plan\.rollout\.overrides\[0\]\.gemm\.kind: expected "fp32", "rounding" or "quantized", got "int3"/,
    ],
  ])('refuses override %j naming the field', (o, message) => {
    expect(() =>
      resolvePlan({ rollout: { ...fp8.rollout, overrides: [o] }, trainer: fp8.trainer } as PlanData),
    ).toThrow(message);
  });
});
