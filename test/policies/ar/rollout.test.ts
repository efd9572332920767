// Rollout engine against the trainer: bit-identical log-probs under identical plans, kernel-order
// mismatch under bf16-splitk, ℓroll vs an independent recomputation, reproducibility, EOS handling.

import { describe, expect, it } from 'vitest';
import {
  arConfig,
  arForward,
  backwardLogprobs,
  computeLogprobs,
  createArPolicy,
  numericsFor,
  precisionPlans,
  rollout,
  rolloutResponses,
  type ArPolicy,
  type PolicyNumerics,
  type RolloutOptions,
} from '../../../src/policies/index.js';
import { createRng } from '../../../src/core/rng.js';
import { EOS, makeTask, PAD } from '../../../src/tasks/index.js';

const task = makeTask('reverse');
const P = task.promptLength;
const prompts = task.trainProblems(6, 11).map((p) => [...p.prompt]);

/** A policy with weights scaled up from the GPT-2 init, so its distributions are far from uniform. */
function sharpPolicy(seed: number, overrides: Partial<Parameters<typeof arConfig>[0]> = {}): ArPolicy {
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: 40, ...overrides }), seed);
  const d = policy.params.data;
  for (let i = 0; i < d.length; i++) d[i] = d[i]! * 12;
  return policy;
}

function sameArrays(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

describe('AR rollout vs trainer under one plan', () => {
  // Every preset whose two sides use the same GEMM plan must agree bit for bit; the model variant
  // rotates so that each code path (norms, MLPs, positions, biases, tying) meets a rounding plan.
  const variants: Partial<Parameters<typeof arConfig>[0]>[] = [
    {},
    { positions: 'rope', norm: 'layernorm', bias: true },
    { mlp: 'gelu', tiedEmbeddings: true },
  ];
  const identical = Object.values(precisionPlans).filter(
    (p) => JSON.stringify(p.rollout.gemm) === JSON.stringify(p.trainer.gemm),
  );
  it('the identical-sides presets are fp32, bf16, fp16, qarl and jet', () => {
    expect(identical.map((p) => p.name)).toEqual(['fp32', 'bf16', 'fp16', 'qarl', 'jet']);
  });
  identical.forEach((plan, i) => {
    const overrides = variants[i % variants.length]!;
    it(`${plan.name}: raw ℓroll at τ = 1 (with top-k/top-p active) equals the trainer's ℓ bit for bit`, () => {
      const policy = sharpPolicy(3, overrides);
      const r = rollout(policy, prompts, {
        maxNewTokens: 20,
        numerics: numericsFor(plan.rollout),
        rng: createRng(1),
        logprob: 'raw',
        topK: 5,
        topP: 0.9,
      });
      const lp = computeLogprobs(policy, r.tokens, r.B, P, r.responseMask, { numerics: numericsFor(plan.trainer) });
      expect(r.responseMask.reduce((a, b) => a + b)).toBeGreaterThan(20);
      expect(sameArrays(r.logpRollout, lp.logp)).toBe(true);
    });
    it(`${plan.name}: processed ℓroll without top-k/top-p at τ = 0.7 equals the trainer's ℓ at τ = 0.7 bit for bit, for both decode modes`, () => {
      const policy = sharpPolicy(4, overrides);
      for (const decode of ['incremental', 'recompute'] as const) {
        const r = rollout(policy, prompts, {
          maxNewTokens: 20,
          numerics: numericsFor(plan.rollout),
          rng: createRng(2),
          temperature: 0.7,
          decode,
        });
        const lp = computeLogprobs(policy, r.tokens, r.B, P, r.responseMask, {
          numerics: numericsFor(plan.trainer),
          temperature: 0.7,
        });
        expect(sameArrays(r.logpRollout, lp.logp)).toBe(true);
        expect(lp.logp.some((x) => x < -1e-3)).toBe(true);
      }
    });
  });

  it('support replay under top-p: with the recorded kept sets the trainer ℓ equals ℓroll bit for bit; without, they differ', () => {
    // TRL issue 6789 / PR 7269, prime-rl PR 2601: score under the support the sampler drew from
    const policy = sharpPolicy(4);
    const n = numericsFor(precisionPlans.bf16.rollout);
    const r = rollout(policy, prompts, {
      maxNewTokens: 10,
      numerics: n,
      rng: createRng(2),
      temperature: 0.9,
      topP: 0.7,
      recordSupport: true,
    });
    const V = policy.config.vocabSize;
    expect(r.support?.length).toBe(r.B * r.responseLength * V);
    const replay = computeLogprobs(policy, r.tokens, r.B, P, r.responseMask, {
      numerics: numericsFor(precisionPlans.bf16.trainer),
      temperature: 0.9,
      support: r.support,
    });
    expect(sameArrays(r.logpRollout, replay.logp)).toBe(true);
    const plain = computeLogprobs(policy, r.tokens, r.B, P, r.responseMask, {
      numerics: numericsFor(precisionPlans.bf16.trainer),
      temperature: 0.9,
    });
    expect(sameArrays(r.logpRollout, plain.logp)).toBe(false);
    // every sampled token lies in its recorded kept set, and top-p kept fewer than V ids somewhere
    let truncated = 0;
    for (let i = 0; i < r.B * r.responseLength; i++) {
      if (!r.responseMask[i]) continue;
      const b = Math.floor(i / r.responseLength);
      const k = i % r.responseLength;
      const keep = r.support!.subarray(i * V, (i + 1) * V);
      expect(keep[r.tokens[b * (P + r.responseLength) + P + k]!]).toBe(1);
      if (keep.reduce((a, x) => a + x, 0) < V) truncated++;
      // the entropy under replay is that of the renormalised distribution: −Σ_{v∈K} p_K log p_K
      const off = (b * (P + r.responseLength) + P + k - 1) * V;
      const lse = Math.log(
        Array.from(keep).reduce((a, x, v) => a + (x ? Math.exp(replay.cache.logits[off + v]! / 0.9) : 0), 0),
      );
      const h = Array.from(keep).reduce(
        (a, x, v) =>
          x ? a - Math.exp(replay.cache.logits[off + v]! / 0.9 - lse) * (replay.cache.logits[off + v]! / 0.9 - lse) : a,
        0,
      );
      expect(replay.entropy[i]).toBeCloseTo(h, 12);
      if (keep.reduce((a, x) => a + x, 0) === 1) expect(replay.entropy[i]).toBe(0);
    }
    expect(truncated).toBeGreaterThan(5);
    expect(replay.entropy.some((h, i) => h < plain.entropy[i]! - 1e-9)).toBe(true);
  });

  it('with top-k on, processed ℓroll exceeds the trainer ℓ by −log(kept mass) > 0 under identical numerics', () => {
    const policy = sharpPolicy(4);
    const n = numericsFor(precisionPlans.fp32.rollout);
    const r = rollout(policy, prompts, { maxNewTokens: 10, numerics: n, rng: createRng(2), topK: 2 });
    const lp = computeLogprobs(policy, r.tokens, r.B, P, r.responseMask, { numerics: n });
    let strictly = 0;
    for (let i = 0; i < lp.logp.length; i++) {
      if (!r.responseMask[i]) continue;
      expect(r.logpRollout[i]!).toBeGreaterThanOrEqual(lp.logp[i]!);
      if (r.logpRollout[i]! - lp.logp[i]! > 1e-6) strictly++;
    }
    expect(strictly).toBeGreaterThan(5);
  });

  it('the two decode modes give the same tokens and ℓroll (per-element numerics)', () => {
    const policy = sharpPolicy(5);
    const base: RolloutOptions = {
      maxNewTokens: 16,
      numerics: numericsFor(precisionPlans.bf16.rollout),
      rng: createRng(3),
      topK: 6,
    };
    const a = rollout(policy, prompts, { ...base, rng: createRng(3) });
    const b = rollout(policy, prompts, { ...base, rng: createRng(3), decode: 'recompute' });
    expect(sameArrays(a.tokens, b.tokens)).toBe(true);
    expect(sameArrays(a.logpRollout, b.logpRollout)).toBe(true);
  });

  it('bf16-splitk: split-K rollout kernels give a non-zero, finite mismatch', () => {
    const policy = sharpPolicy(6);
    const plan = precisionPlans['bf16-splitk'];
    const r = rollout(policy, prompts, {
      maxNewTokens: 24,
      numerics: numericsFor(plan.rollout),
      rng: createRng(4),
      eos: null,
    });
    const lp = computeLogprobs(policy, r.tokens, r.B, P, r.responseMask, { numerics: numericsFor(plan.trainer) });
    let maxAbs = 0;
    for (let i = 0; i < lp.logp.length; i++) {
      expect(Number.isFinite(lp.logp[i]!) && Number.isFinite(r.logpRollout[i]!)).toBe(true);
      maxAbs = Math.max(maxAbs, Math.abs(lp.logp[i]! - r.logpRollout[i]!));
    }
    expect(maxAbs).toBeGreaterThan(0);
    expect(maxAbs).toBeLessThan(1e-2);
  });
});

describe('ℓroll equals an independent recomputation under the rollout numerics', () => {
  it('processed log-probs with temperature, top-k and top-p (bf16-splitk rollout side)', () => {
    const policy = sharpPolicy(7);
    const numerics = numericsFor(precisionPlans['bf16-splitk'].rollout);
    const tau = 0.8,
      topK = 4,
      topP = 0.85;
    const r = rollout(policy, prompts, { maxNewTokens: 12, numerics, rng: createRng(5), temperature: tau, topK, topP });
    const T = P + r.responseLength;
    const V = policy.config.vocabSize;
    const full = arForward(policy, r.tokens, r.B, T, numerics);
    let checked = 0;
    for (let b = 0; b < r.B; b++) {
      for (let k = 0; k < r.responseLength; k++) {
        if (!r.responseMask[b * r.responseLength + k]) continue;
        const z = Array.from(full.logits.subarray((b * T + P + k - 1) * V, (b * T + P + k) * V));
        // Independent: rank, cut to k, softmax at τ, nucleus over the cut set, renormalize.
        const order = z
          .map((_, v) => v)
          .sort((x, y) => z[y]! - z[x]! || x - y)
          .slice(0, topK);
        const w = order.map((v) => Math.exp((z[v]! - z[order[0]!]!) / tau));
        const sw = w.reduce((a, c) => a + c);
        const kept: number[] = [];
        let mass = 0;
        order.forEach((v, i) => {
          if (i === 0 || mass < topP) kept.push(v);
          mass += w[i]! / sw;
        });
        const y = r.tokens[b * T + P + k]!;
        expect(kept).toContain(y);
        const zk = kept.map((v) => z[v]! / tau);
        const m = Math.max(...zk);
        const expected = z[y]! / tau - (m + Math.log(zk.reduce((a, c) => a + Math.exp(c - m), 0)));
        expect(Math.abs(r.logpRollout[b * r.responseLength + k]! - expected)).toBeLessThan(1e-12);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(20);
  });
});

describe('sampling', () => {
  it('is reproducible from the seed and changes with it', () => {
    const policy = sharpPolicy(8);
    const numerics = numericsFor(precisionPlans.fp32.rollout);
    const run = (seed: number) =>
      rollout(policy, prompts, { maxNewTokens: 10, numerics, rng: createRng(seed).fork('rollout'), temperature: 1.3 });
    const a = run(9),
      b = run(9),
      c = run(10);
    expect(sameArrays(a.tokens, b.tokens) && sameArrays(a.logpRollout, b.logpRollout)).toBe(true);
    expect(sameArrays(a.tokens, c.tokens)).toBe(false);
  });

  it('EOS ends a sequence: mask 1 up to and including EOS, PAD tokens and ℓroll 0 after; eos null never stops', () => {
    const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: 40 }), 12); // near-uniform: EOS ≈ 1/13 per step
    const many = task.trainProblems(24, 3).map((p) => [...p.prompt]);
    const L = 25;
    const r = rollout(policy, many, {
      maxNewTokens: L,
      numerics: numericsFor(precisionPlans.fp32.rollout),
      rng: createRng(13),
    });
    let ended = 0,
      full = 0;
    const responses = rolloutResponses(r);
    expect(responses).toHaveLength(r.B);
    for (let b = 0; b < r.B; b++) {
      const resp = responses[b]!;
      expect(resp).toHaveLength(L);
      expect(Array.from(r.tokens.subarray(b * (P + L), b * (P + L) + P))).toEqual(many[b]);
      const firstEos = resp.indexOf(EOS);
      const len = firstEos < 0 ? L : firstEos + 1;
      if (firstEos >= 0 && firstEos < L - 1) ended++;
      if (firstEos < 0) full++;
      expect(r.lengths[b]).toBe(len);
      for (let k = 0; k < L; k++) {
        expect(r.responseMask[b * L + k]).toBe(k < len ? 1 : 0);
        if (k >= len) {
          expect(resp[k]).toBe(PAD);
          expect(r.logpRollout[b * L + k]).toBe(0);
        } else {
          expect(r.logpRollout[b * L + k]!).toBeLessThan(0);
        }
      }
    }
    expect(ended).toBeGreaterThan(3);
    expect(full).toBeGreaterThan(0);
    const n = rollout(policy, many, {
      maxNewTokens: L,
      numerics: numericsFor(precisionPlans.fp32.rollout),
      rng: createRng(13),
      eos: null,
    });
    expect(Array.from(n.lengths)).toEqual(new Array(many.length).fill(L));
    expect(n.responseMask.every((m) => m === 1)).toBe(true);
  });

  it('rejects bad inputs with errors naming the field', () => {
    const policy = sharpPolicy(1);
    const numerics = numericsFor(precisionPlans.fp32.rollout);
    expect(() => rollout(policy, prompts, { maxNewTokens: 0, numerics, rng: createRng(1) })).toThrow(/maxNewTokens/);
    expect(() => rollout(policy, prompts, { maxNewTokens: 40, numerics, rng: createRng(1) })).toThrow(/maxLen/);
    expect(() => rollout(policy, [[1, 2], [1]], { maxNewTokens: 2, numerics, rng: createRng(1) })).toThrow(
      /prompts\[1\]/,
    );
    expect(() => rollout(policy, prompts, { maxNewTokens: 2, numerics, rng: createRng(1), topP: 0 })).toThrow(/topP/);
    expect(() => rollout(policy, prompts, { maxNewTokens: 2, numerics, rng: createRng(1), temperature: 0 })).toThrow(
      /temperature/,
    );
  });
});

describe('trainer log-probs', () => {
  it('entropy is −Σ p log p of softmax(z/τ) and lies in [0, log V]; masked slots are 0', () => {
    const policy = sharpPolicy(21);
    const n = numericsFor(precisionPlans.fp32.trainer);
    const r = rollout(policy, prompts, { maxNewTokens: 8, numerics: n, rng: createRng(3) });
    const tau = 1.3;
    const lp = computeLogprobs(policy, r.tokens, r.B, P, r.responseMask, { numerics: n, temperature: tau });
    const T = P + r.responseLength;
    const V = policy.config.vocabSize;
    for (let b = 0; b < r.B; b++) {
      for (let k = 0; k < r.responseLength; k++) {
        const i = b * r.responseLength + k;
        if (!r.responseMask[i]) {
          expect(lp.entropy[i]).toBe(0);
          continue;
        }
        const z = Array.from(lp.cache.logits.subarray((b * T + P + k - 1) * V, (b * T + P + k) * V), (x) => x / tau);
        const m = Math.max(...z);
        const p = z.map((x) => Math.exp(x - m));
        const s = p.reduce((a, c) => a + c);
        const h = -p.reduce((a, c) => a + (c / s) * Math.log(c / s), 0);
        expect(lp.entropy[i]!).toBeCloseTo(h, 12);
        expect(lp.entropy[i]!).toBeLessThanOrEqual(Math.log(V) + 1e-12);
      }
    }
  });

  it('the bf16 trainer gradient points where the fp32 one does (cosine > 0.999 at the GPT-2 init)', () => {
    const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: 40 }), 22);
    const fp32 = numericsFor(precisionPlans.fp32.trainer);
    const r = rollout(policy, prompts, { maxNewTokens: 8, numerics: fp32, rng: createRng(4) });
    const g = Float64Array.from({ length: r.B * r.responseLength }, (_, i) => Math.sin(i + 1));
    const grad = (name: 'fp32' | 'bf16'): Float64Array => {
      policy.params.grads.fill(0);
      const n = numericsFor(precisionPlans[name].trainer);
      backwardLogprobs(policy, computeLogprobs(policy, r.tokens, r.B, P, r.responseMask, { numerics: n }), g);
      return Float64Array.from(policy.params.grads);
    };
    const a = grad('fp32');
    const b = grad('bf16');
    let dot = 0,
      na = 0,
      nb = 0,
      diff = 0;
    for (let i = 0; i < a.length; i++) {
      dot += a[i]! * b[i]!;
      na += a[i]! ** 2;
      nb += b[i]! ** 2;
      if (a[i] !== b[i]) diff++;
    }
    expect(dot / Math.sqrt(na * nb)).toBeGreaterThan(0.999);
    expect(diff).toBeGreaterThan(0);
  });
});

describe('KV cache hook', () => {
  it('every K/V row (prefill and decode) passes numerics.kvHook(layer) exactly once, before attention reads it', () => {
    const policy = sharpPolicy(31, { layers: 2 });
    const seen: string[] = [];
    const fp32 = numericsFor(precisionPlans.fp32.rollout);
    const recording: PolicyNumerics = {
      label: 'fp32 + recording hook',
      block: (l) => fp32.block(l),
      lmHead: () => fp32.lmHead(),
      kvHook: (layer) => (_k, _v, t) => {
        seen.push(`${layer}:${t}`);
      },
    };
    const L = 5;
    const r = rollout(policy, prompts, { maxNewTokens: L, numerics: recording, rng: createRng(8), eos: null });
    // Rows 0 … P+L−2 are written (the last sampled token is never fed back).
    const expected = [0, 1].flatMap((l) => Array.from({ length: P + L - 1 }, (_, t) => `${l}:${t}`));
    expect([...seen].sort()).toEqual([...expected].sort());
    const plain = rollout(policy, prompts, { maxNewTokens: L, numerics: fp32, rng: createRng(8), eos: null });
    expect(sameArrays(r.logpRollout, plain.logpRollout)).toBe(true);
    // A hook that rounds the fresh rows coarsely changes what attention reads.
    const coarse: PolicyNumerics = {
      ...recording,
      kvHook: () => (k, v, t, B, tCap, C) => {
        for (let b = 0; b < B; b++)
          for (let c = 0; c < C; c++) {
            const i = (b * tCap + t) * C + c;
            k[i] = Math.round(k[i]! * 2) / 2;
            v[i] = Math.round(v[i]! * 2) / 2;
          }
      },
    };
    const q = rollout(policy, prompts, { maxNewTokens: L, numerics: coarse, rng: createRng(8), eos: null });
    expect(sameArrays(q.logpRollout, plain.logpRollout)).toBe(false);
  });
});
