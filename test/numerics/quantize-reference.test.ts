// The fast quantizer (quantize.ts: runs of a cell's elements, vector casts, explicit scratch) against the plain
// reference (quantize-reference.ts), Object.is on codes, scales, zero points, scale codes, global scale, dequantized.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import { quantPreset, quantPresets } from '../../src/numerics/presets.js';
import {
  type QuantSpec,
  type QuantizedTensor,
  createQuantizeScratch,
  dequantize,
  elementFormat,
  quantize,
  quantizeTransient,
  quantizedValues,
} from '../../src/numerics/quantize.js';
import {
  dequantizeReference,
  quantizeReference,
  quantizedValuesReference,
} from '../../src/numerics/quantize-reference.js';

const FLT_MAX = 3.4028234663852886e38;
const EDGES = [
  0,
  -0,
  NaN,
  -NaN,
  Infinity,
  -Infinity,
  2 ** -149,
  -(2 ** -140),
  1e-40,
  FLT_MAX,
  -FLT_MAX,
  3e38,
  1,
  -1.5,
  448,
  -464,
  6,
  1e-3,
  2 ** 100,
  -(2 ** -100),
];

/** (rows, cols) values at varied magnitudes per row, with a fraction `edgeRate` of edge values. */
function matrix(rows: number, cols: number, seed: string, edgeRate: number): Float32Array {
  const rng = createRng(seed).fork('quantize-reference');
  const x = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const mag = 2 ** (rng.int(40) - 20);
    for (let c = 0; c < cols; c++)
      x[r * cols + c] = rng.uniform() < edgeRate ? (EDGES[rng.int(EDGES.length)] as number) : rng.normal() * mag;
  }
  return x;
}

const same = (x: ArrayLike<number> | undefined, y: ArrayLike<number> | undefined): boolean =>
  x === y ||
  (x !== undefined && y !== undefined && x.length === y.length && Array.from(x).every((v, i) => Object.is(v, y[i])));

function expectSameTensor(fast: QuantizedTensor, ref: QuantizedTensor, what: string): void {
  expect(same(fast.codes, ref.codes), `${what}: codes`).toBe(true);
  expect(same(fast.scales, ref.scales), `${what}: scales`).toBe(true);
  expect(same(fast.zeroPoints, ref.zeroPoints), `${what}: zero points`).toBe(true);
  expect(same(fast.scaleCodes, ref.scaleCodes), `${what}: scale codes`).toBe(true);
  expect(Object.is(fast.globalScale, ref.globalScale), `${what}: global scale`).toBe(true);
  expect(fast.scaleShape, `${what}: scale shape`).toEqual(ref.scaleShape);
  expect(
    same(fast.state?.amaxHistory, ref.state?.amaxHistory) && Object.is(fast.state?.scale, ref.state?.scale),
    `${what}: state`,
  ).toBe(true);
  expect(same(quantizedValues(fast), quantizedValuesReference(ref)), `${what}: values`).toBe(true);
  expect(same(dequantize(fast), dequantizeReference(ref)), `${what}: dequantized`).toBe(true);
}

function compare(spec: QuantSpec, x: Float32Array, rows: number, cols: number, what: string): void {
  let refError: unknown = null;
  let ref: QuantizedTensor | null = null;
  try {
    ref = quantizeReference(spec, x, [rows, cols]);
  } catch (e) {
    refError = e;
  }
  if (ref === null) {
    expect(() => quantize(spec, x, [rows, cols]), what).toThrow((refError as Error).message);
    return;
  }
  expectSameTensor(quantize(spec, x, [rows, cols]), ref, what);
}

const shapes: readonly (readonly [number, number])[] = [
  [1, 1],
  [1, 40],
  [3, 70],
  [17, 33],
  [0, 8],
];
const names = Object.keys(quantPresets);

describe('quantize (fast) equals quantizeReference bit for bit', () => {
  it.each(names)('preset %s (default and block 16 where it has a block), on ordinary and edge data', (name) => {
    const takesBlock = (quantPresets[name as keyof typeof quantPresets].params as readonly string[]).includes('block');
    for (const params of takesBlock ? [{}, { block: 16 }] : [{}]) {
      const spec = quantPreset(name, params);
      for (const [rows, cols] of shapes) {
        for (const rate of [0, 0.05, 0.3])
          compare(
            spec,
            matrix(rows, cols, `${name}${rows}${cols}${rate}`, rate),
            rows,
            cols,
            `${name} ${JSON.stringify(params)} ${rows}×${cols} rate ${rate}`,
          );
      }
    }
  });

  const variants: readonly [string, QuantSpec][] = [
    [
      'every clamp, reciprocal',
      {
        format: 'e4m3fn',
        granularity: { kind: 'row' },
        scale: { kind: 'amax' },
        scaling: 'reciprocal',
        clamp: 'fmaxf-first',
        profile: 'ieee',
      },
    ],
    [
      'propagate-nan clamp, max-over-amax',
      {
        format: 'int8',
        granularity: { kind: 'group', size: 8 },
        scale: { kind: 'amax', divisor: 100 },
        scaling: 'max-over-amax',
        clamp: 'propagate-nan',
        mode: 'rha',
      },
    ],
    [
      'static scales with zero points',
      {
        format: 'uint8',
        granularity: { kind: 'tensor' },
        scale: { kind: 'static', scale: 0.05, zeroPoint: 128 },
        mode: 'rtz',
        intNan: 'zero',
      },
    ],
    [
      'minmax symmetric int4',
      {
        format: 'int4',
        granularity: { kind: 'row' },
        scale: { kind: 'minmax', symmetric: true, includeZero: true, unitIfZero: true },
      },
    ],
    [
      'negative zero made positive',
      {
        format: 'e2m1',
        granularity: { kind: 'group', size: 16 },
        scale: { kind: 'nvfp4', unitEncode: 'reference' },
        negativeZero: 'positive',
        amaxNan: 'propagate',
      },
    ],
    [
      'multiplier fp64, pow2',
      {
        format: 'e5m2',
        granularity: { kind: 'tensor' },
        scale: {
          kind: 'multiplier',
          precision: 'fp64',
          pow2: 'exp2-floor-log2',
          invalidAmax: 'literal',
          amaxFloor: 1e-12,
        },
      },
    ],
    [
      'amax pow2 bits, propagate',
      {
        format: 'e4m3fn',
        granularity: { kind: 'block', size: 4 },
        scale: {
          kind: 'amax',
          amaxFloor: 1e-4,
          amaxFloorNan: 'propagate',
          pow2: 'ceil-bits',
          pow2Range: [-126, 127],
          pow2NonFinite: 'bits',
        },
        amaxNan: 'propagate',
      },
    ],
    [
      'unknown clamp (error)',
      { format: 'e4m3fn', granularity: { kind: 'row' }, scale: { kind: 'amax' }, clamp: 'sometimes' as never },
    ],
    [
      'unknown scale kind (error)',
      { format: 'e4m3fn', granularity: { kind: 'row' }, scale: { kind: 'magic' } as never },
    ],
    [
      'mx on an int format (error)',
      { format: 'int8', granularity: { kind: 'group', size: 32 }, scale: { kind: 'mx', exponent: 'floor' } },
    ],
  ];
  it.each(variants)('spec variant: %s', (what, spec) => {
    for (const [rows, cols] of shapes)
      for (const rate of [0, 0.2])
        compare(
          spec,
          matrix(rows, cols, `${what}${rows}${rate}`, rate),
          rows,
          cols,
          `${what} ${rows}×${cols} rate ${rate}`,
        );
  });

  it('integer codes: ties of both parities, ±0, values past 2^51 and ±Inf, per-group zero points, every rounding mode', () => {
    // With scale 1 the scaled value is the element itself: k + 0.5 ties of both parities and signs, ±0, and
    // magnitudes where the fast rounding falls back to roundInt (≥ 2^51) or the clamp saturates.
    const special = [
      0.5,
      1.5,
      2.5,
      -0.5,
      -1.5,
      -2.5,
      -0,
      0,
      126.5,
      127.5,
      -128.5,
      -127.5,
      2 ** 51,
      -(2 ** 51),
      2 ** 52 + 2,
      2 ** 60,
      -(2 ** 60),
      Infinity,
      -Infinity,
      NaN,
      0.49999997,
      -0.49999997,
      3e38,
    ];
    const rows = 4;
    const cols = special.length;
    const x = new Float32Array(rows * cols);
    for (let r = 0; r < rows; r++)
      for (let c = 0; c < cols; c++) x[r * cols + c] = special[(c + 5 * r) % cols]! * (r === 3 ? 0.25 : 1);
    for (const mode of ['rne', 'rtz', 'rha', 'rhz'] as const) {
      for (const [format, zeroPoint] of [
        ['int8', 0],
        ['uint8', 128],
        ['int4', undefined],
        ['uint4', 8],
      ] as const) {
        const stat: QuantSpec = {
          format,
          granularity: { kind: 'tensor' },
          scale: { kind: 'static', scale: 1, ...(zeroPoint !== undefined ? { zeroPoint } : {}) },
          mode,
        };
        compare(stat, x, rows, cols, `static ${format} zp ${zeroPoint} ${mode}`);
        for (const clamp of ['fminf-first', 'propagate-nan'] as const)
          compare({ ...stat, clamp, intNan: 'zero' }, x, rows, cols, `static ${format} ${clamp} ${mode}`);
      }
      compare(
        { format: 'uint4', granularity: { kind: 'group', size: 5 }, scale: { kind: 'minmax' }, mode },
        x,
        rows,
        cols,
        `minmax uint4 groups of 5 ${mode}`,
      );
      compare(
        { format: 'int8', granularity: { kind: 'block', size: 2 }, scale: { kind: 'amax' }, scaling: 'divide', mode },
        x,
        rows,
        cols,
        `amax int8 blocks ${mode}`,
      );
    }
  });

  it('stochastic rounding draws the same bits from the same stream; delayed scaling returns the same state', () => {
    const spec: QuantSpec = {
      format: 'e5m2',
      granularity: { kind: 'tensor' },
      scale: { kind: 'amax' },
      mode: 'stochastic',
    };
    const x = matrix(5, 30, 'stochastic', 0.1);
    expectSameTensor(
      quantize(spec, x, [5, 30], { randomBits: createRng('sr') }),
      quantizeReference(spec, x, [5, 30], { randomBits: createRng('sr') }),
      'stochastic',
    );
    const delayed = quantPreset('te-delayed');
    let fast = quantize(delayed, x, [5, 30]);
    let ref = quantizeReference(delayed, x, [5, 30]);
    for (let step = 0; step < 3; step++) {
      expectSameTensor(fast, ref, `delayed step ${step}`);
      fast = quantize(delayed, x, [5, 30], { state: fast.state! });
      ref = quantizeReference(delayed, x, [5, 30], { state: ref.state! });
    }
  });

  it.each(names)(
    'preset %s through quantizeTransient: one scratch over shapes that grow, shrink and alternate (views reused)',
    (name) => {
      const spec = quantPreset(name);
      // More distinct lengths than the scratch keeps views of, a repeated length after its buffer grew, an empty tensor.
      const seq: readonly (readonly [number, number])[] = [
        [1, 8],
        [8, 8],
        [1, 8],
        [3, 70],
        [1, 9],
        [9, 8],
        [17, 33],
        [1, 8],
        [0, 8],
        [8, 8],
        [40, 64],
        [1, 8],
        [3, 70],
      ];
      const made = createQuantizeScratch(4, 1);
      // A scratch built by hand (no reused views) takes the per-call views.
      const plain = {
        amax: new Float32Array(1),
        min: new Float32Array(1),
        max: new Float32Array(1),
        factors: new Float32Array(1),
        scaled: new Float32Array(1),
        codes: new Uint8Array(1),
        scales: new Float32Array(1),
      };
      seq.forEach(([rows, cols], i) => {
        const x = matrix(rows, cols, `${name}-transient-${i}`, i % 3 === 0 ? 0.2 : 0);
        const ref = quantizeReference(spec, x, [rows, cols]);
        for (const [label, scratch] of [
          ['made', made],
          ['plain', plain],
        ] as const) {
          const t = quantizeTransient(spec, x, [rows, cols], scratch);
          expect(t.codes.length, `${name} ${label} ${rows}×${cols}: codes length`).toBe(rows * cols);
          // The result lives in the scratch's current arrays (scales always, codes of 8-bit float formats), not in a view kept from before they grew.
          expect(t.scales.buffer, `${name} ${label}: scales in the scratch`).toBe(scratch.scales.buffer);
          if (elementFormat(spec.format).kind === 'float' && elementFormat(spec.format).bits <= 8)
            expect(t.codes.buffer, `${name} ${label}: codes in the scratch`).toBe(scratch.codes.buffer);
          expectSameTensor(t, ref, `${name} ${label} ${rows}×${cols} (call ${i})`);
        }
      });
    },
  );

  it('quantizeTransient writes into the scratch it is given and equals quantize', () => {
    const spec = quantPreset('deepseek-fp8-group', { block: 16 });
    const scratch = createQuantizeScratch(4, 1);
    const x = matrix(6, 40, 'transient', 0.1);
    const t = quantizeTransient(spec, x, [6, 40], scratch);
    expect(t.codes.buffer).toBe(scratch.codes.buffer);
    expect(t.scales.buffer).toBe(scratch.scales.buffer);
    expectSameTensor(t, quantizeReference(spec, x, [6, 40]), 'transient');
  });
});
