// Tests of the diffusion RlEngine and its PolicyFactory: batch shapes and masks, determinism, ℓold ≡ ℓroll under identical plans, mismatch under bf16-splitk, backward vs float64 finite differences, reference weights, validation.
// Not the sampler's or the estimators' own semantics (sampler.test.ts, estimators.test.ts).

import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/core/errors.js';
import { ReferenceBackend } from '../../../src/backend/reference.js';
import { fp32Numerics } from '../../../src/policies/numerics.js';
import {
  createDiffusionEngine,
  diffusionPolicyFactory,
  type DiffusionEngine,
  type DiffusionEngineRecord,
} from '../../../src/policies/diffusion/engine.js';
import { diffusionLogprobs } from '../../../src/policies/diffusion/estimators.js';
import { resolveRunConfig, type RunConfig } from '../../../src/rl/grpo/config.js';
import { grpoStep } from '../../../src/rl/grpo/loop.js';
import { batchFromJson, batchToJson, parseMessage } from '../../../src/protocol/schema.js';
import type { ReplayRecord } from '../../../src/core/backend-contract.js';
import { createRng } from '../../../src/core/rng.js';
import { EOS, makeTask, PAD, type Task } from '../../../src/tasks/index.js';

const estimators = ['trajectory', 'd1', 'elbo'] as const;
const tiny = { C: 8, H: 2, hidden: 16, layers: 1 };

function setup(
  overrides: {
    plan?: string;
    estimator?: (typeof estimators)[number];
    model?: Record<string, unknown>;
    sampler?: Record<string, unknown>;
  } = {},
): {
  config: RunConfig;
  task: Task;
  engine: DiffusionEngine;
  prompts: number[][];
} {
  const config = resolveRunConfig({
    seed: 3,
    task: { name: 'reverse', options: { maxLength: 4, minLength: 2 } },
    plan: overrides.plan ?? 'bf16',
    policy: {
      kind: 'diffusion',
      model: overrides.model ?? tiny,
      diffusion: { generationLength: 8, blockLength: 4, steps: 4, estimator: overrides.estimator ?? 'd1' },
      ...(overrides.sampler ? { sampler: overrides.sampler } : {}),
    },
    rollout: { prompts: 2, groupSize: 3 },
    sft: { steps: 0, cache: false },
    estimators: { kl: { name: 'k3', coef: 0.01 } },
  });
  diffusionPolicyFactory.validate(config);
  const task = makeTask('reverse', { maxLength: 4, minLength: 2 });
  const engine = createDiffusionEngine(config, task);
  // Larger-than-init weights so that logits (and so mismatches and gradients) are not trivially small.
  const rng = createRng(11).fork('weights');
  for (let i = 0; i < engine.params.data.length; i++) engine.params.data[i] = 0.4 * rng.normal();
  engine.sync();
  const prompts = task.trainProblems(6, 5).map((p) => [...p.prompt]);
  return { config, task, engine, prompts };
}

describe('diffusion engine: generate', () => {
  it('returns (B, T) responses, a completion mask up to the first EOS, ℓroll only under the mask, and the record', () => {
    for (const estimator of estimators) {
      const { engine, prompts } = setup({ estimator });
      const batch = engine.generate(prompts, createRng(1).fork('rollout'));
      const N = 8;
      expect([batch.B, batch.T, batch.responses.length, batch.mask.length, batch.logpRollout.length]).toEqual([
        6,
        N,
        6 * N,
        6 * N,
        6 * N,
      ]);
      const record = batch.record as DiffusionEngineRecord;
      expect(record.kind).toBe('diffusion');
      expect(record.estimator).toBe(estimator);
      for (let r = 0; r < batch.B; r++) {
        const full = record.sequences[r]!.response;
        const eos = full.indexOf(EOS);
        const len = eos < 0 ? N : eos + 1;
        for (let j = 0; j < N; j++) {
          const k = r * N + j;
          expect(batch.mask[k]).toBe(j < len ? 1 : 0);
          if (j < len) {
            expect(batch.responses[k]).toBe(full[j]);
            expect(Number.isFinite(batch.logpRollout[k]!) && batch.logpRollout[k]! <= 0).toBe(true);
          } else {
            expect([batch.responses[k], batch.logpRollout[k]]).toEqual([PAD, 0]);
          }
        }
      }
    }
  });

  it('is a function of the rng stream; greedy ignores it', () => {
    const { engine, prompts } = setup();
    const a = engine.generate(prompts, createRng(1).fork('rollout'));
    const b = engine.generate(prompts, createRng(1).fork('rollout'));
    const c = engine.generate(prompts, createRng(2).fork('rollout'));
    expect(b.responses).toEqual(a.responses);
    expect(b.logpRollout).toEqual(a.logpRollout);
    expect(c.responses).not.toEqual(a.responses);
    const g1 = engine.generate(prompts, createRng(1), { greedy: true });
    const g2 = engine.generate(prompts, createRng(2), { greedy: true });
    expect(g2.responses).toEqual(g1.responses);
    expect((g1.record as DiffusionEngineRecord).temperature).toBe(1);
  });

  it('rollout side uses the weights of the last sync(); trainer side the current master weights', () => {
    const { engine, prompts } = setup({ plan: 'fp32' });
    const before = engine.generate(prompts, createRng(4), { greedy: true });
    for (let i = 0; i < engine.params.data.length; i++) engine.params.data[i] = -engine.params.data[i]!;
    expect(engine.generate(prompts, createRng(4), { greedy: true }).logpRollout).toEqual(before.logpRollout);
    const trainerSide = engine.generate(prompts, createRng(4), { greedy: true, side: 'trainer' });
    expect(trainerSide.logpRollout).not.toEqual(before.logpRollout);
    engine.sync();
    expect(engine.generate(prompts, createRng(4), { greedy: true }).logpRollout).toEqual(trainerSide.logpRollout);
  });
});

describe('diffusion engine: logprobs', () => {
  it('identical plans on both sides ⇒ ℓold ≡ ℓroll bit for bit, for the whole batch and for any row subset', () => {
    for (const plan of ['fp32', 'bf16']) {
      for (const estimator of estimators) {
        const { engine, prompts } = setup({ plan, estimator });
        const batch = engine.generate(prompts, createRng(7).fork('rollout'));
        const rows = [4, 1, 2];
        const all = engine.logprobs(batch, [0, 1, 2, 3, 4, 5], { grad: false });
        const sub = engine.logprobs(batch, rows, { grad: false });
        for (let k = 0; k < all.logp.length; k++) expect(Object.is(all.logp[k], batch.logpRollout[k])).toBe(true);
        rows.forEach((r, i) => {
          for (let j = 0; j < batch.T; j++)
            expect(Object.is(sub.logp[i * batch.T + j], batch.logpRollout[r * batch.T + j])).toBe(true);
        });
        for (let k = 0; k < all.entropy.length; k++) {
          if (batch.mask[k] === 1) expect(all.entropy[k]!).toBeGreaterThan(0);
          else expect(all.entropy[k]).toBe(0);
        }
      }
    }
  });

  it('sampling-support replay under top-p, identical plans ⇒ ℓold ≡ ℓroll bit for bit for every estimator; without the kept sets ℓold < ℓroll somewhere', () => {
    // TRL issue 6789 / PR 7269, prime-rl PR 2601: the trainer scores under the support the sampler drew from
    for (const estimator of estimators) {
      const { engine, prompts } = setup({
        plan: 'bf16',
        estimator,
        sampler: { temperature: 0.8, topP: 0.6, supportReplay: true },
      });
      const batch = engine.generate(prompts, createRng(7).fork('rollout'));
      const record = batch.record as DiffusionEngineRecord;
      expect(record.support?.length).toBe(batch.B * batch.T * engine.model.config.vocabSize);
      const all = engine.logprobs(batch, [0, 1, 2, 3, 4, 5], { grad: false });
      for (let k = 0; k < all.logp.length; k++)
        expect(Object.is(all.logp[k], batch.logpRollout[k]), `${estimator} k=${k}`).toBe(true);
      const rows = [4, 1];
      const sub = engine.logprobs(batch, rows, { grad: false });
      rows.forEach((r, i) => {
        for (let j = 0; j < batch.T; j++)
          expect(Object.is(sub.logp[i * batch.T + j], batch.logpRollout[r * batch.T + j])).toBe(true);
      });
      const { support: _s, ...bare } = record;
      const full = engine.logprobs({ ...batch, record: bare }, [0, 1, 2, 3, 4, 5], { grad: false });
      expect(
        full.logp.some((x, k) => batch.mask[k] === 1 && x < batch.logpRollout[k]! - 1e-9),
        estimator,
      ).toBe(true);
      // entropy of the renormalised distribution: over fewer ids, never above the full one here
      expect(all.entropy.some((h, k) => batch.mask[k] === 1 && h < full.entropy[k]! - 1e-9)).toBe(true);
    }
    // without supportReplay the batch carries no kept sets and ℓroll stays processed (the modelled bias)
    const off = setup({ plan: 'bf16', estimator: 'trajectory', sampler: { temperature: 0.8, topP: 0.6 } });
    const b = off.engine.generate(off.prompts, createRng(7).fork('rollout'));
    expect((b.record as DiffusionEngineRecord).support).toBeUndefined();
    const lp = off.engine.logprobs(b, [0, 1, 2, 3, 4, 5], { grad: false }).logp;
    expect(lp.some((x, k) => b.mask[k] === 1 && x < b.logpRollout[k]! - 1e-9)).toBe(true);
  });

  it('the kept sets cross the protocol (and so checkpoints of stale batches): after the JSON round trip ℓold still ≡ ℓroll', () => {
    const { engine, prompts } = setup({
      plan: 'bf16',
      estimator: 'elbo',
      sampler: { temperature: 0.8, topK: 3, supportReplay: true },
    });
    const gen = engine.generate(prompts, createRng(5));
    const batch = { weightVersion: 0, ...gen, record: gen.record as ReplayRecord };
    const back = batchFromJson(
      parseMessage('generate', 'result', JSON.parse(JSON.stringify(batchToJson(batch)))),
      'generate',
      'result',
    );
    expect((back.record as unknown as DiffusionEngineRecord).support).toBeInstanceOf(Uint8Array);
    const lp = engine.logprobs(back, [0, 1, 2, 3, 4, 5], { grad: false }).logp;
    for (let k = 0; k < lp.length; k++) expect(Object.is(lp[k], back.logpRollout[k])).toBe(true);
  });

  it('bf16-splitk rollout vs bf16 trainer ⇒ finite, non-zero mismatch under every estimator', () => {
    for (const estimator of estimators) {
      const { engine, prompts } = setup({
        plan: 'bf16-splitk',
        estimator,
        model: { ...tiny, C: 32, H: 2, hidden: 64 },
      });
      const batch = engine.generate(prompts, createRng(7).fork('rollout'));
      const old = engine.logprobs(batch, [0, 1, 2, 3, 4, 5], { grad: false });
      let maxAbs = 0;
      for (let k = 0; k < old.logp.length; k++) {
        expect(Number.isFinite(old.logp[k]!)).toBe(true);
        if (batch.mask[k] === 1) maxAbs = Math.max(maxAbs, Math.abs(old.logp[k]! - batch.logpRollout[k]!));
      }
      expect(maxAbs).toBeGreaterThan(0);
      expect(maxAbs).toBeLessThan(1);
    }
  });

  it('backward accumulates d(Σ g·ℓ)/dθ: matches float64 central differences (also renormalised over replayed kept sets)', () => {
    const cases = [
      ...estimators.map((estimator) => ({ estimator, sampler: undefined })),
      ...estimators.map((estimator) => ({
        estimator,
        sampler: { temperature: 0.8, topK: 4, topP: 0.8, supportReplay: true },
      })),
    ];
    for (const { estimator, sampler } of cases) {
      const { engine, prompts } = setup({ plan: 'fp32', estimator, ...(sampler ? { sampler } : {}) });
      const batch = engine.generate(prompts, createRng(9).fork('rollout'));
      const rows = [5, 0, 3];
      const T = batch.T;
      const g = Float64Array.from({ length: rows.length * T }, (_, k) => ((k * 7) % 5) - 2);
      engine.params.zeroGrad();
      engine.logprobs(batch, rows, { grad: true });
      engine.backward(g);
      const record = batch.record as DiffusionEngineRecord;
      const seqs = rows.map((r) => record.sequences[r]!);
      const V = engine.model.config.vocabSize;
      const support = record.support
        ? Uint8Array.from(rows.flatMap((r) => Array.from(record.support!.subarray(r * T * V, (r + 1) * T * V))))
        : null;
      expect(support !== null).toBe(sampler !== undefined);
      const mask = Float64Array.from(g, (_, k) => batch.mask[rows[Math.floor(k / T)]! * T + (k % T)]!);
      const theta = Float64Array.from(engine.params.data);
      const f = (p: Float64Array): number => {
        const { logp } = diffusionLogprobs(estimator, engine.model, p, seqs, fp32Numerics(), {
          seed: record.estimatorSeed,
          temperature: record.temperature,
          support,
        });
        let s = 0;
        for (let k = 0; k < logp.length; k++) s += mask[k]! * g[k]! * logp[k]!;
        return s;
      };
      const pick = createRng(estimator).fork(sampler ? 'replay' : 'indices');
      let scale = 0;
      for (const v of engine.params.grads) scale = Math.max(scale, Math.abs(v));
      expect(scale).toBeGreaterThan(0);
      for (let n = 0; n < 40; n++) {
        const i = pick.int(theta.length);
        const h = 1e-5;
        const plus = Float64Array.from(theta);
        const minus = Float64Array.from(theta);
        plus[i] = plus[i]! + h;
        minus[i] = minus[i]! - h;
        const fd = (f(plus) - f(minus)) / (2 * h);
        expect(Math.abs(engine.params.grads[i]! - fd)).toBeLessThan(1e-3 * scale + 1e-5);
      }
    }
  });

  it('reference weights give different log-probs; grad with reference weights and backward without grad are errors', () => {
    const { engine, prompts } = setup();
    const batch = engine.generate(prompts, createRng(2));
    const reference = Float32Array.from(engine.params.data, (v) => v * 0.5);
    const own = engine.logprobs(batch, [0, 1], { grad: false });
    const ref = engine.logprobs(batch, [0, 1], { grad: false, weights: reference });
    expect(ref.logp).not.toEqual(own.logp);
    expect(engine.logprobs(batch, [0, 1], { grad: false }).logp).toEqual(own.logp);
    expect(() => engine.logprobs(batch, [0], { grad: true, weights: reference })).toThrow(/master weights/);
    expect(() => engine.backward(new Float64Array(batch.T))).toThrow(/preceding logprobs/);
    expect(() => engine.logprobs(batch, [6], { grad: false })).toThrow(/rows\[0\]/);
    expect(() => engine.logprobs({ ...batch, record: undefined }, [0], { grad: false })).toThrow(/record/);
  });

  it('state() is null and restore accepts only that', () => {
    const { engine } = setup();
    expect(engine.state()).toBeNull();
    expect(() => engine.restore(null)).not.toThrow();
    expect(() => engine.restore({ scales: [1] })).toThrow(/null state/);
  });
});

describe('diffusion engine in the GRPO loop', () => {
  it('one step runs; identical plans ⇒ zero mismatch; a changed plan ⇒ non-zero', async () => {
    for (const [plan, zero] of [
      ['bf16', true],
      ['bf16-splitk', false],
    ] as const) {
      const { config, task, engine } = setup({ plan, model: { ...tiny, C: 32, H: 2, hidden: 64 } });
      const backend = new ReferenceBackend(config, diffusionPolicyFactory, task);
      const before = Float32Array.from(engine.params.data); // setup's larger-than-init weights
      // A reference policy away from θ gives the KL term a gradient even when every advantage is 0.
      backend.weights.set(before.map((v) => 0.9 * v));
      await backend.setReference();
      backend.weights.set(before);
      const { metrics } = await grpoStep({ config, task, backend }, 1, createRng(0).fork('step').fork('1'));
      for (const v of Object.values(metrics)) expect(Number.isFinite(v)).toBe(true);
      expect(metrics['rollout_corr/k3_kl'] === 0).toBe(zero);
      expect(backend.weights).not.toEqual(before);
    }
  });

  it('top-p under identical plans: a GRPO step with supportReplay has zero mismatch (ℓref replayed too), without it the truncation bias shows', async () => {
    for (const [supportReplay, zero] of [
      [true, true],
      [false, false],
    ] as const) {
      const { config, task } = setup({
        plan: 'bf16',
        estimator: 'trajectory',
        sampler: { temperature: 0.8, topP: 0.6, supportReplay },
      });
      const backend = new ReferenceBackend(config, diffusionPolicyFactory, task);
      await backend.setReference();
      const { metrics } = await grpoStep({ config, task, backend }, 1, createRng(0).fork('step').fork('1'));
      for (const v of Object.values(metrics)) expect(Number.isFinite(v)).toBe(true);
      expect(
        metrics['rollout_corr/k3_kl'] === 0,
        `supportReplay ${supportReplay}: ${metrics['rollout_corr/k3_kl']}`,
      ).toBe(zero);
    }
  });

  it('warmStart yields to the event loop between steps, with the same weights as the synchronous loop', async () => {
    const { config, task, engine } = setup();
    const { engine: twin } = setup();
    const short = { ...config, sft: { ...config.sft, steps: 3, batchSize: 4 } };
    let ticks = 0;
    const seen: number[] = [];
    const tick = (): void => {
      ticks++;
      if (ticks < 10) setImmediate(tick);
    };
    setImmediate(tick);
    await diffusionPolicyFactory.warmStart(engine, short, task, () => seen.push(ticks));
    // A synchronous loop would report 0 ticks at every step; the async one lets the ticker run in between.
    expect(seen[0]).toBe(0);
    expect(seen[2]!).toBeGreaterThan(0);
    const { diffusionWarmStart } = await import('../../../src/policies/diffusion/warmstart.js');
    diffusionWarmStart(
      twin.model,
      task,
      { steps: 3, batchSize: 4, lr: short.sft.lr, genLength: twin.sampler.genLength, seed: `${short.seed}` },
      twin.params,
    );
    expect(Array.from(twin.params.data)).toEqual(Array.from(engine.params.data));
  });

  it('warmStart trains the engine in place with config.sft and reports its losses', async () => {
    const { config, task, engine } = setup();
    const before = Float32Array.from(engine.params.data);
    const out = await diffusionPolicyFactory.warmStart(
      engine,
      { ...config, sft: { ...config.sft, steps: 3, batchSize: 4 } },
      task,
    );
    expect(out['sft/steps']).toBe(3);
    expect(Number.isFinite(out['sft/loss_first']!)).toBe(true);
    expect(engine.params.data).not.toEqual(before);
  });
});

describe('diffusionPolicyFactory.validate', () => {
  const base = { task: { name: 'sudoku4' }, policy: { kind: 'diffusion' } };
  const cases: [Record<string, unknown>, RegExp][] = [
    [
      { diffusion: { steps: 5 } },
      /^config\.policy\.diffusion\.steps: must be a multiple of the number of blocks 3.*got 5$/,
    ],
    [{ diffusion: { steps: 48 } }, /^config\.policy\.diffusion\.steps: must be ≤ blocks·blockLength = 24/],
    [
      { diffusion: { blockLength: 5 } },
      /^config\.policy\.diffusion\.blockLength: must divide generationLength 24, got 5$/,
    ],
    [
      { diffusion: { generationLength: 16, blockLength: 8, steps: 4 } },
      /^config\.policy\.diffusion\.generationLength: must be ≥ task sudoku4's response length 17/,
    ],
    [{ model: { C: 30, H: 4 } }, /^config\.policy\.model\.H: must divide C = 30, got 4$/],
    [{ model: { width: 3 } }, /^config\.policy\.model: unknown field 'width'/],
    [{ model: { layers: 0 } }, /^config\.policy\.model\.layers: must be a positive integer, got 0$/],
    [
      { model: { maxLen: 30 } },
      /^config\.policy\.model\.maxLen: must be ≥ prompt length 18 \+ generationLength 24 = 42, got 30$/,
    ],
    [{ model: { nLayer: 2 } }, /^config\.policy\.model\.nLayer: is now 'layers' .*, got 2$/],
    [{ model: { maxSeqLen: 64 } }, /^config\.policy\.model\.maxSeqLen: is now 'maxLen' .*, got 64$/],
    [{ sampler: { logprob: 'raw' } }, /^config\.policy\.sampler\.logprob: must be 'processed' .*, got "raw"$/],
  ];
  it('names the field and the value', () => {
    for (const [policy, re] of cases) {
      const config = resolveRunConfig({ ...base, policy: { ...base.policy, ...policy } });
      let error: unknown;
      try {
        diffusionPolicyFactory.validate(config);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(UsageError);
      expect((error as Error).message).toMatch(re);
    }
    const badPlan = resolveRunConfig({ ...base, plan: 'fp7' });
    expect(() => diffusionPolicyFactory.validate(badPlan)).toThrow(
      /^config\.plan: must be one of fp32, bf16, .*, got "fp7"$/,
    );
    expect(() => diffusionPolicyFactory.validate(resolveRunConfig({ ...base, policy: { kind: 'ar' } }))).toThrow(
      /^config\.policy\.kind: must be 'diffusion'.*got "ar"$/,
    );
    expect(() => diffusionPolicyFactory.validate(resolveRunConfig(base))).not.toThrow();
    // top-k / top-p and sampling-support replay are the diffusion policy's too
    const replay = resolveRunConfig({
      ...base,
      policy: { ...base.policy, sampler: { topK: 5, topP: 0.9, supportReplay: true } },
    });
    expect(() => diffusionPolicyFactory.validate(replay)).not.toThrow();
    expect(() => resolveRunConfig({ ...base, policy: { ...base.policy, sampler: { topP: 1.5 } } })).toThrow(
      /^config\.policy\.sampler\.topP: /,
    );
  });
});
