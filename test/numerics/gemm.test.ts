// GEMM accumulator models against independent references: a scalar Math.fround triple loop (fp32), BigInt (int32),
// exact rational sums (fp64), hand-computed MMA-Sim cases and an error-bound property (hopper-fp8), scale placement.
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import {
  type QuantSpec,
  dequantize,
  fakeQuant,
  gemm,
  quantPreset,
  quantize,
  truncateToE8M,
} from '../../src/numerics/index.js';
import { decodeTable } from '../../src/numerics/vector.js';
import { exponentOf } from '../../src/numerics/formats.js';
import { fma32 } from '../../src/numerics/scales.js';
import { fp32KernelIsSimd } from '../../src/numerics/kernels/fp32-kernel.js';
import { hopperKernelIsSimd } from '../../src/numerics/kernels/hopper-kernel.js';

const fr = Math.fround;

function randomMatrix(rows: number, cols: number, seed: string, scale = 1): Float32Array {
  const rng = createRng(seed).fork('m');
  return Float32Array.from({ length: rows * cols }, () => fr(rng.normal() * scale));
}

/** The plain definition: out[i][j] = Σ_k fl(a·b) summed left to right in float32. */
function scalarFp32(a: Float32Array, b: Float32Array, m: number, n: number, k: number): Float32Array {
  const out = new Float32Array(m * n);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let kk = 0; kk < k; kk++) s = fr(s + fr(a[i * k + kk]! * b[j * k + kk]!));
      out[i * n + j] = s;
    }
  }
  return out;
}

const same = (x: Float32Array, y: Float32Array): boolean =>
  x.length === y.length && x.every((v, i) => Object.is(v, y[i]));

describe('fp32 accumulator', () => {
  it.each([
    [1, 1, 1],
    [4, 4, 4],
    [5, 7, 3],
    [13, 9, 33],
    [16, 20, 64],
    [3, 17, 100],
  ])('equals the scalar Math.fround triple loop bit for bit (m=%i n=%i k=%i)', (m, n, k) => {
    const a = randomMatrix(m, k, `a${m}${n}${k}`);
    const b = randomMatrix(n, k, `b${m}${n}${k}`, 1000);
    const out = gemm(new Float32Array(m * n), a, b, m, n, k);
    expect(same(out, scalarFp32(a, b, m, n, k))).toBe(true);
  });

  test.prop([
    fc.integer({ min: 1, max: 9 }),
    fc.integer({ min: 1, max: 9 }),
    fc.integer({ min: 0, max: 40 }),
    fc.integer(),
  ])('property: any small shape equals the scalar loop', (m, n, k, seed) => {
    const a = randomMatrix(m, k, `pa${seed}`);
    const b = randomMatrix(n, k, `pb${seed}`);
    expect(same(gemm(new Float32Array(m * n), a, b, m, n, k), scalarFp32(a, b, m, n, k))).toBe(true);
  });

  it('the WebAssembly SIMD path (4×8 tiles) equals the scalar loop with subnormals, ±0, ±Inf and NaN', () => {
    expect(fp32KernelIsSimd()).toBe(true);
    const [m, n, k] = [37, 45, 70];
    const a = randomMatrix(m, k, 'wa');
    const b = randomMatrix(n, k, 'wb');
    a[5] = 2 ** -70;
    b[5] = 2 ** -70; // a product 2^-140: float32 subnormal, must not flush to zero
    a[k + 3] = -0;
    b[k + 4] = Infinity;
    a[2 * k + 9] = Number.NaN;
    b[7 * k] = -(2 ** -130);
    for (let i = 0; i < k; i++) {
      a[3 * k + i] = 2 ** -75;
      b[2 * k + i] = 2 ** -74;
    } // a whole row of subnormal products
    const out = gemm(new Float32Array(m * n), a, b, m, n, k);
    const ref = scalarFp32(a, b, m, n, k);
    expect(out.every((v, i) => Object.is(v, ref[i]) || (Number.isNaN(v) && Number.isNaN(ref[i]!)))).toBe(true);
    expect(out[3 * n + 2]).toBe(ref[3 * n + 2]);
    expect(out[3 * n + 2]).toBeGreaterThan(0);
    // segments starting at k0 > 0 (split K) go through the same kernel
    const split = gemm(
      new Float32Array(m * n),
      a.map((v) => (Number.isFinite(v) ? v : 1)),
      b.map((v) => (Number.isFinite(v) ? v : 1)),
      m,
      n,
      k,
      { splitK: 3 },
    );
    const a2 = a.map((v) => (Number.isFinite(v) ? v : 1));
    const b2 = b.map((v) => (Number.isFinite(v) ? v : 1));
    const part = (lo: number, hi: number): Float32Array => {
      const sub = (x: Float32Array, rows: number): Float32Array =>
        Float32Array.from(
          { length: rows * (hi - lo) },
          (_, i) => x[Math.floor(i / (hi - lo)) * k + lo + (i % (hi - lo))]!,
        );
      return scalarFp32(sub(a2, m), sub(b2, n), m, n, hi - lo);
    };
    const [p0, p1, p2] = [part(0, 24), part(24, 48), part(48, 70)];
    expect(
      same(
        split,
        p0.map((v, i) => fr(fr(v + p1[i]!) + p2[i]!)),
      ),
    ).toBe(true);
  });

  it('bf16 operand rounding then fp32 sums; outFormat rounds the result', () => {
    const [m, n, k] = [6, 5, 19];
    const a = randomMatrix(m, k, 'ra');
    const b = randomMatrix(n, k, 'rb');
    const ab = fakeQuant('bf16', a, { profile: 'ieee' });
    const bb = fakeQuant('bf16', b, { profile: 'ieee' });
    const out = gemm(new Float32Array(m * n), a, b, m, n, k, { aQuant: 'bf16', bQuant: 'bf16', outFormat: 'bf16' });
    expect(same(out, fakeQuant('bf16', scalarFp32(ab, bb, m, n, k), { profile: 'ieee' }))).toBe(true);
  });

  it('splitK: the parts are summed from zero and then added in order', () => {
    const [m, n, k] = [3, 4, 10];
    const a = randomMatrix(m, k, 'sa');
    const b = randomMatrix(n, k, 'sb', 100);
    const out = gemm(new Float32Array(m * n), a, b, m, n, k, { splitK: 2 });
    const part = (lo: number, hi: number): Float32Array => {
      const sub = (x: Float32Array, rows: number): Float32Array =>
        Float32Array.from(
          { length: rows * (hi - lo) },
          (_, i) => x[Math.floor(i / (hi - lo)) * k + lo + (i % (hi - lo))]!,
        );
      return scalarFp32(sub(a, m), sub(b, n), m, n, hi - lo);
    };
    const p0 = part(0, 5);
    const p1 = part(5, 10);
    expect(
      same(
        out,
        p0.map((v, i) => fr(v + p1[i]!)),
      ),
    ).toBe(true);
  });

  it('pairwise: (p0 + p1) + (p2 + p3) for k = 4, which differs from the sequential order here', () => {
    const a = Float32Array.of(1, 2 ** -24, 2 ** -24, -1);
    const b = Float32Array.of(1, 1, 1, 1);
    const seq = gemm(new Float32Array(1), a, b, 1, 1, 4)[0];
    const pw = gemm(new Float32Array(1), a, b, 1, 1, 4, { accumulator: 'pairwise' })[0];
    expect(seq).toBe(0); // 1 + 2^-24 rounds to 1 twice, then − 1
    expect(pw).toBe(fr(fr(1 + 2 ** -24) + fr(2 ** -24 - 1)));
  });
});

describe('int32 accumulator', () => {
  const int8: QuantSpec = { format: 'int8', granularity: { kind: 'tensor' }, scale: { kind: 'none' } };

  it('equals a BigInt reference (wrapping modulo 2^32) on int8 operands', () => {
    const [m, n, k] = [5, 6, 37];
    const rng = createRng('int').fork('x');
    const a = Float32Array.from({ length: m * k }, () => rng.int(256) - 128);
    const b = Float32Array.from({ length: n * k }, () => rng.int(256) - 128);
    const out = gemm(new Float32Array(m * n), a, b, m, n, k, { aQuant: int8, bQuant: int8, accumulator: 'int32' });
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = 0n;
        for (let kk = 0; kk < k; kk++) s += BigInt(a[i * k + kk]!) * BigInt(b[j * k + kk]!);
        expect(out[i * n + j]).toBe(fr(Number(BigInt.asIntN(32, s))));
      }
    }
  });

  it('wraps like the hardware when the sum leaves int32', () => {
    const k = 140_000; // 127·127·k > 2^31
    const a = new Float32Array(k).fill(127);
    const out = gemm(new Float32Array(1), a, a, 1, 1, k, { aQuant: int8, bQuant: int8, accumulator: 'int32' });
    expect(out[0]).toBe(fr(Number(BigInt.asIntN(32, 127n * 127n * BigInt(k)))));
    expect(out[0]).toBeLessThan(0);
  });

  it('per-row int8 scales are applied once at the end: fl(s_a·fl(s_b·acc))', () => {
    const [m, n, k] = [3, 2, 8];
    const a = randomMatrix(m, k, 'qa');
    const b = randomMatrix(n, k, 'qb');
    const spec = quantPreset('int8-row');
    const qa = quantize(spec, a, [m, k]);
    const qb = quantize(spec, b, [n, k]);
    const out = gemm(new Float32Array(m * n), qa, qb, m, n, k, { accumulator: 'int32' });
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let kk = 0; kk < k; kk++) s += (qa.codes[i * k + kk] as number) * (qb.codes[j * k + kk] as number);
        expect(out[i * n + j]).toBe(fr(qa.scales[i]! * fr(qb.scales[j]! * s)));
      }
    }
  });

  it('the float32 SIMD kernel path (k·max|A|·max|B| < 2^24) equals the scalar int32 reference, Object.is, at tile and edge shapes', () => {
    const rng = createRng('int').fork('simd');
    // Edge values: ±0 products, −128·−128, mixed signs that cancel to 0; m, n off the 4×8 tile on purpose.
    for (const [m, n, k] of [
      [9, 17, 64],
      [4, 8, 1],
      [16, 64, 32],
      [5, 3, 1023],
    ] as const) {
      const edge = [-128, 127, 0, -1, 1, -127];
      const a = Float32Array.from({ length: m * k }, (_, i) =>
        i % 7 === 0 ? edge[i % edge.length]! : rng.int(256) - 128,
      );
      const b = Float32Array.from({ length: n * k }, (_, i) =>
        i % 5 === 0 ? edge[(i >> 1) % edge.length]! : rng.int(256) - 128,
      );
      const fast = gemm(new Float32Array(m * n), a, b, m, n, k, { aQuant: int8, bQuant: int8, accumulator: 'int32' });
      const ref = gemm(new Float32Array(m * n), a, b, m, n, k, {
        aQuant: int8,
        bQuant: int8,
        accumulator: 'int32',
        reference: true,
      });
      for (let i = 0; i < m * n; i++)
        if (!Object.is(fast[i], ref[i])) expect(fast[i], `m=${m} n=${n} k=${k} at ${i}`).toBe(ref[i]);
    }
    // Per-token × per-channel scales (the int8-rollout plan's presets), a sum that cancels to zero, and k over the bound.
    const [m, n, k] = [8, 16, 40];
    const x = randomMatrix(m, k, 'sx');
    x.fill(0, 0, k); // a zero row: scale 0
    const w = randomMatrix(n, k, 'sw');
    const qa = quantize(quantPreset('vllm-int8-token'), x, [m, k]);
    const qb = quantize(quantPreset('int8-row'), w, [n, k]);
    const fast = gemm(new Float32Array(m * n), qa, qb, m, n, k, { accumulator: 'int32' });
    const ref = gemm(new Float32Array(m * n), qa, qb, m, n, k, { accumulator: 'int32', reference: true });
    for (let i = 0; i < m * n; i++) expect(Object.is(fast[i], ref[i]), `scaled at ${i}`).toBe(true);
    const big = new Float32Array(4 * 1100).fill(127);
    const wide = gemm(new Float32Array(16), big, big, 4, 4, 1100, { aQuant: int8, bQuant: int8, accumulator: 'int32' });
    expect(wide[0]).toBe(127 * 127 * 1100); // over the bound: the int32 loop (exact, no wrap yet)
  });

  it('refuses float operands', () => {
    expect(() =>
      gemm(new Float32Array(1), Float32Array.of(1.5), Float32Array.of(1), 1, 1, 1, { accumulator: 'int32' }),
    ).toThrow(/'int32' needs integer operands/);
  });
});

describe('fp64 accumulator', () => {
  test.prop([
    fc.array(fc.tuple(fc.integer({ min: -2000, max: 2000 }), fc.integer({ min: -2000, max: 2000 })), {
      minLength: 1,
      maxLength: 60,
    }),
    fc.integer({ min: 0, max: 12 }),
  ])('equals the exact rational sum rounded once (small integers over powers of two)', (pairs, shift) => {
    const k = pairs.length;
    const a = Float32Array.from(pairs, ([x]) => x / 2 ** shift);
    const b = Float32Array.from(pairs, ([, y]) => y * 3);
    // exact: Σ x·3y / 2^shift as a BigInt numerator
    const num = pairs.reduce((s, [x, y]) => s + BigInt(x) * BigInt(3 * y), 0n);
    const exact = Number(num) / 2 ** shift; // |num| < 2^53: exact
    const out = gemm(new Float32Array(1), a, b, 1, 1, k, { accumulator: 'fp64' });
    expect(out[0]).toBe(fr(exact));
  });
});

describe('hopper-fp8 accumulator (MMA-Sim model)', () => {
  const e4m3: QuantSpec = { format: 'e4m3fn', granularity: { kind: 'tensor' }, scale: { kind: 'none' } };

  it('small products below 2^(maxE − 13) are truncated away', () => {
    // one product 1·1 and 31 products 2^-7·2^-7 = 2^-14: aligned to 2^0, each 2^-14 truncates to 0
    const a = Float32Array.from({ length: 32 }, (_, i) => (i === 0 ? 1 : 2 ** -7));
    const hop = gemm(new Float32Array(1), a, a, 1, 1, 32, { aQuant: e4m3, bQuant: e4m3, accumulator: 'hopper-fp8' });
    expect(hop[0]).toBe(1);
    const f32 = gemm(new Float32Array(1), a, a, 1, 1, 32, { aQuant: e4m3, bQuant: e4m3 });
    expect(f32[0]).toBe(1 + 31 * 2 ** -14);
  });

  it('the result is truncated to 13 mantissa bits (e8m13)', () => {
    // 1 + 1 + 2^-13 = 2 + 2^-13: exact after alignment, but 2^-13 is below the 13-bit quantum of [2, 4)
    const a = Float32Array.of(1, 1, 2 ** -7);
    const b = Float32Array.of(1, 1, 2 ** -6);
    const hop = gemm(new Float32Array(1), a, b, 1, 1, 3, { aQuant: e4m3, bQuant: e4m3, accumulator: 'hopper-fp8' });
    expect(hop[0]).toBe(2);
    expect(gemm(new Float32Array(1), a, b, 1, 1, 3)[0]).toBe(2 + 2 ** -13);
    expect(truncateToE8M(-(2 + 2 ** -13 + 2 ** -12))).toBe(-(2 + 2 ** -12));
  });

  it('promotion to fp32 every chunk keeps bits that the running e8m13 accumulator drops', () => {
    // chunk 2: [1·1 + 1·1] then [2^-7·2^-6 + 2^-7·2^-6] = 2^-12
    const a = Float32Array.of(1, 1, 2 ** -7, 2 ** -7);
    const b = Float32Array.of(1, 1, 2 ** -6, 2 ** -6);
    const opts = { aQuant: e4m3, bQuant: e4m3, accumulator: 'hopper-fp8', chunk: 2 } as const;
    expect(gemm(new Float32Array(1), a, b, 1, 1, 4, { ...opts, promoteEvery: 0 })[0]).toBe(2); // c = 2 aligns 2^-13 away
    expect(gemm(new Float32Array(1), a, b, 1, 1, 4, { ...opts, promoteEvery: 1 })[0]).toBe(2 + 2 ** -12);
  });

  test.prop([fc.integer({ min: 1, max: 200 }), fc.integer(), fc.constantFrom(0, 1, 4)])(
    'property: |hopper − exact| ≤ chunks · 35 · 2^(E − 13), E bounding every addend exponent',
    (k, seed, promoteEvery) => {
      const rng = createRng(`h${seed}`).fork('x');
      const x = Float32Array.from({ length: k }, () => fr(rng.normal() * 2 ** (rng.int(8) - 4)));
      const y = Float32Array.from({ length: k }, () => fr(rng.normal() * 2 ** (rng.int(8) - 4)));
      const qa = quantize(e4m3, x, [1, k]);
      const qb = quantize(e4m3, y, [1, k]);
      const av = dequantize(qa);
      const bv = dequantize(qb);
      let exact = 0;
      let abs = 0;
      let maxProdE = -Infinity;
      for (let i = 0; i < k; i++) {
        exact += av[i]! * bv[i]!;
        abs += Math.abs(av[i]! * bv[i]!);
        const ea = av[i] === 0 ? -6 : Math.max(exponentOf(av[i]!), -6);
        const eb = bv[i] === 0 ? -6 : Math.max(exponentOf(bv[i]!), -6);
        maxProdE = Math.max(maxProdE, ea + eb);
      }
      const E = Math.max(maxProdE, abs > 0 ? exponentOf(abs) + 1 : -126);
      const chunks = Math.ceil(k / 32);
      const hop = gemm(new Float32Array(1), qa, qb, 1, 1, k, { accumulator: 'hopper-fp8', promoteEvery })[0]!;
      expect(Math.abs(hop - exact)).toBeLessThanOrEqual(chunks * 35 * 2 ** (E - 13) + Math.abs(exact) * 2 ** -22);
    },
  );

  /** Random values over a wide exponent range with zeros, ±0, subnormals, float32 extremes and (optionally) Inf/NaN. */
  function edgyMatrix(rows: number, cols: number, seed: string, spread: number, specials: boolean): Float32Array {
    const rng = createRng(seed).fork('edgy');
    const edges = [0, -0, 2 ** -149, -(2 ** -140), 2 ** -126, 3.4e38, -3.4e38, 448, -448, 2 ** -9, 1, -1];
    if (specials) edges.push(Infinity, -Infinity, NaN);
    return Float32Array.from({ length: rows * cols }, () =>
      rng.int(6) === 0 ? edges[rng.int(edges.length)]! : fr(rng.normal() * 2 ** (rng.int(2 * spread + 1) - spread)),
    );
  }

  it.each([
    // m, n, k, operand quantizer, options
    [7, 5, 96, 'e4m3', {}],
    [3, 4, 100, 'e4m3', { promoteEvery: 0 }],
    [4, 6, 64, 'block', { chunk: 16 }],
    [5, 3, 80, 'group', { chunk: 16, promoteEvery: 1, splitK: 2 }],
    [6, 6, 48, 'bf16', { chunk: 8, promoteEvery: 2 }],
    [6, 6, 48, 'bf16', { chunk: 5, fractionBits: 10 }],
    [4, 4, 40, 'tensor', { chunk: 16, promoteEvery: 1, outFormat: 'bf16' }],
    // One chunk per segment with ≥ 2048 products: the WebAssembly SIMD step (4-column panels, n not a multiple of 4).
    [16, 13, 48, 'group', { chunk: 16, promoteEvery: 1 }],
    [12, 9, 64, 'block', { chunk: 16, promoteEvery: 1 }],
    [20, 7, 40, 'tensor', { chunk: 16, promoteEvery: 1, outFormat: 'bf16' }],
    [9, 11, 64, 'e4m3', { chunk: 32, promoteEvery: 1 }],
    [10, 10, 60, 'bf16', { chunk: 24, promoteEvery: 1, fractionBits: 10 }],
  ] as const)(
    'the table kernel equals the scalar reference bit for bit (m=%i n=%i k=%i %s %o)',
    (m, n, k, quant, extra) => {
      expect(hopperKernelIsSimd()).toBe(true);
      const specs: Record<string, QuantSpec | 'bf16'> = {
        e4m3,
        block: quantPreset('deepseek-fp8-block', { block: 16 }),
        group: quantPreset('vllm-fp8-group', { block: 16 }),
        tensor: quantPreset('vllm-fp8-tensor'),
        bf16: 'bf16',
      };
      for (const [spread, specials] of [
        [4, false],
        [40, false],
        [130, false],
        [8, true],
      ] as const) {
        for (let trial = 0; trial < 3; trial++) {
          const a = edgyMatrix(m, k, `fa${m}${k}${spread}${trial}`, spread, specials);
          const b = edgyMatrix(n, k, `fb${n}${k}${spread}${trial}`, spread, specials);
          const opts = {
            aQuant: specs[quant]!,
            bQuant: quant === 'block' ? specs.group! : specs[quant]!,
            accumulator: 'hopper-fp8',
            ...extra,
          } as const;
          const fast = gemm(new Float32Array(m * n), a, b, m, n, k, opts);
          const ref = gemm(new Float32Array(m * n), a, b, m, n, k, { ...opts, reference: true });
          expect(same(fast, ref)).toBe(true);
        }
      }
    },
  );

  it.each([
    // m, n, k, operand quantizer, options: one chunk per segment and ≥ 2048 products, so the WebAssembly SIMD step runs
    [20, 7, 40, 'tensor', { chunk: 16, promoteEvery: 1 }],
    [16, 13, 48, 'group', { chunk: 16, promoteEvery: 1, outFormat: 'bf16' }],
    [10, 10, 60, 'bf16', { chunk: 24, promoteEvery: 1, fractionBits: 10 }],
    [33, 6, 32, 'e4m3', { chunk: 32, promoteEvery: 1 }],
  ] as const)(
    'the SIMD step equals the scalar reference on ordinary data (m=%i n=%i k=%i %s %o)',
    (m, n, k, quant, extra) => {
      expect(hopperKernelIsSimd()).toBe(true);
      const specs: Record<string, QuantSpec | 'bf16'> = {
        e4m3,
        group: quantPreset('vllm-fp8-group', { block: 16 }),
        tensor: quantPreset('vllm-fp8-tensor'),
        bf16: 'bf16',
      };
      // Wide scales only where a quantizer scales them back (unscaled e4m3 would flush 2^-20 to zero).
      for (const scale of quant === 'e4m3' ? [1, 8] : [1, 2 ** -20, 2 ** 30]) {
        const a = randomMatrix(m, k, `sa${m}${scale}`, scale);
        const b = randomMatrix(n, k, `sb${n}${scale}`, 1 / scale);
        const opts = { aQuant: specs[quant]!, bQuant: specs[quant]!, accumulator: 'hopper-fp8', ...extra } as const;
        const fast = gemm(new Float32Array(m * n), a, b, m, n, k, opts);
        expect(same(fast, gemm(new Float32Array(m * n), a, b, m, n, k, { ...opts, reference: true }))).toBe(true);
        expect(fast.some((v) => v !== 0)).toBe(true);
      }
    },
  );

  test.prop([
    fc.integer({ min: 1, max: 5 }),
    fc.integer({ min: 1, max: 5 }),
    fc.integer({ min: 1, max: 120 }),
    fc.integer(),
    fc.constantFrom(0, 1, 4),
    fc.constantFrom(1, 7, 32),
  ])(
    'property: the table kernel equals the scalar reference on e4m3 operands',
    (m, n, k, seed, promoteEvery, chunk) => {
      const a = edgyMatrix(m, k, `qa${seed}`, 6, false);
      const b = edgyMatrix(n, k, `qb${seed}`, 6, false);
      const opts = { aQuant: e4m3, bQuant: e4m3, accumulator: 'hopper-fp8', promoteEvery, chunk } as const;
      expect(
        same(
          gemm(new Float32Array(m * n), a, b, m, n, k, opts),
          gemm(new Float32Array(m * n), a, b, m, n, k, { ...opts, reference: true }),
        ),
      ).toBe(true);
    },
  );

  it('scale groups must be a multiple of the chunk', () => {
    const spec = quantPreset('deepseek-fp8-group', { block: 16 });
    const x = randomMatrix(2, 32, 'g');
    expect(() =>
      gemm(new Float32Array(4), x, x, 2, 2, 32, { aQuant: spec, bQuant: spec, accumulator: 'hopper-fp8' }),
    ).toThrow(/pass \{ chunk: 16 \}/);
    expect(() =>
      gemm(new Float32Array(4), x, x, 2, 2, 32, { aQuant: spec, bQuant: spec, accumulator: 'hopper-fp8', chunk: 16 }),
    ).not.toThrow();
  });
});

describe('scale placement', () => {
  it('fine-grained scales are applied per K-group inside the loop: acc = fmaf(fl(s_a·s_b), partial, acc)', () => {
    const [m, n, k, g] = [5, 9, 24, 8]; // 4×8 tiles through the SIMD kernel plus scalar edges
    const a = randomMatrix(m, k, 'fa');
    const b = randomMatrix(n, k, 'fb', 50);
    const qa = quantize(quantPreset('deepseek-fp8-group', { block: g }), a, [m, k]);
    const qb = quantize(quantPreset('deepseek-fp8-block', { block: g }), b, [n, k]);
    const out = gemm(new Float32Array(m * n), qa, qb, m, n, k);
    const table = decodeTable('e4m3fn');
    const va = Float32Array.from(qa.codes, (c) => table[c]!);
    const vb = Float32Array.from(qb.codes, (c) => table[c]!);
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let acc = 0;
        for (let grp = 0; grp < k / g; grp++) {
          let partial = 0;
          for (let kk = grp * g; kk < (grp + 1) * g; kk++)
            partial = fr(partial + fr(va[i * k + kk]! * vb[j * k + kk]!));
          const sa = qa.scales[i * (k / g) + grp]!;
          const sb = qb.scales[Math.floor(j / g) * (k / g) + grp]!;
          acc = fma32(fr(sa * sb), partial, acc);
        }
        expect(out[i * n + j]).toBe(acc);
      }
    }
  });

  it('per-token FP8 scales are applied in the epilogue: fl(s_a·fl(s_b·acc)) with acc the fp32 sum of code values', () => {
    const [m, n, k] = [4, 8, 40];
    const spec = quantPreset('vllm-fp8-token');
    const qa = quantize(spec, randomMatrix(m, k, 'ta', 3), [m, k]);
    const qb = quantize(spec, randomMatrix(n, k, 'tb', 0.1), [n, k]);
    const out = gemm(new Float32Array(m * n), qa, qb, m, n, k);
    const table = decodeTable('e4m3fn');
    const acc = scalarFp32(
      Float32Array.from(qa.codes, (c) => table[c]!),
      Float32Array.from(qb.codes, (c) => table[c]!),
      m,
      n,
      k,
    );
    expect(
      same(
        out,
        acc.map((v, o) => fr(qa.scales[Math.floor(o / n)]! * fr(qb.scales[o % n]! * v))),
      ),
    ).toBe(true);
  });

  it('weight-only (W4A16): the weight is dequantized and rounded to the activation format first', () => {
    const [m, n, k] = [3, 4, 32];
    const x = randomMatrix(m, k, 'wx');
    const w = randomMatrix(n, k, 'ww');
    const qw = quantize(quantPreset('gptq-w4g128', { block: 16 }), w, [n, k]);
    const out = gemm(new Float32Array(m * n), x, qw, m, n, k, { aQuant: 'bf16' });
    const ref = scalarFp32(
      fakeQuant('bf16', x, { profile: 'ieee' }),
      fakeQuant('bf16', dequantize(qw), { profile: 'ieee' }),
      m,
      n,
      k,
    );
    expect(same(out, ref)).toBe(true);
  });

  it('nvfp4 global scales multiply at the end', () => {
    const [m, n, k] = [2, 2, 32];
    const a = randomMatrix(m, k, 'na');
    const spec = quantPreset('nvfp4');
    const qa = quantize(spec, a, [m, k]);
    const out = gemm(new Float32Array(m * n), qa, qa, m, n, k, { accumulator: 'fp64' });
    const y = dequantize(qa);
    const ref = gemm(new Float32Array(m * n), y, y, m, n, k, { accumulator: 'fp64' });
    for (let i = 0; i < m * n; i++)
      expect(Math.abs(out[i]! - ref[i]!)).toBeLessThanOrEqual(Math.abs(ref[i]!) * 1e-5 + 1e-6);
  });

  it('shape mismatches give one error naming every operand', () => {
    expect(() => gemm(new Float32Array(4), new Float32Array(6), new Float32Array(6), 2, 2, 2)).toThrow(
      /gemm: shapes do not match out\(m×n\) = A\(m×k\)·B\(n×k\)ᵀ with m = 2, n = 2, k = 2: out has 4 elements \(need 4\), A is 6 elements \(need 2×2\), B is 6 elements \(need 2×2\)/,
    );
  });
});
