// Oracle tests of quantize/dequantize against onnxruntime-node QuantizeLinear/DequantizeLinear (opset 21):
// int8/uint8 per tensor and per axis, int4/uint4 and float8 blocked (16, 32), saturate 1 and 0. Exact equality.
import { afterAll, describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import {
  type ElementFormatName,
  type Granularity,
  type QuantSpec,
  type QuantizedTensor,
  dequantize,
  quantize,
} from '../../src/numerics/index.js';
import { cellLayout, elementFormat } from '../../src/numerics/quantize.js';
import {
  type OrtQuantType,
  ortDequantizeLinear,
  ortDisposeSessions,
  ortQuantizeLinear,
  ortQuantizeLinearCodes,
} from '../oracle/ort.js';

afterAll(ortDisposeSessions);

/** Bit patterns with every NaN made the canonical 0x7FC00000: a NaN's sign after float arithmetic is not specified. */
const canonicalBits = (a: Float32Array): number[] =>
  Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length), (b, i) => (Number.isNaN(a[i]) ? 0x7fc00000 : b));

/**
 * Test input: Gaussian rows at varied magnitudes, exact ties of the quotient (k + ½ multiples of a
 * power of two), zeros, −0, and (optionally) NaN/±Inf. Rows × cols with cols not a multiple of the block.
 */
function input(rows: number, cols: number, seed: string, specials: boolean): Float32Array {
  const rng = createRng(seed).fork('x');
  const x = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const mag = 2 ** (rng.int(12) - 6);
    for (let c = 0; c < cols; c++) {
      const u = rng.uniform();
      let v = rng.normal() * mag;
      if (u < 0.1)
        v = ((rng.int(40) - 20 + 0.5) * mag) / 8; // ties after scaling by a power of two
      else if (u < 0.13) v = 0;
      else if (u < 0.15) v = -0;
      x[r * cols + c] = v;
    }
  }
  if (specials) {
    x[3] = Number.NaN;
    x[cols + 5] = Infinity;
    x[2 * cols + 1] = -Infinity;
  }
  return x;
}

/** The scale shape ONNX expects for a granularity (axis 0 per-axis, or blocks along axis 1). */
function onnxLayout(
  g: Granularity,
  rows: number,
  cols: number,
): { scaleShape: number[]; axis?: number; blockSize?: number } {
  if (g.kind === 'tensor') return { scaleShape: [] };
  if (g.kind === 'row') return { scaleShape: [rows], axis: 0 };
  if (g.kind === 'group') return { scaleShape: [rows, Math.ceil(cols / g.size)], axis: 1, blockSize: g.size };
  throw new Error('B×B blocks have no ONNX equivalent');
}

function codeValues(q: QuantizedTensor): number[] {
  return Array.from(q.codes as ArrayLike<number>);
}

/** Raw storage code of an integer value (int8 as its byte, int4 as its nibble). */
function storageCode(format: ElementFormatName, v: number): number {
  if (format === 'int8') return v & 0xff;
  if (format === 'int4') return v & 0x0f;
  return v;
}

async function compareWithOrt(
  spec: QuantSpec,
  rows: number,
  cols: number,
  x: Float32Array,
  saturate?: 0 | 1,
): Promise<void> {
  const q = quantize(spec, x, [rows, cols]);
  if (spec.scale.kind === 'amax' && spec.scale.divisor !== undefined) {
    // the saturating cases must really reach the clamp: some finite |x/s| beyond the format's max
    const cells = cellLayout(spec.granularity, rows, cols);
    const f = elementFormat(spec.format);
    const max = f.kind === 'float' ? f.maxFinite : f.max;
    let beyond = 0;
    for (let i = 0; i < rows * cols; i++) {
      const v = Math.abs(x[i]! / q.scales[cells.index(Math.floor(i / cols), i % cols)]!);
      if (Number.isFinite(v) && v > max + 1) beyond++;
    }
    expect(beyond).toBeGreaterThan(0);
  }
  const layout = onnxLayout(spec.granularity, rows, cols);
  const type = spec.format as OrtQuantType;
  const zp = q.zeroPoints ? Array.from(q.zeroPoints) : null;
  const opts = {
    outputType: type,
    ...(layout.axis !== undefined ? { axis: layout.axis } : {}),
    ...(layout.blockSize !== undefined ? { blockSize: layout.blockSize } : {}),
    ...(saturate !== undefined ? { saturate } : {}),
  };
  // Raw codes (constant folding) must equal ours exactly.
  const raw = await ortQuantizeLinearCodes(x, [rows, cols], q.scales, layout.scaleShape, zp, opts);
  expect(Array.from(raw)).toEqual(codeValues(q).map((v) => storageCode(spec.format, v)));
  // Runtime values as well (integers, or decoded float8).
  const values = await ortQuantizeLinear(x, [rows, cols], q.scales, layout.scaleShape, zp, opts);
  if (type.startsWith('e')) {
    expect(values.length).toBe(rows * cols);
  } else {
    expect(Array.from(values)).toEqual(codeValues(q));
  }
  // Dequantization, bit for bit.
  const dq = await ortDequantizeLinear(codeValues(q), [rows, cols], q.scales, layout.scaleShape, zp, {
    inputType: type,
    ...(layout.axis !== undefined ? { axis: layout.axis } : {}),
    ...(layout.blockSize !== undefined ? { blockSize: layout.blockSize } : {}),
  });
  expect(canonicalBits(dequantize(q))).toEqual(canonicalBits(dq));
}

describe('QuantizeLinear/DequantizeLinear-21 oracle: int8 and uint8', () => {
  const cases: [string, QuantSpec][] = [
    [
      'int8 per tensor, amax/127',
      { format: 'int8', granularity: { kind: 'tensor' }, scale: { kind: 'amax' }, scaling: 'divide' },
    ],
    [
      'int8 per axis 0, amax/127',
      { format: 'int8', granularity: { kind: 'row' }, scale: { kind: 'amax' }, scaling: 'divide' },
    ],
    [
      'int8 per axis 0, scale amax/160 (saturates)',
      { format: 'int8', granularity: { kind: 'row' }, scale: { kind: 'amax', divisor: 160 } },
    ],
    [
      'uint8 per tensor, min/max with zero point',
      { format: 'uint8', granularity: { kind: 'tensor' }, scale: { kind: 'minmax', includeZero: true } },
    ],
    [
      'uint8 per axis 0, min/max with zero point',
      { format: 'uint8', granularity: { kind: 'row' }, scale: { kind: 'minmax' } },
    ],
    ['int8 per axis 0, asymmetric', { format: 'int8', granularity: { kind: 'row' }, scale: { kind: 'minmax' } }],
  ];
  it.each(cases)('%s: codes and dequantized values equal ORT', async (_, spec) => {
    for (const specials of [false, true]) {
      await compareWithOrt(
        spec,
        24,
        40,
        input(24, 40, `${spec.format}/${spec.granularity.kind}/${specials}`, specials),
      );
    }
  });
});

describe('QuantizeLinear/DequantizeLinear-21 oracle: int4 and uint4 blocked', () => {
  for (const block of [16, 32]) {
    const cases: [string, QuantSpec][] = [
      [
        `int4 blocks of ${block}, amax/7`,
        { format: 'int4', granularity: { kind: 'group', size: block }, scale: { kind: 'amax' } },
      ],
      [
        `int4 blocks of ${block}, amax/10 (saturates)`,
        { format: 'int4', granularity: { kind: 'group', size: block }, scale: { kind: 'amax', divisor: 10 } },
      ],
      [
        `uint4 blocks of ${block}, GPTQ-style min/max`,
        { format: 'uint4', granularity: { kind: 'group', size: block }, scale: { kind: 'minmax', includeZero: true } },
      ],
      [
        `int4 blocks of ${block}, asymmetric`,
        { format: 'int4', granularity: { kind: 'group', size: block }, scale: { kind: 'minmax' } },
      ],
    ];
    it.each(cases)('%s: codes and dequantized values equal ORT', async (_, spec) => {
      for (const specials of [false, true]) {
        await compareWithOrt(spec, 12, 72, input(12, 72, `${spec.format}/${block}/${specials}`, specials));
      }
    });
  }
});

describe('QuantizeLinear/DequantizeLinear-21 oracle: float8 blocked', () => {
  const formats = ['e4m3fn', 'e4m3fnuz', 'e5m2', 'e5m2fnuz'] as const;
  for (const format of formats) {
    for (const block of [16, 32]) {
      for (const saturate of [1, 0] as const) {
        // divisor above max: the largest values of each block of each block's values overflow and meet the saturate rule.
        const spec: QuantSpec = {
          format,
          granularity: { kind: 'group', size: block },
          scale: { kind: 'amax', divisor: format.startsWith('e4') ? 600 : 80000 },
          profile: saturate === 1 ? 'onnx-sat' : 'ort-1.30',
        };
        it(`${format} blocks of ${block}, saturate=${saturate}: codes and dequantized values equal ORT`, async () => {
          await compareWithOrt(spec, 8, 72, input(8, 72, `${format}/${block}/${saturate}`, true), saturate);
        });
      }
    }
  }
  it('e4m3fn per tensor and per axis, saturate=1', async () => {
    const base = { format: 'e4m3fn', scale: { kind: 'amax' }, profile: 'onnx-sat' } as const;
    await compareWithOrt({ ...base, granularity: { kind: 'tensor' } }, 16, 48, input(16, 48, 'e4m3fn/tensor', true), 1);
    await compareWithOrt({ ...base, granularity: { kind: 'row' } }, 16, 48, input(16, 48, 'e4m3fn/row', true), 1);
  });
});
