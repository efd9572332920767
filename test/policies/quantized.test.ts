// Quantized precision plans: every preset end to end, GemmFns against direct numerics-core calls, exclusions, the
// weight cache, the FP8 KV hook's calibration, qarl's straight-through and jet's FP8 backward, qarl/jet bit-identity.

import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import {
  dequantize,
  gemm,
  kvDequantize,
  kvQuantize,
  quantize,
  quantPreset,
  type GemmOptions,
  type QuantSpec,
} from '../../src/numerics/index.js';
import {
  arConfig,
  arMismatchProbe,
  backwardLogprobs,
  computeLogprobs,
  createArPolicy,
  loadCheckpoint,
  numericsFor,
  precisionPlans,
  quantizedNumerics,
  rollout,
  roundingNumerics,
  type ArPolicy,
  type OperandQuantPlan,
  type QuantizedGemmPlan,
  type QuantizedPolicyNumerics,
  saveCheckpoint,
} from '../../src/policies/index.js';
import { attentionDecodeForward } from '../../src/nn/index.js';
import { createRng } from '../../src/core/rng.js';
import { makeTask } from '../../src/tasks/index.js';

const task = makeTask('reverse');
const P = task.promptLength;
const prompts = task.trainProblems(6, 5).map((p) => [...p.prompt]);

function freshPolicy(seed: number, overrides: Partial<Parameters<typeof arConfig>[0]> = {}): ArPolicy {
  return createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: 40, ...overrides }), seed);
}

function sameArrays(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

function randomArray(seed: number, n: number, scale = 1): Float32Array {
  const rng = createRng(seed);
  return Float32Array.from({ length: n }, () => Math.fround(rng.normal() * scale));
}

const specOf = (p: OperandQuantPlan): QuantSpec => quantPreset(p.preset, p.params ?? {});

/** The accumulator options of a quantized plan, as gemm() takes them. */
function accumulatorOf(g: QuantizedGemmPlan): GemmOptions {
  return {
    ...(g.accumulator !== undefined ? { accumulator: g.accumulator } : {}),
    ...(g.chunk !== undefined ? { chunk: g.chunk } : {}),
    ...(g.promoteEvery !== undefined ? { promoteEvery: g.promoteEvery } : {}),
    ...(g.splitK !== undefined ? { splitK: g.splitK } : {}),
  };
}

const quantizedNames = (Object.keys(precisionPlans) as (keyof typeof precisionPlans)[]).filter(
  (n) => precisionPlans[n].rollout.gemm.kind === 'quantized',
);

/** Trainer gradient (all parameters) of Σ g·ℓ for a rollout's tokens under `numerics`. */
function gradient(
  policy: ArPolicy,
  tokens: Int32Array,
  B: number,
  mask: Float32Array,
  numerics: ReturnType<typeof numericsFor>,
): { logp: Float64Array; grads: Float32Array } {
  const lp = computeLogprobs(policy, tokens, B, P, mask, { numerics });
  policy.params.grads.fill(0);
  const g = Float64Array.from({ length: lp.logp.length }, (_, i) => Math.cos(i + 1));
  backwardLogprobs(policy, lp, g);
  return { logp: lp.logp, grads: Float32Array.from(policy.params.grads) };
}

describe('quantized presets end to end', () => {
  it('the quantized presets are the ten of spec/policies.md §2 plus mxfp4-rollout', () => {
    expect(quantizedNames).toEqual([
      'fp8-rollout',
      'fp8-tensor-rollout',
      'int8-rollout',
      'w4a16-rollout',
      'nvfp4-rollout',
      'mxfp8-rollout',
      'mxfp4-rollout',
      'fp8-kv',
      'full-fp8',
      'qarl',
      'jet',
    ]);
  });
  for (const name of quantizedNames) {
    const plan = precisionPlans[name];
    const identical = JSON.stringify(plan.rollout.gemm) === JSON.stringify(plan.trainer.gemm);
    it(`${name}: rollout, trainer ℓ and trainer gradient are finite; mismatch ${identical ? 'exactly 0 (same forward)' : 'non-zero (quantized rollout vs BF16 trainer)'}`, () => {
      const policy = freshPolicy(7);
      const { rollout: r, logpOld, diagnostics } = arMismatchProbe(policy, { plan, length: 8, prompts, seed: 3 });
      expect(r.logpRollout.every(Number.isFinite)).toBe(true);
      expect(logpOld.every(Number.isFinite)).toBe(true);
      const { grads } = gradient(policy, r.tokens, r.B, r.responseMask, numericsFor(plan.trainer));
      expect(grads.every(Number.isFinite)).toBe(true);
      expect(grads.some((x) => x !== 0)).toBe(true);
      expect(Number.isFinite(diagnostics.k3)).toBe(true);
      if (identical) {
        expect(diagnostics.meanAbsDelta).toBe(0);
        expect(sameArrays(r.logpRollout, logpOld)).toBe(true);
      } else {
        expect(diagnostics.meanAbsDelta).toBeGreaterThan(0);
        expect(diagnostics.k3).toBeGreaterThan(0);
        expect(diagnostics.maxAbsDelta).toBeLessThan(1);
      }
    });
  }

  for (const name of ['qarl', 'jet'] as const) {
    it(`${name}: the trainer forward equals the rollout forward, so ℓroll and the trainer ℓ are bit-identical (both decode modes, τ = 0.8)`, () => {
      const policy = freshPolicy(
        11,
        name === 'jet' ? { positions: 'rope', norm: 'layernorm', bias: true } : { mlp: 'gelu' },
      );
      const plan = precisionPlans[name];
      for (const decode of ['incremental', 'recompute'] as const) {
        const r = rollout(policy, prompts, {
          maxNewTokens: 8,
          numerics: numericsFor(plan.rollout),
          rng: createRng(5),
          temperature: 0.8,
          decode,
        });
        const lp = computeLogprobs(policy, r.tokens, r.B, P, r.responseMask, {
          numerics: numericsFor(plan.trainer),
          temperature: 0.8,
        });
        expect(sameArrays(r.logpRollout, lp.logp)).toBe(true);
        expect(lp.logp.some((x) => x < -1e-3)).toBe(true);
      }
    });
  }
});

describe('quantized GemmFns against the numerics core', () => {
  // Every quantized preset's q-projection forward equals quantize(W) + gemm(x, Wq) with the plan's options.
  for (const name of quantizedNames) {
    test.prop([fc.integer({ min: 1, max: 7 }), fc.integer({ min: 0, max: 1e6 })], { numRuns: 6 })(
      `${name}: a linear forward = quantize + gemm on the same operands`,
      (m, seed) => {
        const g = precisionPlans[name].rollout.gemm as QuantizedGemmPlan;
        const C = 32,
          OC = 48;
        const x = randomArray(seed, m * C, 3);
        const w = randomArray(seed + 1, OC * C, 0.2);
        const out = new Float32Array(m * OC);
        quantizedNumerics(g).block(1).mlp.up.forward(out, x, w, m, OC, C);
        const aQuant = typeof g.activations === 'string' ? g.activations : specOf(g.activations);
        const expected = gemm(new Float32Array(m * OC), x, quantize(specOf(g.weights), w, [OC, C]), m, OC, C, {
          ...accumulatorOf(g),
          aQuant,
        });
        expect(sameArrays(out, expected)).toBe(true);
      },
    );
  }

  it('jet: dgrad and wgrad quantize both operands (dY and Wᵀ / dYᵀ and xᵀ) with BF16 outputs, as direct gemm calls', () => {
    const g = precisionPlans.jet.trainer.gemm;
    const bw = g.backward;
    if (bw?.kind !== 'quantized') throw new Error('jet backward must be quantized');
    const n = quantizedNumerics(g);
    const N = 10,
      C = 32,
      OC = 48;
    const dy = randomArray(1, N * OC, 1e-3);
    const wT = randomArray(2, C * OC, 0.2);
    const xT = randomArray(3, C * N);
    const dyT = randomArray(4, OC * N, 1e-3);
    const dx = new Float32Array(N * C);
    n.block(0).q.dgrad(dx, dy, wT, N, C, OC);
    const dxRef = gemm(new Float32Array(N * C), dy, quantize(specOf(bw.weight), wT, [C, OC]), N, C, OC, {
      ...accumulatorOf(g),
      aQuant: specOf(bw.gradient),
      outFormat: 'bf16',
    });
    expect(sameArrays(dx, dxRef)).toBe(true);
    const dw = new Float32Array(OC * C);
    n.block(0).q.wgrad(dw, dyT, xT, OC, C, N);
    const dwRef = gemm(new Float32Array(OC * C), dyT, xT, OC, C, N, {
      ...accumulatorOf(g),
      aQuant: specOf(bw.gradient),
      bQuant: specOf(bw.input),
      outFormat: 'bf16',
    });
    expect(sameArrays(dw, dwRef)).toBe(true);
    // …and really differ from the plain (BF16-operand) backward.
    const plain = roundingNumerics({ operands: 'bf16' }).lmHead();
    const dxPlain = new Float32Array(N * C);
    plain.dgrad(dxPlain, dy, wT, N, C, OC);
    expect(sameArrays(dx, dxPlain)).toBe(false);
  });

  it('full-fp8: QKᵀ and PV quantize both operands per call; fp8-rollout leaves them to BF16 rounding', () => {
    const full = precisionPlans['full-fp8'].rollout.gemm;
    const spec = specOf(full.attention!);
    const Tq = 3,
      Tk = 9,
      hs = 8;
    const q = randomArray(5, Tq * hs, 2);
    const k = randomArray(6, Tk * hs, 2);
    const s = new Float32Array(Tq * Tk);
    quantizedNumerics(full).block(0).attention.qk(s, q, k, Tq, Tk, hs);
    expect(
      sameArrays(
        s,
        gemm(new Float32Array(Tq * Tk), q, k, Tq, Tk, hs, { ...accumulatorOf(full), aQuant: spec, bQuant: spec }),
      ),
    ).toBe(true);
    const s8 = new Float32Array(Tq * Tk);
    quantizedNumerics(precisionPlans['fp8-rollout'].rollout.gemm).block(0).attention.qk(s8, q, k, Tq, Tk, hs);
    const sb = new Float32Array(Tq * Tk);
    roundingNumerics({ operands: 'bf16' }).block(0).attention.qk(sb, q, k, Tq, Tk, hs);
    expect(sameArrays(s8, sb)).toBe(true);
    expect(sameArrays(s, sb)).toBe(false);
  });

  it('full-fp8: the decode step runs QKᵀ and PV for every (sequence, head) in one call each, equal to the per-call path bit for bit', () => {
    const B = 3,
      H = 4,
      hs = 8,
      C = H * hs,
      tCap = 21;
    const full = precisionPlans['full-fp8'].rollout.gemm;
    // The plan's accumulator and others a plan can name (fp32, pairwise, hopper-fp8 at the hardware's chunk 32 / every 4).
    const variants = [
      full,
      { ...full, accumulator: 'fp32' as const },
      { ...full, accumulator: 'pairwise' as const },
      { ...full, chunk: 32, promoteEvery: 4 },
    ];
    const edge = (seed: number, n: number): Float32Array => {
      const x = randomArray(seed, n, 3);
      for (let i = 0; i < n; i += 37)
        x[i] = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0, 448, -448, 1e4, 1e-41][
          (i / 37) % 8
        ]!;
      return x;
    };
    let checked = 0;
    for (const [vi, plan] of variants.entries()) {
      const attention = quantizedNumerics(plan).block(0).attention;
      expect(attention.decodeBatch?.qk).toBe(attention.qk);
      const perCall = { ...attention, decodeBatch: undefined };
      for (const tLen of [1, 2, 9, 16, 17, 21]) {
        for (const rope of [false, true]) {
          const q = edge(100 + vi * 50 + tLen, B * C);
          const kCache = edge(200 + vi * 50 + tLen, B * tCap * C);
          const vCache = edge(300 + vi * 50 + tLen, B * tCap * C);
          for (let t = 0; t < tLen; t++) for (let c = 0; c < hs; c++) kCache[(1 * tCap + t) * C + 2 * hs + c] = 0; // an all-zero key head
          for (let t = 0; t < tLen; t++) for (let c = 0; c < hs; c++) vCache[(2 * tCap + t) * C + hs + c] = -0; // a −0 value head
          const run = (gemms: typeof attention): [Float32Array, Float32Array] => {
            const out = new Float32Array(B * C);
            const att = new Float32Array(B * H * tLen);
            attentionDecodeForward(out, att, q, kCache, vCache, tLen, B, tCap, C, H, { rope, gemms });
            return [out, att];
          };
          const [out, att] = run(attention);
          const [outRef, attRef] = run(perCall);
          expect(sameArrays(out, outRef), `variant ${vi}, tLen ${tLen}, rope ${rope}: out`).toBe(true);
          expect(sameArrays(att, attRef), `variant ${vi}, tLen ${tLen}, rope ${rope}: att`).toBe(true);
          checked++;
        }
      }
    }
    expect(checked).toBe(48);
  });

  it('lm_head is excluded by default (BF16 rounding GEMMs); exclude: [] quantizes it; excluded sites are configurable', () => {
    const g = precisionPlans['fp8-rollout'].rollout.gemm;
    const m = 5,
      C = 32,
      V = 13;
    const x = randomArray(8, m * C, 2);
    const w = randomArray(9, V * C, 0.3);
    const run = (fn: (o: Float32Array) => void): Float32Array => {
      const o = new Float32Array(m * V);
      fn(o);
      return o;
    };
    const dflt = run((o) => quantizedNumerics(g).lmHead().forward(o, x, w, m, V, C));
    const bf16 = run((o) => roundingNumerics({ operands: 'bf16' }).lmHead().forward(o, x, w, m, V, C));
    const quantHead = run((o) =>
      quantizedNumerics({ ...g, exclude: [] })
        .lmHead()
        .forward(o, x, w, m, V, C),
    );
    expect(sameArrays(dflt, bf16)).toBe(true);
    expect(sameArrays(quantHead, bf16)).toBe(false);
    const noQ = run((o) =>
      quantizedNumerics({ ...g, exclude: ['q', 'lmHead'] })
        .block(0)
        .q.forward(o, x, w, m, V, C),
    );
    expect(sameArrays(noQ, bf16)).toBe(true);
    expect(() => quantizedNumerics({ ...g, exclude: ['wte' as never] })).toThrow(
      /exclude must list sites among q, k, v, o, up, gate, down, lmHead, router, got "wte"/,
    );
  });

  it('weights are quantized once per numerics object (by array identity); activations per call', () => {
    const n = quantizedNumerics(precisionPlans['int8-rollout'].rollout.gemm);
    const m = 4,
      C = 32,
      OC = 32;
    const w = randomArray(10, OC * C, 0.2);
    const x = randomArray(11, m * C);
    const first = new Float32Array(m * OC);
    n.block(0).o.forward(first, x, w, m, OC, C);
    w[0] = w[0]! + 5; // a weight change without a new numerics object is not seen …
    const again = new Float32Array(m * OC);
    n.block(0).o.forward(again, x, w, m, OC, C);
    expect(sameArrays(first, again)).toBe(true);
    const fresh = new Float32Array(m * OC); // … a new one (the next weight sync) sees it
    quantizedNumerics(precisionPlans['int8-rollout'].rollout.gemm).block(0).o.forward(fresh, x, w, m, OC, C);
    expect(sameArrays(first, fresh)).toBe(false);
    const x2 = x.map((v) => v * 2); // activations are re-quantized: doubling x doubles y up to rounding
    const y2 = new Float32Array(m * OC);
    n.block(0).o.forward(y2, x2, w, m, OC, C);
    expect(sameArrays(y2, first)).toBe(false);
  });

  it('float64 operands (gradient-check buffers) get the float32 result: finite differences of a quantized forward are not meaningful', () => {
    const g = precisionPlans['fp8-rollout'].rollout.gemm;
    const m = 3,
      C = 32,
      OC = 16;
    const x = randomArray(12, m * C);
    const w = randomArray(13, OC * C, 0.2);
    const o32 = new Float32Array(m * OC);
    quantizedNumerics(g).block(0).k.forward(o32, x, w, m, OC, C);
    const o64 = new Float64Array(m * OC);
    quantizedNumerics(g).block(0).k.forward(o64, Float64Array.from(x), Float64Array.from(w), m, OC, C);
    expect(sameArrays(o64, o32)).toBe(true);
    // A tiny perturbation of x usually leaves the quantized product unchanged (piecewise-constant forward).
    const xp = Float64Array.from(x);
    xp[1] = xp[1]! + 1e-6;
    const op = new Float64Array(m * OC);
    quantizedNumerics(g).block(0).k.forward(op, xp, Float64Array.from(w), m, OC, C);
    expect(sameArrays(op, o64)).toBe(true);
  });
});

describe('quantized plan validation and kernel-order options', () => {
  const g = precisionPlans['fp8-rollout'].rollout.gemm;
  it('errors name the offending field and value', () => {
    expect(() => quantizedNumerics({ ...g, weights: { preset: 'fp9' as never } })).toThrow(
      /weights: .*unknown quantizer preset 'fp9'/,
    );
    expect(() => quantizedNumerics({ ...g, activations: 'fp8' as never })).toThrow(
      /activations must be a quantizer \{ preset, params\? \} or one of bf16, fp16, tf32, got "fp8"/,
    );
    expect(() => quantizedNumerics({ ...g, accumulator: 'fp128' as never })).toThrow(
      /accumulator must be one of fp32, fp32-fma, fp32-fma-x2, pairwise, fp64, int32, hopper-fp8, got "fp128"/,
    );
    expect(() => quantizedNumerics({ ...g, backward: { kind: 'ste' } as never })).toThrow(
      /backward\.kind must be plain, straight-through or quantized, got "ste"/,
    );
    expect(() => quantizedNumerics({ ...g, plainOperands: 'fp8' as never })).toThrow(
      /plainOperands must be one of bf16, fp16, tf32, got "fp8"/,
    );
  });
  it('a split-K (or plain fp32) accumulator on the rollout side changes the quantized GEMM result: a kernel-order mismatch on top of quantization', () => {
    const m = 6,
      C = 64,
      OC = 32;
    const x = randomArray(30, m * C, 3);
    const w = randomArray(31, OC * C, 0.2);
    const run = (plan: QuantizedGemmPlan): Float32Array => {
      const o = new Float32Array(m * OC);
      quantizedNumerics(plan).block(0).q.forward(o, x, w, m, OC, C);
      return o;
    };
    const base = run(g);
    expect(sameArrays(run({ ...g, splitK: 2 }), base)).toBe(false);
    expect(sameArrays(run({ ...g, accumulator: 'fp32' }), base)).toBe(false);
    expect(numericsFor({ gemm: { ...g, splitK: 2 } }).label).toMatch(
      /^W deepseek-fp8-block A vllm-fp8-group, hopper-fp8 accumulate/,
    );
  });
});

describe('fp8-kv: KV-cache hook and calibration', () => {
  const g = precisionPlans['fp8-kv'].rollout.gemm;
  const kv = g.kvCache!;
  it('calibrates on the first hook call after a sync (max|K|/200, max|V|/100 over the cache), keeps the scale afterwards, and quantizes each row', () => {
    const n = numericsFor(precisionPlans['fp8-kv'].rollout) as QuantizedPolicyNumerics;
    const B = 2,
      tCap = 5,
      C = 8;
    const k = new Float32Array(B * tCap * C),
      v = new Float32Array(B * tCap * C);
    const rk = randomArray(20, B * tCap * C, 3),
      rv = randomArray(21, B * tCap * C, 2);
    for (let b = 0; b < B; b++)
      for (let t = 0; t < 2; t++)
        for (let c = 0; c < C; c++) {
          // prefill rows 0, 1
          const i = (b * tCap + t) * C + c;
          k[i] = rk[i]!;
          v[i] = rv[i]!;
        }
    const amax = (x: Float32Array): number => x.reduce((a, y) => Math.max(a, Math.abs(y)), 0);
    expect(n.kvCacheState(0)!.calibrated).toBe(false);
    const hook = n.kvHook(0)!;
    const before = Float32Array.from(k);
    hook(k, v, 0, B, tCap, C);
    const s = n.kvCacheState(0)!;
    expect(s.calibrated).toBe(true);
    expect(s.kScale[0]).toBe(Math.fround(amax(before) / 200));
    expect(s.vScale[0]).toBe(Math.fround(amax(Float32Array.from(v)) / 100));
    expect(n.kvCacheState(1)!.calibrated).toBe(false); // one state per layer
    // Row 0 of each sequence now holds the FP8 round trip with that scale.
    const row0 = Float32Array.from([...before.subarray(0, C), ...before.subarray(tCap * C, tCap * C + C)]);
    const q0 = kvDequantize(kv, kvQuantize(kv, row0, [B, C], s.kScale));
    expect(sameArrays([...k.subarray(0, C), ...k.subarray(tCap * C, tCap * C + C)], q0)).toBe(true);
    // A later row 10× larger does not recalibrate: the scale stays and the row saturates at 448·scale.
    for (let c = 0; c < C; c++) k[(0 * tCap + 3) * C + c] = 1000 * (c % 2 ? 1 : -1);
    hook(k, v, 3, B, tCap, C);
    expect(sameArrays(n.kvCacheState(0)!.kScale, s.kScale)).toBe(true);
    expect(Math.abs(k[3 * C]!)).toBeLessThanOrEqual(448 * s.kScale[0]! * 1.01);
    // The next weight sync (a new numerics object) recalibrates.
    const n2 = numericsFor(precisionPlans['fp8-kv'].rollout) as QuantizedPolicyNumerics;
    const kAmax = amax(k);
    n2.kvHook(0)!(k, v, 3, B, tCap, C);
    expect(n2.kvCacheState(0)!.kScale[0]).toBe(Math.fround(kAmax / 200));
  });

  it('in a rollout every layer calibrates once at the prefill and keeps its scales across the decode and later rollouts of the same sync', () => {
    const policy = freshPolicy(17);
    const n = numericsFor(precisionPlans['fp8-kv'].rollout) as QuantizedPolicyNumerics;
    const a = rollout(policy, prompts, { maxNewTokens: 10, numerics: n, rng: createRng(2), eos: null });
    const scales = [0, 1].map((l) => Float32Array.from(n.kvCacheState(l)!.kScale));
    expect([0, 1].every((l) => n.kvCacheState(l)!.calibrated)).toBe(true);
    // A second rollout with the same object keeps the scales; the quantized KV cache changes what the engine samples with.
    rollout(policy, prompts, { maxNewTokens: 10, numerics: n, rng: createRng(3), eos: null });
    expect([0, 1].every((l) => sameArrays(n.kvCacheState(l)!.kScale, scales[l]!))).toBe(true);
    const noKv = rollout(policy, prompts, {
      maxNewTokens: 10,
      numerics: numericsFor(precisionPlans['fp8-rollout'].rollout),
      rng: createRng(2),
      eos: null,
    });
    expect(sameArrays(a.logpRollout, noKv.logpRollout)).toBe(false);
  });

  it('rejects trainer-side calibration inside the rollout engine', () => {
    expect(() => quantizedNumerics({ ...g, kvCache: { calibration: { mode: 'trainer' } } })).toThrow(
      /kvCache\.calibration\.mode must be fixed or inference.*"trainer"/,
    );
  });
});

describe('trainer backward of the quantized plans', () => {
  it('qarl: straight-through — ℓ and every gradient equal (Object.is) those of the BF16 trainer on a copy whose linear weights are the dequantized W4 weights', () => {
    const policy = freshPolicy(23);
    const plan = precisionPlans.qarl;
    const spec = specOf(plan.trainer.gemm.weights);
    const copy = loadCheckpoint(saveCheckpoint(policy)).policy;
    const { C, hidden } = copy.config;
    for (const bw of copy.weights.blocks) {
      const mats: [Float32Array, number, number][] = [
        [bw.wq as Float32Array, C, C],
        [bw.wk as Float32Array, C, C],
        [bw.wv as Float32Array, C, C],
        [bw.wo as Float32Array, C, C],
        [bw.mlp!.up as Float32Array, hidden, C],
        [bw.mlp!.gate as Float32Array, hidden, C],
        [bw.mlp!.down as Float32Array, C, hidden],
      ];
      for (const [w, rows, cols] of mats) w.set(dequantize(quantize(spec, Float32Array.from(w), [rows, cols])));
    }
    const r = rollout(policy, prompts, { maxNewTokens: 8, numerics: numericsFor(plan.rollout), rng: createRng(6) });
    const q = gradient(policy, r.tokens, r.B, r.responseMask, numericsFor(plan.trainer));
    const d = gradient(copy, r.tokens, r.B, r.responseMask, numericsFor(precisionPlans.bf16.trainer));
    expect(sameArrays(q.logp, d.logp)).toBe(true);
    expect(sameArrays(q.grads, d.grads)).toBe(true);
    // The gradient is applied to the FP32 master weights, which are not themselves quantized.
    expect(sameArrays(policy.weights.blocks[0]!.wq, copy.weights.blocks[0]!.wq)).toBe(false);
  });

  it("jet: the FP8 backward GEMMs change the gradient (finite, same direction) while the forward is the rollout's", () => {
    const policy = freshPolicy(29);
    const plan = precisionPlans.jet;
    const r = rollout(policy, prompts, { maxNewTokens: 8, numerics: numericsFor(plan.rollout), rng: createRng(7) });
    const jet = gradient(policy, r.tokens, r.B, r.responseMask, numericsFor(plan.trainer));
    const plainBackward = gradient(
      policy,
      r.tokens,
      r.B,
      r.responseMask,
      numericsFor({ gemm: { ...plan.trainer.gemm, backward: { kind: 'plain' } } }),
    );
    expect(sameArrays(jet.logp, plainBackward.logp)).toBe(true);
    expect(sameArrays(jet.logp, r.logpRollout)).toBe(true);
    expect(jet.grads.every(Number.isFinite)).toBe(true);
    let dot = 0,
      na = 0,
      nb = 0,
      diff = 0;
    for (let i = 0; i < jet.grads.length; i++) {
      const a = jet.grads[i]!,
        b = plainBackward.grads[i]!;
      dot += a * b;
      na += a * a;
      nb += b * b;
      if (a !== b) diff++;
    }
    expect(diff).toBeGreaterThan(jet.grads.length / 4);
    expect(dot / Math.sqrt(na * nb)).toBeGreaterThan(0.9);
  });
});
