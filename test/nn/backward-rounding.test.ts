// The rounded-once paths of linearBackward (LinearGemms.backwardRounding) and of full-sequence attention
// (AttentionGemms.operandRounding) against the per-call paths, bit for bit on edge data and ragged shapes.

import { describe, expect, it } from 'vitest';
import {
  attentionBackward,
  attentionForward,
  blockBackward,
  blockForward,
  createAttentionCache,
  createBlockCache,
  linearBackward,
  roundedInputT,
  type AttentionGemms,
  type BlockConfig,
  type BlockGemms,
  type FloatArray,
  type LinearGemms,
} from '../../src/nn/index.js';
import { roundingNumerics, type PolicyNumerics, type RoundingNumericsOptions } from '../../src/policies/index.js';
import { createRng } from '../../src/core/rng.js';

/** The same GEMMs without the description: linearBackward calls dgrad and wgrad, which round per call. */
function perCall(g: LinearGemms): LinearGemms {
  return { ...g, backwardRounding: undefined };
}

/** Normal values with the edge cases of the operand formats mixed in (NaN, ±Inf, −0, subnormals, ties, format maxima and beyond). */
function edgeData(n: number, seed: string): Float32Array {
  const rng = createRng(seed);
  const edges = [
    NaN,
    Infinity,
    -Infinity,
    -0,
    0,
    1e-40,
    -3e-39,
    1 + 2 ** -8,
    1 + 3 * 2 ** -8,
    -(1 + 2 ** -11),
    3.3895313892515355e38,
    -3.4e38,
    65504,
    65520,
    -65536,
    2 ** -24,
    2 ** -25,
    6e-8,
  ];
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++)
    x[i] =
      i % 5 === 2
        ? edges[(i * 7 + seed.length) % edges.length]!
        : rng.normal() * 2 ** Math.floor(rng.uniform() * 8 - 4);
  return x;
}

function sameBits(got: ArrayLike<number>, want: ArrayLike<number>): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++)
    if (!Object.is(got[i], want[i])) expect.fail(`element ${i}: got ${got[i]}, want ${want[i]}`);
}

const options: readonly RoundingNumericsOptions[] = [
  { operands: 'bf16' },
  { operands: 'fp16', out: 'bf16' },
  { operands: 'tf32', accumulator: 'pairwise' },
  { operands: 'bf16', accumulator: 'split-k', splitK: 3, splitKMaxRows: 4 },
  { operands: 'fp16', profile: 'satfinite' },
];

/** One linearBackward into fresh gradient buffers of the element type of `like`. */
function backward(
  like: FloatArray,
  gemms: LinearGemms,
  dout: Float32Array,
  inp: Float32Array,
  weight: Float32Array,
  N: number,
  C: number,
  OC: number,
  withDinp: boolean,
): FloatArray[] {
  const cast = (x: Float32Array): FloatArray => (like instanceof Float64Array ? Float64Array.from(x) : x.slice());
  const dinp = withDinp ? cast(edgeData(N * C, 'dinp').map((v) => (Number.isFinite(v) ? v : 0.5))) : null;
  const dweight = cast(new Float32Array(OC * C).fill(0.25));
  const dbias = cast(new Float32Array(OC).fill(-1));
  linearBackward(dinp, dweight, dbias, cast(dout), cast(inp), cast(weight), N, C, OC, gemms);
  return dinp ? [dinp, dweight, dbias] : [dweight, dbias];
}

describe('linearBackward with backwardRounding', () => {
  it('equals the per-call rounding path bit for bit (formats, accumulators, float32 and float64, ragged and zero-size shapes)', () => {
    const shapes: [number, number, number][] = [
      [7, 5, 3],
      [1, 1, 1],
      [0, 4, 6],
      [9, 16, 10],
      [33, 8, 17],
      [5, 3, 0],
    ];
    for (const opt of options) {
      for (const [N, C, OC] of shapes) {
        for (const like of [new Float32Array(0), new Float64Array(0)]) {
          for (const withDinp of [true, false]) {
            const dout = edgeData(N * OC, `dout${N}`),
              inp = edgeData(N * C, `inp${C}`),
              weight = edgeData(OC * C, `w${OC}`);
            const fast = roundingNumerics(opt).lmHead();
            expect(fast.backwardRounding).toBeDefined();
            const got = backward(like, fast, dout, inp, weight, N, C, OC, withDinp);
            const want = backward(like, perCall(roundingNumerics(opt).lmHead()), dout, inp, weight, N, C, OC, withDinp);
            got.forEach((g, i) => sameBits(g, want[i]!));
          }
        }
      }
    }
  });

  it('shares a rounded input between layers of the same rounding and ignores one made for another input or rounding', () => {
    const N = 11,
      C = 6,
      OC = 4;
    const inp = edgeData(N * C, 'shared'),
      other = edgeData(N * C, 'other');
    const w1 = edgeData(OC * C, 'w1'),
      w2 = edgeData(OC * C, 'w2');
    const dout = edgeData(N * OC, 'dy');
    const numerics = roundingNumerics({ operands: 'bf16' });
    const gemms = numerics.block(0).q;
    const run = (g: LinearGemms, w: Float32Array, inpT: ReturnType<typeof roundedInputT>): Float32Array[] => {
      const dinp = new Float32Array(N * C),
        dw = new Float32Array(OC * C);
      linearBackward(dinp, dw, null, dout, inp, w, N, C, OC, g, inpT);
      return [dinp, dw];
    };
    const shared = roundedInputT(inp, N, C, gemms);
    expect(shared).not.toBeNull();
    expect(roundedInputT(inp, N, C, perCall(gemms))).toBeNull();
    const fromOtherInput = roundedInputT(other, N, C, gemms);
    const fromOtherRounding = roundedInputT(inp, N, C, roundingNumerics({ operands: 'fp16' }).block(0).q);
    for (const w of [w1, w2]) {
      const want = run(perCall(gemms), w, null);
      for (const inpT of [shared, fromOtherInput, fromOtherRounding, null])
        run(gemms, w, inpT).forEach((g, i) => sameBits(g, want[i]!));
    }
  });

  it('a copy that replaces dgrad or wgrad calls them (the description no longer applies)', () => {
    const N = 6,
      C = 4,
      OC = 5;
    const base = roundingNumerics({ operands: 'bf16' }).lmHead();
    const calls: string[] = [];
    const replaced: LinearGemms = {
      ...base,
      wgrad: (o, a, b, m, n, k) => {
        calls.push('wgrad');
        base.wgrad(o, a, b, m, n, k);
      },
    };
    backward(
      new Float32Array(0),
      replaced,
      edgeData(N * OC, 'a'),
      edgeData(N * C, 'b'),
      edgeData(OC * C, 'c'),
      N,
      C,
      OC,
      true,
    );
    expect(calls).toEqual(['wgrad']);
  });

  it('a new numerics after a weight change rounds the new weight (the rounded transpose is kept per numerics)', () => {
    const N = 8,
      C = 4,
      OC = 3;
    const weight = edgeData(OC * C, 'w');
    const dout = edgeData(N * OC, 'dy'),
      inp = edgeData(N * C, 'x');
    for (let version = 0; version < 3; version++) {
      const got = backward(
        new Float32Array(0),
        roundingNumerics({ operands: 'bf16' }).lmHead(),
        dout,
        inp,
        weight,
        N,
        C,
        OC,
        true,
      );
      const want = backward(
        new Float32Array(0),
        perCall(roundingNumerics({ operands: 'bf16' }).lmHead()),
        dout,
        inp,
        weight,
        N,
        C,
        OC,
        true,
      );
      got.forEach((g, i) => sameBits(g, want[i]!));
      for (let i = 0; i < weight.length; i++) weight[i] = Math.fround(weight[i]! * 1.7 + 0.01); // the optimizer step
    }
  });

  it('a whole block backward (q, k, v and MLP up, gate sharing their inputs) equals the per-call path', () => {
    const cfg: BlockConfig = {
      C: 8,
      H: 2,
      hidden: 12,
      norm: 'rmsnorm',
      mlp: 'swiglu',
      bias: true,
      causal: true,
      rope: true,
    };
    const B = 2,
      T = 5,
      N = B * T,
      C = cfg.C;
    const rng = createRng('block');
    const tensor = (n: number, s = 0.3): Float32Array => Float32Array.from({ length: n }, () => rng.normal() * s);
    const w = {
      ln1: tensor(C, 1),
      ln1Bias: null,
      wq: tensor(C * C),
      bq: tensor(C),
      wk: tensor(C * C),
      bk: tensor(C),
      wv: tensor(C * C),
      bv: tensor(C),
      wo: tensor(C * C),
      bo: tensor(C),
      ln2: tensor(C, 1),
      ln2Bias: null,
      mlp: {
        up: tensor(cfg.hidden * C),
        upBias: tensor(cfg.hidden),
        gate: tensor(cfg.hidden * C),
        gateBias: tensor(cfg.hidden),
        down: tensor(C * cfg.hidden),
        downBias: tensor(C),
      },
    };
    const zeros = (): typeof w =>
      JSON.parse(JSON.stringify(w), (_k, v) =>
        v && typeof v === 'object' && '0' in v ? new Float32Array(Object.keys(v).length) : v,
      ) as typeof w;
    const inp = tensor(N * C, 1);
    const dout = tensor(N * C, 1);
    const run = (numerics: PolicyNumerics, slow: boolean): Float32Array[] => {
      const g0 = numerics.block(0);
      const gemms: BlockGemms = slow
        ? {
            ...g0,
            attention: { ...g0.attention, operandRounding: undefined },
            q: perCall(g0.q),
            k: perCall(g0.k),
            v: perCall(g0.v),
            o: perCall(g0.o),
            mlp: { up: perCall(g0.mlp.up), gate: perCall(g0.mlp.gate), down: perCall(g0.mlp.down) },
          }
        : g0;
      const cache = createBlockCache(inp, B, T, cfg);
      blockForward(new Float32Array(N * C), cache, inp, w, B, T, cfg, gemms);
      const g = zeros();
      const dinp = new Float32Array(N * C);
      blockBackward(dinp, g, dout, cache, inp, w, B, T, cfg, gemms);
      return [dinp, g.wq, g.bq, g.wk, g.wv, g.wo, g.ln1, g.ln2, g.mlp.up, g.mlp.gate, g.mlp.down, g.mlp.upBias].map(
        (x) => x as Float32Array,
      );
    };
    for (const opt of options) {
      const got = run(roundingNumerics(opt), false);
      const want = run(roundingNumerics(opt), true);
      got.forEach((g, i) => sameBits(g, want[i]!));
    }
  });
});

describe('attention with operandRounding', () => {
  /** Forward then backward of one attention call; returns out, P and dq, dk, dv. */
  function attention(
    gemms: AttentionGemms,
    like: FloatArray,
    B: number,
    T: number,
    C: number,
    H: number,
    causal: boolean,
    rope: boolean,
    seed: string,
    backwardGemms = gemms,
  ): FloatArray[] {
    const cast = (x: Float32Array): FloatArray => (like instanceof Float64Array ? Float64Array.from(x) : x.slice());
    const n = B * T * C;
    const [q, k, v, dout] = ['q', 'k', 'v', 'dy'].map((name) => cast(edgeData(n, seed + name))) as [
      FloatArray,
      FloatArray,
      FloatArray,
      FloatArray,
    ];
    const out = cast(new Float32Array(n));
    const cache = createAttentionCache(q, B, T, C, H);
    const opts = { causal, rope, gemms };
    attentionForward(out, cache, q, k, v, B, T, C, H, opts);
    const [dq, dk, dv] = [0.5, -0.25, 1].map((x) => cast(new Float32Array(n).fill(x))) as [
      FloatArray,
      FloatArray,
      FloatArray,
    ];
    attentionBackward(dq, dk, dv, dout, cache, v, B, T, C, H, { ...opts, gemms: backwardGemms });
    return [out, cache.att, cache.q, dq, dk, dv];
  }

  it('forward and backward equal the per-call rounding path bit for bit (formats, accumulators, float32 and float64, causal and bidirectional, RoPE)', () => {
    const shapes: [number, number, number, number][] = [
      [2, 5, 8, 2],
      [1, 1, 4, 1],
      [3, 7, 12, 3],
      [1, 17, 4, 2],
    ];
    for (const opt of options) {
      for (const [B, T, C, H] of shapes) {
        for (const like of [new Float32Array(0), new Float64Array(0)]) {
          for (const [causal, rope] of [
            [true, false],
            [false, true],
            [true, true],
          ] as const) {
            const fast = roundingNumerics(opt).block(0).attention;
            expect(fast.operandRounding).toBeDefined();
            const slow: AttentionGemms = { ...roundingNumerics(opt).block(0).attention, operandRounding: undefined };
            const seed = `${B}${T}${C}`;
            const got = attention(fast, like, B, T, C, H, causal, rope, seed);
            const want = attention(slow, like, B, T, C, H, causal, rope, seed);
            got.forEach((g, i) => sameBits(g, want[i]!));
          }
        }
      }
    }
  });

  it('a backward under another rounding than the forward rounds the operands afresh', () => {
    const bf16 = roundingNumerics({ operands: 'bf16' }).block(0).attention;
    const fp16 = roundingNumerics({ operands: 'fp16' }).block(0).attention;
    const got = attention(bf16, new Float32Array(0), 2, 6, 8, 2, true, true, 'x', fp16);
    const want = attention({ ...bf16, operandRounding: undefined }, new Float32Array(0), 2, 6, 8, 2, true, true, 'x', {
      ...fp16,
      operandRounding: undefined,
    });
    got.forEach((g, i) => sameBits(g, want[i]!));
  });

  it('a copy that replaces one of the six GEMMs calls it (the description no longer applies)', () => {
    const base = roundingNumerics({ operands: 'bf16' }).block(0).attention;
    let calls = 0;
    const replaced: AttentionGemms = {
      ...base,
      dKey: (o, a, b, m, n, k) => {
        calls++;
        base.dKey(o, a, b, m, n, k);
      },
    };
    const got = attention(replaced, new Float32Array(0), 2, 4, 4, 2, true, false, 'r');
    expect(calls).toBe(4);
    const want = attention({ ...base, operandRounding: undefined }, new Float32Array(0), 2, 4, 4, 2, true, false, 'r');
    got.forEach((g, i) => sameBits(g, want[i]!));
  });
});

describe('roundingNumerics remembers the rounding of linear-forward inputs', () => {
  it('equals a fresh numerics on every call: the same values again, new values in the same array, other lengths, float64, NaN payloads', () => {
    const C = 6,
      OC = 5;
    const weight = edgeData(OC * C, 'w');
    const x = edgeData(720 * C, 'x'); // above the size from which inputs are remembered
    const nanPayload = x.slice();
    new Uint32Array(nanPayload.buffer)[3] = 0x7fc00001; // a NaN with another payload
    const inputs: FloatArray[] = [
      x,
      x.slice(),
      x,
      nanPayload,
      x,
      x.subarray(0, 2 * C),
      x.subarray(0, 2 * C),
      Float64Array.from(x),
      edgeData(720 * C, 'y'),
      x,
    ];
    for (const opt of options) {
      const numerics = roundingNumerics(opt);
      const gemms = [numerics.block(0).q, numerics.block(0).k, numerics.lmHead()];
      inputs.forEach((inp, step) => {
        if (step === 4) x[8] = Math.fround(x[8]! * 3 + 1); // the same array, new values
        const N = inp.length / C;
        const got = new Float32Array(N * OC);
        gemms[step % gemms.length]!.forward(got, inp, weight, N, OC, C);
        const want = new Float32Array(N * OC);
        roundingNumerics(opt).lmHead().forward(want, inp, weight, N, OC, C);
        sameBits(got, want);
      });
    }
  });

  it('the backward reuses the rounding of a forward input only while its bits are unchanged', () => {
    const N = 720,
      C = 6,
      OC = 4; // an input above the size from which inputs are remembered
    const finite = (x: Float32Array): Float32Array =>
      x.map((v) => (Number.isFinite(v) && Math.abs(v) < 1e30 ? v : 0.5)); // so that one changed input moves dW
    const weight = edgeData(OC * C, 'w'),
      dout = finite(edgeData(N * OC, 'dy'));
    for (const mutate of [false, true]) {
      const x = finite(edgeData(N * C, 'x'));
      const fast = roundingNumerics({ operands: 'bf16' }).lmHead();
      fast.forward(new Float32Array(N * OC), x, weight, N, OC, C);
      if (mutate) x[11] = Math.fround(x[11]! * -3 + 2); // a buffer reused with new values before the backward
      const got = [new Float32Array(N * C), new Float32Array(OC * C)];
      linearBackward(got[0]!, got[1]!, null, dout, x, weight, N, C, OC, fast);
      const want = [new Float32Array(N * C), new Float32Array(OC * C)];
      linearBackward(
        want[0]!,
        want[1]!,
        null,
        dout,
        x,
        weight,
        N,
        C,
        OC,
        perCall(roundingNumerics({ operands: 'bf16' }).lmHead()),
      );
      got.forEach((g, i) => sameBits(g, want[i]!));
    }
  });
});
