// The `quantizers` golden suite: every preset on tensors that exercise its edges (all-zero block,
// outlier, power-of-two amax, partial last block, NaN): codes, scales, zero points, dequantized.

import { type QuantPreset, quantPreset, quantPresets } from '../../numerics/presets.js';
import { dequantize, quantize } from '../../numerics/quantize.js';
import { createRng, type Rng } from '../../rng.js';
import type { WireArray } from '../../protocol/tensor.js';
import { tensor } from '../write.js';
import type { GoldenCase, GoldenSuite, GoldenTensor } from '../types.js';

/** Block size used for presets that take one: small, so that a few rows hold many blocks. */
export const GOLDEN_BLOCK = 8;

/**
 * An input of `rows × cols` (cols = 2·block + 3: a partial last group). Row 0 all zero, row 1 with
 * an outlier, row 2 with amax exactly 8 (a power of two), row 3 tiny values (and, with `nan`, a NaN),
 * the rest normal values at scales from 1e-3 to 1e3.
 */
export function quantizerInput(rng: Rng, rows: number, cols: number, nan: boolean): Float32Array {
  const x = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const scale = 10 ** (rng.int(7) - 3);
    for (let c = 0; c < cols; c++) x[r * cols + c] = Math.fround(rng.normal() * scale);
  }
  x.fill(0, 0, cols);
  if (rows > 1) x[cols + 3] = Math.fround(1000 * (x[cols + 3] as number) + 500);
  if (rows > 2) {
    for (let c = 0; c < cols; c++) x[2 * cols + c] = Math.fround(Math.max(-7.5, Math.min(7.5, x[2 * cols + c] as number)));
    x[2 * cols + 1] = -8;
    x[2 * cols + cols - 1] = 8;
  }
  if (rows > 3) {
    for (let c = 0; c < cols; c++) x[3 * cols + c] = Math.fround((rng.uniform() - 0.5) * 1e-6);
    if (nan) x[3 * cols + 2] = Number.NaN;
  }
  return x;
}

const asWire = (codes: ArrayLike<number> & { BYTES_PER_ELEMENT: number }): WireArray =>
  codes instanceof Int8Array ? Int32Array.from(codes) : (codes as WireArray);

function quantizerCase(name: string, preset: QuantPreset, nan: boolean, seed: number): GoldenCase {
  const block = preset.params.includes('block') ? GOLDEN_BLOCK : undefined;
  const spec = quantPreset(name, block !== undefined ? { block } : {});
  const isBlock = spec.granularity.kind === 'block';
  const cols = 2 * GOLDEN_BLOCK + 3;
  const rows = isBlock ? GOLDEN_BLOCK + 3 : 6;
  const rng = createRng(seed).fork(`golden/quantizers/${name}/${nan ? 'nan' : 'finite'}`);
  const x = quantizerInput(rng, rows, cols, nan);
  const q = quantize(spec, x, [rows, cols]);
  const y = dequantize(q);
  const tensors: Record<string, GoldenTensor> = {
    input: tensor('input', x, 'bitwise', [rows, cols]),
    codes: tensor('expected', asWire(q.codes), 'bitwise', [rows, cols]),
    scales: tensor('expected', q.scales, { ulp: 0 }, q.scaleShape),
    ...(q.scaleCodes ? { scaleCodes: tensor('expected', q.scaleCodes, 'bitwise', q.scaleShape) } : {}),
    ...(q.zeroPoints ? { zeroPoints: tensor('expected', q.zeroPoints, 'bitwise', q.scaleShape) } : {}),
    ...(q.globalScale !== undefined ? { globalScale: tensor('expected', new Float32Array([q.globalScale]), { ulp: 0 }, []) } : {}),
    dequantized: tensor('expected', y, { ulp: 0 }, [rows, cols]),
  };
  return {
    name: `${name}.${nan ? 'nan' : 'finite'}`,
    description: `${name} on [${rows}, ${cols}]${block !== undefined ? ` with block ${block}` : ''}: all-zero row, outlier, power-of-two amax, partial last group${nan ? ', a NaN' : ''}`,
    params: { preset: name, ...(block !== undefined ? { block } : {}), format: spec.format, granularity: spec.granularity, nan },
    tensors,
  };
}

/** Every preset, with and without a NaN in the input. */
export const quantizersSuite: GoldenSuite = {
  name: 'quantizers',
  description: 'every quantizer preset on edge-case tensors: codes, scales (and their codes), zero points, dequantized',
  cases(seed) {
    return Object.entries(quantPresets as Record<string, QuantPreset>).flatMap(([name, preset]) => [false, true].map((nan) => quantizerCase(name, preset, nan, seed)));
  },
};
