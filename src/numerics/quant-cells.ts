// Scale cells of a row-major (rows, cols) tensor: which cell holds each element (the layout of a granularity) and
// per-cell statistics (amax, min, max). Not the scale rules (scale-rules.ts), not the element casts.

import type { Granularity, QuantSpec } from './quant-spec.js';

/** Cell layout of a granularity over (rows, cols). */
export interface CellLayout {
  readonly count: number;
  readonly shape: readonly number[];
  /** Cells per row of the scale grid (1 for tensor/row). */
  readonly perRow: number;
  /** Index of the cell holding element (r, c). */
  index(r: number, c: number): number;
  /** Elements per cell along K (Infinity for tensor/row: the scale is constant along K). */
  readonly kSize: number;
}

/**
 * A {@link CellLayout} as one class (one object shape, `index` on the prototype, no closure per
 * call): cell of (r, c) = ⌊r / rowDiv⌋ · rowStride + ⌊c / colDiv⌋.
 */
class GridLayout implements CellLayout {
  constructor(
    readonly count: number,
    readonly shape: readonly number[],
    readonly perRow: number,
    readonly kSize: number,
    private readonly rowDiv: number,
    private readonly rowStride: number,
    private readonly colDiv: number,
  ) {}

  index(r: number, c: number): number {
    return Math.floor(r / this.rowDiv) * this.rowStride + Math.floor(c / this.colDiv);
  }
}

/** The scale cells of `granularity` over a (rows, cols) tensor. */
export function cellLayout(granularity: Granularity, rows: number, cols: number): CellLayout {
  switch (granularity.kind) {
    case 'tensor':
      return new GridLayout(1, [], 1, Infinity, 1, 0, Infinity);
    case 'row':
      return new GridLayout(rows, [rows], 1, Infinity, 1, 1, Infinity);
    case 'group': {
      const g = checkSize(granularity.size, 'granularity.size');
      const ng = Math.ceil(cols / g);
      return new GridLayout(rows * ng, [rows, ng], ng, g, 1, ng, g);
    }
    case 'block': {
      const b = checkSize(granularity.size, 'granularity.size');
      const nbr = Math.ceil(rows / b);
      const nbc = Math.ceil(cols / b);
      return new GridLayout(nbr * nbc, [nbr, nbc], nbc, b, b, nbc, b);
    }
    default:
      throw new Error(
        `granularity.kind: unknown '${(granularity as { kind: string }).kind}' (known: tensor, row, group, block)`,
      );
  }
}

/** @internal Throws unless `size` is a positive integer; the message names `field`. */
export function checkSize(size: number, field: string): number {
  if (!Number.isInteger(size) || size < 1) throw new Error(`${field}: expected a positive integer, got ${size}`);
  return size;
}

/** Checks a (rows, cols) shape against a data length; throws an error naming the field. */
export function checkShape2d(field: string, length: number, shape: readonly number[]): readonly [number, number] {
  const [rows, cols] = shape;
  if (
    shape.length !== 2 ||
    rows === undefined ||
    cols === undefined ||
    !Number.isInteger(rows) ||
    !Number.isInteger(cols) ||
    rows < 0 ||
    cols < 0
  ) {
    throw new Error(`${field} shape: expected [rows, cols] of non-negative integers, got [${shape.join(', ')}]`);
  }
  if (rows * cols !== length)
    throw new Error(`${field}: ${length} elements do not fill shape [${rows}, ${cols}] (${rows * cols})`);
  return [rows, cols];
}

/** Per-cell statistics of x (indices below the layout's `count` are valid). */
export interface CellStats {
  amax: Float32Array;
  min: Float32Array;
  max: Float32Array;
}

/** Where {@link cellStats} writes: arrays it grows on demand (replaced, so keep the object, not the arrays). */
export interface CellStatsScratch {
  amax: Float32Array<ArrayBuffer>;
  min: Float32Array<ArrayBuffer>;
  max: Float32Array<ArrayBuffer>;
}

/** `a` if it holds `n` elements, else a new array of at least `n` (doubling). @internal */
export function grown(a: Float32Array<ArrayBuffer>, n: number): Float32Array<ArrayBuffer> {
  return a.length >= n ? a : new Float32Array(Math.max(n, 2 * a.length));
}

/** What to do with a NaN element in a cell's amax: QuantSpec.amaxNan. */
export type AmaxNanRule = 'ignore' | 'propagate';

/**
 * Per-cell amax (and min, max for the `minmax` scale rule) of x into `scratch`, by runs of consecutive elements of
 * a cell. A NaN element is skipped (`amaxNan: 'ignore'`, the default), or makes the cell's statistics NaN ('propagate').
 */
export function cellStats(
  x: Float32Array,
  rows: number,
  cols: number,
  layout: CellLayout,
  spec: Pick<QuantSpec, 'amaxNan' | 'scale'>,
  scratch: CellStatsScratch,
): CellStats {
  const amaxNan = spec.amaxNan ?? 'ignore';
  if (spec.scale.kind !== 'minmax') return cellAmax(x, rows, cols, layout, amaxNan, scratch);
  const propagateNan = amaxNan === 'propagate';
  const count = layout.count;
  const amax = (scratch.amax = grown(scratch.amax, count));
  const min = (scratch.min = grown(scratch.min, count));
  const max = (scratch.max = grown(scratch.max, count));
  amax.fill(0, 0, count);
  min.fill(Infinity, 0, count);
  max.fill(-Infinity, 0, count);
  const kSize = layout.kSize;
  // A cell covers `seg` consecutive elements of a row: index(r, c) = index(r, 0) + ⌊c / kSize⌋ for every layout.
  const seg = Number.isFinite(kSize) ? kSize : Math.max(cols, 1);
  for (let r = 0; r < rows; r++) {
    const rowCell = layout.index(r, 0);
    const base = r * cols;
    for (let c0 = 0, cell = rowCell; c0 < cols; c0 += seg, cell++) {
      const cEnd = Math.min(cols, c0 + seg);
      let am = amax[cell] as number;
      let mn = min[cell] as number;
      let mx = max[cell] as number;
      let nan = false;
      for (let c = c0; c < cEnd; c++) {
        const v = x[base + c] as number;
        if (v !== v) {
          nan = true;
          continue;
        }
        const a = Math.abs(v);
        if (a > am) am = a;
        if (v < mn) mn = v;
        if (v > mx) mx = v;
      }
      if (nan && propagateNan) {
        am = Number.NaN;
        mn = Number.NaN;
        mx = Number.NaN;
      }
      amax[cell] = am;
      min[cell] = mn;
      max[cell] = mx;
    }
  }
  // Empty cells (only possible for empty tensors) have amax 0 and min = max = 0.
  for (let i = 0; i < count; i++) {
    if (min[i] === Infinity) min[i] = 0;
    if (max[i] === -Infinity) max[i] = 0;
  }
  return { amax, min, max };
}

/**
 * The amax of x[from, to) continued from `am` (the cell's amax so far): a NaN element is skipped ('ignore'), or makes
 * the result NaN ('propagate').
 */
export function amaxRun(x: Float32Array, from: number, to: number, am: number, amaxNan: AmaxNanRule): number {
  let nan = false;
  for (let i = from; i < to; i++) {
    const a = Math.abs(x[i] as number);
    if (a > am)
      am = a; // false for NaN: skipped
    else if (a !== a) nan = true;
  }
  return nan && amaxNan === 'propagate' ? Number.NaN : am;
}

/** @internal Replaces the one cell's amax by `QuantizeOptions.tensorAmax` (per-tensor granularity only). */
export function overrideTensorAmax(amax: Float32Array, count: number, tensorAmax: number): void {
  if (count !== 1) throw new Error(`tensorAmax: needs granularity 'tensor' (one cell), got ${count} cells`);
  amax[0] = tensorAmax;
}

/** {@link cellStats} for rules that read only amax (every rule but `minmax`): min and max are left unset. */
function cellAmax(
  x: Float32Array,
  rows: number,
  cols: number,
  layout: CellLayout,
  amaxNan: AmaxNanRule,
  scratch: CellStatsScratch,
): CellStats {
  const count = layout.count;
  const amax = (scratch.amax = grown(scratch.amax, count));
  amax.fill(0, 0, count);
  // One cell (per-tensor scale): the whole tensor is one run of elements.
  const flat = count === 1;
  const seg = flat ? Math.max(rows * cols, 1) : Number.isFinite(layout.kSize) ? layout.kSize : Math.max(cols, 1);
  for (let r = 0; r < (flat ? Math.min(rows, 1) : rows); r++) {
    const rowCell = flat ? 0 : layout.index(r, 0);
    const base = r * cols;
    const width = flat ? rows * cols : cols;
    for (let c0 = 0, cell = rowCell; c0 < width; c0 += seg, cell++) {
      const end = base + Math.min(width, c0 + seg);
      amax[cell] = amaxRun(x, base + c0, end, amax[cell] as number, amaxNan);
    }
  }
  return { amax, min: scratch.min, max: scratch.max };
}
