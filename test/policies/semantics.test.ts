// Log-prob semantics: each side's record from its plan side and the sampler, the named differences
// (temperature, support, logits epilogue), and the probe showing exactly the −log S offset of a
// truncated, renormalised rollout log-prob under otherwise identical numerics.

import { describe, expect, it } from 'vitest';
import { logitsFormat, logprobSemantics, semanticsDifferences, semanticsLine } from '../../src/policies/semantics.js';
import { precisionPlan, type PlanSide } from '../../src/policies/plans.js';
import { runCli } from '../cli/io.js';

const bf16 = precisionPlan('bf16');

describe('logprobSemantics', () => {
  it('reads values, temperature, support and the logits epilogue from the side and the sampler', () => {
    expect(logprobSemantics(bf16.rollout, 'rollout', { temperature: 0.7, topP: 0.9 })).toEqual({ values: 'processed', temperature: 0.7, support: 'truncated', logits: 'fp32' });
    expect(logprobSemantics({ ...bf16.rollout, logprob: 'raw' }, 'rollout', { temperature: 0.7, topK: 5 })).toEqual({ values: 'raw', temperature: 1, support: 'full', logits: 'fp32' });
    expect(logprobSemantics(bf16.trainer, 'trainer', { temperature: 0.7, topP: 0.9 }).support).toBe('full');
    expect(logprobSemantics(bf16.trainer, 'trainer', { topP: 0.9, supportReplay: true }).support).toBe('truncated');
    const bf16Logits: PlanSide = { ...bf16.rollout, overrides: [{ match: 'lm*', gemm: { kind: 'rounding', operands: 'bf16', out: 'bf16' } }] };
    expect(logitsFormat(bf16Logits)).toBe('bf16');
    expect(logitsFormat({ gemm: { kind: 'rounding', operands: 'bf16', out: 'fp16' } })).toBe('fp16');
    expect(logitsFormat(precisionPlan('fp8-rollout').rollout)).toBe('fp32'); // lm_head excluded → plain fp32 out
    expect(logitsFormat({ gemm: { ...(precisionPlan('fp8-rollout').rollout.gemm as object), exclude: [], out: 'bf16' } as unknown as PlanSide['gemm'] })).toBe('bf16');
  });

  it('names every differing field, in a fixed order', () => {
    const r = { values: 'raw', temperature: 1, support: 'truncated', logits: 'bf16' } as const;
    const t = { values: 'processed', temperature: 0.7, support: 'full', logits: 'fp32' } as const;
    const d = semanticsDifferences(r, t);
    expect(d.map((x) => x.field)).toEqual(['temperature', 'support', 'logits']);
    expect(semanticsLine(d)).toBe('temperature 1≠0.7; support truncated≠full; logits bf16≠fp32');
    expect(semanticsLine(semanticsDifferences(t, t))).toBe('matched');
  });
});

describe('qrl-sim mismatch semantics', () => {
  it('top-p under bf16: the diagnostic names the support and every δ is −log S ≥ 0 (k1 > 0); matched sides print no key', async () => {
    const a = JSON.parse((await runCli(['mismatch', '--policy', 'ar', '--plan', 'bf16', '--top-p', '0.9', '--length', '6', '--batch', '4', '--json'])).out);
    expect(a.semantics).toBe('support truncated≠full');
    expect(a.k1).toBeGreaterThan(0);
    const b = JSON.parse((await runCli(['mismatch', '--policy', 'ar', '--plan', 'bf16', '--length', '6', '--batch', '4', '--json'])).out);
    expect('semantics' in b).toBe(false);
    expect(b.k3).toBe(0);
    const raw = JSON.parse((await runCli(['mismatch', '--policy', 'ar', '--plan', 'sims/plans/bf16-raw-logprobs.json', '--temperature', '0.7', '--length', '6', '--batch', '4', '--json'])).out);
    expect(raw.semantics).toBe('temperature 1≠0.7');
    expect((await runCli(['mismatch', '--policy', 'ar', '--plan', 'bf16', '--top-p', '1.5'])).err).toMatch(/--top-p: expected a number in \(0, 1\], got '1.5'/);
    expect((await runCli(['mismatch', '--policy', 'diffusion', '--plan', 'bf16', '--top-k', '3'])).err).toMatch(/--top-k: only for --policy ar/);
  });
});
