// Every GemmOptions field reaches every path of `gemm`: a type-level check that a new field fails to compile until
// normalizeGemmOptions and fastPathReadsOf list it, and a run of each field on the fast path against the reference.
import { describe, expect, expectTypeOf, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import { type GemmOptions, gemm, quantPreset } from '../../src/numerics/index.js';
import { type NormalizedGemmOptions, fastPathReadsOf, normalizeGemmOptions } from '../../src/numerics/gemm.js';

function randomMatrix(rows: number, cols: number, seed: string): Float32Array {
  const rng = createRng(seed).fork('m');
  return Float32Array.from({ length: rows * cols }, () => Math.fround(rng.normal()));
}

const same = (x: Float32Array, y: Float32Array): boolean =>
  x.length === y.length && x.every((v, i) => Object.is(v, y[i]));

describe('GemmOptions on every path', () => {
  it('normalizeGemmOptions and fastPathReadsOf list exactly the fields of GemmOptions (type level)', () => {
    expectTypeOf<keyof NormalizedGemmOptions>().toEqualTypeOf<keyof GemmOptions>();
    expectTypeOf<keyof typeof fastPathReadsOf>().toEqualTypeOf<keyof GemmOptions>();
    type Extended = GemmOptions & { readonly newField?: number };
    // @ts-expect-error a field added to GemmOptions is missing from normalizeGemmOptions's result until it is listed
    const normalized: NormalizedGemmOptions<Extended> = normalizeGemmOptions({});
    // @ts-expect-error ... and from the table of where the fast path reads it
    const reads: Record<keyof Extended, string> = fastPathReadsOf;
    expect(Object.keys(normalized).sort()).toEqual(Object.keys(reads).sort());
  });

  it('normalizeGemmOptions keeps every field, in one key order', () => {
    const o: GemmOptions = { outFormat: 'bf16', splitK: 2, reference: false, aQuant: 'bf16' };
    const n = normalizeGemmOptions(o);
    expect(Object.keys(n)).toEqual(Object.keys(fastPathReadsOf));
    for (const key of Object.keys(o) as (keyof GemmOptions)[]) expect(n[key]).toBe(o[key]);
  });

  // One options object per field that changes the result, each run fast and as the reference.
  const fieldCases: Record<Exclude<keyof GemmOptions, 'reference'>, GemmOptions> = {
    aQuant: { aQuant: quantPreset('vllm-fp8-token') },
    bQuant: { bQuant: 'bf16' },
    accumulator: { accumulator: 'pairwise' },
    promoteEvery: { accumulator: 'hopper-fp8', chunk: 8, promoteEvery: 2 },
    chunk: { accumulator: 'hopper-fp8', chunk: 4 },
    fractionBits: { accumulator: 'hopper-fp8', fractionBits: 9 },
    splitK: { splitK: 3 },
    outFormat: { outFormat: 'fp16' },
  };
  it.each(Object.entries(fieldCases))('%s: the fast path equals gemmReference, Object.is', (_field, options) => {
    const [m, n, k] = [5, 9, 48];
    const a = randomMatrix(m, k, `a-${_field}`);
    const b = randomMatrix(n, k, `b-${_field}`);
    const fast = gemm(new Float32Array(m * n), a, b, m, n, k, options);
    const ref = gemm(new Float32Array(m * n), a, b, m, n, k, { ...options, reference: true });
    expect(same(fast, ref)).toBe(true);
  });
});
