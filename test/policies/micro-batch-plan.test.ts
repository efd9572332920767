// The trainer's micro-batches as a plan field (`trainer.microBatch`): a chunk of the whole batch is the unchunked
// recompute bit for bit (ℓold, and the engine's ℓθ with its gradients); a smaller chunk moves ℓold under
// per-tensor activation scales and not under per-token ones; the field is refused on the rollout side.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import { arConfig } from '../../src/policies/ar/config.js';
import { createArEngine } from '../../src/policies/index.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { arMismatchProbe } from '../../src/policies/ar/probe.js';
import { precisionPlan, resolvePlan, type PlanData, type PrecisionPlan } from '../../src/policies/plans.js';
import { resolveRunConfig } from '../../src/rl/grpo/config.js';
import { makeTask } from '../../src/tasks/registry.js';
import { sharpMoePolicy } from './sharp-moe.js';

function sameBits(got: ArrayLike<number>, want: ArrayLike<number>): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++)
    if (!Object.is(got[i], want[i])) expect.fail(`element ${i}: got ${got[i]}, want ${want[i]}`);
}

const fileData = (name: string): PlanData => JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData;
const withMicroBatch = (p: PrecisionPlan, microBatch: number | undefined): PrecisionPlan => {
  const { microBatch: _m, ...trainer } = p.trainer;
  return { ...p, trainer: microBatch === undefined ? trainer : { ...trainer, microBatch } };
};

describe('trainer.microBatch in the mismatch probe', () => {
  const task = makeTask('reverse');
  const L = 5;
  const B = 6;
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + L }), 3);
  const prompts = task.trainProblems(B, 9).map((q) => [...q.prompt]);
  const probe = (plan: PrecisionPlan) => arMismatchProbe(policy, { plan, length: L, prompts, seed: 4 });
  const tensor = resolvePlan(fileData('fp8-tensor-trainer-micro-batch'));
  const token = resolvePlan(fileData('fp8-token-scale-invariant'));

  it('the plan file sets microBatch 8 on the trainer', () => {
    expect(tensor.trainer.microBatch).toBe(8);
    expect(tensor.rollout).toEqual(resolvePlan(fileData('fp8-tensor-scale-invariant')).rollout);
  });

  it('a chunk of the whole batch (or more) is the unchunked recompute bit for bit', () => {
    const none = probe(withMicroBatch(tensor, undefined));
    for (const m of [B, 8]) {
      const got = probe(withMicroBatch(tensor, m));
      sameBits(got.logpOld, none.logpOld);
      expect(got.diagnostics).toEqual(none.diagnostics);
    }
  });

  it('per-tensor scales: chunks of 1 and 2 move ℓold (and k3); per-token scales: ℓold identical', () => {
    const none = probe(withMicroBatch(tensor, undefined));
    const one = probe(withMicroBatch(tensor, 1));
    const two = probe(withMicroBatch(tensor, 2));
    sameBits(one.rollout.logpRollout, none.rollout.logpRollout); // the rollout does not see the field
    expect([...one.logpOld]).not.toEqual([...none.logpOld]);
    expect([...two.logpOld]).not.toEqual([...one.logpOld]);
    expect(one.diagnostics.k3).not.toBe(none.diagnostics.k3);
    const tokenNone = probe(token);
    sameBits(probe(withMicroBatch(token, 1)).logpOld, tokenNone.logpOld);
    sameBits(probe(withMicroBatch(token, 4)).logpOld, tokenNone.logpOld);
  });

  it('the field is trainer only and a positive integer', () => {
    const side = { gemm: { kind: 'rounding', operands: 'bf16' } };
    const plan = (rollout: object, trainer: object) => () => resolvePlan({ rollout, trainer });
    expect(plan({ ...side, microBatch: 2 }, side)).toThrow(/plan\.rollout\.microBatch: trainer only/);
    expect(plan(side, { ...side, microBatch: 0 })).toThrow(/plan\.trainer\.microBatch: expected a positive integer/);
    expect(plan(side, { ...side, microBatch: 1.5 })).toThrow(/plan\.trainer\.microBatch: expected a positive integer/);
    expect(plan(side, { ...side, microBatch: 3 })().trainer.microBatch).toBe(3);
  });
});

describe('trainer.microBatch with MoE routing (replay and flip rates cut and gathered per chunk)', () => {
  const task = makeTask('reverse');
  const L = 4;
  const policy = sharpMoePolicy(task, L);
  const prompts = task.trainProblems(5, 5).map((q) => [...q.prompt]);
  const fp8 = precisionPlan('fp8-rollout'); // FP8 block rollout, sequential BF16 trainer

  it('a row-independent trainer in chunks of 1 and 2 gives ℓold, the flip rates and ℓold under R3 bit for bit', () => {
    const none = arMismatchProbe(policy, { plan: fp8, length: L, prompts, seed: 2 });
    expect(none.moe).toBeDefined();
    expect(none.moe!.flipRate.some((f) => f > 0)).toBe(true);
    for (const m of [1, 2]) {
      const got = arMismatchProbe(policy, { plan: withMicroBatch(fp8, m), length: L, prompts, seed: 2 });
      sameBits(got.logpOld, none.logpOld);
      expect(got.moe!.flipRate).toEqual(none.moe!.flipRate);
      sameBits(got.moe!.logpOldR3, none.moe!.logpOldR3);
    }
  });
});

describe('trainer.microBatch in the run engine (ℓθ and its backward)', () => {
  const task = makeTask('reverse');
  const base = fileData('fp8-tensor-trainer-micro-batch') as unknown as Record<string, unknown>;
  const pass = (microBatch: number | undefined) => {
    const trainer = { ...(base.trainer as Record<string, unknown>) };
    delete trainer.microBatch;
    const config = resolveRunConfig({
      task: { name: 'reverse' },
      policy: { model: { C: 16, H: 2, layers: 1, hidden: 32 } },
      plan: { ...base, trainer: microBatch === undefined ? trainer : { ...trainer, microBatch } },
    });
    const engine = createArEngine(config, task as never);
    const gen = engine.generate(
      task.trainProblems(4, 1).map((p) => [...p.prompt]),
      createRng(3),
    );
    const batch = { weightVersion: 0, ...gen };
    const old = engine.logprobs(batch, [0, 1, 2, 3], { grad: false });
    const lp = engine.logprobs(batch, [0, 1, 2, 3], { grad: true });
    const g = Float64Array.from({ length: 4 * batch.T }, (_, i) => ((i * 7) % 5) - 2);
    engine.params.grads.fill(0);
    engine.backward(g);
    return { old: Float64Array.from(old.logp), lp, grads: Float32Array.from(engine.params.grads) };
  };

  it('microBatch ≥ the rows: ℓold, ℓθ and the gradients of the unchunked engine bit for bit', () => {
    const none = pass(undefined);
    const whole = pass(4);
    sameBits(whole.old, none.old);
    sameBits(whole.lp.logp, none.lp.logp);
    sameBits(whole.grads, none.grads);
  });

  it('microBatch 1: ℓ follows the chunk, and the accumulated gradient is the chunked passes’ sum (close, not equal)', () => {
    const none = pass(undefined);
    const one = pass(1);
    expect([...one.lp.logp]).not.toEqual([...none.lp.logp]);
    sameBits(one.old, one.lp.logp); // ℓold and ℓθ are chunked alike
    let num = 0;
    let den = 0;
    for (let i = 0; i < none.grads.length; i++) {
      num += (one.grads[i]! - none.grads[i]!) ** 2;
      den += none.grads[i]! ** 2;
    }
    expect(den).toBeGreaterThan(0);
    expect(Math.sqrt(num / den)).toBeGreaterThan(0);
    expect(Math.sqrt(num / den)).toBeLessThan(0.2);
  });
});
