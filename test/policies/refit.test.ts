// The refit chain: BF16 export, checkpoint quantize→dequantize steps (all-zero blocks as slime's
// block_fp8 before and after PR 2256), fused QKV / gate-up scales, the plan field and its checks,
// and the xtuner PR 2044 alignment (both sides quantizing the BF16 export ⇒ k3 exactly 0).

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { arConfig } from '../../src/policies/ar/config.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import { arMismatchProbe } from '../../src/policies/ar/probe.js';
import { computeLogprobs } from '../../src/policies/ar/logprobs.js';
import { numericsFor, precisionPlan, resolvePlan, sideNumerics, type PlanData } from '../../src/policies/plans.js';
import { refitWeights } from '../../src/policies/refit.js';
import { quantPreset } from '../../src/numerics/presets.js';
import { dequantize, quantize } from '../../src/numerics/quantize.js';
import { fakeQuant } from '../../src/numerics/vector.js';
import { floatFormats } from '../../src/numerics/formats.js';
import { makeTask } from '../../src/tasks/registry.js';
import { validateDiffusionConfig } from '../../src/policies/diffusion/engine.js';
import { resolveRunConfig } from '../../src/rl/grpo/config.js';

const policy = createArPolicy(arConfig({ vocabSize: 13, maxLen: 24 }), 5);
const C = policy.config.C;
const bf16 = (x: Float32Array) => fakeQuant(floatFormats.bf16, Float32Array.from(x), { profile: 'ieee' });
const block16 = { preset: 'deepseek-fp8-block', params: { block: 16 } } as const;
const sameBits = (a: Float32Array, b: Float32Array) => a.length === b.length && a.every((v, i) => Object.is(v, b[i]));

describe('refitWeights', () => {
  it('source bf16 rounds every linear weight, lm_head and router included; fp32 keeps them', () => {
    const w = policy.weights;
    const m = refitWeights(w, { source: 'bf16' });
    expect(sameBits(m.get(w.blocks[0]!.wq)!, bf16(Float32Array.from(w.blocks[0]!.wq)))).toBe(true);
    expect(sameBits(m.get(w.lmHead)!, bf16(Float32Array.from(w.lmHead)))).toBe(true);
    const id = refitWeights(w, {});
    expect(sameBits(id.get(w.blocks[1]!.mlp!.down)!, Float32Array.from(w.blocks[1]!.mlp!.down))).toBe(true);
  });

  it('a checkpoint step is quantize→dequantize of the exported weight on every site but lm_head and router', () => {
    const w = policy.weights;
    const m = refitWeights(w, { source: 'bf16', checkpoint: [block16] });
    const spec = quantPreset('deepseek-fp8-block', { block: 16 });
    const want = dequantize(quantize(spec, bf16(Float32Array.from(w.blocks[0]!.wk)), [C, C]));
    expect(sameBits(m.get(w.blocks[0]!.wk)!, want)).toBe(true);
    expect(sameBits(m.get(w.lmHead)!, bf16(Float32Array.from(w.lmHead)))).toBe(true);
    // two steps: quant → dequant → quant → dequant with the second quantizer (UE8M0 scales)
    const two = refitWeights(w, { checkpoint: [block16, { preset: 'deepseek-fp8-block', params: { block: 16, ue8m0: true } }] });
    const first = dequantize(quantize(spec, Float32Array.from(w.blocks[0]!.wo), [C, C]));
    const second = dequantize(quantize(quantPreset('deepseek-fp8-block', { block: 16, ue8m0: true }), first, [C, C]));
    expect(sameBits(two.get(w.blocks[0]!.wo)!, second)).toBe(true);
  });

  it('fused QKV shares one per-tensor scale: the stacked tensor quantized as one, different from per tensor', () => {
    const w = policy.weights;
    const b = w.blocks[0]!;
    // make the three amaxes differ clearly
    const wv = Float32Array.from(b.wv).map((x) => x * 0.25);
    const blocks = [{ ...b, wv }, ...w.blocks.slice(1)];
    const ws = { ...w, blocks };
    const spec = quantPreset('vllm-fp8-tensor');
    const fused = refitWeights(ws, { checkpoint: [{ preset: 'vllm-fp8-tensor' }], fuse: ['qkv'] });
    const stacked = new Float32Array(3 * C * C);
    stacked.set(b.wq, 0);
    stacked.set(b.wk, C * C);
    stacked.set(wv, 2 * C * C);
    const dq = dequantize(quantize(spec, stacked, [3 * C, C]));
    expect(sameBits(fused.get(wv)!, dq.slice(2 * C * C))).toBe(true);
    const apart = refitWeights(ws, { checkpoint: [{ preset: 'vllm-fp8-tensor' }] });
    expect(sameBits(apart.get(wv)!, fused.get(wv)!)).toBe(false);
    // the MLP (no gate in the GELU tiny model) is unaffected by fuse
    expect(sameBits(apart.get(b.mlp!.up)!, fused.get(b.mlp!.up)!)).toBe(true);
  });

  it('an all-zero block: slime block_fp8 before PR 2256 (no amax floor) gives NaN weights and NaN log-probs; the 1e-12 floor gives zeros', () => {
    const p = createArPolicy(arConfig({ vocabSize: 13, maxLen: 24 }), 5);
    const wq = p.weights.blocks[0]!.wq;
    for (let r = 0; r < 16; r++) for (let c = 0; c < 16; c++) wq[r * C + c] = 0;
    const before = refitWeights(p.weights, { source: 'bf16', checkpoint: [{ preset: 'deepseek-fp8-block', params: { block: 16, eps: 0 } }] });
    const after = refitWeights(p.weights, { source: 'bf16', checkpoint: [{ preset: 'deepseek-fp8-block', params: { block: 16, eps: 1e-12 } }] });
    expect(Number.isNaN(before.get(wq)![0])).toBe(true);
    expect(Number.isNaN(before.get(wq)![16])).toBe(false); // the next block is untouched
    expect(after.get(wq)!.slice(0, 16).every((x) => x === 0)).toBe(true);
    const tokens = Int32Array.from({ length: 2 * 20 }, (_, i) => (i * 5 + 1) % 13);
    const mask = new Float32Array(2 * 4).fill(1);
    const side = (eps: number) => ({ gemm: { kind: 'rounding' as const, operands: 'bf16' as const }, refit: { checkpoint: [{ preset: 'deepseek-fp8-block' as const, params: { block: 16, eps } }] } });
    const nan = computeLogprobs(p, tokens, 2, 16, mask, { numerics: sideNumerics(side(0), p.weights) });
    const fine = computeLogprobs(p, tokens, 2, 16, mask, { numerics: sideNumerics(side(1e-12), p.weights) });
    expect(nan.logp.some((x) => Number.isNaN(x))).toBe(true);
    expect(fine.logp.every((x) => Number.isFinite(x))).toBe(true);
  });
});

describe('refit in plans', () => {
  const task = makeTask('reverse');
  const tiny = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + 8 }), 1);
  const prompts = task.trainProblems(4, 1).map((q) => [...q.prompt]);
  const probe = (plan: PlanData | string) => arMismatchProbe(tiny, { plan: typeof plan === 'string' ? precisionPlan(plan) : resolvePlan(plan), length: 8, prompts, seed: 1 }).diagnostics;
  const file = (name: string) => JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData;

  it('without a refit chain sideNumerics is numericsFor: the presets probe byte-identically', () => {
    const side = precisionPlan('fp8-rollout').rollout;
    expect(sideNumerics(side, tiny.weights).label).toBe(numericsFor(side).label);
    const a = probe('fp8-rollout');
    const b = probe({ rollout: precisionPlan('fp8-rollout').rollout, trainer: precisionPlan('fp8-rollout').trainer } as PlanData);
    expect(b).toEqual(a);
  });

  it('jet with the rollout quantizing the BF16 export parts from the trainer; quantizing the same BF16 weights on both sides gives k3 exactly 0', () => {
    expect(probe(file('jet-bf16-export')).k3).toBeGreaterThan(0);
    const aligned = probe(file('jet-bf16-aligned'));
    expect([aligned.k1, aligned.k3, aligned.maxAbsDelta]).toEqual([0, 0, 0]);
  });

  it('xtuner PR 2044 mechanism: with BF16-exact master weights (a step-1 policy loaded from a BF16 checkpoint) the export changes nothing and jet-bf16-export gives k3 = 0', () => {
    const exact = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + 8 }), 1);
    exact.params.data.set(bf16(Float32Array.from(exact.params.data)));
    const d = arMismatchProbe(exact, { plan: resolvePlan(file('jet-bf16-export')), length: 8, prompts, seed: 1 }).diagnostics;
    expect([d.k1, d.k3, d.maxAbsDelta]).toEqual([0, 0, 0]);
  });

  it('every plan under sims/plans resolves', () => {
    for (const name of ['fp8-rollout-ue8m0', 'fp8-rollout-bf16-export', 'fp8-rollout-requant-ue8m0', 'jet-bf16-export', 'jet-bf16-aligned', 'w8a16-fp8-tensor', 'w8a16-fp8-tensor-fused']) {
      expect(resolvePlan(file(name)).name).toBe(name);
    }
  });

  it.each([
    [{ source: 'fp16' }, /plan\.rollout\.refit\.source: expected "fp32" or "bf16", got "fp16"/],
    [{ extra: 1 }, /plan\.rollout\.refit: unknown field 'extra'/],
    [{ checkpoint: [{ preset: 'nope' }] }, /plan\.rollout\.refit\.checkpoint\[0\]: /],
    [{ fuse: ['qk'] }, /plan\.rollout\.refit\.fuse\[0\]: expected "qkv" or "gate-up", got "qk"/],
    [{ fuse: 'qkv' }, /plan\.rollout\.refit\.fuse: expected a list of "qkv", "gate-up", got "qkv"/],
    [{ exclude: ['q', 'head'] }, /plan\.rollout\.refit\.exclude\[1\]: expected a site among q, k, v, o, up, gate, down, lmHead, router, got "head"/],
    [{ checkpoint: { preset: 'fp8' } }, /plan\.rollout\.refit\.checkpoint: expected an array of \{ preset, params\? \}, got \{"preset":"fp8"\}/],
  ])('refuses refit %j naming the field', (refit, message) => {
    const p = precisionPlan('fp8-rollout');
    expect(() => resolvePlan({ rollout: { ...p.rollout, refit }, trainer: p.trainer } as PlanData)).toThrow(message);
  });

  it('the diffusion policy refuses a refit chain', () => {
    const p = precisionPlan('bf16');
    const config = resolveRunConfig({ seed: 0, task: { name: 'sudoku4' }, policy: { kind: 'diffusion' }, plan: { rollout: { ...p.rollout, refit: { source: 'bf16' } }, trainer: p.trainer } });
    expect(() => validateDiffusionConfig(config)).toThrow(/plan.*refit chains and precision overrides are for the ar policy only/);
  });
});

describe('refit faults (docs/refit.md "Faults")', () => {
  const gated = createArPolicy(arConfig({ vocabSize: 13, maxLen: 24, mlp: 'swiglu' } as never), 5);
  it('halves-swapped exchanges each feed-forward\'s gate and up, nothing else', () => {
    const w = gated.weights;
    const healthy = refitWeights(w, { checkpoint: [block16] });
    const faulty = refitWeights(w, { checkpoint: [block16], faults: [{ kind: 'halves-swapped' }] });
    let swapped = 0;
    for (const b of w.blocks) {
      const m = b.mlp!;
      if (m.gate === null) continue;
      expect(sameBits(faulty.get(m.gate)!, healthy.get(m.up)!)).toBe(true);
      expect(sameBits(faulty.get(m.up)!, healthy.get(m.gate)!)).toBe(true);
      expect(sameBits(faulty.get(m.down)!, healthy.get(m.down)!)).toBe(true);
      expect(sameBits(faulty.get(b.wq)!, healthy.get(b.wq)!)).toBe(true);
      swapped += 1;
    }
    expect(swapped).toBe(w.blocks.length);
  });

  it('rows-permuted exchanges each pair of row blocks of the named sites', () => {
    const w = policy.weights;
    const healthy = refitWeights(w, {});
    const faulty = refitWeights(w, { faults: [{ kind: 'rows-permuted', sites: ['q'], block: 4 }] });
    const q = w.blocks[0]!.wq;
    const h = healthy.get(q)!;
    const f = faulty.get(q)!;
    // rows 0–3 now hold rows 4–7 and the other way round
    expect(sameBits(f.subarray(0, 4 * C), h.subarray(4 * C, 8 * C))).toBe(true);
    expect(sameBits(f.subarray(4 * C, 8 * C), h.subarray(0, 4 * C))).toBe(true);
    expect(sameBits(faulty.get(w.blocks[0]!.wk)!, healthy.get(w.blocks[0]!.wk)!)).toBe(true);
  });

  it('stale-sync serves the previous sync\'s weights from the second sync on; a chain without faults is unchanged', () => {
    const p = createArPolicy(arConfig({ vocabSize: 13, maxLen: 24 }), 7);
    const side = { ...precisionPlan('bf16').rollout, refit: { faults: [{ kind: 'stale-sync' as const }] } };
    const tokens = Int32Array.from({ length: 2 * 8 }, (_, i) => 3 + (i % 9));
    const mask = Float64Array.from({ length: 2 * 4 }, () => 1);
    const ell = () => computeLogprobs(p, tokens, 2, 4, mask, { numerics: sideNumerics(side, p.weights) }).logp;
    const first = ell(); // sync 1: right
    // a step moves the linear weights (the ones a refit carries; embeddings and norms are not refitted)
    for (const a of [p.weights.lmHead, ...p.weights.blocks.flatMap((b) => [b.wq, b.wo])]) for (let i = 0; i < a.length; i++) a[i] = Math.fround((a[i] as number) * 1.5);
    const second = ell(); // sync 2: still the weights of sync 1
    expect(Array.from(second)).toEqual(Array.from(first));
    const healthy = computeLogprobs(p, tokens, 2, 4, mask, { numerics: sideNumerics(precisionPlan('bf16').rollout, p.weights) }).logp;
    expect(Array.from(healthy)).not.toEqual(Array.from(first));
  });

  it('are refused with the field named when malformed', () => {
    expect(() => resolvePlan({ ...(precisionPlan('fp8-rollout') as unknown as PlanData), rollout: { ...precisionPlan('fp8-rollout').rollout, refit: { faults: [{ kind: 'nope' }] } } } as never)).toThrow(/refit\.faults/);
  });
});
