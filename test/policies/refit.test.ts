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
import { ignoredSites, refitWeights } from '../../src/policies/refit.js';
import { kvDequantize, kvQuantize, type KvCacheSpec } from '../../src/numerics/kvcache.js';
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
    const two = refitWeights(w, {
      checkpoint: [block16, { preset: 'deepseek-fp8-block', params: { block: 16, ue8m0: true } }],
    });
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
    const before = refitWeights(p.weights, {
      source: 'bf16',
      checkpoint: [{ preset: 'deepseek-fp8-block', params: { block: 16, eps: 0 } }],
    });
    const after = refitWeights(p.weights, {
      source: 'bf16',
      checkpoint: [{ preset: 'deepseek-fp8-block', params: { block: 16, eps: 1e-12 } }],
    });
    expect(Number.isNaN(before.get(wq)![0])).toBe(true);
    expect(Number.isNaN(before.get(wq)![16])).toBe(false); // the next block is untouched
    expect(
      after
        .get(wq)!
        .slice(0, 16)
        .every((x) => x === 0),
    ).toBe(true);
    const tokens = Int32Array.from({ length: 2 * 20 }, (_, i) => (i * 5 + 1) % 13);
    const mask = new Float32Array(2 * 4).fill(1);
    const side = (eps: number) => ({
      gemm: { kind: 'rounding' as const, operands: 'bf16' as const },
      refit: { checkpoint: [{ preset: 'deepseek-fp8-block' as const, params: { block: 16, eps } }] },
    });
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
  const probe = (plan: PlanData | string) =>
    arMismatchProbe(tiny, {
      plan: typeof plan === 'string' ? precisionPlan(plan) : resolvePlan(plan),
      length: 8,
      prompts,
      seed: 1,
    }).diagnostics;
  const file = (name: string) => JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData;

  it('without a refit chain sideNumerics is numericsFor: the presets probe byte-identically', () => {
    const side = precisionPlan('fp8-rollout').rollout;
    expect(sideNumerics(side, tiny.weights).label).toBe(numericsFor(side).label);
    const a = probe('fp8-rollout');
    const b = probe({
      rollout: precisionPlan('fp8-rollout').rollout,
      trainer: precisionPlan('fp8-rollout').trainer,
    } as PlanData);
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
    const d = arMismatchProbe(exact, {
      plan: resolvePlan(file('jet-bf16-export')),
      length: 8,
      prompts,
      seed: 1,
    }).diagnostics;
    expect([d.k1, d.k3, d.maxAbsDelta]).toEqual([0, 0, 0]);
  });

  it('every plan under sims/plans resolves', () => {
    for (const name of [
      'fp8-rollout-ue8m0',
      'fp8-rollout-bf16-export',
      'fp8-rollout-requant-ue8m0',
      'jet-bf16-export',
      'jet-bf16-aligned',
      'w8a16-fp8-tensor',
      'w8a16-fp8-tensor-fused',
    ]) {
      expect(resolvePlan(file(name)).name).toBe(name);
    }
  });

  it.each([
    [{ source: 'fp16' }, /plan\.rollout\.refit\.source: expected "fp32" or "bf16", got "fp16"/],
    [{ extra: 1 }, /plan\.rollout\.refit: unknown field 'extra'/],
    [{ checkpoint: [{ preset: 'nope' }] }, /plan\.rollout\.refit\.checkpoint\[0\]: /],
    [{ fuse: ['qk'] }, /plan\.rollout\.refit\.fuse\[0\]: expected "qkv" or "gate-up", got "qk"/],
    [{ fuse: 'qkv' }, /plan\.rollout\.refit\.fuse: expected a list of "qkv", "gate-up", got "qkv"/],
    [
      { exclude: ['q', 'head'] },
      /plan\.rollout\.refit\.exclude\[1\]: expected a site among q, k, v, o, up, gate, down, lmHead, router, got "head"/,
    ],
    [
      { checkpoint: { preset: 'fp8' } },
      /plan\.rollout\.refit\.checkpoint: expected an array of \{ preset, params\? \}, got \{"preset":"fp8"\}/,
    ],
  ])('refuses refit %j naming the field', (refit, message) => {
    const p = precisionPlan('fp8-rollout');
    expect(() => resolvePlan({ rollout: { ...p.rollout, refit }, trainer: p.trainer } as PlanData)).toThrow(message);
  });

  it('the diffusion policy refuses a refit chain', () => {
    const p = precisionPlan('bf16');
    const config = resolveRunConfig({
      seed: 0,
      task: { name: 'sudoku4' },
      policy: { kind: 'diffusion' },
      plan: { rollout: { ...p.rollout, refit: { source: 'bf16' } }, trainer: p.trainer },
    });
    expect(() => validateDiffusionConfig(config)).toThrow(
      /plan.*refit chains and precision overrides are for the ar policy only/,
    );
  });
});

describe('refit faults (docs/refit.md "Faults")', () => {
  const gated = createArPolicy(arConfig({ vocabSize: 13, maxLen: 24, mlp: 'swiglu' } as never), 5);
  it("halves-swapped exchanges each feed-forward's gate and up, nothing else", () => {
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

  it("stale-sync serves the previous sync's weights from the second sync on; a chain without faults is unchanged", () => {
    const p = createArPolicy(arConfig({ vocabSize: 13, maxLen: 24 }), 7);
    const side = { ...precisionPlan('bf16').rollout, refit: { faults: [{ kind: 'stale-sync' as const }] } };
    const tokens = Int32Array.from({ length: 2 * 8 }, (_, i) => 3 + (i % 9));
    const mask = Float64Array.from({ length: 2 * 4 }, () => 1);
    const ell = () => computeLogprobs(p, tokens, 2, 4, mask, { numerics: sideNumerics(side, p.weights) }).logp;
    const first = ell(); // sync 1: right
    // a step moves the linear weights (the ones a refit carries; embeddings and norms are not refitted)
    for (const a of [p.weights.lmHead, ...p.weights.blocks.flatMap((b) => [b.wq, b.wo])])
      for (let i = 0; i < a.length; i++) a[i] = Math.fround((a[i] as number) * 1.5);
    const second = ell(); // sync 2: still the weights of sync 1
    expect(Array.from(second)).toEqual(Array.from(first));
    const healthy = computeLogprobs(p, tokens, 2, 4, mask, {
      numerics: sideNumerics(precisionPlan('bf16').rollout, p.weights),
    }).logp;
    expect(Array.from(healthy)).not.toEqual(Array.from(first));
  });

  it('are refused with the field named when malformed', () => {
    expect(() =>
      resolvePlan({
        ...(precisionPlan('fp8-rollout') as unknown as PlanData),
        rollout: { ...precisionPlan('fp8-rollout').rollout, refit: { faults: [{ kind: 'nope' }] } },
      } as never),
    ).toThrow(/refit\.faults/);
  });
});

describe('refit faults: unity KV scales and a wrong ignore rule (docs/refit.md "Faults")', () => {
  const task = makeTask('reverse');
  const tiny = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + 8 }), 1);
  const prompts = task.trainProblems(4, 1).map((q) => [...q.prompt]);
  const probe = (plan: PlanData | string) =>
    arMismatchProbe(tiny, {
      plan: typeof plan === 'string' ? precisionPlan(plan) : resolvePlan(plan),
      length: 8,
      prompts,
      seed: 1,
    });
  const file = (name: string) => JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData;
  const withFaults = (name: string, faults: readonly unknown[], extra: Record<string, unknown> = {}) => {
    const p = precisionPlan(name);
    return { rollout: { ...p.rollout, ...extra, refit: { faults } }, trainer: p.trainer } as unknown as PlanData;
  };

  it('ignoredSites applies the engine rule to the engine module names: substring mlp.gate catches every dense gate_up_proj, prefix catches nothing', () => {
    const w = tiny.weights;
    expect(ignoredSites({ kind: 'ignore-rule', ignore: ['mlp.gate'], match: 'substring' }, w)).toEqual(
      w.blocks.flatMap((_, l) => [`h${l}.up`, `h${l}.gate`]),
    );
    expect(ignoredSites({ kind: 'ignore-rule', ignore: ['mlp.gate'], match: 'vllm' }, w)).toEqual(
      ignoredSites({ kind: 'ignore-rule', ignore: ['mlp.gate'] }, w),
    );
    expect(
      ignoredSites({ kind: 'ignore-rule', ignore: ['mlp.gate', 'model.layers.0.mlp.gate'], match: 'prefix' }, w),
    ).toEqual([]);
    expect(
      ignoredSites({ kind: 'ignore-rule', ignore: ['model.layers.1.self_attn', 'lm_head'], match: 'prefix' }, w),
    ).toEqual(['h1.q', 'h1.k', 'h1.v', 'h1.o', 'lmHead']);
    expect(
      ignoredSites({ kind: 'ignore-rule', ignore: ['re:.*lm_head', 'mlp.gate'], match: 'compressed-tensors' }, w),
    ).toEqual(['lmHead']);
    // an MoE stack: the router is mlp.gate, the experts one fused mlp.experts module that mlp.gate does not catch
    const moe = createArPolicy(
      arConfig({ vocabSize: 13, maxLen: 24, moe: { experts: 2, topK: 1, auxCoeff: 0 } } as never),
      3,
    );
    expect(ignoredSites({ kind: 'ignore-rule', ignore: ['mlp.gate'] }, moe.weights)).toEqual(
      moe.weights.blocks.map((_, l) => `h${l}.router`),
    );
    expect(
      ignoredSites({ kind: 'ignore-rule', ignore: ['model.layers.0.mlp.gate'], match: 'prefix' }, moe.weights),
    ).toEqual(['h0.router']);
  });

  it("ignore-rule catching exactly the plan's exclusions changes nothing; the jet fault plan runs the caught sites as plain BF16 GEMMs and nothing else", () => {
    const healthy = probe('fp8-rollout');
    const same = probe(withFaults('fp8-rollout', [{ kind: 'ignore-rule', ignore: ['lm_head'], match: 'prefix' }]));
    expect(same.diagnostics).toEqual(healthy.diagnostics);
    expect(Array.from(same.rollout.logpRollout)).toEqual(Array.from(healthy.rollout.logpRollout));
    // jet: both sides bit-identical (k3 = 0); the faulted rollout is jet with gate, up and lm_head overridden to BF16
    expect(probe('jet').diagnostics.k3).toBe(0);
    const faulty = probe(file('jet-fault-ignore-rule'));
    const jet = precisionPlan('jet');
    const overridden = probe({
      rollout: {
        ...jet.rollout,
        overrides: [{ match: ['h*.gate', 'h*.up', 'lmHead'], gemm: { kind: 'rounding', operands: 'bf16' } }],
      },
      trainer: jet.trainer,
    } as unknown as PlanData);
    expect(Array.from(faulty.rollout.logpRollout)).toEqual(Array.from(overridden.rollout.logpRollout));
    expect(faulty.diagnostics).toEqual(overridden.diagnostics);
    expect(faulty.diagnostics.k3).toBeGreaterThan(0);
    // the reverse: a prefix rule whose mlp.gate catches nothing and no lm_head entry quantizes lm_head as well
    const reverse = probe(withFaults('jet', [{ kind: 'ignore-rule', ignore: ['mlp.gate'], match: 'prefix' }]));
    const lmHeadQuantized = probe({
      rollout: { ...jet.rollout, gemm: { ...jet.rollout.gemm, exclude: [] } },
      trainer: jet.trainer,
    } as unknown as PlanData);
    expect(reverse.diagnostics).toEqual(lmHeadQuantized.diagnostics);
    expect(reverse.diagnostics.k3).toBeGreaterThan(0);
  });

  it('unity-kv-scales stores the faulted rows under scale 1 and leaves the other tensor and every GEMM as they were', () => {
    const spec = precisionPlan('fp8-kv').rollout.gemm as { kvCache: KvCacheSpec };
    const B = 2;
    const tCap = 3;
    const Cw = 4;
    // K and V of a prefill of 3 rows: K near 4 (calibrated scale 4/200), V small (calibrated scale 0.01/100)
    const k0 = Float32Array.from({ length: B * tCap * Cw }, (_, i) => Math.fround(4 * Math.sin(i + 1)));
    const v0 = Float32Array.from({ length: B * tCap * Cw }, (_, i) => Math.fround(0.01 * Math.cos(3 * i + 1)));
    const run = (which: 'k' | 'v' | 'kv' | null) => {
      const side =
        which === null
          ? precisionPlan('fp8-kv').rollout
          : { ...precisionPlan('fp8-kv').rollout, refit: { faults: [{ kind: 'unity-kv-scales' as const, which }] } };
      const hook = sideNumerics(side, tiny.weights).kvHook(0)!;
      const k = Float32Array.from(k0);
      const v = Float32Array.from(v0);
      for (let t = 0; t < tCap; t++) hook(k, v, t, B, tCap, Cw);
      return { k, v };
    };
    const unity = (x: Float32Array) =>
      kvDequantize(spec.kvCache, kvQuantize(spec.kvCache, x, [B * tCap, Cw], Float32Array.of(1)));
    const healthy = run(null);
    const v = run('v');
    expect(sameBits(v.k, healthy.k)).toBe(true);
    expect(sameBits(v.v, unity(v0))).toBe(true);
    expect(sameBits(v.v, healthy.v)).toBe(false);
    const k = run('k');
    expect(sameBits(k.k, unity(k0))).toBe(true);
    expect(sameBits(k.v, healthy.v)).toBe(true);
    const kv = run('kv');
    expect(sameBits(kv.k, unity(k0)) && sameBits(kv.v, unity(v0))).toBe(true);
    // the GEMMs are those of the healthy plan: a recompute decode (no KV cache) sees no fault
    const recompute = (faults: readonly unknown[]) =>
      probe(withFaults('fp8-kv', faults, { decode: 'recompute' })).diagnostics;
    expect(recompute([{ kind: 'unity-kv-scales' }])).toEqual(recompute([]));
    // and over the incremental decode the fault plan moves the mismatch
    expect(probe(file('fp8-rollout-fault-unity-kv-scales')).diagnostics).not.toEqual(probe('fp8-kv').diagnostics);
  });

  it.each([
    [
      'fp8-rollout',
      [{ kind: 'unity-kv-scales' }],
      /plan\.rollout\.refit\.faults\[0\]: unity-kv-scales needs a KV-cache quantizer \(gemm\.kvCache\), the side has none/,
    ],
    [
      'bf16',
      [{ kind: 'ignore-rule', ignore: ['lm_head'] }],
      /plan\.rollout\.refit\.faults\[0\]: ignore-rule needs a quantized GEMM plan .*got gemm\.kind "rounding"/,
    ],
    [
      'fp8-kv',
      [{ kind: 'unity-kv-scales', which: 'q' }],
      /plan\.rollout\.refit\.faults\[0\]\.which: expected "k", "v" or "kv", got "q"/,
    ],
    [
      'fp8-rollout',
      [{ kind: 'ignore-rule', ignore: ['lm_head'], match: 'glob' }],
      /plan\.rollout\.refit\.faults\[0\]\.match: expected one of substring, prefix, regex, vllm, compressed-tensors, got "glob"/,
    ],
    [
      'fp8-rollout',
      [{ kind: 'ignore-rule', ignore: 'lm_head' }],
      /plan\.rollout\.refit\.faults\[0\]\.ignore: expected a list of module-name patterns, got "lm_head"/,
    ],
    [
      'fp8-rollout',
      [{ kind: 'ignore-rule', ignore: ['re:(('], match: 'regex' }],
      /plan\.rollout\.refit\.faults\[0\]\.ignore\[0\]: not a valid regular expression, got "re:\(\("/,
    ],
    [
      'fp8-kv',
      [{ kind: 'unity-kv-scales' }, { kind: 'unity-kv-scales', which: 'v' }],
      /plan\.rollout\.refit\.faults\[1\]: a second unity-kv-scales fault/,
    ],
  ])('%s with faults %j is refused naming the field', (name, faults, message) => {
    expect(() => resolvePlan(withFaults(name, faults))).toThrow(message);
  });

  it('the fault plans resolve under their names', () => {
    for (const name of [
      'fp8-rollout-fault-halves-swapped',
      'fp8-rollout-fault-rows-permuted',
      'fp8-rollout-fault-stale-sync',
      'fp8-rollout-fault-unity-kv-scales',
      'jet-fault-ignore-rule',
    ])
      expect(resolvePlan(file(name)).name).toBe(name);
  });
});
