// The sampler's distribution through the in-process layers: the AR rollout's top-k ids and ℓ (the K
// most likely of the processed distribution, the support under top-k/top-p, nothing else moved),
// the trainer's ℓ at them and its backward, the reference backend, and a GRPO run that reads them.

import { describe, expect, it } from 'vitest';
import { ParamLayout } from '../../../src/nn/index.js';
import { rngFor } from '../../nn/gradcheck.js';
import {
  ArPolicy,
  arConfig,
  arParamSpecs,
  fp32Numerics,
  backwardLogprobs,
  computeLogprobs,
  createArPolicy,
  numericsFor,
  precisionPlans,
  rollout,
} from '../../../src/policies/index.js';
import { arPolicyFactory } from '../../../src/policies/ar/engine.js';
import { ReferenceBackend } from '../../../src/backend/reference.js';
import { createRng } from '../../../src/core/rng.js';
import { makeTask, type Task } from '../../../src/tasks/index.js';
import { grpoStep, resolveRunConfig } from '../../../src/rl/index.js';
import { backendMismatches } from '../../../src/runs/backend-expect.js';
import { connectBackend } from '../../../src/protocol/remote.js';
import { serveBackend } from '../../../src/protocol/serve.js';

const task = makeTask('reverse');
const prompts = task.trainProblems(4, 3).map((p) => [...p.prompt]);

function sharpPolicy(seed: number): ArPolicy {
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: 40 }), seed);
  const d = policy.params.data;
  for (let i = 0; i < d.length; i++) d[i] = d[i]! * 6;
  return policy;
}

const numerics = (_policy: ArPolicy) => numericsFor(precisionPlans.fp32.rollout);

describe('AR rollout topkLogprobs', () => {
  it.each([
    [{ topK: 0, topP: 1 }, 5],
    [{ topK: 3, topP: 1 }, 5],
    [{ topK: 0, topP: 0.6 }, 4],
  ])('%j, K = %i: tokens and ℓroll unchanged; ids the K most likely of the support; y in the support', (s, K) => {
    const policy = sharpPolicy(1);
    const opts = { maxNewTokens: 6, numerics: numerics(policy), temperature: 0.8, recordSupport: true, ...s };
    const plain = rollout(policy, prompts, { ...opts, rng: createRng('t/topk') });
    const r = rollout(policy, prompts, { ...opts, rng: createRng('t/topk'), topkLogprobs: K });
    expect(Array.from(r.tokens)).toEqual(Array.from(plain.tokens));
    expect(Array.from(r.logpRollout)).toEqual(Array.from(plain.logpRollout));
    const { B, promptLength: P, responseLength: L } = r;
    const V = task.vocabSize;
    const T = P + L;
    const topk = r.topk!;
    for (let b = 0; b < B; b++)
      for (let k = 0; k < L; k++) {
        const at = (b * L + k) * K;
        const ids = Array.from(topk.ids.subarray(at, at + K));
        if (r.responseMask[b * L + k] !== 1) {
          expect(ids.every((v) => v === -1)).toBe(true);
          continue;
        }
        const keep = r.support!.subarray((b * L + k) * V, (b * L + k + 1) * V);
        const kept = keep.reduce((a, x) => a + x, 0);
        // the ids are valid exactly up to the support's size, every one kept, in ℓ order
        ids.forEach((v, j) => expect(v >= 0).toBe(j < kept));
        for (const v of ids) if (v >= 0) expect(keep[v]).toBe(1);
        const lp = Array.from(topk.logp.subarray(at, at + K));
        for (let j = 1; j < K; j++) if (ids[j]! >= 0) expect(lp[j]!).toBeLessThanOrEqual(lp[j - 1]!);
        // no kept id outside the list is more likely than its last entry
        const valid = ids.filter((v) => v >= 0);
        const y = r.tokens[b * T + P + k]!;
        expect(keep[y]).toBe(1); // the sampled token is in the support
        const j = valid.indexOf(y);
        if (j >= 0) expect(lp[j]).toBe(r.logpRollout[b * L + k]); // the same processed ℓ as ℓroll
        if (valid.length === K && kept > K) expect(j < 0 || lp[j]! >= lp[K - 1]!).toBe(true);
      }
  });

  it('greedy and K = 0 record nothing; K > V is refused', () => {
    const policy = sharpPolicy(2);
    const base = { maxNewTokens: 4, numerics: numerics(policy), rng: createRng('t/g') };
    expect(rollout(policy, prompts, { ...base, greedy: true, topkLogprobs: 3 }).topk).toBeUndefined();
    expect(rollout(policy, prompts, base).topk).toBeUndefined();
    expect(() => rollout(policy, prompts, { ...base, topkLogprobs: task.vocabSize + 1 })).toThrow(/topkLogprobs/);
  });
});

describe('trainer ℓ at the engine ids and its backward', () => {
  it('ℓ at y equals the sampled ℓθ; a coefficient at the slot of y back-propagates as the same one on ℓθ', () => {
    const policy = sharpPolicy(3);
    const r = rollout(policy, prompts, {
      maxNewTokens: 5,
      numerics: numerics(policy),
      rng: createRng('t/b'),
      topkLogprobs: 4,
    });
    const { B, promptLength: P, responseLength: L } = r;
    const T = P + L;
    const mask = r.responseMask;
    const opts = { numerics: numerics(policy), topk: { K: 4, ids: r.topk!.ids } };
    const lp = computeLogprobs(policy, r.tokens, B, P, mask, opts);
    const gY = new Float64Array(B * L);
    const gTop = new Float64Array(B * L * 4);
    let hits = 0;
    for (let b = 0; b < B; b++)
      for (let k = 0; k < L; k++) {
        if (!mask[b * L + k]) continue;
        const y = r.tokens[b * T + P + k]!;
        for (let j = 0; j < 4; j++)
          if (r.topk!.ids[(b * L + k) * 4 + j] === y) {
            expect(lp.topkLogp![(b * L + k) * 4 + j]).toBe(lp.logp[b * L + k]);
            gY[b * L + k] = 0.3 + 0.1 * j;
            gTop[(b * L + k) * 4 + j] = 0.3 + 0.1 * j;
            hits++;
          }
      }
    expect(hits).toBeGreaterThan(3);
    policy.params.grads.fill(0);
    backwardLogprobs(policy, lp, gY);
    const viaLogp = Float64Array.from(policy.params.grads);
    policy.params.grads.fill(0);
    backwardLogprobs(policy, computeLogprobs(policy, r.tokens, B, P, mask, opts), new Float64Array(B * L), gTop);
    const viaTopk = Float64Array.from(policy.params.grads);
    let scale = 0;
    for (const g of viaLogp) scale = Math.max(scale, Math.abs(g));
    expect(scale).toBeGreaterThan(0);
    for (let i = 0; i < viaLogp.length; i++)
      expect(Math.abs(viaTopk[i]! - viaLogp[i]!)).toBeLessThanOrEqual(1e-6 * scale);
  });

  it.each([
    [1, undefined],
    [0.7, 'support'],
    [1.6, 'after'],
  ] as const)('the backward of top-k coefficients against float64 central differences (τ %f, %s)', (tau, variant) => {
    const V = 7;
    const cfg = arConfig({ vocabSize: V, maxLen: 8, C: 8, H: 2, layers: 1, hidden: 12 });
    const layout = new ParamLayout(arParamSpecs(cfg));
    const rng = rngFor(11, 'ar-topk-gradcheck');
    const data = new Float64Array(layout.size);
    layout.initialize(data, rng.fork('init'));
    for (let i = 0; i < data.length; i++) data[i] = data[i]! + 0.3 * rng.normal();
    const policy = new ArPolicy(cfg, { layout, data, grads: new Float64Array(layout.size) });
    const [B, P, L, K] = [2, 2, 3, 3];
    const tokens = Array.from({ length: B * (P + L) }, () => rng.int(V));
    const mask = [1, 1, 0, 1, 0, 1];
    const ids = new Int32Array(B * L * K).fill(-1);
    for (let s = 0; s < B * L; s++) {
      const order = rng.fork(`ids/${s}`).shuffle(Array.from({ length: V }, (_, v) => v));
      for (let j = 0; j < (s % 2 === 0 ? K : K - 1); j++) ids[s * K + j] = order[j]!; // some empty slots
    }
    const support = variant === 'support' ? new Uint8Array(B * L * V).fill(1) : undefined;
    if (support !== undefined)
      for (let s = 0; s < B * L; s++) {
        const kept = new Set([tokens[Math.floor(s / L) * (P + L) + P + (s % L)]!, ...ids.subarray(s * K, (s + 1) * K)]);
        for (let v = 0; v < V; v++) support[s * V + v] = kept.has(v) ? 1 : 0;
      }
    const opts = {
      numerics: fp32Numerics(),
      temperature: tau,
      support,
      topk: { K, ids },
      ...(variant === 'after' ? { temperatureAt: 'after-log-softmax' as const } : {}),
    };
    const g = Array.from({ length: B * L }, () => rng.normal());
    const gTop = Array.from(ids, (v) => (v >= 0 ? rng.normal() : 0));
    const objective = (): number => {
      const lp = computeLogprobs(policy, tokens, B, P, mask, opts);
      let s = 0;
      for (let i = 0; i < g.length; i++) s += g[i]! * lp.logp[i]!;
      for (let i = 0; i < gTop.length; i++) s += gTop[i]! * lp.topkLogp![i]!;
      return s;
    };
    backwardLogprobs(policy, computeLogprobs(policy, tokens, B, P, mask, opts), g, gTop);
    const picked = rng
      .fork('pick')
      .shuffle(Array.from({ length: layout.size }, (_, i) => i))
      .slice(0, 120);
    const h = 1e-5;
    let nonzero = 0;
    for (const i of picked) {
      const x0 = data[i]!;
      data[i] = x0 + h;
      const up = objective();
      data[i] = x0 - h;
      const dn = objective();
      data[i] = x0;
      const num = (up - dn) / (2 * h);
      const a = policy.params.grads[i]!;
      if (a !== 0) nonzero++;
      expect(Math.abs(a - num), `param ${i}: ${a} vs ${num}`).toBeLessThanOrEqual(
        1e-5 * Math.max(Math.abs(a), Math.abs(num)) + 1e-8,
      );
    }
    expect(nonzero).toBeGreaterThan(30);
  });
});

describe('a run that reads the top-k', () => {
  const base = {
    seed: 3,
    task: { name: 'reverse', options: { minLength: 2, maxLength: 3 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 }, sampler: { topkLogprobs: 13 } },
    plan: 'fp8-rollout',
    rollout: { prompts: 2, groupSize: 4 },
    optim: { miniBatches: 2 },
    estimators: { loss: { name: 'trpl' }, scoreCentering: {}, exactOnPolicyRatio: true },
  };
  const tk = makeTask('reverse', { minLength: 2, maxLength: 3 }) as unknown as Task;

  it('refuses a reader without topkLogprobs, a diffusion policy with it, K above the vocabulary, and a backend without the capability, naming the field', async () => {
    expect(() => resolveRunConfig({ ...base, policy: { ...base.policy, sampler: {} } })).toThrow(
      /^config\.policy\.sampler\.topkLogprobs: estimators\.loss 'trpl' reads/,
    );
    expect(() =>
      resolveRunConfig({ ...base, policy: { kind: 'diffusion', sampler: { topkLogprobs: 2 } }, estimators: {} }),
    ).toThrow(/^config\.policy\.sampler\.topkLogprobs: the diffusion policy reports no top-k/);
    // K above the task's vocabulary fails at config time, before any warm start or file
    expect(() => resolveRunConfig({ ...base, policy: { ...base.policy, sampler: { topkLogprobs: 14 } } })).toThrow(
      /^config\.policy\.sampler\.topkLogprobs: must be at most task reverse's vocabulary of 13 ids, got 14$/,
    );
    const config = resolveRunConfig(base);
    const info = await new ReferenceBackend(config, arPolicyFactory, tk).info();
    expect(backendMismatches(info, config, tk)).toEqual([]);
    const { topkLogprobs: _, ...older } = info.capabilities;
    expect(backendMismatches({ ...info, capabilities: older }, config, tk)).toEqual([
      "capabilities.topkLogprobs: the backend does not report the sampler's top-k log-probs (capabilities.topkLogprobs is false), which config.policy.sampler.topkLogprobs = 13 needs",
    ]);
  });

  it("refuses loss 'dppo-topk-tv' without topkLogprobs and runs it with them", async () => {
    const dppo = { ...base, estimators: { loss: { name: 'dppo-topk-tv' } } };
    expect(() => resolveRunConfig({ ...dppo, policy: { ...base.policy, sampler: {} } })).toThrow(
      /^config\.policy\.sampler\.topkLogprobs: estimators\.loss 'dppo-topk-tv' reads/,
    );
    const config = resolveRunConfig(dppo);
    const backend = new ReferenceBackend(config, arPolicyFactory, tk);
    await backend.setReference();
    const m = (await grpoStep({ backend, config, task: tk }, 1, createRng('3/step/1'))).metrics;
    expect(m['actor/dppo_topk/divergence/mean']).toBeGreaterThan(0); // the trainer's ℓ at the engine's ids arrived
    expect(Number.isFinite(m['actor/dppo_topk/mask_ratio/overall_mean'])).toBe(true);
  }, 60_000);

  it('refuses config.topkKl without topkLogprobs and runs it with them', async () => {
    const tk2 = { ...base, estimators: { loss: { name: 'ppo-clip' }, topkKl: { iw: true } } };
    expect(() => resolveRunConfig({ ...tk2, policy: { ...base.policy, sampler: {} } })).toThrow(
      /^config\.policy\.sampler\.topkLogprobs: estimators\.topkKl reads/,
    );
    const config = resolveRunConfig(tk2);
    const backend = new ReferenceBackend(config, arPolicyFactory, tk);
    await backend.setReference();
    const m = (await grpoStep({ backend, config, task: tk }, 1, createRng('3/step/1'))).metrics;
    expect(m['actor/topk_kl/head']).toBeGreaterThan(0); // KL(πθ‖μ) over the engine's 13 of 13 ids: FP8 mismatch
    expect(m['actor/topk_kl/tail_frac']).toBe(0); // K = V: no tail
  }, 60_000);

  it('two steps are deterministic and report the estimators’ metrics', async () => {
    const runOnce = async () => {
      const config = resolveRunConfig(base);
      const backend = new ReferenceBackend(config, arPolicyFactory, tk);
      await backend.setReference();
      const out: Record<string, number>[] = [];
      for (let step = 1; step <= 2; step++)
        out.push((await grpoStep({ backend, config, task: tk }, step, createRng(`3/step/${step}`))).metrics);
      return out;
    };
    const a = await runOnce();
    const b = await runOnce();
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    for (const m of a) {
      expect(Number.isFinite(m['actor/trpl/importance_ratio'])).toBe(true);
      expect(Number.isFinite(m['actor/score_centering_loss'])).toBe(true);
    }
  }, 60_000);
});

describe('top-k over qrl-backend/1 (the negotiated capability topkLogprobs)', () => {
  const config = resolveRunConfig({
    task: { name: 'reverse', options: { minLength: 2, maxLength: 3 } },
    policy: { model: { C: 8, H: 2, layers: 1, hidden: 16 } },
  });
  const tk = makeTask('reverse', { minLength: 2, maxLength: 3 }) as unknown as Task;
  const request = {
    prompts: [tk.sampleProblem(createRng(1), 'train').prompt, tk.sampleProblem(createRng(2), 'train').prompt],
    seed: '0/step/1/rollout',
    topkLogprobs: 5,
  };

  it('batch.topk, logprobs.topk and backward.gradTopk travel bit for bit and give the in-process gradient step', async () => {
    const local = new ReferenceBackend(config, arPolicyFactory, tk);
    const served = new ReferenceBackend(config, arPolicyFactory, tk);
    const server = await serveBackend(served, { port: 0 });
    const remote = await connectBackend({ url: `http://127.0.0.1:${server.port}` }, { timeoutMs: 30_000 });
    try {
      expect(remote.lastInfo?.capabilities.topkLogprobs).toBe(true);
      const batch = await remote.generate(request);
      const mine = await local.generate(request);
      expect(Array.from(batch.topk!.ids)).toEqual(Array.from(mine.topk!.ids));
      expect(Array.from(batch.topk!.logp)).toEqual(Array.from(mine.topk!.logp));
      const got = await remote.logprobs({ batch, rows: [1, 0], policy: 'current', grad: true, topk: true });
      const want = await local.logprobs({ batch: mine, rows: [1, 0], policy: 'current', grad: true, topk: true });
      expect(Array.from(got.topkLogp!)).toEqual(Array.from(want.topkLogp!));
      const g = Float64Array.from(want.logp, (_, i) => 0.1 * (i % 3));
      const gTop = Float64Array.from(want.topkLogp!, (_, i) => 0.05 * ((i % 4) - 1.5));
      await remote.backward(got.handle!, g, gTop);
      await local.backward(want.handle!, g, gTop);
      const a = await remote.step({ maxGradNorm: 1 });
      const b = await local.step({ maxGradNorm: 1 });
      expect(a.gradNorm).toBe(b.gradNorm);
      expect(Array.from(served.weights)).toEqual(Array.from(local.weights));
    } finally {
      await remote.close();
      await server.close();
    }
  }, 60_000);

  it('a backend without the capability still conforms; a top-k request to it is refused naming the field, without a call', async () => {
    const served = new ReferenceBackend(config, arPolicyFactory, tk);
    const inner = served.info.bind(served);
    served.info = async () => {
      const i = await inner();
      const { topkLogprobs: _, ...older } = i.capabilities;
      return { ...i, capabilities: older };
    };
    const server = await serveBackend(served, { port: 0 });
    const remote = await connectBackend({ url: `http://127.0.0.1:${server.port}` }, { timeoutMs: 30_000 });
    try {
      const { topkLogprobs: _, ...plain } = request;
      const batch = await remote.generate(plain);
      expect(batch.topk).toBeUndefined();
      await expect(remote.generate(request)).rejects.toThrow(/generate: topkLogprobs needs capabilities\.topkLogprobs/);
      await expect(remote.logprobs({ batch, rows: [0], policy: 'current', topk: true })).rejects.toThrow(
        /logprobs: topk needs capabilities\.topkLogprobs/,
      );
    } finally {
      await remote.close();
      await server.close();
    }
  }, 60_000);
});
