// The trainer's padding per micro-batch (`trainer.padding`): trimming a chunk to P + its longest response never
// moves the scored ℓ of a row-independent trainer (fp32, sequential BF16: ℓ, entropy, gradients, MoE routing bit
// for bit), and moves them only through a kernel or a scale that follows the GEMM's rows (split-K by row count,
// per-tensor FP8 scales; per-token scales stay put). Default and `max-length` are the unpadded field bit for bit.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import { arConfig } from '../../src/policies/ar/config.js';
import { chunkedLogprobs, responseLengths } from '../../src/policies/ar/micro-batches.js';
import { createArEngine } from '../../src/policies/index.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { arMismatchProbe } from '../../src/policies/ar/probe.js';
import { rollout } from '../../src/policies/ar/rollout.js';
import type { TrainerPadding } from '../../src/policies/plan-schema.js';
import {
  precisionPlan,
  resolvePlan,
  sideNumerics,
  type PlanData,
  type PlanSide,
  type PrecisionPlan,
} from '../../src/policies/plans.js';
import { resolveRunConfig } from '../../src/rl/grpo/config.js';
import { makeTask } from '../../src/tasks/registry.js';
import { sharpMoePolicy } from './sharp-moe.js';

function sameBits(got: ArrayLike<number>, want: ArrayLike<number>): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++)
    if (!Object.is(got[i], want[i])) expect.fail(`element ${i}: got ${got[i]}, want ${want[i]}`);
}

const fileData = (name: string): PlanData => JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData;
const withTrainer = (p: PrecisionPlan, microBatch?: number, padding?: TrainerPadding): PrecisionPlan => {
  const { microBatch: _m, padding: _p, ...trainer } = p.trainer;
  return {
    ...p,
    trainer: {
      ...trainer,
      ...(microBatch === undefined ? {} : { microBatch }),
      ...(padding === undefined ? {} : { padding }),
    },
  };
};
const sides = (trainer: PlanSide): PrecisionPlan =>
  resolvePlan({ name: 'padding', rollout: { gemm: { kind: 'rounding', operands: 'bf16' } }, trainer });

describe('responseLengths', () => {
  it('is the last scored slot plus one, 0 for a row with none', () => {
    const mask = [1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0];
    expect([...responseLengths(mask, 4)]).toEqual([2, 4, 0, 3]);
  });
});

describe('trainer.padding in the mismatch probe (responses of lengths 1..L)', () => {
  const task = makeTask('reverse');
  const L = 6;
  const B = 7;
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + L }), 5);
  const prompts = task.trainProblems(B, 2).map((q) => [...q.prompt]);
  const requestLengths = [6, 2, 3, 1, 4, 3, 2]; // the first chunk of 3 reaches L, the others do not
  const probe = (plan: PrecisionPlan) => arMismatchProbe(policy, { plan, length: L, prompts, seed: 1, requestLengths });
  const paddings: readonly TrainerPadding[] = ['max-length', 'longest-in-batch', 'longest-in-micro-batch'];

  it('a row-independent trainer (fp32, sequential BF16): ℓold bit for bit under every padding and chunk', () => {
    for (const base of [precisionPlan('fp32'), precisionPlan('bf16')]) {
      const none = probe(withTrainer(base));
      expect([...none.rollout.lengths]).toEqual(requestLengths);
      for (const m of [undefined, 1, 3])
        for (const p of paddings) sameBits(probe(withTrainer(base, m, p)).logpOld, none.logpOld);
    }
  });

  it('an absent field and max-length are the same pass; longest-in-batch is max-length when a response reaches L', () => {
    const tensor = resolvePlan(fileData('fp8-tensor-trainer-micro-batch'));
    for (const m of [1, 3]) {
      const none = probe(withTrainer(tensor, m));
      sameBits(probe(withTrainer(tensor, m, 'max-length')).logpOld, none.logpOld);
      sameBits(probe(withTrainer(tensor, m, 'longest-in-batch')).logpOld, none.logpOld);
    }
  });

  it('split-K chosen by the row count: trimming moves exactly the rows whose chunk crosses the limit', () => {
    const P = task.promptLength;
    // chunks of 1: a sequence of length L is P + L rows (sequential), a shorter one ≤ P + L − 1 rows (split-K)
    const plan = sides({
      gemm: { kind: 'rounding', operands: 'bf16', accumulator: 'split-k', splitK: 4, splitKMaxRows: P + L - 1 },
      microBatch: 1,
    });
    const padded = probe(plan).logpOld;
    const trimmed = probe(withTrainer(plan, 1, 'longest-in-micro-batch')).logpOld;
    let moved = 0;
    requestLengths.forEach((len, b) => {
      const row = (a: Float64Array) => a.subarray(b * L, (b + 1) * L);
      if (len === L) sameBits(row(trimmed), row(padded));
      else if ([...row(trimmed)].some((x, j) => !Object.is(x, row(padded)[j]))) moved++;
    });
    expect(moved).toBeGreaterThan(0); // split-K moves ℓ by ~5e-10 here; a row may keep its bits by chance
    const sequential = sides({ gemm: { kind: 'rounding', operands: 'bf16' }, microBatch: 1 });
    sameBits(probe(withTrainer(sequential, 1, 'longest-in-micro-batch')).logpOld, probe(sequential).logpOld);
  });

  it('per-tensor FP8 scales over the chunk’s rows move with the trim; per-token scales do not', () => {
    const tensor = resolvePlan(fileData('fp8-tensor-trainer-padded-micro-batch'));
    expect(tensor.trainer.padding).toBe('longest-in-micro-batch');
    const padded = probe(withTrainer(tensor, 1)).logpOld;
    const trimmed = probe(withTrainer(tensor, 1, 'longest-in-micro-batch')).logpOld;
    expect([...trimmed]).not.toEqual([...padded]);
    const token = resolvePlan(fileData('fp8-token-scale-invariant'));
    for (const m of [1, 3])
      sameBits(probe(withTrainer(token, m, 'longest-in-micro-batch')).logpOld, probe(withTrainer(token, m)).logpOld);
  });

  it('the field is trainer only and one of three names', () => {
    const side = { gemm: { kind: 'rounding', operands: 'bf16' } };
    const plan = (rollout: object, trainer: object) => () => resolvePlan({ rollout, trainer });
    expect(plan({ ...side, padding: 'longest-in-batch' }, side)).toThrow(/plan\.rollout\.padding: trainer only/);
    expect(plan(side, { ...side, padding: 'longest' })).toThrow(
      /plan\.trainer\.padding: expected one of "max-length", "longest-in-batch", "longest-in-micro-batch"/,
    );
    expect(plan(side, { ...side, padding: 'longest-in-micro-batch' })().trainer.padding).toBe('longest-in-micro-batch');
  });
});

describe('trainer.padding: what a trimmed chunk returns', () => {
  const task = makeTask('reverse');
  const L = 5;
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + L }), 8);
  const prompts = task.trainProblems(4, 3).map((q) => [...q.prompt]);
  const numerics = sideNumerics({ gemm: { kind: 'fp32' } }, policy.weights);
  const r = rollout(policy, prompts, {
    maxNewTokens: L,
    numerics,
    rng: createRng(4),
    eos: null,
    requestLengths: [2, 1, 5, 3],
    recordSupport: true,
    topK: 4,
    topkLogprobs: 3,
  });

  it('ℓ, entropy, Σπ² and the top-k ℓ of chunks [2, 1] (2 columns) and [5, 3] (5 columns) are the unpadded ones', () => {
    const opts = { numerics, support: r.support, topk: { K: 3, ids: r.topk!.ids }, probSqSum: true };
    const none = chunkedLogprobs(policy, r.tokens, r.B, r.promptLength, r.responseMask, opts);
    const got = chunkedLogprobs(policy, r.tokens, r.B, r.promptLength, r.responseMask, {
      ...opts,
      microBatch: 2,
      padding: 'longest-in-micro-batch',
    });
    expect(got.chunks.map((c) => c.responseLength)).toEqual([2, 5]);
    expect(got.chunks[0]!.cache.logits.length).toBe(2 * (task.promptLength + 2) * task.vocabSize);
    sameBits(got.logp, none.logp);
    sameBits(got.entropy, none.entropy);
    sameBits(got.probSqSum!, none.probSqSum!);
    sameBits(got.topkLogp!, none.topkLogp!);
  });
});

describe('trainer.padding with MoE routing (trimmed chunks gathered back, −1 where not computed)', () => {
  const task = makeTask('reverse');
  const L = 4;
  const policy = sharpMoePolicy(task, L);
  const prompts = task.trainProblems(5, 5).map((q) => [...q.prompt]);
  const fp8 = precisionPlan('fp8-rollout'); // FP8 block rollout, sequential BF16 trainer
  const requestLengths = [1, 2, 4, 2, 1];

  it('a row-independent trainer trimmed per chunk of 2: ℓold, the flip rates and ℓold under R3 bit for bit', () => {
    const none = arMismatchProbe(policy, { plan: fp8, length: L, prompts, seed: 2, requestLengths });
    expect(none.moe!.flipRate.some((f) => f > 0)).toBe(true);
    const got = arMismatchProbe(policy, {
      plan: withTrainer(fp8, 2, 'longest-in-micro-batch'),
      length: L,
      prompts,
      seed: 2,
      requestLengths,
    });
    sameBits(got.logpOld, none.logpOld);
    expect(got.moe!.flipRate).toEqual(none.moe!.flipRate);
    sameBits(got.moe!.logpOldR3, none.moe!.logpOldR3);
  });
});

describe('trainer.padding in the run engine (ℓθ and its backward)', () => {
  const task = makeTask('reverse');
  const pass = (trainer: Record<string, unknown>) => {
    const config = resolveRunConfig({
      task: { name: 'reverse' },
      policy: { model: { C: 16, H: 2, layers: 1, hidden: 32 } },
      plan: { name: 'padding', rollout: { gemm: { kind: 'fp32' } }, trainer: { gemm: { kind: 'fp32' }, ...trainer } },
    });
    const engine = createArEngine(config, task as never);
    const gen = engine.generate(
      task.trainProblems(6, 1).map((p) => [...p.prompt]),
      createRng(3),
    );
    const batch = { weightVersion: 0, ...gen };
    const rows = [0, 1, 2, 3, 4, 5];
    const lp = engine.logprobs(batch, rows, { grad: true });
    const g = Float64Array.from({ length: rows.length * batch.T }, (_, i) => ((i * 7) % 5) - 2);
    engine.params.grads.fill(0);
    engine.backward(g);
    return {
      lengths: responseLengths(batch.mask, rows.length),
      T: batch.T,
      lp,
      grads: Float32Array.from(engine.params.grads),
    };
  };

  it('fp32 trainer: ℓθ and the accumulated gradients of trimmed chunks equal the padded chunks’ bit for bit', () => {
    const padded = pass({ microBatch: 2 });
    expect(Math.min(...padded.lengths)).toBeLessThan(padded.T); // some responses end before the slots do
    const trimmed = pass({ microBatch: 2, padding: 'longest-in-micro-batch' });
    sameBits(trimmed.lp.logp, padded.lp.logp);
    sameBits(trimmed.grads, padded.grads);
    const whole = pass({ padding: 'longest-in-batch' });
    sameBits(whole.lp.logp, pass({}).lp.logp);
  });
});
