// The decode step's scaled attention (all heads of a sequence per call, each cached row's amax taken once) against
// the per-call path (both operands of every per-head GEMM quantized inside the call), bit for bit.

import { describe, expect, it } from 'vitest';
import { attentionDecodeAppend, attentionDecodeForward, type AttentionGemms, type GemmFn } from '../../src/nn/index.js';
import type { DecodeAttentionGemms } from '../../src/nn/attention-decode.js';
import { rowwiseQuantizable } from '../../src/nn/attention-decode-scaled.js';
import { gemm, quantPreset, type GemmOptions, type QuantSpec } from '../../src/numerics/index.js';
import { precisionPlans, quantizedNumerics } from '../../src/policies/index.js';
import { createRng } from '../../src/rng.js';

const fr = Math.fround;

/** Scaled attention GEMMs with `spec` on both operands, as quantizedNumerics builds them. */
function scaledGemms(spec: QuantSpec, acc: GemmOptions): DecodeAttentionGemms {
  const opts: GemmOptions = { ...acc, aQuant: spec, bQuant: spec };
  const g: GemmFn = (out, a, b, m, n, k) => {
    gemm(out as Float32Array, a as Float32Array, b as Float32Array, m, n, k, opts);
  };
  const decodeScaled = {
    qk: g, pv: g, spec,
    gemm: (out: Float32Array, a: Float32Array, b: Float32Array, m: number, n: number, k: number, aQuant: QuantSpec, bQuant: QuantSpec) => void gemm(out, a, b, m, n, k, { ...acc, aQuant, bQuant }),
  };
  return { qk: g, pv: g, dScores: g, dValues: g, dQuery: g, dKey: g, decodeScaled };
}

interface Case {
  readonly B: number;
  readonly tCap: number;
  readonly C: number;
  readonly H: number;
}

/** Decodes steps from..tCap over the caches: appends row t−1, then `edit` (a KV hook), then the forward; returns outputs and probabilities. */
function decode(gemms: AttentionGemms, c: Case, kCache: Float32Array, vCache: Float32Array, kRows: Float32Array, vRows: Float32Array, q: Float32Array, edit: (t: number) => void, from = 1): Float32Array[] {
  const { B, tCap, C, H } = c;
  const outs: Float32Array[] = [];
  for (let t = from; t <= tCap; t++) {
    attentionDecodeAppend(kCache, vCache, kRows.subarray((t - 1) * B * C, t * B * C), vRows.subarray((t - 1) * B * C, t * B * C), t - 1, B, tCap, C, H, { rope: true });
    edit(t);
    const out = new Float32Array(B * C);
    const att = new Float32Array(B * H * t);
    attentionDecodeForward(out, att, q.subarray((t - 1) * B * C, t * B * C), kCache, vCache, t, B, tCap, C, H, { gemms, rope: true });
    outs.push(out, att);
  }
  return outs;
}

function expectSame(got: Float32Array[], want: Float32Array[]): void {
  expect(got.length).toBe(want.length);
  for (let s = 0; s < got.length; s++) {
    const g = got[s]!, w = want[s]!;
    expect(g.length).toBe(w.length);
    for (let i = 0; i < g.length; i++) if (!Object.is(g[i], w[i])) expect.fail(`output ${s}, element ${i}: ${g[i]} ≠ ${w[i]}`);
  }
}

/** Rows with edge values: NaN, ±Inf, −0, subnormals, the E4M3 max and beyond, growing magnitudes (the amax moves). */
function edgeRows(c: Case, seed: string, withNonFinite: boolean): { kRows: Float32Array; vRows: Float32Array; q: Float32Array } {
  const rng = createRng(seed);
  const n = c.tCap * c.B * c.C;
  // Magnitudes grow with the step, with spikes: a head's amax moves at some steps and stays at others.
  const randn = (): Float32Array => Float32Array.from({ length: n }, (_, i) => fr(rng.normal() * (1 + Math.floor(i / (c.B * c.C)) / 3) * (rng.uniform() < 0.05 ? 40 : 1)));
  const kRows = randn(), vRows = randn(), q = randn();
  vRows[5] = -0;
  kRows[7] = 0;
  kRows[20] = 1e-40; // subnormal
  vRows[21] = -3e-42;
  kRows[c.B * c.C + 3] = 448; // the E4M3 max, exactly
  vRows[2 * c.B * c.C + 1] = -448;
  kRows[3 * c.B * c.C + 2] = 1e5; // saturates
  q[c.B * c.C + 1] = -0;
  if (withNonFinite) {
    kRows[4 * c.B * c.C + 3] = NaN;
    vRows[5 * c.B * c.C + 2] = Infinity;
    q[6 * c.B * c.C] = -Infinity;
  }
  // An all-zero key row of every head (amax 0 at step 1 of sequence 0).
  kRows.fill(0, 0, c.C);
  return { kRows, vRows, q };
}

describe('decode with scaled (per-tensor FP8) attention GEMMs', () => {
  const full = precisionPlans['full-fp8'].rollout.gemm;
  const acc: GemmOptions = { accumulator: 'hopper-fp8', chunk: 16 };
  const specs: [string, QuantSpec][] = [
    ['vllm-fp8-tensor (reciprocal, fminf clamp)', quantPreset('vllm-fp8-tensor')],
    ['e5m2, divide, NaN amax propagates', { format: 'e5m2', granularity: { kind: 'tensor' }, scale: { kind: 'amax', scaleFloor: 2 ** -20 }, scaling: 'divide', profile: 'satfinite', amaxNan: 'propagate' }],
    ['int8, amax floor', { format: 'int8', granularity: { kind: 'tensor' }, scale: { kind: 'amax', amaxFloor: 1e-3 }, scaling: 'divide', profile: 'satfinite' }],
    ['e4m3fn, power-of-two scales, negative zero made positive', { format: 'e4m3fn', granularity: { kind: 'tensor' }, scale: { kind: 'amax', pow2: 'ceil-bits' }, scaling: 'reciprocal', profile: 'satfinite', negativeZero: 'positive' }],
  ];
  const cases: Case[] = [
    { B: 2, tCap: 12, C: 16, H: 2 }, // hs 8 < chunk
    { B: 3, tCap: 19, C: 40, H: 2 }, // hs 20: K not a multiple of the chunk; tLen ragged
  ];

  for (const [name, spec] of specs) {
    for (const c of cases) {
      it(`${name}, B=${c.B} C=${c.C} H=${c.H}: equals the per-call path at every step (edge values, a rewritten row, reused caches)`, () => {
        const fast = scaledGemms(spec, acc);
        const slow: AttentionGemms = { ...fast, decodeScaled: undefined } as AttentionGemms;
        const n = c.B * c.tCap * c.C;
        const kCache = new Float32Array(n), vCache = new Float32Array(n);
        // A KV hook that rewrites earlier rows: at step 5 an element becomes its head's amax, at step 7 it
        // shrinks again (the head's scale moves twice without a new row holding the amax); step 9 a small change.
        const edit = (k: Float32Array) => (t: number): void => {
          const e = (1 * c.tCap + 1) * c.C + 2; // sequence 1, row 1, head 0
          if (t === 5) k[e] = 300;
          if (t === 7) k[e] = 0.001;
          if (t === 9) k[(0 * c.tCap + 2) * c.C + 1] = fr(k[(0 * c.tCap + 2) * c.C + 1]! * 1.5 + 0.25);
        };
        for (const [round, nonFinite] of [[0, false], [1, true], [2, false]] as const) {
          const { kRows, vRows, q } = edgeRows(c, `scaled-decode-${round}`, nonFinite);
          // The same cache arrays every round (reused as a later rollout would), the reference on fresh ones.
          const got = decode(fast, c, kCache, vCache, kRows, vRows, q, edit(kCache));
          const kRef = new Float32Array(n), vRef = new Float32Array(n);
          const want = decode(slow, c, kRef, vRef, kRows, vRows, q, edit(kRef));
          expectSame(got, want);
        }
      });
    }
  }

  it('a cache reused with another quantizer, or with fewer rows, is quantized again', () => {
    const c = cases[0]!;
    const n = c.B * c.tCap * c.C;
    const kCache = new Float32Array(n), vCache = new Float32Array(n);
    const { kRows, vRows, q } = edgeRows(c, 'scaled-decode-reuse', false);
    const [a, b] = [scaledGemms(specs[0]![1], acc), scaledGemms(specs[2]![1], acc)];
    decode(a, c, kCache, vCache, kRows, vRows, q, () => {});
    // Another quantizer over the same (full) cache: step tCap only.
    const got = decode(b, c, kCache, vCache, kRows, vRows, q, () => {}, c.tCap);
    const want = decode({ ...b, decodeScaled: undefined } as AttentionGemms, c, kCache.slice(), vCache.slice(), kRows, vRows, q, () => {}, c.tCap);
    expectSame(got, want);
    // A shorter decode over the same arrays (rows past tLen still hold the old values).
    const short = decode(a, { ...c }, kCache, vCache, kRows.map((x) => fr(x / 3)), vRows, q, () => {}, 1).slice(0, 6);
    const ref = decode({ ...a, decodeScaled: undefined } as AttentionGemms, c, new Float32Array(n), new Float32Array(n), kRows.map((x) => fr(x / 3)), vRows, q, () => {}, 1).slice(0, 6);
    expectSame(short, ref);
  });

  it('the full-fp8 rollout numerics take the scaled path and equal their per-call GEMMs', () => {
    const att = quantizedNumerics(full).block(0).attention as DecodeAttentionGemms;
    expect(att.decodeScaled?.qk).toBe(att.qk);
    expect(att.decodeScaled?.pv).toBe(att.pv);
    const c = cases[1]!;
    const n = c.B * c.tCap * c.C;
    const { kRows, vRows, q } = edgeRows(c, 'scaled-decode-plan', true);
    const got = decode(att, c, new Float32Array(n), new Float32Array(n), kRows, vRows, q, () => {});
    const want = decode({ ...att, decodeScaled: undefined } as AttentionGemms, c, new Float32Array(n), new Float32Array(n), kRows, vRows, q, () => {});
    expectSame(got, want);
  });

  it('only per-tensor amax quantizers scaled by s or 1/s take the scaled path', () => {
    expect(rowwiseQuantizable(quantPreset('vllm-fp8-tensor'))).toBe(true);
    expect(rowwiseQuantizable(quantPreset('vllm-fp8-token'))).toBe(false); // one scale per row
    expect(rowwiseQuantizable(quantPreset('vllm-fp8-group', { block: 16 }))).toBe(false);
    const t: QuantSpec = quantPreset('vllm-fp8-tensor');
    expect(rowwiseQuantizable({ ...t, scaling: 'max-over-amax' })).toBe(false); // the factor reads the amax
    expect(rowwiseQuantizable({ ...t, mode: 'stochastic' })).toBe(false);
    expect(rowwiseQuantizable({ ...t, scale: { kind: 'static', scale: 2 } })).toBe(false);
    // A copy of the GEMMs that replaces qk drops the scaled path.
    const g = scaledGemms(t, acc);
    const c = cases[0]!;
    const n = c.B * c.tCap * c.C;
    const { kRows, vRows, q } = edgeRows(c, 'scaled-decode-replaced', false);
    const replaced = { ...g, qk: (out: never, a: never, b: never, m: number, nn: number, k: number) => g.qk(out, a, b, m, nn, k) } as DecodeAttentionGemms;
    const got = decode(replaced, c, new Float32Array(n), new Float32Array(n), kRows, vRows, q, () => {});
    const want = decode({ ...replaced, decodeScaled: undefined } as AttentionGemms, c, new Float32Array(n), new Float32Array(n), kRows, vRows, q, () => {});
    expectSame(got, want);
  });
});
