// The one-call WebAssembly hopper-fp8 GEMM (src/numerics/kernels/hopper-gemm-kernel.ts) against its scalar reference, built
// here from the exported scalar pieces: per segment hopperFusedDotAdd from zero, then fma32(fl(sa·sb), c, acc) or
// fl(acc + c). Object.is on edge data: an fma32 tie that a double rounding would break, ±0, subnormal scales,
// cancellation, overflow to ±Inf, and the flagged sums that must fall back.

import { describe, expect, it } from 'vitest';
import { hopperFusedDotAdd, gemm, quantPreset, quantize } from '../../src/numerics/index.js';
import { exponentOf, floatFormats } from '../../src/numerics/formats.js';
import { decodeTable } from '../../src/numerics/vector.js';
import { fma32 } from '../../src/numerics/scales.js';
import {
  type HopperOperand,
  hopperGemm,
  hopperGemmKernelIsSimd,
} from '../../src/numerics/kernels/hopper-gemm-kernel.js';
import { createRng } from '../../src/core/rng.js';

const fr = Math.fround;
const EMIN = -6; // e4m3's; the kernel takes any exponent tables

function exps(v: Float32Array, emin = EMIN): Int16Array {
  return Int16Array.from(v, (x) => (x === 0 ? emin : Math.max(exponentOf(x), emin)));
}

function reference(
  A: Float32Array,
  B: Float32Array,
  m: number,
  n: number,
  K: number,
  seg: number,
  fine: boolean,
  sa: Float64Array,
  sb: Float64Array,
  fb = 13,
  emin = EMIN,
): Float32Array {
  const out = new Float32Array(m * n);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let acc = 0;
      for (let s = 0; s < Math.ceil(K / seg); s++) {
        const c = fr(hopperFusedDotAdd(0, A, B, i * K, j * K, s * seg, Math.min((s + 1) * seg, K), emin, emin, fb));
        acc = fine ? fma32(fr((sa[s * m + i] as number) * (sb[s * n + j] as number)), c, acc) : fr(acc + c);
      }
      out[i * n + j] = acc;
    }
  }
  return out;
}

function expectSame(got: Float32Array, want: Float32Array, label: string): void {
  for (let i = 0; i < want.length; i++)
    if (!Object.is(got[i], want[i])) expect(got[i], `${label} at ${i}`).toBe(want[i]);
}

describe.runIf(hopperGemmKernelIsSimd())('one-call WebAssembly hopper-fp8 GEMM', () => {
  it('equals the scalar reference, Object.is, on edge data (fma32 ties, ±0, subnormal scales, cancellation, Inf)', () => {
    const [m, n, K, seg] = [6, 11, 64, 16];
    const rng = createRng('hopper-gemm').fork('edge');
    const e4m3 = [0, -0, 448, -448, 2 ** -9, -(2 ** -9), 1, -1, 0.875, 240, 2 ** -6];
    const A = Float32Array.from({ length: m * K }, (_, x) => (x % 3 === 0 ? e4m3[x % e4m3.length]! : fr(rng.normal())));
    const B = Float32Array.from({ length: n * K }, (_, x) =>
      x % 4 === 0 ? e4m3[(x >> 2) % e4m3.length]! : fr(rng.normal()),
    );
    const sa = Float64Array.from({ length: (K / seg) * m }, () => fr(2 ** (rng.int(40) - 20) * (1 + rng.uniform())));
    const sb = Float64Array.from({ length: (K / seg) * n }, () => fr(2 ** (rng.int(40) - 20) * (1 + rng.uniform())));
    // Row 0 / column 0: acc = 2^24 after segment 0, then p = fl(sa·sb)·c = 1 + 2^-33, so t = 2^24 + 1 + 2^-33 rounds in
    // double to the float32 midpoint 2^24 + 1; fma32 gives 2^24 + 2 where fround(t) would give 2^24. Row 1: the negation.
    for (const [row, sign] of [
      [0, 1],
      [1, -1],
    ] as const) {
      for (let kk = 0; kk < K; kk++) A[row * K + kk] = 0;
      for (let kk = 0; kk < K; kk++) B[kk] = 0;
      A[row * K] = sign;
      B[0] = 1;
      A[row * K + seg] = sign * (1 + 2 ** -11);
      B[seg] = 1;
      sa[row] = 2 ** 24;
      sb[0] = 1;
      sa[m + row] = fr(1 - 2 ** -11 + 2 ** -22);
      sb[n] = 1;
    }
    // Row 2: a subnormal float32 scale product; row 3: scales large enough for the accumulator to overflow to Inf.
    sa[2] = 2 ** -140;
    for (let s = 0; s < K / seg; s++) sa[s * m + 3] = 2 ** 120;
    for (let j = 0; j < n; j++)
      for (let s = 0; s < K / seg; s++) sb[s * n + j] = j % 2 === 0 && j >= 2 ? 2 ** 100 : sb[s * n + j]!;
    const want = reference(A, B, m, n, K, seg, true, sa, sb);
    expect(want[0]).toBe(2 ** 24 + 2);
    expect(want[n]).toBe(-(2 ** 24 + 2));
    expect(want.some((v) => v === Infinity || v === -Infinity)).toBe(true);
    const got = new Float32Array(m * n);
    expect(
      hopperGemm(
        got,
        { values: A, exps: exps(A) },
        { values: B, exps: exps(B) },
        { m, n, K, segLen: seg, fractionBits: 13, segmentScales: { a: sa, b: sb } },
      ),
    ).toBe(true);
    expectSame(got, want, 'fine');
    const plain = new Float32Array(m * n);
    expect(
      hopperGemm(
        plain,
        { values: A, exps: exps(A) },
        { values: B, exps: exps(B) },
        { m, n, K, segLen: seg, fractionBits: 13, segmentScales: null, cacheB: true },
      ),
    ).toBe(true);
    expectSame(plain, reference(A, B, m, n, K, seg, false, sa, sb), 'per-row (fl(acc + c))');
    // Cached panels of B give the same result on a second call.
    const again = new Float32Array(m * n);
    hopperGemm(
      again,
      { values: A, exps: exps(A) },
      { values: B, exps: exps(B) },
      { m, n, K, segLen: seg, fractionBits: 13, segmentScales: null, cacheB: true },
    );
    expectSame(again, plain, 'cached B');
  });

  it('random e4m3 data at several shapes and fraction bits', () => {
    const rng = createRng('hopper-gemm').fork('random');
    // K not a multiple of the chunk (a shorter last segment) and m or n = 1 included; fb = 23 is too wide for float32 lanes.
    const shapes = [
      [1, 4, 32, 16, 13],
      [16, 32, 32, 16, 13],
      [9, 7, 96, 32, 10],
      [5, 13, 48, 16, 23],
      [6, 5, 57, 16, 13],
      [1, 9, 41, 16, 13],
      [7, 1, 70, 32, 13],
    ] as const;
    for (const [m, n, K, seg, fb] of shapes) {
      const q = quantPreset('vllm-fp8-group', { block: seg });
      const qa = quantize(
        q,
        Float32Array.from({ length: m * K }, () => rng.normal() * 3),
        [m, K],
      );
      const qb = quantize(
        q,
        Float32Array.from({ length: n * K }, () => rng.normal()),
        [n, K],
      );
      const decode = (x: typeof qa): Float32Array => Float32Array.from(x.codes, (c) => gemmDecode(c));
      const A = decode(qa);
      const B = decode(qb);
      const groups = Math.ceil(K / seg);
      const sa = Float64Array.from({ length: groups * m }, (_, x) => qa.scales[(x % m) * groups + Math.floor(x / m)]!);
      const sb = Float64Array.from({ length: groups * n }, (_, x) => qb.scales[(x % n) * groups + Math.floor(x / n)]!);
      const want = reference(A, B, m, n, K, seg, true, sa, sb, fb);
      for (const allowNarrow of [true, false]) {
        const got = new Float32Array(m * n);
        expect(
          hopperGemm(
            got,
            { values: A, exps: exps(A) },
            { values: B, exps: exps(B) },
            { m, n, K, segLen: seg, fractionBits: fb, segmentScales: { a: sa, b: sb }, allowNarrow },
          ),
        ).toBe(true);
        expectSame(got, want, `m=${m} n=${n} K=${K} fb=${fb} narrow allowed ${allowNarrow}`);
      }
    }
  });

  it('float32 operands: subnormal chunk sums, truncation of either sign, fraction bits 0 to 52, Object.is', () => {
    const rng = createRng('hopper-gemm').fork('float32');
    const [m, n, K, seg] = [5, 9, 48, 16];
    const emin = -126; // float32 operands: exponents floored at float32's emin
    // Row 0 of A and column 0 of B tiny (products ≈ 2^-140: chunk sums below float32's normal range), the rest
    // 24-bit values of mixed sign and magnitude (sums that truncation shortens, cancellation to ±0).
    const A = Float32Array.from({ length: m * K }, (_, x) =>
      x < K ? fr(2 ** -70 * (1 + rng.uniform())) : fr(rng.normal() * 2 ** (rng.int(12) - 6)),
    );
    const B = Float32Array.from({ length: n * K }, (_, x) =>
      x < K ? fr(-(2 ** -70) * (1 + rng.uniform())) : x % 7 === 0 ? 0 : fr(rng.normal()),
    );
    const sa = Float64Array.from({ length: (K / seg) * m }, () => fr(1 + rng.uniform()));
    const sb = Float64Array.from({ length: (K / seg) * n }, () => fr(1 + rng.uniform()));
    for (const fb of [0, 1, 13, 23, 52]) {
      for (const fine of [true, false]) {
        const want = reference(A, B, m, n, K, seg, fine, sa, sb, fb, emin);
        const got = new Float32Array(m * n);
        const ran = hopperGemm(
          got,
          { values: A, exps: exps(A, emin) },
          { values: B, exps: exps(B, emin) },
          { m, n, K, segLen: seg, fractionBits: fb, segmentScales: fine ? { a: sa, b: sb } : null },
        );
        // fb ≥ 18 makes these 24-bit products' chunk sums reach 2^31 units: handed back, never wrong
        if (ran) expectSame(got, want, `fb=${fb} fine=${fine}`);
        else expect(fb).toBeGreaterThanOrEqual(18);
        if (fb <= 13) expect(ran).toBe(true);
      }
    }
    expect(
      hopperGemm(
        new Float32Array(m * n),
        { values: A, exps: exps(A, emin) },
        { values: B, exps: exps(B, emin) },
        { m, n, K, segLen: seg, fractionBits: 53, segmentScales: { a: sa, b: sb } },
      ),
    ).toBe(false);
  });

  it('FP8 codes in float32 lanes: every e4m3 value (±448, subnormals, ±0) against every other, all-zero rows, widest exponent spread', () => {
    // A row i·K + kk pairs e4m3 code (i·K + kk) mod 256 with B codes in another order: every pair of magnitudes meets.
    const codes = Array.from({ length: 256 }, (_, c) => c).filter((c) => Number.isFinite(gemmDecode(c)));
    const [m, n, K, seg] = [8, 6, 64, 16];
    const A = Float32Array.from({ length: m * K }, (_, x) => (x < K ? 0 : gemmDecode(codes[x % codes.length]!)));
    const B = Float32Array.from({ length: n * K }, (_, x) => gemmDecode(codes[(x * 37 + 11) % codes.length]!));
    for (let kk = 0; kk < K; kk++) A[K + kk] = kk % 2 === 0 ? 448 : -(2 ** -9); // 2^8.8 against 2^-9 within a chunk
    const sa = Float64Array.from({ length: (K / seg) * m }, (_, x) => fr(2 ** ((x % 7) - 3) * 1.375));
    const sb = Float64Array.from({ length: (K / seg) * n }, (_, x) => fr(2 ** ((x % 5) - 2) * 1.625));
    for (const fine of [true, false]) {
      const want = reference(A, B, m, n, K, seg, fine, sa, sb);
      for (const allowNarrow of [true, false]) {
        const got = new Float32Array(m * n);
        expect(
          hopperGemm(
            got,
            { values: A, exps: exps(A) },
            { values: B, exps: exps(B) },
            { m, n, K, segLen: seg, fractionBits: 13, segmentScales: fine ? { a: sa, b: sb } : null, allowNarrow },
          ),
        ).toBe(true);
        expectSame(got, want, `fine=${fine} narrow allowed ${allowNarrow}`);
      }
    }
  });

  it('a chunk sum at or above 2^31 units, or one that saturates, is handed back (false) and gemm still equals its reference', () => {
    const [m, n, K] = [4, 8, 64];
    const A = new Float32Array(m * K).fill(448);
    const B = new Float32Array(n * K).fill(448);
    // 16 addends of ≈ 2^29.6 units each at fractionBits 28: chunk sums ≥ 2^31 units
    const got = new Float32Array(m * n);
    const ones = new Float64Array(64).fill(1);
    expect(
      hopperGemm(
        got,
        { values: A, exps: exps(A) },
        { values: B, exps: exps(B) },
        { m, n, K, segLen: 16, fractionBits: 28, segmentScales: { a: ones, b: ones } },
      ),
    ).toBe(false);
    const out = gemm(new Float32Array(m * n), A, B, m, n, K, {
      accumulator: 'hopper-fp8',
      chunk: 16,
      promoteEvery: 1,
      fractionBits: 28,
    });
    const ref = gemm(new Float32Array(m * n), A, B, m, n, K, {
      accumulator: 'hopper-fp8',
      chunk: 16,
      promoteEvery: 1,
      fractionBits: 28,
      reference: true,
    });
    expectSame(out, ref, 'fallback');
  });

  it('gemm with the FP8 presets (one call) equals gemm with reference: true', () => {
    const rng = createRng('hopper-gemm').fork('presets');
    // K = 57, 100, 40: not multiples of the chunk (a shorter last segment in the one call); m or n = 1.
    for (const [m, n, k] of [
      [24, 40, 64],
      [1, 40, 57],
      [24, 1, 100],
      [17, 9, 40],
    ] as const) {
      const x = Float32Array.from({ length: m * k }, (_, i) =>
        i % 17 === 0 ? 0 : rng.normal() * (i % 32 === 5 ? 20 : 1),
      );
      const w = Float32Array.from({ length: n * k }, () => rng.normal() * 0.1);
      const cases = [
        { a: quantPreset('vllm-fp8-group', { block: 16 }), b: quantPreset('deepseek-fp8-block', { block: 16 }) },
        { a: quantPreset('te-current'), b: quantPreset('te-current') },
      ];
      for (const { a, b } of cases) {
        const wq = quantize(b, w, [n, k]);
        const opts = { aQuant: a, accumulator: 'hopper-fp8', chunk: 16, promoteEvery: 1 } as const;
        const ref = gemm(new Float32Array(m * n), x, wq, m, n, k, { ...opts, reference: true });
        // The weight decoded in the kernel from its codes (first call), then from its cached decoding and panels.
        for (const call of [1, 2, 3])
          expectSame(gemm(new Float32Array(m * n), x, wq, m, n, k, opts), ref, `${a.name} ${m}×${n}×${k} call ${call}`);
      }
    }
  });
});

describe.runIf(hopperGemmKernelIsSimd())('one-call hopper-fp8 GEMM on codes decoded in the kernel', () => {
  // Codes of every format: all finite codes (±0, subnormals, ± the format's max) in a scrambled order per operand.
  const finiteCodes = (name: 'e4m3fn' | 'e5m2' | 'e2m1' | 'e3m2'): number[] => {
    const t = decodeTable(floatFormats[name]);
    return Array.from(t, (_, c) => c).filter((c) => Number.isFinite(t[c]));
  };
  const codesFor = (codes: number[], len: number, mul: number, add: number): Uint8Array =>
    Uint8Array.from({ length: len }, (_, x) => codes[(x * mul + add) % codes.length]!);

  it('equals the decoded operands and the scalar reference, Object.is: every code, ragged K, m or n = 1, zero sizes, both lane widths', () => {
    const rng = createRng('hopper-gemm').fork('codes');
    // K not a multiple of the chunk, n not a multiple of 4 or 8, m = 1 decode rows, zero-size m and n.
    const shapes = [
      [4, 9, 64, 16],
      [1, 13, 41, 16],
      [7, 1, 70, 32],
      [3, 8, 16, 16],
      [1, 1, 5, 16],
      [0, 5, 32, 16],
      [5, 0, 32, 16],
    ] as const;
    for (const [fa, fb] of [
      ['e4m3fn', 'e4m3fn'],
      ['e4m3fn', 'e5m2'],
      ['e5m2', 'e5m2'],
      ['e2m1', 'e2m1'],
      ['e3m2', 'e4m3fn'],
    ] as const) {
      const ta = decodeTable(floatFormats[fa]);
      const tb = decodeTable(floatFormats[fb]);
      const emA = floatFormats[fa].emin;
      const emB = floatFormats[fb].emin;
      for (const [m, n, K, seg] of shapes) {
        const ca = codesFor(finiteCodes(fa), m * K, 7, rng.int(50));
        const cb = codesFor(finiteCodes(fb), n * K, 13, rng.int(50));
        // an all-zero row of A (its chunk maxima stay at the floor)
        if (m > 1) ca.fill(0, K, 2 * K);
        const A = Float32Array.from(ca, (c) => ta[c]!);
        const B = Float32Array.from(cb, (c) => tb[c]!);
        const eA = Int16Array.from(A, (x) => (x === 0 ? emA : Math.max(exponentOf(x), emA)));
        const eB = Int16Array.from(B, (x) => (x === 0 ? emB : Math.max(exponentOf(x), emB)));
        const nseg = Math.ceil(K / seg);
        const sa = Float64Array.from({ length: nseg * m }, () => fr(2 ** (rng.int(20) - 10) * (1 + rng.uniform())));
        const sb = Float64Array.from({ length: nseg * n }, () => fr(2 ** (rng.int(20) - 10) * (1 + rng.uniform())));
        for (const fine of [true, false]) {
          const want = new Float32Array(m * n);
          for (let i = 0; i < m; i++) {
            for (let j = 0; j < n; j++) {
              let acc = 0;
              for (let s = 0; s < nseg; s++) {
                const c = fr(
                  hopperFusedDotAdd(0, A, B, i * K, j * K, s * seg, Math.min((s + 1) * seg, K), emA, emB, 13),
                );
                acc = fine ? fma32(fr(sa[s * m + i]! * sb[s * n + j]!), c, acc) : fr(acc + c);
              }
              want[i * n + j] = acc;
            }
          }
          const codedA: HopperOperand = { codes: ca, format: floatFormats[fa] };
          const codedB: HopperOperand = { codes: cb, format: floatFormats[fb] };
          const sides: [HopperOperand, HopperOperand][] = [
            [codedA, codedB],
            [codedA, { values: B, exps: eB }],
            [{ values: A, exps: eA }, codedB],
          ];
          for (const [a, b] of sides) {
            for (const allowNarrow of [true, false]) {
              const got = new Float32Array(m * n).fill(Number.NaN);
              expect(
                hopperGemm(got, a, b, {
                  m,
                  n,
                  K,
                  segLen: seg,
                  fractionBits: 13,
                  segmentScales: fine ? { a: sa, b: sb } : null,
                  allowNarrow,
                }),
              ).toBe(true);
              expectSame(
                got,
                want,
                `${fa}×${fb} ${m}×${n}×${K} fine=${fine} A ${a.codes !== undefined ? 'codes' : 'values'} B ${b.codes !== undefined ? 'codes' : 'values'} narrow allowed ${allowNarrow}`,
              );
            }
          }
        }
      }
    }
  });

  it('a NaN or Inf code in either operand hands the call back (false), and gemm then equals its reference', () => {
    const [m, n, K] = [2, 5, 32];
    const ones = new Float64Array(64).fill(1);
    for (const [name, bad] of [
      ['e4m3fn', 0x7f],
      ['e4m3fn', 0xff],
      ['e5m2', 0x7c],
      ['e5m2', 0xfe],
    ] as const) {
      const format = floatFormats[name];
      for (const side of ['a', 'b'] as const) {
        const ca = new Uint8Array(m * K).fill(0x38);
        const cb = new Uint8Array(n * K).fill(0x38);
        (side === 'a' ? ca : cb)[K + 3] = bad;
        const got = new Float32Array(m * n);
        expect(
          hopperGemm(
            got,
            { codes: ca, format },
            { codes: cb, format },
            { m, n, K, segLen: 16, fractionBits: 13, segmentScales: { a: ones, b: ones } },
          ),
          `${name} ${bad} in ${side}`,
        ).toBe(false);
      }
    }
    // Through gemm: per-call FP8 operands (both coded) with a NaN and an Inf input, at a decode-row shape below the old size floor.
    for (const [m1, n1, k1] of [
      [1, 6, 8],
      [1, 8, 24],
      [3, 4, 16],
    ] as const) {
      const x = Float32Array.from({ length: m1 * k1 }, (_, i) => (i === 2 ? Number.NaN : (i % 5) - 2.5));
      const y = Float32Array.from({ length: n1 * k1 }, (_, i) => (i === 5 ? Infinity : ((i * 7) % 11) / 4 - 1));
      for (const [xx, yy] of [
        [x, y],
        [x.map((v) => (Number.isNaN(v) ? 1 : v)), y.map((v) => (v === Infinity ? -2 : v))],
      ] as const) {
        const opts = {
          aQuant: quantPreset('te-current'),
          bQuant: quantPreset('te-current'),
          accumulator: 'hopper-fp8',
          chunk: 16,
          promoteEvery: 1,
        } as const;
        const fast = gemm(new Float32Array(m1 * n1), xx, yy, m1, n1, k1, opts);
        const ref = gemm(new Float32Array(m1 * n1), xx, yy, m1, n1, k1, { ...opts, reference: true });
        expectSame(fast, ref, `${m1}×${n1}×${k1}`);
      }
    }
  });

  it('gemm with per-call FP8 operands (both coded), attention decode shapes, equals gemm with reference: true', () => {
    const rng = createRng('hopper-gemm').fork('attention');
    for (const [m, n, k] of [
      [1, 1, 8],
      [1, 9, 8],
      [1, 8, 9],
      [1, 8, 33],
      [8, 8, 8],
      [2, 17, 48],
      [0, 4, 16],
      [3, 0, 16],
    ] as const) {
      const x = Float32Array.from({ length: m * k }, (_, i) =>
        i % 7 === 0 ? 0 : i % 11 === 0 ? -0 : rng.normal() * (i % 13 === 1 ? 1e4 : 1),
      );
      const y = Float32Array.from({ length: n * k }, (_, i) => (i % 9 === 0 ? 2 ** -12 : rng.normal()));
      for (const q of [quantPreset('te-current'), quantPreset('vllm-fp8-group', { block: 8 })]) {
        const chunk = q.name === 'te-current' ? 16 : 8;
        const opts = { aQuant: q, bQuant: q, accumulator: 'hopper-fp8', chunk, promoteEvery: 1 } as const;
        const fast = gemm(new Float32Array(m * n), x, y, m, n, k, opts);
        const ref = gemm(new Float32Array(m * n), x, y, m, n, k, { ...opts, reference: true });
        expectSame(fast, ref, `${q.name} ${m}×${n}×${k}`);
        // Given QuantizedTensors (A coded, B coded then cached; below the size floor the JS path decodes them), twice.
        const [qx, qy] = [quantize(q, x, [m, k]), quantize(q, y, [n, k])];
        const given = { accumulator: 'hopper-fp8', chunk, promoteEvery: 1 } as const;
        const refGiven = gemm(new Float32Array(m * n), qx, qy, m, n, k, { ...given, reference: true });
        for (const call of [1, 2, 3])
          expectSame(
            gemm(new Float32Array(m * n), qx, qy, m, n, k, given),
            refGiven,
            `${q.name} ${m}×${n}×${k} given, call ${call}`,
          );
      }
    }
  });
});

const e4m3Table = (() => {
  const t = new Float32Array(256);
  for (let c = 0; c < 256; c++) {
    const s = c & 0x80 ? -1 : 1;
    const e = (c >> 3) & 0xf;
    const mm = c & 7;
    t[c] = e === 15 && mm === 7 ? Number.NaN : e === 0 ? s * 2 ** -6 * (mm / 8) : s * 2 ** (e - 7) * (1 + mm / 8);
  }
  return t;
})();

function gemmDecode(code: number): number {
  return e4m3Table[code] as number;
}
