// The diffusion rollout's MoE routing record (the forward whose logits give ℓroll) and routing replay
// through the engine, for every estimator. Not the AR record (test/policies/ar/moe-routing.test.ts).

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ReferenceBackend } from '../../../src/backend/index.js';
import {
  createDiffusionEngine,
  createDiffusionModel,
  diffusionLogprobs,
  diffusionMismatchProbe,
  diffusionPolicyFactory,
  numericsFor,
  precisionPlans,
  type DiffusionEngineRecord,
} from '../../../src/policies/index.js';
import { createParamStore } from '../../../src/nn/index.js';
import { createRng } from '../../../src/core/rng.js';
import { makeTask } from '../../../src/tasks/index.js';
import { resolveRunConfig } from '../../../src/rl/index.js';
import { runGrpo } from '../../../src/runs/index.js';

const model = { C: 16, H: 2, layers: 2, hidden: 16, moe: { experts: 4, topK: 2, auxCoeff: 0.01 } };
const config = (estimator: string, plan: string, extra: Record<string, unknown> = {}) =>
  resolveRunConfig({
    seed: 3,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    plan,
    policy: {
      kind: 'diffusion',
      model,
      diffusion: { generationLength: 8, blockLength: 8, steps: 4, estimator },
      ...extra,
    },
  });

/** A backend whose weights are scaled up (router logits far from uniform, so a quantized rollout flips some decisions), and a batch. */
async function scaled(estimator: string, plan: string) {
  const backend = new ReferenceBackend(config(estimator, plan), diffusionPolicyFactory);
  const w = backend.weights;
  for (let i = 0; i < w.length; i++) w[i] = Math.fround(w[i]! * 6);
  await backend.sync();
  const prompts = backend.task.trainProblems(4, 'moe-diffusion').map((p) => [...p.prompt]);
  const batch = await backend.generate({ prompts, seed: 'moe/diffusion' });
  return { backend, batch, rows: [0, 1, 2, 3] };
}

const same = (a: Float64Array, b: Float64Array): boolean => a.every((x, i) => Object.is(x, b[i]));

describe.each(['trajectory', 'd1', 'elbo'] as const)('diffusion MoE routing (%s)', (estimator) => {
  const views = { trajectory: 4, d1: 1, elbo: 8 }[estimator]; // forward rows per sequence: steps, 1, elboSamples
  it('records the routing of the ℓroll forward; under bf16 R3 and R2 reproduce the own routing bit for bit', async () => {
    const { backend, batch, rows } = await scaled(estimator, 'bf16');
    const record = batch.record as unknown as DiffusionEngineRecord;
    const T = batch.prompts[0]!.length + batch.T;
    expect(record.moeRouting!.map((r) => r.length)).toEqual([4 * views * T * 2, 4 * views * T * 2]);
    const own = await backend.logprobs({ batch, rows, policy: 'current', returnRouting: true });
    expect(own.routingFlipRate).toEqual([0, 0]);
    own.routing!.forEach((r, l) => expect(Array.from(r)).toEqual(Array.from(record.moeRouting![l]!)));
    const r3 = await backend.logprobs({ batch, rows, policy: 'current', routing: 'rollout' });
    const r2 = await backend.logprobs({
      batch,
      rows: [2],
      policy: 'current',
      routing: own.routing!.map((r) => r.slice(2 * views * T * 2, 3 * views * T * 2)),
    });
    expect(same(r3.logp, own.logp)).toBe(true);
    expect(same(r2.logp, own.logp.subarray(2 * batch.T, 3 * batch.T))).toBe(true);
    await backend.close();
  });

  it('under int8-rollout some decisions flip; R3 replays the record (flip rate 0) and moves ℓ', async () => {
    const { backend, batch, rows } = await scaled(estimator, 'int8-rollout');
    const own = await backend.logprobs({ batch, rows, policy: 'current' });
    const r3 = await backend.logprobs({ batch, rows, policy: 'current', routing: 'rollout' });
    expect(own.routingFlipRate!.some((f) => f > 0)).toBe(true);
    expect(r3.routingFlipRate).toEqual([0, 0]);
    expect(same(r3.logp, own.logp)).toBe(false);
    await backend.close();
  });
});

it("trajectory: the sampler's step passes route exactly as the trajectory estimator under the rollout side", () => {
  const c = config('trajectory', 'int8-rollout');
  const engine = createDiffusionEngine(c, makeTask('reverse', { minLength: 3, maxLength: 4 }));
  const w = engine.params.data;
  for (let i = 0; i < w.length; i++) w[i] = Math.fround(w[i]! * 6);
  engine.sync();
  const prompts = makeTask('reverse', { minLength: 3, maxLength: 4 })
    .trainProblems(3, 'traj')
    .map((p) => [...p.prompt]);
  const batch = engine.generate(prompts, createRng('traj'));
  const record = batch.record as DiffusionEngineRecord;
  const lp = diffusionLogprobs(
    'trajectory',
    engine.model,
    w,
    record.sequences,
    numericsFor(precisionPlans['int8-rollout']!.rollout),
    { seed: record.estimatorSeed, temperature: record.temperature },
  );
  lp.routing!.forEach((r, l) => expect(Array.from(r)).toEqual(Array.from(record.moeRouting![l]!)));
});

it.each(['trajectory', 'd1'] as const)(
  'the mismatch probe (%s): flip rate per layer and the diagnostics with R3 replay',
  (estimator) => {
    const task = makeTask('reverse', { minLength: 3, maxLength: 4 });
    const m = createDiffusionModel({
      C: 16,
      H: 2,
      layers: 2,
      hidden: 16,
      moe: model.moe,
      vocabSize: task.vocabSize,
      maxLen: 32,
    });
    const params = createParamStore(m.specs, 'probe').data;
    for (let i = 0; i < params.length; i++) params[i] = Math.fround(params[i]! * 6);
    const probe = (plan: 'bf16' | 'int8-rollout') =>
      diffusionMismatchProbe({
        rollout: numericsFor(precisionPlans[plan]!.rollout),
        trainer: numericsFor(precisionPlans[plan]!.trainer),
        length: 8,
        seed: 2,
        estimator,
        task: 'reverse',
        taskOptions: { minLength: 3, maxLength: 4 },
        sequences: 6,
        model: m,
        params,
      });
    const same = probe('bf16');
    expect(same.moe!.flipRate).toEqual([0, 0]);
    expect([same.diagnostics.k3, same.moe!.diagnosticsR3.k3]).toEqual([0, 0]);
    const q = probe('int8-rollout');
    expect(q.moe!.flipRate.some((f) => f > 0)).toBe(true);
    expect(q.moe!.diagnosticsR3.k3).not.toBe(q.diagnostics.k3);
  },
);

describe('diffusion GRPO with R3 under identical plans', () => {
  const root = mkdtempSync(join(tmpdir(), 'qrl-dmoe-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  it('≡ no replay: metrics and final weights bit for bit (d1, 2 steps)', async () => {
    const out: { lines: Record<string, number>[]; weights: Float32Array }[] = [];
    for (const mode of ['none', 'R3'] as const) {
      const c = resolveRunConfig({
        ...config('d1', 'bf16', { routingReplay: mode }),
        steps: 2,
        sft: { steps: 2, batchSize: 4, cache: false },
        rollout: { prompts: 2, groupSize: 2 },
        optim: { miniBatches: 1 },
        eval: { every: 0, problems: 2 },
      });
      const backend = new ReferenceBackend(c, diffusionPolicyFactory);
      await runGrpo({ config: c, outDir: join(root, mode), backend, cacheDir: join(root, 'cache') });
      out.push({
        lines: readFileSync(join(root, mode, 'metrics.jsonl'), 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Record<string, number>),
        weights: Float32Array.from(backend.weights),
      });
      await backend.close();
    }
    const [none, r3] = out as [(typeof out)[0], (typeof out)[0]];
    none.lines.forEach((line, i) => {
      for (const [key, value] of Object.entries(line)) expect([key, r3.lines[i]![key]]).toEqual([key, value]);
      expect(line['moe/flip_rate/l0']).toBe(0);
    });
    expect(Array.from(r3.weights).every((w, i) => Object.is(w, none.weights[i]))).toBe(true);
  });
});
