// The caches of the fast GEMM (src/numerics/gemm-caches.ts): the history-dependent paths (a given B's first, second
// and later hopper-fp8 GEMMs; cached decodings and dequantized copies) give the reference's bits, and with checks on
// (src/numerics/operand-checks.ts) a cached operand written after its first GEMM is refused.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import { type GemmOptions, type QuantizedTensor, gemm, quantPreset, quantize } from '../../src/numerics/index.js';
import { setGemmCacheChecks } from '../../src/numerics/operand-checks.js';
import { fp32KernelIsSimd, markGemmOperandImmutable } from '../../src/numerics/kernels/fp32-kernel.js';

function randomMatrix(rows: number, cols: number, seed: string): Float32Array {
  const rng = createRng(seed).fork('m');
  return Float32Array.from({ length: rows * cols }, () => Math.fround(rng.normal()));
}

const same = (x: Float32Array, y: Float32Array): boolean =>
  x.length === y.length && x.every((v, i) => Object.is(v, y[i]));

/** Operands and options of one cached-operand path: B given quantized (a weight), A a Float32Array or given too. */
interface CacheCase {
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly a: (x: Float32Array) => Float32Array | QuantizedTensor;
  readonly b: (w: Float32Array) => QuantizedTensor;
  readonly options: GemmOptions;
}

const fp8Group = quantPreset('deepseek-fp8-group', { block: 16 });
const cases: Record<string, CacheCase> = {
  // hopper-fp8 one call: B left coded on its first sight, decoded and cached on its second
  'hopper-fp8, B given (first sight coded, then decoded)': {
    m: 4,
    n: 24,
    k: 64,
    a: (x) => x,
    b: (w) => quantize(fp8Group, w, [24, 64]),
    options: { aQuant: fp8Group, accumulator: 'hopper-fp8', chunk: 16, promoteEvery: 1 },
  },
  'hopper-fp8 segment loop (promoteEvery 2), both given': {
    m: 3,
    n: 5,
    k: 64,
    a: (x) => quantize(fp8Group, x, [3, 64]),
    b: (w) => quantize(fp8Group, w, [5, 64]),
    options: { accumulator: 'hopper-fp8', chunk: 16, promoteEvery: 2 },
  },
  'int32 scaled one call, B given (cached decoding)': {
    m: 4,
    n: 12,
    k: 40,
    a: (x) => quantize(quantPreset('vllm-int8-token'), x, [4, 40]),
    b: (w) => quantize(quantPreset('int8-row'), w, [12, 40]),
    options: { accumulator: 'int32' },
  },
  'weight-only (W4A16), B given (cached dequantized copy)': {
    m: 2,
    n: 8,
    k: 128,
    a: (x) => x,
    b: (w) => quantize(quantPreset('gptq-w4g128'), w, [8, 128]),
    options: { aQuant: 'bf16' },
  },
};

describe('gemm caches', () => {
  let before = false;
  beforeEach(() => {
    before = setGemmCacheChecks(true);
  });
  afterEach(() => {
    setGemmCacheChecks(before);
  });

  it.each(Object.entries(cases))(
    '%s: calls 1, 2 and 3 with the same tensors equal gemmReference, Object.is',
    (name, c) => {
      const x = randomMatrix(c.m, c.k, `x-${name}`);
      const a = c.a(x);
      const b = c.b(randomMatrix(c.n, c.k, `w-${name}`));
      const ref = gemm(new Float32Array(c.m * c.n), a, b, c.m, c.n, c.k, { ...c.options, reference: true });
      for (let call = 1; call <= 3; call++) {
        const got = gemm(new Float32Array(c.m * c.n), a, b, c.m, c.n, c.k, c.options);
        expect(same(got, ref), `call ${call}`).toBe(true);
      }
    },
  );

  it.each(Object.entries(cases))('%s: a cached operand written after its first GEMM throws (checks on)', (name, c) => {
    const a = c.a(randomMatrix(c.m, c.k, `x-${name}`));
    const b = c.b(randomMatrix(c.n, c.k, `w-${name}`));
    const out = new Float32Array(c.m * c.n);
    gemm(out, a, b, c.m, c.n, c.k, c.options);
    gemm(out, a, b, c.m, c.n, c.k, c.options); // the second sight: now cached on every path
    (b.codes as Uint8Array)[0] = ((b.codes[0] as number) ^ 1) & 0xff;
    expect(() => gemm(out, a, b, c.m, c.n, c.k, c.options)).toThrow(
      /gemm: a cached operand changed after its first GEMM/,
    );
  });

  it('a changed scale is refused too, and a fresh tensor of the same data is accepted', () => {
    const c = cases['int32 scaled one call, B given (cached decoding)'] as CacheCase;
    const a = c.a(randomMatrix(c.m, c.k, 'x'));
    const w = randomMatrix(c.n, c.k, 'w');
    const b = c.b(w);
    const out = new Float32Array(c.m * c.n);
    gemm(out, a, b, c.m, c.n, c.k, c.options);
    b.scales[0] = Math.fround((b.scales[0] as number) * 2);
    expect(() => gemm(out, a, b, c.m, c.n, c.k, c.options)).toThrow(/fingerprint/);
    expect(() => gemm(out, a, c.b(w), c.m, c.n, c.k, c.options)).not.toThrow();
  });

  it.runIf(fp32KernelIsSimd())(
    'a Float32Array marked immutable and written after its first GEMM throws (the fp32 kernel keeps its panels)',
    () => {
      const [m, n, k] = [3, 16, 32];
      const x = randomMatrix(m, k, 'x-marked');
      const w = randomMatrix(n, k, 'w-marked');
      markGemmOperandImmutable(w);
      const out = new Float32Array(m * n);
      const ref = gemm(new Float32Array(m * n), x, w, m, n, k, { reference: true });
      gemm(out, x, w, m, n, k);
      expect(same(gemm(out, x, w, m, n, k), ref)).toBe(true); // the kept panels: the same bits
      w[5] = Math.fround((w[5] as number) + 1);
      expect(() => gemm(out, x, w, m, n, k)).toThrow(/marked immutable: fingerprint/);
    },
  );

  it('checks off (the default): nothing is fingerprinted', () => {
    setGemmCacheChecks(false);
    const c = cases['int32 scaled one call, B given (cached decoding)'] as CacheCase;
    const a = c.a(randomMatrix(c.m, c.k, 'x'));
    const b = c.b(randomMatrix(c.n, c.k, 'w'));
    const out = new Float32Array(c.m * c.n);
    gemm(out, a, b, c.m, c.n, c.k, c.options);
    b.scales[0] = Math.fround((b.scales[0] as number) * 2);
    expect(() => gemm(out, a, b, c.m, c.n, c.k, c.options)).not.toThrow();
  });
});
