// The precision seam: roundingNumerics against scalar references (operand rounding, accumulation orders,
// output rounding, weight cache), and the frozen plan table.

import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import {
  attentionDecodeAppend,
  attentionDecodeForward,
  gemmReference,
  gemmSequential,
  type AttentionGemms,
} from '../../src/nn/index.js';
import { round } from '../../src/numerics/index.js';
import {
  fp32Numerics,
  numericsFor,
  precisionPlan,
  precisionPlans,
  roundingNumerics,
} from '../../src/policies/index.js';
import { pairwiseSum, type AccumulatorOrder } from '../../src/policies/numerics.js';
import { createRng } from '../../src/core/rng.js';

const fr = Math.fround;

/** Scalar reference: round operands with the scalar `round`, then accumulate in the given order. */
function referenceGemm(
  a: Float32Array,
  b: Float32Array,
  m: number,
  n: number,
  k: number,
  fmt: 'bf16' | 'fp16' | 'tf32',
  order: AccumulatorOrder,
  chunk: number,
  out?: 'bf16' | 'fp16',
): Float32Array {
  const ra = a.map((x) => round(fmt, x, { profile: 'ieee' }));
  const rb = b.map((x) => round(fmt, x, { profile: 'ieee' }));
  const res = new Float32Array(m * n);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      const prods = Array.from({ length: k }, (_, p) => fr(ra[i * k + p]! * rb[j * k + p]!));
      let acc = 0;
      if (order === 'fp32') for (const x of prods) acc = fr(acc + x);
      else if (order === 'pairwise') {
        const tree = (xs: number[]): number =>
          xs.length === 0
            ? 0
            : xs.length === 1
              ? xs[0]!
              : fr(tree(xs.slice(0, Math.ceil(xs.length / 2))) + tree(xs.slice(Math.ceil(xs.length / 2))));
        acc = tree(prods);
      } else {
        for (let p0 = 0; p0 < k; p0 += chunk) {
          let part = 0;
          for (const x of prods.slice(p0, p0 + chunk)) part = fr(part + x);
          acc = fr(acc + part);
        }
      }
      res[i * n + j] = out ? round(out, acc, { profile: 'ieee' }) : acc;
    }
  }
  return res;
}

const gemmArb = fc.record({
  m: fc.integer({ min: 1, max: 5 }),
  n: fc.integer({ min: 1, max: 5 }),
  k: fc.integer({ min: 1, max: 40 }),
  fmt: fc.constantFrom('bf16' as const, 'fp16' as const, 'tf32' as const),
  order: fc.constantFrom('fp32' as const, 'pairwise' as const, 'split-k' as const),
  chunk: fc.integer({ min: 1, max: 12 }),
  out: fc.constantFrom(undefined, 'bf16' as const, 'fp16' as const),
  seed: fc.integer({ min: 0, max: 1 << 30 }),
});

describe('roundingNumerics', () => {
  test.prop([gemmArb])(
    'every GEMM site equals the scalar reference (operand rounding, accumulation order, output rounding)',
    (c) => {
      const rng = createRng(c.seed);
      const a = Float32Array.from({ length: c.m * c.k }, () => rng.normal() * 3);
      const b = Float32Array.from({ length: c.n * c.k }, () => rng.normal() * 3);
      const numerics = roundingNumerics({
        operands: c.fmt,
        accumulator: c.order,
        splitK: c.chunk,
        ...(c.out ? { out: c.out } : {}),
      });
      const expected = referenceGemm(a, b, c.m, c.n, c.k, c.fmt, c.order, c.chunk, c.out);
      const block = numerics.block(0);
      for (const gemm of [
        block.q.forward,
        block.mlp.down.dgrad,
        block.attention.qk,
        block.attention.dKey,
        numerics.lmHead().wgrad,
      ]) {
        const out = new Float32Array(c.m * c.n);
        gemm(out, a, b, c.m, c.n, c.k);
        expect(Array.from(out).every((x, i) => Object.is(x, expected[i]))).toBe(true);
      }
      expect(numerics.kvHook(0)).toBeNull();
    },
  );

  it('caches the rounded weight by identity: a numerics object is a snapshot of one weight sync', () => {
    const numerics = roundingNumerics({ operands: 'bf16' });
    const x = Float32Array.from([1, 1]);
    const w = Float32Array.from([1.0001, 2]);
    const out = new Float32Array(1);
    numerics.block(0).q.forward(out, x, w, 1, 1, 2);
    expect(out[0]).toBe(3);
    w[0] = 5; // weights changed after the sync: this object still uses the synced copy
    numerics.block(0).q.forward(out, x, w, 1, 1, 2);
    expect(out[0]).toBe(3);
    roundingNumerics({ operands: 'bf16' }).block(0).q.forward(out, x, w, 1, 1, 2);
    expect(out[0]).toBe(7);
  });

  it('split-K and pairwise orders really differ from sequential on some inputs', () => {
    const rng = createRng(5);
    let diff = 0;
    for (let t = 0; t < 50; t++) {
      const a = Float32Array.from({ length: 64 }, () => rng.normal());
      const b = Float32Array.from({ length: 64 }, () => rng.normal());
      const s = new Float32Array(1),
        p = new Float32Array(1);
      roundingNumerics({ operands: 'tf32' }).block(0).attention.qk(s, a, b, 1, 1, 64);
      roundingNumerics({ operands: 'tf32', accumulator: 'split-k', splitK: 16 })
        .block(0)
        .attention.qk(p, a, b, 1, 1, 64);
      if (s[0] !== p[0]) diff++;
    }
    expect(diff).toBeGreaterThan(5);
  });

  it('pairwiseSum splits ⌈n/2⌉ | ⌊n/2⌋', () => {
    // (1 + 1) + 2^24 is exact; 1 + (1 + 2^24) loses both ones to ties-to-even.
    expect(pairwiseSum(Float32Array.from([1, 1, 2 ** 24]), 0, 3)).toBe(2 ** 24 + 2);
    // Sequential 2^24 + 1 + 1 + 1 stays at 2^24; the tree keeps (1 + 1).
    const x = Float32Array.from([2 ** 24, 1, 1, 1]);
    expect(pairwiseSum(x, 0, 4)).toBe(2 ** 24 + 2);
    expect(pairwiseSum(x, 0, 0)).toBe(0);
  });

  it('fp32Numerics is the sequential GEMM everywhere', () => {
    const n = fp32Numerics();
    expect(n.block(1).mlp.gate.wgrad).toBe(gemmSequential);
    expect(n.lmHead().forward).toBe(gemmSequential);
    const a = Float32Array.from([1, 2, 3]),
      b = Float32Array.from([4, 5, 6]);
    const o1 = new Float32Array(1),
      o2 = new Float32Array(1);
    n.block(0).attention.pv(o1, a, b, 1, 1, 3);
    gemmReference(o2, a, b, 1, 1, 3);
    expect(o1[0]).toBe(o2[0]);
  });

  it('rejects bad options naming the field', () => {
    expect(() => roundingNumerics({ operands: 'e4m3fn' as never })).toThrow(/operands/);
    expect(() => roundingNumerics({ operands: 'bf16', splitK: 0 })).toThrow(/splitK/);
    expect(() => roundingNumerics({ operands: 'bf16', accumulator: 'kahan' as never })).toThrow(/accumulator/);
  });
});

describe('precision plans', () => {
  it('is a frozen table of the presets; unknown names list the known ones', () => {
    expect(Object.keys(precisionPlans)).toEqual([
      'fp32',
      'bf16',
      'bf16-splitk',
      'fp16',
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
    expect(Object.isFrozen(precisionPlans)).toBe(true);
    expect(Object.isFrozen(precisionPlans.bf16.rollout.gemm)).toBe(true);
    for (const [name, plan] of Object.entries(precisionPlans)) {
      expect(plan.name).toBe(name);
      expect(precisionPlan(name)).toBe(plan);
    }
    expect(() => precisionPlan('fp8-rolout')).toThrow(/fp32, bf16, bf16-splitk, fp16, fp8-rollout.*"fp8-rolout"/);
    expect(() => precisionPlan('toString')).toThrow(/name must be one of/);
  });

  it('numericsFor builds the side described by the data', () => {
    expect(numericsFor(precisionPlans.fp32.trainer)).toBe(fp32Numerics());
    expect(numericsFor(precisionPlans.bf16.rollout).label).toBe('bf16 operands, fp32 accumulate');
    expect(numericsFor(precisionPlans['bf16-splitk'].rollout).label).toMatch(/split-K/);
    expect(numericsFor(precisionPlans.fp16.trainer).label).toMatch(/^fp16 operands/);
    expect(() => numericsFor({ gemm: { kind: 'fp8' } as never })).toThrow(
      /gemm\.kind must be one of fp32, rounding, quantized, got "fp8"/,
    );
  });
});

describe('decode over a K/V cache with rounded operands', () => {
  const B = 2,
    tCap = 6,
    C = 8,
    H = 2;
  const rng = createRng('decode-rounding');
  const randn = (n: number): Float32Array => Float32Array.from({ length: n }, () => fr(rng.normal() * 3));
  /** Decodes steps 1 … tCap over the caches: appends row t−1 from `kRows`/`vRows`, then `edit` (a KV hook), then the forward. */
  function decode(
    gemms: AttentionGemms,
    kCache: Float32Array,
    vCache: Float32Array,
    kRows: Float32Array,
    vRows: Float32Array,
    q: Float32Array,
    edit: (t: number) => void,
  ): Float32Array[] {
    const outs: Float32Array[] = [];
    for (let t = 1; t <= tCap; t++) {
      attentionDecodeAppend(
        kCache,
        vCache,
        kRows.subarray((t - 1) * B * C, t * B * C),
        vRows.subarray((t - 1) * B * C, t * B * C),
        t - 1,
        B,
        tCap,
        C,
        H,
      );
      edit(t);
      const out = new Float32Array(B * C);
      attentionDecodeForward(out, null, q.subarray((t - 1) * B * C, t * B * C), kCache, vCache, t, B, tCap, C, H, {
        gemms,
      });
      outs.push(out);
    }
    return outs;
  }

  it('rounds each cached row once and equals rounding K and V at every step, bit for bit (rewritten rows, reused caches, another format)', () => {
    const kRows = randn(tCap * B * C),
      vRows = randn(tCap * B * C),
      q = randn(tCap * B * C);
    kRows[3] = NaN;
    vRows[5] = -0;
    kRows[20] = 1e-40; // subnormal
    const kCache = new Float32Array(B * tCap * C),
      vCache = new Float32Array(B * tCap * C);
    const kRef = new Float32Array(B * tCap * C),
      vRef = new Float32Array(B * tCap * C);
    // A KV hook that rewrites an earlier row at step 4: the rounded copy must follow it.
    const edit =
      (k: Float32Array) =>
      (t: number): void => {
        if (t === 4) k[(1 * tCap + 1) * C + 2] = fr(k[(1 * tCap + 1) * C + 2]! * 1.5 + 0.25);
      };
    const bf16 = roundingNumerics({ operands: 'bf16' });
    for (const numerics of [bf16, bf16, roundingNumerics({ operands: 'fp16' })]) {
      const fast = numerics.block(0).attention;
      expect(fast.decodeRounding).toBeDefined();
      const slow: AttentionGemms = { ...fast, decodeRounding: undefined };
      // The same cache arrays each round (reused as a later rollout would), the reference on its own pair.
      const got = decode(fast, kCache, vCache, kRows, vRows, q, edit(kCache));
      const want = decode(slow, kRef, vRef, kRows, vRows, q, edit(kRef));
      for (let t = 0; t < tCap; t++)
        for (let i = 0; i < B * C; i++) expect(Object.is(got[t]![i], want[t]![i])).toBe(true);
      kRows.reverse(); // the next round writes other values into the same rows
    }
  });

  it('a copy of the GEMMs that replaces qk or pv does not use the rounded cache', () => {
    const kRows = randn(tCap * B * C),
      vRows = randn(tCap * B * C),
      q = randn(tCap * B * C);
    const base = roundingNumerics({ operands: 'bf16' }).block(0).attention;
    const replaced: AttentionGemms = { ...base, qk: gemmSequential };
    const plain: AttentionGemms = { ...replaced, decodeRounding: undefined };
    const mk = (): Float32Array => new Float32Array(B * tCap * C);
    const [k1, v1, k2, v2] = [mk(), mk(), mk(), mk()];
    const got = decode(replaced, k1, v1, kRows, vRows, q, () => {});
    const want = decode(plain, k2, v2, kRows, vRows, q, () => {});
    for (let t = 0; t < tCap; t++)
      for (let i = 0; i < B * C; i++) expect(Object.is(got[t]![i], want[t]![i])).toBe(true);
  });
});
