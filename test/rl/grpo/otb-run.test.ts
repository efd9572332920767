// veRL's optimal token baseline in the GRPO loop: the ℓold pass returns Σπ² (float64, from the same
// softmax row as ℓ), the loop computes advantages after that pass, and they, and the first update's
// gradient, equal `estimate`'s on the same batch. veRL: ray_trainer.py compute_advantage after old_log_prob.

import { describe, expect, it } from 'vitest';
import type { LogprobsRequest, LogprobsResult, RolloutBatch } from '../../../src/core/backend-contract.js';
import { ReferenceBackend } from '../../../src/backend/reference.js';
import { rowProbSqSum } from '../../../src/nn/row-logprob.js';
import {
  arConfig,
  computeLogprobs,
  createArPolicy,
  diffusionPolicyFactory,
  numericsFor,
  precisionPlans,
  rollout,
} from '../../../src/policies/index.js';
import { arPolicyFactory } from '../../../src/policies/ar/engine.js';
import { estimate, grpoStep, resolveRunConfig } from '../../../src/rl/index.js';
import { createRng } from '../../../src/core/rng.js';
import { makeTask, type Task } from '../../../src/tasks/index.js';
import { backendMismatches } from '../../../src/runs/backend-expect.js';
import { BackendCallError } from '../../../src/protocol/errors.js';
import { connectBackend } from '../../../src/protocol/remote.js';
import { serveBackend } from '../../../src/protocol/serve.js';

/** log Σ_v exp(a_v) in doubles: an independent reference, not the engine's routine. */
function lse(a: readonly number[]): number {
  const m = Math.max(...a);
  return m + Math.log(a.reduce((s, v) => s + Math.exp(v - m), 0));
}

describe('Σ_v π(v)² of the trainer pass', () => {
  it('rowProbSqSum: hand values, and the kept set renormalises', () => {
    expect(rowProbSqSum(Float32Array.of(0, 0), 0, 2, 1, Math.LN2)).toBe(0.5);
    // p = (1/2, 1/4, 1/4): Σp² = 1/4 + 1/16 + 1/16 = 3/8
    const z = Float64Array.of(Math.log(2), 0, 0);
    expect(rowProbSqSum(z, 0, 3, 1, Math.log(4))).toBeCloseTo(3 / 8, 15);
    // kept {1, 2}: p = (0, 1/2, 1/2)
    expect(rowProbSqSum(z, 0, 3, 1, Math.LN2, Uint8Array.of(0, 1, 1))).toBe(0.5);
  });

  it("computeLogprobs: veRL's exp(logsumexp(2z/τ) − 2·logsumexp(z/τ)) at every scored token, and ℓ unchanged by asking", () => {
    const task = makeTask('reverse');
    const P = task.promptLength;
    const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: 40 }), 7);
    const prompts = task.trainProblems(3, 5).map((p) => [...p.prompt]);
    const numerics = numericsFor(precisionPlans.bf16.trainer);
    const tau = 0.8;
    const r = rollout(policy, prompts, { maxNewTokens: 6, numerics, rng: createRng(5), temperature: tau });
    const plain = computeLogprobs(policy, r.tokens, r.B, P, r.responseMask, { numerics, temperature: tau });
    const lp = computeLogprobs(policy, r.tokens, r.B, P, r.responseMask, {
      numerics,
      temperature: tau,
      probSqSum: true,
    });
    expect(plain.probSqSum).toBeUndefined();
    expect(Array.from(lp.logp)).toEqual(Array.from(plain.logp));
    const V = task.vocabSize;
    const L = lp.responseLength;
    const T = P + L;
    let scored = 0;
    for (let b = 0; b < r.B; b++) {
      for (let k = 0; k < L; k++) {
        const got = lp.probSqSum![b * L + k]!;
        if (!r.responseMask[b * L + k]) {
          expect(got).toBe(0);
          continue;
        }
        const row = Array.from(lp.cache.logits.subarray((b * T + P + k - 1) * V, (b * T + P + k) * V), (z) => z / tau);
        expect(got).toBeCloseTo(Math.exp(lse(row.map((z) => 2 * z)) - 2 * lse(row)), 14);
        scored++;
      }
    }
    expect(scored).toBeGreaterThan(5);
  });
});

describe('optimal_token_baseline in a run', () => {
  const base = {
    seed: 2,
    task: { name: 'reverse', options: { minLength: 2, maxLength: 3 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
    plan: 'fp8-rollout',
    rollout: { prompts: 3, groupSize: 4 },
    optim: { miniBatches: 1 },
    estimators: { advantage: { name: 'optimal_token_baseline' }, correction: { name: 'tis' } },
  };

  it('run configs accept it for AR policies; diffusion, bypass and loglinear refuse it naming the field', () => {
    expect(resolveRunConfig(base).estimators.advantage).toEqual({
      name: 'optimal_token_baseline',
      epsilon: 1e-8,
      handleZeroTail: true,
    });
    expect(() => resolveRunConfig({ ...base, policy: { kind: 'diffusion' } })).toThrow(
      /^config\.estimators\.advantage\.name: 'optimal_token_baseline' needs .* the diffusion policy \(config\.policy\.kind\)/,
    );
    expect(() => resolveRunConfig({ ...base, estimators: { ...base.estimators, mode: 'bypass' } })).toThrow(
      /^config\.estimators\.advantage\.name: .*estimators\.mode 'bypass' skips/,
    );
    expect(() =>
      resolveRunConfig({ ...base, estimators: { ...base.estimators, proxLogp: { method: 'loglinear' } } }),
    ).toThrow(/^config\.estimators\.advantage\.name: .*proxLogp 'loglinear' skips/);
  });

  it('at init, a backend without capabilities.probSqSum is refused with a line naming it; the reference backend declares it for AR', async () => {
    const config = resolveRunConfig(base);
    const task = makeTask('reverse', { minLength: 2, maxLength: 3 }) as unknown as Task;
    const info = await new ReferenceBackend(config, arPolicyFactory, task).info();
    expect(info.capabilities.probSqSum).toBe(true);
    expect(backendMismatches(info, config, task)).toEqual([]);
    const { probSqSum: _, ...older } = info.capabilities;
    expect(backendMismatches({ ...info, capabilities: older }, config, task)).toEqual([
      "capabilities.probSqSum: the backend does not return Σ_v π(v)² per token (capabilities.probSqSum is false), which config.estimators.advantage.name 'optimal_token_baseline' needs",
    ]);
    // other advantages do not need it
    expect(
      backendMismatches({ ...info, capabilities: older }, resolveRunConfig({ ...base, estimators: {} }), task),
    ).toEqual([]);
  });

  it("the step's advantages and first gradient equal estimate's on the same batch, ℓold and Σπ²", async () => {
    const config = resolveRunConfig(base);
    const inner = makeTask('reverse', { minLength: 2, maxLength: 3 }) as unknown as Task;
    const rewards: number[] = [];
    // the task as the step sees it, recording each row's reward in row order
    const reward = (...args: Parameters<Task['reward']>): ReturnType<Task['reward']> => {
      const r = inner.reward(...args);
      rewards.push(r.reward);
      return r;
    };
    const task = new Proxy(
      {},
      {
        get: (_, key) => {
          if (key === 'reward') return reward;
          const v = Reflect.get(inner, key) as unknown;
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(inner) : v;
        },
      },
    ) as Task;
    const backend = new ReferenceBackend(config, arPolicyFactory, inner);
    await backend.warmStart({ task: config.task as never, steps: 15, batchSize: 16, lr: 3e-3, seed: 0 });
    await backend.setReference();
    let batch: RolloutBatch | undefined;
    const passes: { request: LogprobsRequest; result: LogprobsResult }[] = [];
    const grads: Float64Array[] = [];
    const spy = {
      sync: () => backend.sync(),
      generate: async (request: Parameters<ReferenceBackend['generate']>[0]) =>
        (batch = await backend.generate(request)),
      logprobs: async (request: LogprobsRequest) => {
        const result = await backend.logprobs(request);
        passes.push({ request, result });
        return result;
      },
      backward: async (handle: string, g: Float64Array) => {
        grads.push(g);
        return backend.backward(handle, g);
      },
      step: (request: Parameters<ReferenceBackend['step']>[0]) => backend.step(request),
    } as unknown as ReferenceBackend;
    const { metrics } = await grpoStep(
      { config, task, backend: spy },
      1,
      createRng(config.seed).fork('step').fork('1'),
    );

    const b = batch!;
    const old = passes[0]!;
    expect(old.request.probSqSum).toBe(true);
    expect(old.request.grad).toBeUndefined();
    expect(passes.slice(1).every((p) => p.request.probSqSum === undefined)).toBe(true); // only the ℓold pass asks
    const theta = passes[1]!;
    const G = config.rollout.groupSize;
    const rows = Array.from({ length: b.B }, (_, i) => i);
    const ref = estimate(
      {
        shape: { B: b.B, T: b.T },
        logpTheta: theta.result.logp,
        logpOld: old.result.logp,
        logpRollout: b.logpRollout,
        mask: b.mask,
        rewards: Float64Array.from(rewards),
        groups: rows.map((i) => Math.floor(i / G)),
        probSqSum: old.result.probSqSum!,
      },
      config.estimators,
    );
    // a non-trivial baseline: some token's advantage differs from its row's reward
    expect(ref.advantages.some((a, k) => b.mask[k] === 1 && a !== rewards[Math.floor(k / b.T)])).toBe(true);
    for (const key of ['advantages/mean', 'advantages/max', 'advantages/min'])
      expect(metrics[key], key).toBe(ref.metrics[key]);
    expect(grads).toHaveLength(1);
    expect(Array.from(grads[0]!)).toEqual(Array.from(ref.gradLogpTheta));
  }, 120_000);
});

describe('probSqSum from the reference backend', () => {
  it('the diffusion policy refuses it naming logprobs.probSqSum, and does not declare it', async () => {
    const config = resolveRunConfig({
      task: { name: 'reverse', options: { minLength: 2, maxLength: 3 } },
      policy: {
        kind: 'diffusion',
        model: { C: 8, H: 2, layers: 1, hidden: 16 },
        diffusion: { generationLength: 8, blockLength: 8, steps: 4 },
      },
    });
    const task = makeTask('reverse', { minLength: 2, maxLength: 3 }) as unknown as Task;
    const backend = new ReferenceBackend(config, diffusionPolicyFactory, task);
    expect((await backend.info()).capabilities.probSqSum).toBe(false);
    const batch = await backend.generate({ prompts: [task.sampleProblem(createRng(1), 'train').prompt], seed: 's' });
    expect((await backend.logprobs({ batch, rows: [0], policy: 'current' })).probSqSum).toBeUndefined();
    await expect(backend.logprobs({ batch, rows: [0], policy: 'current', probSqSum: true })).rejects.toThrow(
      /^logprobs\.probSqSum: the diffusion policy/,
    );
  });
});

describe('probSqSum over qrl-backend/1', () => {
  it('travels as F64 (rows, T) bit for bit; an answer without it, when asked, is malformed naming result.probSqSum', async () => {
    const config = resolveRunConfig({
      task: { name: 'reverse', options: { minLength: 2, maxLength: 3 } },
      policy: { model: { C: 8, H: 2, layers: 1, hidden: 16 } },
    });
    const task = makeTask('reverse', { minLength: 2, maxLength: 3 }) as unknown as Task;
    const local = new ReferenceBackend(config, arPolicyFactory, task);
    const served = new ReferenceBackend(config, arPolicyFactory, task);
    let drop = false;
    const inner = served.logprobs.bind(served);
    served.logprobs = async (request) => {
      const r = await inner(request);
      return drop ? { logp: r.logp, entropy: r.entropy } : r;
    };
    const server = await serveBackend(served, { port: 0 });
    const remote = await connectBackend({ url: `http://127.0.0.1:${server.port}` }, { timeoutMs: 30_000 });
    try {
      expect(remote.lastInfo?.capabilities.probSqSum).toBe(true);
      const request = {
        prompts: [task.sampleProblem(createRng(1), 'train').prompt, task.sampleProblem(createRng(2), 'train').prompt],
        seed: '0/step/1/rollout',
      };
      const batch = await remote.generate(request);
      const want = await local.logprobs({
        batch: await local.generate(request),
        rows: [1, 0],
        policy: 'current',
        probSqSum: true,
      });
      const got = await remote.logprobs({ batch, rows: [1, 0], policy: 'current', probSqSum: true });
      expect(Array.from(got.probSqSum!)).toEqual(Array.from(want.probSqSum!));
      expect((await remote.logprobs({ batch, rows: [0], policy: 'current' })).probSqSum).toBeUndefined();
      drop = true;
      const e = (await remote
        .logprobs({ batch, rows: [0], policy: 'current', probSqSum: true })
        .catch((x: unknown) => x)) as BackendCallError;
      expect(e).toBeInstanceOf(BackendCallError);
      expect(e.field).toBe('result.probSqSum');
    } finally {
      await remote.close();
      await server.close();
    }
  }, 60_000);
});
