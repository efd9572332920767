// The fp32 GEMM kernel (MR×8 register tiles, A and B packed, K-blocks carried through memory) against the scalar
// reference with Object.is on edge data, at every tail shape; B panels of an operand marked immutable packed once, and
// a rollout's weights packed once per numerics object (weight version).
// Not a timing test: `npx tsx bench/index.ts gemm` measures the kernel.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import { gemm, quantize, quantPreset, threadedGemmF32 } from '../../src/numerics/index.js';
import { gemmReference } from '../../src/numerics/gemm-reference.js';
import { arConfig, createArPolicy, numericsFor, precisionPlans, rollout } from '../../src/policies/index.js';
import { makeTask } from '../../src/tasks/index.js';
import {
  FP32_BLOCKING,
  FP32_TILE_ROWS,
  fp32KernelIsSimd,
  fp32PanelPacks,
  markGemmOperandImmutable,
} from '../../src/numerics/kernels/fp32-kernel.js';
import { scaledPanelPacks } from '../../src/numerics/kernels/scaled-gemm-kernel.js';

/** B panels packed by either kernel: the fp32 one, or the scaled fp32/int32 one that quantized weights with scales take. */
const allPanelPacks = (): number => fp32PanelPacks() + scaledPanelPacks();

const same = (x: Float32Array, y: Float32Array): boolean =>
  x.length === y.length && x.every((v, i) => Object.is(v, y[i]));

/** Rows of mixed magnitudes (sums that depend on the order over k), with NaN, ±Inf, ±0, subnormals and values near the float32 max. */
function edgeMatrix(rows: number, k: number, seed: string): Float32Array {
  const rng = createRng(seed).fork('edge');
  const edges = [
    0,
    -0,
    2 ** -149,
    -(2 ** -149),
    2 ** -126 * 0.75,
    3.4028234663852886e38,
    -3.4028234663852886e38,
    2 ** 100,
    Infinity,
    -Infinity,
    NaN,
  ];
  const scales = [2 ** -70, 2 ** -64, 1, 2 ** 10, 2 ** -20];
  const out = new Float32Array(rows * k);
  for (let i = 0; i < rows; i++) {
    const scale = scales[rng.int(scales.length)]!;
    for (let p = 0; p < k; p++)
      out[i * k + p] =
        rng.int(k + 4) === 0
          ? edges[rng.int(edges.length)]!
          : Math.fround(rng.normal() * scale * 2 ** (rng.int(16) - 8));
  }
  return out;
}

function reference(a: Float32Array, b: Float32Array, m: number, n: number, k: number, options = {}): Float32Array {
  return gemmReference(new Float32Array(m * n), a, b, m, n, k, options);
}

describe('fp32 kernel', () => {
  it('runs on WebAssembly SIMD here, with 4-row tiles and K-blocks shorter than the long shapes below', () => {
    expect(fp32KernelIsSimd()).toBe(true);
    expect(FP32_TILE_ROWS).toBe(4);
    expect(FP32_BLOCKING.kc).toBeLessThan(600);
  });

  // m: every tail of the row blocks (1, 2, 3 rows left) and none; n: panels with 1, 7, 0 and 1 columns left;
  // k: empty, one step, either side of a K-block, several K-blocks with a short last one.
  const ms = [1, 2, 3, 4, 5, 7, 9];
  const ns = [1, 7, 8, 9, 17];
  const ks = [0, 1, 255, 256, 257, 600];
  it.each(ks)(
    'gemm (fp32 model) equals the reference, Object.is, at every m ∈ {1…9} × n ∈ {1…17} tail shape (k=%i)',
    (k) => {
      for (const m of ms) {
        for (const n of ns) {
          const a = edgeMatrix(m, k, `a${m}-${k}`);
          const b = edgeMatrix(n, k, `b${n}-${k}`);
          expect(
            same(gemm(new Float32Array(m * n), a, b, m, n, k), reference(a, b, m, n, k)),
            `m=${m} n=${n} k=${k}`,
          ).toBe(true);
        }
      }
    },
  );

  it('the edges reach the outputs: NaN, infinities and subnormal sums are all compared', () => {
    const [m, n, k] = [9, 17, 600];
    const ref = reference(edgeMatrix(m, k, `a${m}-${k}`), edgeMatrix(n, k, `b${n}-${k}`), m, n, k);
    expect([
      ref.some(Number.isNaN),
      ref.some((v) => Math.abs(v) === Infinity),
      ref.some((v) => v !== 0 && Math.abs(v) < 2 ** -126),
    ]).toEqual([true, true, true]);
  });

  it('K-ranges at offsets into one packing (splitK, ranges across K-block edges) equal the reference', () => {
    const [m, n, k] = [6, 11, 601];
    const a = edgeMatrix(m, k, 'ra');
    const b = edgeMatrix(n, k, 'rb');
    for (const splitK of [2, 3, 7])
      expect(
        same(gemm(new Float32Array(m * n), a, b, m, n, k, { splitK }), reference(a, b, m, n, k, { splitK })),
        `splitK=${splitK}`,
      ).toBe(true);
  });

  it("threadedGemmF32 on one thread (the layers' path) equals the reference at tail shapes", () => {
    for (const [m, n, k] of [
      [1, 9, 300],
      [3, 8, 257],
      [6, 23, 40],
    ] as const) {
      const a = edgeMatrix(m, k, `ta${m}`);
      const b = edgeMatrix(n, k, `tb${n}`);
      expect(
        same(threadedGemmF32(new Float32Array(m * n), a, b, m, n, k, 1), reference(a, b, m, n, k)),
        `m=${m} n=${n} k=${k}`,
      ).toBe(true);
    }
  });
});

describe('packed B panels of operands marked immutable', () => {
  it('are packed on the first call only (per shape read as), with Object.is-identical results; unmarked operands are packed every call', () => {
    const [n, k] = [19, 40];
    const w = edgeMatrix(n, k, 'w');
    markGemmOperandImmutable(w);
    const results: Float32Array[] = [];
    const packsBefore = fp32PanelPacks();
    for (const m of [1, 4, 7, 4]) {
      const x = edgeMatrix(m, k, `x${m}`);
      const out = gemm(new Float32Array(m * n), x, w, m, n, k);
      expect(same(out, reference(x, w, m, n, k)), `m=${m}`).toBe(true);
      expect(same(threadedGemmF32(new Float32Array(m * n), x, w, m, n, k, 1), out), `m=${m} threaded`).toBe(true);
      if (m === 4) results.push(out);
    }
    expect(fp32PanelPacks() - packsBefore).toBe(1); // 8 calls through both entry points, one packing
    expect(same(results[0]!, results[1]!)).toBe(true);
    // the same array read as another shape: packed once more, for that shape
    const x = edgeMatrix(2, n, 'xt');
    expect(same(gemm(new Float32Array(2 * k), x, w, 2, k, n), reference(x, w, 2, k, n))).toBe(true);
    expect(fp32PanelPacks() - packsBefore).toBe(2);
    // an unmarked copy: packed on every call
    const copy = Float32Array.from(w);
    const before = fp32PanelPacks();
    for (let i = 0; i < 3; i++) gemm(new Float32Array(n), edgeMatrix(1, k, 'x1'), copy, 1, n, k);
    expect(fp32PanelPacks() - before).toBe(3);
  });

  it("a quantized weight given to gemm (its decoding, or its W4A16 dequantization) is packed once over many calls, with the reference's bits", () => {
    const [n, k] = [13, 64];
    const w = edgeMatrix(n, k, 'qw').map((v) => (Number.isFinite(v) ? v : 1));
    const cases = [
      {
        weight: quantize(quantPreset('vllm-fp8-group', { block: 16 }), w, [n, k]),
        act: (x: Float32Array, m: number) => quantize(quantPreset('vllm-fp8-group', { block: 16 }), x, [m, k]),
        options: {},
      },
      {
        weight: quantize(quantPreset('gptq-w4g128', { block: 16 }), w, [n, k]),
        act: (x: Float32Array) => x,
        options: { aQuant: 'bf16' as const },
      },
    ];
    for (const { weight, act, options } of cases) {
      const before = allPanelPacks();
      for (const m of [1, 5, 8]) {
        const x = act(
          edgeMatrix(m, k, `qx${m}`).map((v) => (Number.isFinite(v) ? v : -2)),
          m,
        );
        expect(
          same(
            gemm(new Float32Array(m * n), x, weight, m, n, k, options),
            gemmReference(new Float32Array(m * n), x, weight, m, n, k, options),
          ),
          weight.spec.format,
        ).toBe(true);
      }
      expect(allPanelPacks() - before, weight.spec.format).toBe(1);
    }
  });
});

describe('rollout decode steps pack each weight once per weight version', () => {
  it.each(['bf16', 'int8-rollout', 'w4a16-rollout', 'mxfp8-rollout'])(
    '%s: a second rollout with the same numerics packs no weight again; a new numerics object (a new version) packs them once more',
    (plan) => {
      const task = makeTask('reverse');
      const config = arConfig({
        C: 32,
        layers: 2,
        H: 4,
        hidden: 64,
        vocabSize: task.vocabSize,
        maxLen: task.promptLength + 4,
      });
      const policy = createArPolicy(config, 0);
      const prompts = task.trainProblems(4, 0).map((p) => [...p.prompt]);
      const weightSites = config.layers * 7 + 1; // q, k, v, o, up, gate, down per layer, and the lm_head
      const numericsOf = () => numericsFor(precisionPlans[plan as keyof typeof precisionPlans].rollout);
      const packsOf = (numerics: ReturnType<typeof numericsOf>) => {
        const before = allPanelPacks();
        const r = rollout(policy, prompts, { maxNewTokens: 4, numerics, rng: createRng('packs'), eos: null });
        return { packs: allPanelPacks() - before, tokens: Array.from(r.tokens) };
      };
      const numerics = numericsOf();
      const first = packsOf(numerics);
      const second = packsOf(numerics);
      const fresh = packsOf(numericsOf());
      expect(second.tokens).toEqual(first.tokens);
      expect(fresh.tokens).toEqual(first.tokens);
      expect(first.packs - second.packs).toBe(weightSites);
      expect(fresh.packs).toBe(first.packs);
    },
  );
});
