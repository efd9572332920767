// Engine execution paths: a rollout whose GEMM reduction order depends on the rows it batches
// (split-K for small GEMMs only), the batch-invariant switch (true-on-policy: k3 exactly 0), and the
// path mismatch vanishing exactly when every GEMM the engine runs is larger than the split-K limit.

import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { roundingNumerics, withKernelRows } from '../../src/policies/numerics.js';
import {
  reducePartials,
  ringOrder,
  shardRange,
  tensorParallelNumerics,
  type EngineExecution,
} from '../../src/policies/execution.js';
import { scheduleRequests } from '../../src/policies/ar/scheduler.js';
import { round } from '../../src/numerics/round.js';
import type { LinearGemms } from '../../src/nn/gemm.js';
import { arConfig } from '../../src/policies/ar/config.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { arMismatchProbe } from '../../src/policies/ar/probe.js';
import { resolvePlan, type PlanData, type PrecisionPlan } from '../../src/policies/plans.js';
import { makeTask } from '../../src/tasks/registry.js';
import { createRng } from '../../src/core/rng.js';

describe('splitKMaxRows', () => {
  it('uses split-K in GEMMs of at most that many rows and the sequential order above', () => {
    const rng = createRng(3);
    const k = 64;
    const m = 3;
    const n = 5;
    const a = Float32Array.from({ length: m * k }, () => rng.normal());
    const b = Float32Array.from({ length: n * k }, () => rng.normal());
    const run = (opts: Parameters<typeof roundingNumerics>[0], rows: number) => {
      const out = new Float32Array(rows * n);
      roundingNumerics(opts).block(0).attention.qk(out, a, b, rows, n, k);
      return out;
    };
    const seq = (rows: number) => run({ operands: 'bf16' }, rows);
    const split = (rows: number) => run({ operands: 'bf16', accumulator: 'split-k', splitK: 16 }, rows);
    const limited = (rows: number) =>
      run({ operands: 'bf16', accumulator: 'split-k', splitK: 16, splitKMaxRows: 2 }, rows);
    expect([...limited(2)]).toEqual([...split(2)]);
    expect([...limited(3)]).toEqual([...seq(3)]);
    expect([...split(3)]).not.toEqual([...seq(3)]); // the orders do differ on these inputs
    expect(() => roundingNumerics({ operands: 'bf16', splitKMaxRows: 4 })).toThrow(
      /splitKMaxRows must be a positive integer with accumulator split-k, got 4/,
    );
    expect(() => roundingNumerics({ operands: 'bf16', accumulator: 'split-k', splitKMaxRows: 0 })).toThrow(
      /splitKMaxRows/,
    );
  });
});

describe('batch-dependent engine and the batch-invariant switch', () => {
  const task = makeTask('reverse');
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + 6 }), 6);
  const plan = (name: string) => resolvePlan(JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData);
  const probe = (name: string, B: number) =>
    arMismatchProbe(policy, {
      plan: plan(name),
      length: 6,
      prompts: task.trainProblems(B, 6).map((q) => [...q.prompt]),
      seed: 6,
    }).diagnostics;

  it('mismatch at small batches (decode GEMMs of B ≤ 16 rows take split-K), none once every GEMM has more rows', () => {
    expect(probe('bf16-batch-variant', 2).meanAbsDelta).toBeGreaterThan(0);
    const large = probe('bf16-batch-variant', 17); // decode 17 rows, prefill 17·P rows: all sequential
    expect([large.k1, large.k3, large.maxAbsDelta]).toEqual([0, 0, 0]);
  });

  it('true-on-policy: the rollout runs the trainer kernel at every batch size, k3 exactly 0', () => {
    for (const B of [1, 2, 17]) {
      const d = probe('true-on-policy', B);
      expect([d.k1, d.k3, d.maxAbsDelta]).toEqual([0, 0, 0]);
    }
  });

  it('batch-shared activation scales: per-tensor FP8 scales defeat the switch (k3 > 0), per-token scales restore it (exactly 0)', () => {
    const scheduled = (name: string): PrecisionPlan => {
      const p = plan(name);
      return { ...p, rollout: { ...p.rollout, engine: { batchInvariant: true, maxBatch: 3, prefillChunk: 2 } } };
    };
    for (const B of [1, 2, 17]) {
      expect(probe('fp8-tensor-scale-invariant', B).k3, `B = ${B}`).toBeGreaterThan(0);
      const d = probe('fp8-token-scale-invariant', B);
      expect([d.k1, d.k3, d.maxAbsDelta], `B = ${B}`).toEqual([0, 0, 0]);
    }
    const prompts = task.trainProblems(7, 6).map((q) => [...q.prompt]);
    const run = (name: string) =>
      arMismatchProbe(policy, {
        plan: scheduled(name),
        length: 6,
        prompts,
        seed: 6,
        requestLengths: [1, 6, 3, 6, 2, 5, 4],
      }).diagnostics;
    expect(run('fp8-tensor-scale-invariant').k3).toBeGreaterThan(0);
    const d = run('fp8-token-scale-invariant');
    expect([d.k1, d.k3, d.maxAbsDelta]).toEqual([0, 0, 0]);
  });
});

describe('withKernelRows: a linear kernel chosen for the engine step, not the call', () => {
  it('splitKMaxRows reads the step tokens for linear GEMMs, the own rows for attention', () => {
    const rng = createRng(4);
    const k = 64;
    const n = 5;
    const a = Float32Array.from({ length: 3 * k }, () => rng.normal());
    const b = Float32Array.from({ length: n * k }, () => rng.normal());
    const limited = roundingNumerics({ operands: 'bf16', accumulator: 'split-k', splitK: 16, splitKMaxRows: 2 }).block(
      0,
    );
    const split = roundingNumerics({ operands: 'bf16', accumulator: 'split-k', splitK: 16 }).block(0);
    const seq = roundingNumerics({ operands: 'bf16' }).block(0);
    const lin = (g: typeof seq, m: number) => {
      const out = new Float32Array(m * n);
      g.q.forward(out, a, b, m, n, k);
      return [...out];
    };
    expect(withKernelRows(2, () => lin(limited, 3))).toEqual(lin(split, 3)); // 3 rows, but a 2-token step
    expect(withKernelRows(17, () => lin(limited, 1))).toEqual(lin(seq, 1)); // 1 row of a 17-token step
    expect(withKernelRows(Infinity, () => lin(limited, 1))).toEqual(lin(seq, 1)); // the batch-invariant switch
    expect(lin(limited, 1)).toEqual(lin(split, 1)); // restored after each call
    const att = (g: typeof seq) => {
      const out = new Float32Array(n);
      g.attention.qk(out, a, b, 1, n, k);
      return [...out];
    };
    expect(withKernelRows(17, () => att(limited))).toEqual(att(split)); // attention keeps its own shape
    expect(() => withKernelRows(0, () => 0)).toThrow(/rows must be ≥ 1, got 0/);
  });
});

describe('tensor-parallel all-reduce order', () => {
  const bf = (x: number) => round('bf16', x, { profile: 'ieee' });
  const e = 2 ** -8; // half an ulp of 1 in bf16: 1 + e ties to 1
  it('sums the rank partials in ring, tree or rank order, rounding each add (hand-computed)', () => {
    expect(shardRange(10, 3, 0)).toEqual([0, 4]);
    expect(shardRange(10, 3, 1)).toEqual([4, 7]);
    expect(shardRange(10, 3, 2)).toEqual([7, 10]);
    expect([0, 1, 2].map((j) => ringOrder(j, 3, 3))).toEqual([
      [1, 2, 0],
      [2, 0, 1],
      [0, 1, 2],
    ]);
    const p = [1, e, e];
    // ring, chunk 0: e + e = 2e, + 1 = 1 + 2^-7 (exact); chunk 1: (e + 1 → 1) + e → 1; chunk 2: (1 + e → 1) + e → 1
    expect([0, 1, 2].map((j) => reducePartials(p, 'ring', bf, j, 3))).toEqual([1 + 2 ** -7, 1, 1]);
    expect(reducePartials(p, 'rank-order', bf, 0, 3)).toBe(1);
    expect(reducePartials(p, 'tree', bf, 0, 3)).toBe(1); // (1 + e → 1) + e → 1
    expect(reducePartials([e, e, 1], 'tree', bf, 0, 3)).toBe(1 + 2 ** -7); // (e + e) + 1
    expect(reducePartials(p, 'rank-order', Math.fround, 0, 3)).toBe(1 + 2 ** -7); // fp32 holds every partial sum
  });

  it('one rank is the inner numerics; R shards in fp32 rank order are a split-K of K/R (property)', () => {
    const inner = roundingNumerics({ operands: 'bf16' });
    expect(tensorParallelNumerics(inner, { ranks: 1 })).toBe(inner);
    const tp = tensorParallelNumerics(inner, { ranks: 4, reduce: 'rank-order', dtype: 'fp32' }).block(0);
    const splitK = roundingNumerics({ operands: 'bf16', accumulator: 'split-k', splitK: 16 }).block(0);
    for (const seed of [1, 2, 3]) {
      const rng = createRng(seed);
      const [m, n, k] = [2 + seed, 7, 64];
      const a = Float32Array.from({ length: m * k }, () => rng.normal());
      const b = Float32Array.from({ length: n * k }, () => rng.normal());
      const run = (g: LinearGemms) => {
        const out = new Float32Array(m * n);
        g.forward(out, a, b, m, n, k);
        return [...out];
      };
      expect(run(tp.o)).toEqual(run(splitK.o));
      expect(run(tp.mlp.down)).toEqual(run(splitK.mlp.down));
      expect(run(tp.q)).toEqual(run(inner.block(0).q)); // column-parallel: unchanged
      // vLLM's custom all-reduce: the same fp32 sum of BF16-rounded partials, rounded to BF16 once
      const vllm = tensorParallelNumerics(inner, { ranks: 4, reduce: 'rank-order', dtype: 'bf16-fp32' }).block(0);
      const bf = (x: number) => round('bf16', x, { profile: 'ieee' });
      const hand = (() => {
        const out = new Float32Array(m * n);
        const part = new Float32Array(m * n);
        for (let r = 0; r < 4; r++) {
          const [lo, hi] = shardRange(k, 4, r);
          const as = Float32Array.from(
            { length: m * (hi - lo) },
            (_, x) => a[Math.floor(x / (hi - lo)) * k + lo + (x % (hi - lo))]!,
          );
          const bs = Float32Array.from(
            { length: n * (hi - lo) },
            (_, x) => b[Math.floor(x / (hi - lo)) * k + lo + (x % (hi - lo))]!,
          );
          inner.block(0).o.forward(part, as, bs, m, n, hi - lo);
          for (let x = 0; x < m * n; x++) out[x] = r === 0 ? bf(part[x]!) : Math.fround(out[x]! + bf(part[x]!));
        }
        return [...out].map(bf);
      })();
      expect(run(vllm.o)).toEqual(hand);
    }
  });
});

describe('continuous batching and chunked prefill', () => {
  const task = makeTask('reverse');
  const L = 6;
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + L }), 6);
  const P = task.promptLength;
  const prompts = (B: number) => task.trainProblems(B, 6).map((q) => [...q.prompt]);
  const variant = resolvePlan(JSON.parse(readFileSync('sims/plans/bf16-batch-variant.json', 'utf8')) as PlanData);
  const withEngine = (engine: EngineExecution): PrecisionPlan => ({
    ...variant,
    rollout: { ...variant.rollout, engine },
  });

  it('runs the steps a FIFO scheduler with a max batch runs (hand-traced)', () => {
    const lengths = [2, 1, 3, 1, 1];
    const ended = (b: number, k: number) => k + 1 === lengths[b];
    const run = (prefillChunk?: number) => {
      const samples: string[] = [];
      const steps = scheduleRequests({
        policy,
        prompts: Int32Array.from(prompts(5).flat()),
        B: 5,
        P,
        T: P + 3,
        numerics: roundingNumerics({ operands: 'bf16' }),
        routing: null,
        sample: (b, k) => {
          samples.push(`${b}:${k}`);
          return { token: 3, ended: ended(b, k) };
        },
        maxBatch: 2,
        ...(prefillChunk === undefined ? {} : { prefillChunk }),
      });
      return { steps, samples };
    };
    const whole = run();
    expect(whole.steps).toEqual([
      { tokens: 2 * P, requests: [0, 1] }, // both prefill; 1 ends after its first token
      { tokens: 1 + P, requests: [0, 2] }, // 0 decodes, 2 joins; 0 ends
      { tokens: 1 + P, requests: [2, 3] },
      { tokens: 1 + P, requests: [2, 4] },
    ]);
    expect(whole.samples).toEqual(['0:0', '1:0', '0:1', '2:0', '2:1', '3:0', '2:2', '4:0']);
    const chunked = run(P / 2); // two chunks per prompt (P = 8)
    expect(chunked.steps.slice(0, 3)).toEqual([
      { tokens: P, requests: [0, 1] }, // first chunks, nothing sampled
      { tokens: P, requests: [0, 1] }, // second chunks, both sample; 1 ends
      { tokens: 1 + P / 2, requests: [0, 2] },
    ]);
    expect(chunked.samples.slice(0, 3)).toEqual(['0:0', '1:0', '0:1']);
  });

  it('maxBatch ≥ B, one prefill, equal lengths: the lockstep rollout draw for draw (property)', () => {
    for (const B of [1, 3, 17]) {
      const base = arMismatchProbe(policy, { plan: variant, length: L, prompts: prompts(B), seed: B });
      for (const engine of [{ maxBatch: B }, { maxBatch: B + 5, prefillChunk: P }]) {
        const r = arMismatchProbe(policy, { plan: withEngine(engine), length: L, prompts: prompts(B), seed: B });
        expect(Buffer.from(r.rollout.tokens.buffer)).toEqual(Buffer.from(base.rollout.tokens.buffer));
        expect([...r.rollout.logpRollout]).toEqual([...base.rollout.logpRollout]);
      }
    }
  });

  it("MoE: the scheduler records each request's routing where the lockstep rollout does", () => {
    const moe = createArPolicy(
      arConfig({ vocabSize: task.vocabSize, maxLen: P + 5, moe: { experts: 4, topK: 2, auxCoeff: 0.01 } }),
      1,
    );
    const fp8 = resolvePlan('fp8-rollout');
    const q = prompts(5);
    const a = arMismatchProbe(moe, { plan: fp8, length: 5, prompts: q, seed: 1 });
    const b = arMismatchProbe(moe, {
      plan: { ...fp8, rollout: { ...fp8.rollout, engine: { maxBatch: 5 } } },
      length: 5,
      prompts: q,
      seed: 1,
    });
    expect(b.rollout.routing!.map((r) => [...r])).toEqual(a.rollout.routing!.map((r) => [...r]));
    expect(b.moe!.flipRate).toEqual(a.moe!.flipRate);
  });

  it('requests leaving the batch shrink the decode GEMMs under the split-K limit: mismatch the lockstep batch does not have', () => {
    const B = 20;
    const requestLengths = Array.from({ length: B }, (_, b) => 1 + (b % L));
    const lockstep = arMismatchProbe(policy, {
      plan: variant,
      length: L,
      prompts: prompts(B),
      seed: 2,
      requestLengths,
    }).diagnostics;
    expect([lockstep.k1, lockstep.k3, lockstep.maxAbsDelta]).toEqual([0, 0, 0]); // finished requests stay in the batch, fed pad
    const cb = arMismatchProbe(policy, {
      plan: withEngine({ maxBatch: B }),
      length: L,
      prompts: prompts(B),
      seed: 2,
      requestLengths,
    }).diagnostics;
    expect(cb.maxAbsDelta).toBeGreaterThan(0);
  });

  it('chunked prefill changes the prompt pass: ℓroll differs from one prefill', () => {
    const B = 4; // one prefill: 4·P = 32 rows (sequential); chunks of 2: 8-token steps (split-K)
    const one = arMismatchProbe(policy, { plan: variant, length: L, prompts: prompts(B), seed: 3 });
    const chunked = arMismatchProbe(policy, {
      plan: withEngine({ prefillChunk: 2 }),
      length: L,
      prompts: prompts(B),
      seed: 3,
    });
    expect([...chunked.rollout.logpRollout]).not.toEqual([...one.rollout.logpRollout]);
  });

  it('the batch-invariant switch: k3 exactly 0 on every path and schedule (property)', () => {
    const cases: { B: number; engine: EngineExecution; lengths?: boolean }[] = [
      { B: 1, engine: { batchInvariant: true } },
      { B: 4, engine: { batchInvariant: true, prefillChunk: 1 } },
      { B: 7, engine: { batchInvariant: true, maxBatch: 3, prefillChunk: 3 }, lengths: true },
      { B: 20, engine: { batchInvariant: true, maxBatch: 20 }, lengths: true },
    ];
    for (const c of cases) {
      const requestLengths = c.lengths ? Array.from({ length: c.B }, (_, b) => 1 + ((b * 5) % L)) : undefined;
      const d = arMismatchProbe(policy, {
        plan: withEngine(c.engine),
        length: L,
        prompts: prompts(c.B),
        seed: c.B,
        ...(requestLengths ? { requestLengths } : {}),
      }).diagnostics;
      expect([d.k1, d.k3, d.maxAbsDelta]).toEqual([0, 0, 0]);
    }
  });

  it('tensor parallelism: rollout-only TP parts from a one-device trainer; the same TP on both sides gives k3 exactly 0', () => {
    const tp = { ranks: 4, reduce: 'ring', dtype: 'bf16' } as const;
    const bf16 = resolvePlan('bf16');
    const rolloutOnly: PrecisionPlan = { ...bf16, rollout: { ...bf16.rollout, engine: { tensorParallel: tp } } };
    expect(
      arMismatchProbe(policy, { plan: rolloutOnly, length: L, prompts: prompts(4), seed: 1 }).diagnostics.maxAbsDelta,
    ).toBeGreaterThan(0);
    const both: PrecisionPlan = {
      ...variant,
      rollout: { ...variant.rollout, engine: { tensorParallel: tp, batchInvariant: true, maxBatch: 2 } },
      trainer: { ...variant.trainer, engine: { tensorParallel: tp } },
    };
    const d = arMismatchProbe(policy, { plan: both, length: L, prompts: prompts(5), seed: 1 }).diagnostics;
    expect([d.k1, d.k3, d.maxAbsDelta]).toEqual([0, 0, 0]);
  });
});

describe('engine settings as plan data', () => {
  const side = { gemm: { kind: 'rounding', operands: 'bf16' } };
  const plan =
    (rollout: object, trainer: object = side) =>
    () =>
      resolvePlan({ rollout: { ...side, ...rollout }, trainer } as PlanData);
  it('refuses bad values naming the field', () => {
    expect(plan({ engine: { maxBatch: 0 } })).toThrow(
      /^plan\.rollout\.engine\.maxBatch: expected an integer in 1\.\.4096, got 0$/,
    );
    expect(plan({ engine: { prefillChunk: 1.5 } })).toThrow(
      /plan\.rollout\.engine\.prefillChunk: expected an integer in 1\.\.1024, got 1\.5/,
    );
    expect(plan({ engine: { batchInvariant: 'yes' } })).toThrow(
      /plan\.rollout\.engine\.batchInvariant: expected true or false, got "yes"/,
    );
    expect(plan({ engine: { splitK: 2 } })).toThrow(/plan\.rollout\.engine: unknown field 'splitK'/);
    expect(plan({ engine: { tensorParallel: { ranks: 9 } } })).toThrow(
      /plan\.rollout\.engine\.tensorParallel\.ranks: expected an integer in 1\.\.8, got 9/,
    );
    expect(plan({ engine: { tensorParallel: { ranks: 2, reduce: 'butterfly' } } })).toThrow(
      /tensorParallel\.reduce: expected "ring", "tree" or "rank-order", got "butterfly"/,
    );
    expect(plan({ engine: { tensorParallel: { ranks: 2, dtype: 'fp16' } } })).toThrow(
      /tensorParallel\.dtype: expected "bf16", "fp32" or "bf16-fp32", got "fp16"/,
    );
    expect(plan({}, { ...side, engine: { maxBatch: 4 } })).toThrow(
      /plan\.trainer\.engine\.maxBatch: a rollout engine setting, not for the trainer/,
    );
    expect(plan({ temperatureAt: 'after-log-softmax' })).toThrow(/plan\.rollout\.temperatureAt: trainer only/);
    expect(plan({}, { ...side, temperatureAt: 'late' })).toThrow(
      /plan\.trainer\.temperatureAt: expected "before-log-softmax" or "after-log-softmax", got "late"/,
    );
    expect(
      plan(
        { engine: { maxBatch: 2, tensorParallel: { ranks: 2 } } },
        { ...side, engine: { tensorParallel: { ranks: 2 } }, temperatureAt: 'after-log-softmax' },
      ),
    ).not.toThrow();
  });
});

describe('scheduler and all-reduce properties (fast-check)', () => {
  const task = makeTask('reverse');
  const P = task.promptLength;
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: P + 4 }), 9);
  const numerics = roundingNumerics({ operands: 'bf16' });

  it('every request samples exactly its length, slots in order; no step runs more than maxBatch requests; step tokens = chunks + decodes', () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 1, max: 6 })
          .chain((B) =>
            fc.tuple(
              fc.constant(B),
              fc.integer({ min: 1, max: 7 }),
              fc.integer({ min: 1, max: P + 1 }),
              fc.array(fc.integer({ min: 1, max: 4 }), { minLength: B, maxLength: B }),
            ),
          ),
        ([B, maxBatch, chunk, lengths]) => {
          const seen: number[][] = Array.from({ length: B }, () => []);
          const steps = scheduleRequests({
            policy,
            prompts: Int32Array.from(task.trainProblems(B, 1).flatMap((q) => [...q.prompt])),
            B,
            P,
            T: P + 4,
            numerics,
            routing: null,
            sample: (b, k) => {
              seen[b]!.push(k);
              return { token: 3, ended: k + 1 === lengths[b] };
            },
            maxBatch,
            prefillChunk: chunk,
          });
          seen.forEach((ks, b) => expect(ks).toEqual(Array.from({ length: lengths[b]! }, (_, k) => k)));
          for (const s of steps) expect(s.requests.length).toBeLessThanOrEqual(maxBatch);
          // total tokens: every prompt once, plus one decode token per sampled slot after the first
          expect(steps.reduce((a, s) => a + s.tokens, 0)).toBe(B * P + lengths.reduce((a, n) => a + n - 1, 0));
        },
      ),
      { numRuns: 25 },
    );
  });

  it('ring order is rank order rotated to start at rank c+1; fp32 rank order is the sequential float32 sum', () => {
    fc.assert(
      fc.property(
        fc.array(fc.float({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }), {
          minLength: 1,
          maxLength: 8,
        }),
        fc.integer({ min: 0, max: 15 }),
        (p, j) => {
          const R = p.length;
          const n = 16;
          const c = Math.floor((j * R) / n);
          const rotated = Array.from({ length: R }, (_, i) => p[(c + 1 + i) % R]!);
          expect(reducePartials(p, 'ring', Math.fround, j, n)).toBe(
            reducePartials(rotated, 'rank-order', Math.fround, 0, n),
          );
          let acc = Math.fround(p[0]!);
          for (let i = 1; i < R; i++) acc = Math.fround(acc + Math.fround(p[i]!));
          expect(reducePartials(p, 'rank-order', Math.fround, j, n)).toBe(acc);
        },
      ),
    );
  });
});
