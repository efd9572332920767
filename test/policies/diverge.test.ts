// First-divergence localisation: ulp spacing and distances by hand, the criterion r > r_in + κ·u_F on
// hand-built recordings, the AR plan sides (bitwise equal under bf16, within the numerics under
// bf16-splitk, the first FP8 GEMM under fp8-rollout), MoE routing flips, and the dump file round trip.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { compareForwards, ulpDistances, ulpOf, type OpRecord } from '../../src/policies/diverge.js';
import { arDiverge, arForwardOps, nextTokenLogprobs } from '../../src/policies/ar/diverge.js';
import { readForwardDump, writeForwardDump } from '../../src/policies/dump.js';
import { arConfig } from '../../src/policies/ar/config.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { precisionPlan } from '../../src/policies/plans.js';
import { fp32Numerics } from '../../src/policies/numerics.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-diverge-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const op = (name: string, values: number[], inputs?: string[]): OpRecord => ({
  name,
  data: Float32Array.from(values),
  shape: [values.length],
  ...(inputs ? { inputs } : {}),
});

describe('ulp spacing', () => {
  it('is 2^(e − m) inside the normal range and the subnormal step below it', () => {
    expect(ulpOf('bf16', 1)).toBe(2 ** -7);
    expect(ulpOf('bf16', 1.99)).toBe(2 ** -7);
    expect(ulpOf('bf16', 2)).toBe(2 ** -6);
    expect(ulpOf('bf16', -0.75)).toBe(2 ** -8);
    expect(ulpOf('fp32', 1)).toBe(2 ** -23);
    expect(ulpOf('fp16', 0)).toBe(2 ** -24);
    expect(ulpOf('fp16', 2 ** -20)).toBe(2 ** -24);
    expect(ulpOf('e4m3fn', 448)).toBe(32);
  });

  it('measures |a − b| at the reference value, exact powers of two included', () => {
    for (let e = -30; e <= 30; e++) expect(ulpOf('fp32', 2 ** e)).toBe(2 ** (e - 23));
    const d = ulpDistances(
      Float32Array.from([1, 1, 4, NaN, NaN]),
      Float32Array.from([1 + 2 ** -7, 1 - 2 ** -8, 4, 1, NaN]),
      'bf16',
    );
    expect([...d]).toEqual([1, 0.5, 0, Infinity, 0]);
  });
});

describe('compareForwards', () => {
  const ref = [op('a', [1, 2]), op('b', [4, -4]), op('c', [8, 0])];

  it('reports bitwise equal forwards as such', () => {
    const r = compareForwards(ref, ref);
    expect(r.firstDiffer).toBeNull();
    expect(r.firstDivergence).toBeNull();
    expect(r.largestAdded).toBeNull();
    expect(r.rows.every((x) => x.maxAbsDelta === 0 && x.fracDiffer === 0)).toBe(true);
  });

  it('flags the first op whose relative error grows by more than κ·u_F', () => {
    // a: r = 2^-8/2 = 2^-9 (u_bf16 = 2^-8 … half a unit roundoff); b: r = 2^-9 (nothing added);
    // c: r = 0.5/8 = 2^-4 > 2^-9 + 4·2^-8.
    const cand = [op('a', [1, 2 + 2 ** -8]), op('b', [4, -4 - 2 ** -7]), op('c', [8, 0.5])];
    const r = compareForwards(ref, cand, { format: 'bf16', tolerance: 4 });
    expect(r.unitRoundoff).toBe(2 ** -8);
    expect(r.rows.map((x) => x.relError)).toEqual([2 ** -9, 2 ** -9, 2 ** -4]);
    expect(r.rows.map((x) => x.exceeds)).toEqual([false, false, true]);
    expect(r.firstDiffer).toBe('a');
    expect(r.firstDivergence).toBe('c');
    expect(r.largestAdded).toBe('c');
    expect(r.rows[1]!.added).toBe(0);
    // The same difference at op a exceeds with κ = 0, and at fp32 u.
    expect(compareForwards(ref, cand, { format: 'bf16', tolerance: 0 }).firstDivergence).toBe('a');
    expect(compareForwards(ref, cand, { format: 'fp32' }).firstDivergence).toBe('a');
  });

  it('takes r_in from the recorded inputs (a residual keeps the error of its skip input)', () => {
    const r0 = [op('x', [1, 1]), op('f', [1, 1], ['x']), op('y', [2, 2], ['x', 'f'])];
    const r1 = [op('x', [1, 1]), op('f', [1, 1.25], ['x']), op('y', [2, 2.25], ['x', 'f'])];
    const rep = compareForwards(r0, r1, { tolerance: 4 });
    expect(rep.rows[2]!.relErrorIn).toBe(0.25);
    expect(rep.rows[2]!.exceeds).toBe(false);
    expect(rep.firstDivergence).toBe('f');
  });

  it('refuses a missing op, a size mismatch, an unknown input, a bad format or tolerance', () => {
    expect(() => compareForwards(ref, ref.slice(0, 2))).toThrow(/op "c" of the reference is not in the candidate/);
    expect(() => compareForwards(ref, [op('a', [1]), ref[1]!, ref[2]!])).toThrow(
      /op "a" has 2 elements in the reference, 1/,
    );
    expect(() => compareForwards([op('a', [1], ['z'])], [op('a', [1])])).toThrow(/reads "z"/);
    expect(() => compareForwards(ref, ref, { format: 'nope' as never })).toThrow(/format must be one of/);
    expect(() => compareForwards(ref, ref, { tolerance: -1 })).toThrow(/tolerance must be a finite number ≥ 0, got -1/);
  });
});

describe('arDiverge', () => {
  const policy = createArPolicy(arConfig({ vocabSize: 13, maxLen: 12 }), 3);
  const B = 2;
  const T = 12;
  const tokens = Int32Array.from({ length: B * T }, (_, i) => (i * 7 + 3) % 13);

  it('records every op of the forward, logp being the next-token log-softmax of the logits', () => {
    const ops = arForwardOps(policy, tokens, B, T, fp32Numerics());
    expect(ops[0]!.name).toBe('embed');
    expect(ops.map((o) => o.name)).toContain('h1.mlp.act');
    expect(ops.at(-1)!.name).toBe('logp');
    const logits = ops.find((o) => o.name === 'logits')!.data;
    const lp = nextTokenLogprobs(logits, tokens, B, T, 13);
    expect(Object.is(lp[5], ops.at(-1)!.data[5])).toBe(true);
    let z = 0;
    for (let v = 0; v < 13; v++) z += Math.exp(logits[5 * 13 + v]!);
    expect(lp[5]).toBeCloseTo(logits[5 * 13 + tokens[6]!]! - Math.log(z), 5);
  });

  it('bf16 sides are bitwise equal; bf16-splitk differ within the numerics; fp8-rollout parts at the first FP8 GEMM', () => {
    const same = arDiverge(policy, precisionPlan('bf16'), tokens, B, T).report;
    expect(same.firstDiffer).toBeNull();
    const split = arDiverge(policy, precisionPlan('bf16-splitk'), tokens, B, T).report;
    expect(split.firstDiffer).toBe('h0.q');
    expect(split.firstDivergence).toBeNull();
    expect(Math.max(...split.rows.map((r) => r.relError))).toBeLessThan(1e-5);
    const fp8 = arDiverge(policy, precisionPlan('fp8-rollout'), tokens, B, T).report;
    expect(fp8.firstDiffer).toBe('h0.q');
    expect(fp8.firstDivergence).toBe('h0.q');
    expect(fp8.rows.find((r) => r.name === 'embed')!.maxAbsDelta).toBe(0);
  });

  it('is deterministic and reports MoE routing flips per layer', () => {
    const moe = createArPolicy(arConfig({ vocabSize: 13, maxLen: 12, moe: { experts: 4, topK: 2, auxCoeff: 0 } }), 3);
    const a = arDiverge(moe, precisionPlan('nvfp4-rollout'), tokens, B, T);
    const b = arDiverge(moe, precisionPlan('nvfp4-rollout'), tokens, B, T);
    expect(a.report).toEqual(b.report);
    expect(a.routingFlips).toHaveLength(2);
    expect(a.report.rows.map((r) => r.name)).toContain('h0.router');
    expect(arDiverge(moe, precisionPlan('bf16'), tokens, B, T).routingFlips).toEqual([0, 0]);
  });

  it('round-trips through a qrl-dump/1 file to the same report', () => {
    const res = arDiverge(policy, precisionPlan('fp8-rollout'), tokens, B, T);
    const file = (n: string) => join(root, `${n}.safetensors`);
    writeForwardDump(file('t'), { tokens, tokenShape: [B, T], ops: res.trainer, dtypes: {} });
    writeForwardDump(file('r'), { tokens, tokenShape: [B, T], ops: res.rollout, dtypes: { logits: 'float32' } });
    const t = readForwardDump(file('t'));
    const r = readForwardDump(file('r'));
    expect([...t.tokens]).toEqual([...tokens]);
    expect(r.dtypes).toEqual({ logits: 'float32' });
    expect(compareForwards(t.ops, r.ops)).toEqual(res.report);
  });
});
