// The `quantizers` golden suite: every preset on tensors that exercise its edges (all-zero block,
// outlier, power-of-two amax and scale edges, partial last block, −0, subnormals, NaN, ±Inf):
// codes, scales, zero points, dequantized. Not the presets themselves (numerics/presets.ts).

import { type QuantPreset, quantPreset, quantPresets } from '../../numerics/presets.js';
import { dequantize, quantize } from '../../numerics/quantize.js';
import { nextFloat32Down, nextFloat32Up } from '../../numerics/scales.js';
import { createRng, type Rng } from '../../core/rng.js';
import type { WireArray } from '../../protocol/tensor.js';
import { tensor } from '../write.js';
import type { GoldenCase, GoldenSuite, GoldenTensor } from '../types.js';
import { rngStreams } from '../../core/rng-streams.js';

/** Block size used for presets that take one: small, so that a few rows hold many blocks. */
export const GOLDEN_BLOCK = 8;

/**
 * An input of `rows × cols` (cols = 2·block + 3: a partial last group). Row 0 all zero, row 1 with
 * an outlier, row 2 with amax exactly 8 (a power of two), row 3 tiny values (and, with `nan`, a NaN),
 * the rest normal values at scales from 1e-3 to 1e3.
 */
export function quantizerInput(
  rng: Rng,
  size: { readonly rows: number; readonly cols: number; readonly nan: boolean },
): Float32Array {
  const { rows, cols, nan } = size;
  const x = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const scale = 10 ** (rng.int(7) - 3);
    for (let c = 0; c < cols; c++) x[r * cols + c] = Math.fround(rng.normal() * scale);
  }
  x.fill(0, 0, cols);
  if (rows > 1) x[cols + 3] = Math.fround(1000 * (x[cols + 3] as number) + 500);
  if (rows > 2) {
    for (let c = 0; c < cols; c++)
      x[2 * cols + c] = Math.fround(Math.max(-7.5, Math.min(7.5, x[2 * cols + c] as number)));
    x[2 * cols + 1] = -8;
    x[2 * cols + cols - 1] = 8;
  }
  if (rows > 3) {
    for (let c = 0; c < cols; c++) x[3 * cols + c] = Math.fround((rng.uniform() - 0.5) * 1e-6);
    if (nan) x[3 * cols + 2] = Number.NaN;
  }
  return x;
}

/** Rows of the `edges` inputs (two 8-row blocks for B×B presets, the second partial). */
export const EDGE_ROWS = 12;

/**
 * An edge-case input of `EDGE_ROWS × cols` for groups of 8 (cols = 19: groups [0, 8), [8, 16), [16, 19)).
 * Row 0: all-zero groups (+0; ±0 mixed; all −0). Row 1: float32 subnormals (one group up to 2^-126).
 * Rows 2–4: groups whose amax/448 is a power of two, one ulp above and one below (28, 448·2^10,
 * 448·2^-20), so each row's amax is one ulp above 448·2^k: 448/amax falls one ulp below a power of
 * two. Row 5: amax one ulp below 28. Row 6: MX edges, amax 8, one ulp below 8, 12 = 1.5·8.
 * Row 7: amax 3e38, 1e-30, 1e-38 (scales near overflow and underflow). With `nonFinite`, row 8 holds a
 * NaN, +Inf and −Inf in its three groups and row 9 a negative NaN, Inf with NaN, and a finite group;
 * without, they are random. Rows 10–11 random normal values.
 */
export function quantizerEdgeInput(
  rng: Rng,
  size: { readonly cols: number; readonly nonFinite: boolean },
): Float32Array {
  const { cols, nonFinite } = size;
  const rows = EDGE_ROWS;
  const x = new Float32Array(rows * cols);
  for (let i = 0; i < x.length; i++) x[i] = Math.fround(rng.normal());
  const groups = [
    [0, 8],
    [8, 16],
    [16, cols],
  ] as const;
  /** Fills row r, group g with values of magnitude below amax/2 and puts ±amax at a random place. */
  const group = (r: number, g: number, amax: number): void => {
    const [lo, hi] = groups[g] as readonly [number, number];
    for (let c = lo; c < hi; c++) x[r * cols + c] = Math.fround((rng.uniform() - 0.5) * amax);
    x[r * cols + lo + rng.int(hi - lo)] = rng.uniform() < 0.5 ? -amax : amax;
  };
  x.fill(0, 0, cols);
  for (let c = 8; c < 16; c++) x[c] = c % 2 === 0 ? -0 : 0;
  for (let c = 16; c < cols; c++) x[c] = -0;
  for (let c = 0; c < cols; c++) x[cols + c] = (rng.uniform() < 0.5 ? -1 : 1) * (1 + rng.int(2 ** 23 - 1)) * 2 ** -149;
  x[cols + 8 + rng.int(8)] = 2 ** -126;
  x[cols + 16] = -(2 ** -149);
  x[cols + 17] = 2 ** -149;
  x[cols + 18] = -0;
  for (const [r, p2] of [
    [2, 28],
    [3, 448 * 2 ** 10],
    [4, 448 * 2 ** -20],
  ] as const) {
    group(r, 0, p2);
    group(r, 1, nextFloat32Up(p2));
    group(r, 2, nextFloat32Down(p2));
  }
  group(5, 0, nextFloat32Down(28));
  group(5, 1, 3);
  group(5, 2, 0.5);
  group(6, 0, 8);
  group(6, 1, nextFloat32Down(8));
  group(6, 2, 12);
  group(7, 0, 3e38);
  group(7, 1, Math.fround(1e-30));
  group(7, 2, Math.fround(1e-38));
  if (nonFinite) {
    x[8 * cols + 1 + rng.int(6)] = Number.NaN;
    x[8 * cols + 8 + rng.int(8)] = Infinity;
    x[8 * cols + 16 + rng.int(3)] = -Infinity;
    const negNan = new Float32Array(new Uint32Array([0xffc00000]).buffer)[0] as number;
    x[9 * cols + 2] = negNan;
    x[9 * cols + 9] = Infinity;
    x[9 * cols + 12] = Number.NaN;
  }
  return x;
}

/** The inputs of each preset's cases: `.finite`, `.nan`, `.edges` (with NaN/±Inf), `.edges-finite`. */
const variants = ['finite', 'nan', 'edges', 'edges-finite'] as const;
type Variant = (typeof variants)[number];

const asWire = (codes: ArrayLike<number> & { BYTES_PER_ELEMENT: number }): WireArray =>
  codes instanceof Int8Array ? Int32Array.from(codes) : (codes as WireArray);

function quantizerCase(name: string, preset: QuantPreset, variant: Variant, ue8m0: boolean, seed: number): GoldenCase {
  const block = preset.params.includes('block') ? GOLDEN_BLOCK : undefined;
  const spec = quantPreset(name, { ...(block !== undefined ? { block } : {}), ...(ue8m0 ? { ue8m0 } : {}) });
  const isBlock = spec.granularity.kind === 'block';
  const cols = 2 * GOLDEN_BLOCK + 3;
  const edges = variant === 'edges' || variant === 'edges-finite';
  const rows = edges ? EDGE_ROWS : isBlock ? GOLDEN_BLOCK + 3 : 6;
  const nan = variant === 'nan' || variant === 'edges';
  // The .finite/.nan streams keep their names (and inputs) from before the ue8m0 and edge variants.
  const rng = createRng(seed).fork(rngStreams.golden.quantizer(name, variant, ue8m0));
  const x = edges
    ? quantizerEdgeInput(rng, { cols, nonFinite: variant === 'edges' })
    : quantizerInput(rng, { rows, cols, nan });
  const q = quantize(spec, x, [rows, cols]);
  const y = dequantize(q);
  const tensors: Record<string, GoldenTensor> = {
    input: tensor('input', x, 'bitwise', [rows, cols]),
    codes: tensor('expected', asWire(q.codes), 'bitwise', [rows, cols]),
    scales: tensor('expected', q.scales, { ulp: 0 }, q.scaleShape),
    ...(q.scaleCodes ? { scaleCodes: tensor('expected', q.scaleCodes, 'bitwise', q.scaleShape) } : {}),
    ...(q.zeroPoints ? { zeroPoints: tensor('expected', q.zeroPoints, 'bitwise', q.scaleShape) } : {}),
    ...(q.globalScale !== undefined
      ? { globalScale: tensor('expected', new Float32Array([q.globalScale]), { ulp: 0 }, []) }
      : {}),
    dequantized: tensor('expected', y, { ulp: 0 }, [rows, cols]),
  };
  const what = edges
    ? `all-zero and ±0 groups, subnormals, amax/448 and 448/amax one ulp either side of powers of two, MX exponent edges, scales near overflow and underflow${variant === 'edges' ? ', groups with NaN, −NaN, +Inf, −Inf' : ''}`
    : `all-zero row, outlier, power-of-two amax, partial last group${nan ? ', a NaN' : ''}`;
  return {
    name: `${name}.${ue8m0 ? 'ue8m0.' : ''}${variant}`,
    description: `${name}${ue8m0 ? ' (ue8m0)' : ''} on [${rows}, ${cols}]${block !== undefined ? ` with block ${block}` : ''}: ${what}`,
    params: {
      preset: name,
      ...(block !== undefined ? { block } : {}),
      ...(ue8m0 ? { ue8m0 } : {}),
      format: spec.format,
      granularity: spec.granularity,
      nan,
      input: variant,
    },
    tensors,
  };
}

/** Every preset on every input variant, and again with UE8M0 scales where the preset takes `ue8m0`. */
export const quantizersSuite: GoldenSuite = {
  name: 'quantizers',
  description: 'every quantizer preset on edge-case tensors: codes, scales (and their codes), zero points, dequantized',
  cases(seed) {
    return Object.entries(quantPresets as Record<string, QuantPreset>).flatMap(([name, preset]) =>
      (preset.params.includes('ue8m0') ? [false, true] : [false]).flatMap((ue8m0) =>
        variants.map((v) => quantizerCase(name, preset, v, ue8m0, seed)),
      ),
    );
  },
};
