// Log-prob semantics: each side's record from its plan side and the sampler, the named differences
// (temperature, support, logits epilogue), and the probe showing exactly the −log S offset of a
// truncated, renormalised rollout log-prob under otherwise identical numerics.

import { describe, expect, it } from 'vitest';
import {
  logitsFormat,
  logprobSemantics,
  semanticsDifferences,
  semanticsLine,
  semanticsMetrics,
} from '../../src/policies/semantics.js';
import { makeTask } from '../../src/tasks/registry.js';
import { arConfig } from '../../src/policies/ar/config.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { rollout } from '../../src/policies/ar/rollout.js';
import { backwardLogprobs, computeLogprobs } from '../../src/policies/ar/logprobs.js';
import { arMismatchProbe } from '../../src/policies/ar/probe.js';
import { fp32Numerics } from '../../src/policies/numerics.js';
import { createRng } from '../../src/core/rng.js';
import { precisionPlan, type PlanSide } from '../../src/policies/plans.js';
import { runCli } from '../cli/io.js';

const bf16 = precisionPlan('bf16');

describe('logprobSemantics', () => {
  it('reads values, temperature, support and the logits epilogue from the side and the sampler', () => {
    expect(logprobSemantics(bf16.rollout, 'rollout', { temperature: 0.7, topP: 0.9 })).toEqual({
      values: 'processed',
      temperature: 0.7,
      temperatureAt: 'before-log-softmax',
      support: 'truncated',
      logits: 'fp32',
    });
    expect(logprobSemantics({ ...bf16.rollout, logprob: 'raw' }, 'rollout', { temperature: 0.7, topK: 5 })).toEqual({
      values: 'raw',
      temperature: 1,
      temperatureAt: 'before-log-softmax',
      support: 'full',
      logits: 'fp32',
    });
    expect(
      logprobSemantics({ ...bf16.trainer, temperatureAt: 'after-log-softmax' }, 'trainer', { temperature: 0.7 })
        .temperatureAt,
    ).toBe('after-log-softmax');
    expect(logprobSemantics(bf16.trainer, 'trainer', { temperature: 0.7, topP: 0.9 }).support).toBe('full');
    expect(logprobSemantics(bf16.trainer, 'trainer', { topP: 0.9, supportReplay: true }).support).toBe('truncated');
    const bf16Logits: PlanSide = {
      ...bf16.rollout,
      overrides: [{ match: 'lm*', gemm: { kind: 'rounding', operands: 'bf16', out: 'bf16' } }],
    };
    expect(logitsFormat(bf16Logits)).toBe('bf16');
    expect(logitsFormat({ gemm: { kind: 'rounding', operands: 'bf16', out: 'fp16' } })).toBe('fp16');
    expect(logitsFormat(precisionPlan('fp8-rollout').rollout)).toBe('fp32'); // lm_head excluded → plain fp32 out
    expect(
      logitsFormat({
        gemm: {
          ...(precisionPlan('fp8-rollout').rollout.gemm as object),
          exclude: [],
          out: 'bf16',
        } as unknown as PlanSide['gemm'],
      }),
    ).toBe('bf16');
  });

  it('names every differing field, in a fixed order', () => {
    const r = {
      values: 'raw',
      temperature: 1,
      temperatureAt: 'before-log-softmax',
      support: 'truncated',
      logits: 'bf16',
    } as const;
    const t = {
      values: 'processed',
      temperature: 0.7,
      temperatureAt: 'before-log-softmax',
      support: 'full',
      logits: 'fp32',
    } as const;
    const d = semanticsDifferences(r, t);
    expect(d.map((x) => x.field)).toEqual(['temperature', 'support', 'logits']);
    expect(semanticsLine(d)).toBe('temperature 1≠0.7; support truncated≠full; logits bf16≠fp32');
    expect(semanticsLine(semanticsDifferences(t, t))).toBe('matched');
    // the placement of T is named only where it matters (T ≠ 1 on some side)
    const after = { ...t, temperatureAt: 'after-log-softmax' } as const;
    expect(semanticsLine(semanticsDifferences(t, after))).toBe('temperatureAt before-log-softmax≠after-log-softmax');
    expect(semanticsDifferences({ ...t, temperature: 1 }, { ...after, temperature: 1 })).toEqual([]);
  });
});

describe('qrl-sim mismatch semantics', () => {
  it('top-p under bf16: the diagnostic names the support and every δ is −log S ≥ 0 (k1 > 0); matched sides print no key', async () => {
    const a = JSON.parse(
      (
        await runCli([
          'mismatch',
          '--policy',
          'ar',
          '--plan',
          'bf16',
          '--top-p',
          '0.9',
          '--length',
          '6',
          '--batch',
          '4',
          '--json',
        ])
      ).out,
    );
    expect(a.semantics).toBe('support truncated≠full');
    expect(a.k1).toBeGreaterThan(0);
    const b = JSON.parse(
      (await runCli(['mismatch', '--policy', 'ar', '--plan', 'bf16', '--length', '6', '--batch', '4', '--json'])).out,
    );
    expect('semantics' in b).toBe(false);
    expect(b.k3).toBe(0);
    const raw = JSON.parse(
      (
        await runCli([
          'mismatch',
          '--policy',
          'ar',
          '--plan',
          'sims/plans/bf16-raw-logprobs.json',
          '--temperature',
          '0.7',
          '--length',
          '6',
          '--batch',
          '4',
          '--json',
        ])
      ).out,
    );
    expect(raw.semantics).toBe('temperature 1≠0.7');
    expect((await runCli(['mismatch', '--policy', 'ar', '--plan', 'bf16', '--top-p', '1.5'])).err).toMatch(
      /--top-p: expected a number in \(0, 1\], got '1.5'/,
    );
    expect((await runCli(['mismatch', '--policy', 'diffusion', '--plan', 'bf16', '--top-k', '3'])).err).toMatch(
      /--top-k: only for --policy ar/,
    );
  });
});

describe('temperature after the log-softmax (trainer temperatureAt)', () => {
  const task = makeTask('reverse');
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + 4 }), 2);
  const r = rollout(
    policy,
    task.trainProblems(3, 2).map((q) => [...q.prompt]),
    { maxNewTokens: 4, numerics: fp32Numerics(), rng: createRng(2).fork('r'), eos: null },
  );
  const lp = (temperature: number, temperatureAt?: 'after-log-softmax') =>
    computeLogprobs(policy, r.tokens, r.B, r.promptLength, r.responseMask, {
      numerics: fp32Numerics(),
      temperature,
      ...(temperatureAt ? { temperatureAt } : {}),
    });

  it('ℓ = log softmax(z)[y] / T, and its gradient is the T = 1 gradient over T (hand identity, T = 2 exact)', () => {
    const one = lp(1);
    const after = lp(2, 'after-log-softmax');
    expect([...after.logp]).toEqual([...one.logp].map((x) => x / 2));
    expect([...after.entropy]).toEqual([...one.entropy]); // the entropy of softmax(z)
    expect([...lp(2).logp]).not.toEqual([...after.logp]); // log softmax(z/2) is another quantity
    const grads = (l: typeof one, g: number): Float32Array => {
      policy.params.grads.fill(0);
      backwardLogprobs(policy, l, new Float64Array(l.logp.length).fill(g));
      return Float32Array.from(policy.params.grads);
    };
    expect([...grads(after, 1)]).toEqual([...grads(one, 0.5)]);
  });

  it('the probe names it (temperatureAt) and δ = ℓ/T − ℓ_T differs from 0; at T = 1 it is matched and exact', () => {
    const plan = (T: number) => {
      const bf16 = precisionPlan('bf16');
      const p = { ...bf16, trainer: { ...bf16.trainer, temperatureAt: 'after-log-softmax' as const } };
      const d = semanticsDifferences(
        logprobSemantics(p.rollout, 'rollout', { temperature: T }),
        logprobSemantics(p.trainer, 'trainer', { temperature: T }),
      );
      return { p, d };
    };
    expect(semanticsLine(plan(0.7).d)).toBe('temperatureAt before-log-softmax≠after-log-softmax');
    expect(plan(1).d).toEqual([]);
    const prompts = task.trainProblems(2, 5).map((q) => [...q.prompt]);
    expect(
      arMismatchProbe(policy, { plan: plan(0.7).p, length: 4, prompts, seed: 5, temperature: 0.7 }).diagnostics
        .maxAbsDelta,
    ).toBeGreaterThan(1e-3);
    const atOne = arMismatchProbe(policy, { plan: plan(1).p, length: 4, prompts, seed: 5 }).diagnostics;
    expect([atOne.k1, atOne.k3, atOne.maxAbsDelta]).toEqual([0, 0, 0]);
  });
});

describe('semanticsMetrics (the run-metrics form)', () => {
  const bf16 = precisionPlan('bf16');
  const sampler = { temperature: 1, topK: 0, topP: 1, logprob: 'processed' as const };
  it('one key per differing field, none when the sides agree', () => {
    expect(semanticsMetrics(bf16, sampler)).toEqual({});
    expect(semanticsMetrics(bf16, { ...sampler, topP: 0.9 })).toEqual({ 'mismatch/semantics/support': 1 });
    expect(semanticsMetrics(bf16, { ...sampler, topP: 0.9, supportReplay: true })).toEqual({});
    expect(semanticsMetrics(bf16, { ...sampler, temperature: 0.7, logprob: 'raw' })).toEqual({
      'mismatch/semantics/temperature': 1,
    });
    const after = { ...bf16, trainer: { ...bf16.trainer, temperatureAt: 'after-log-softmax' as const } };
    expect(semanticsMetrics(after, { ...sampler, temperature: 0.5, topK: 3 })).toEqual({
      'mismatch/semantics/temperatureAt': 1,
      'mismatch/semantics/support': 1,
    });
  });
});
