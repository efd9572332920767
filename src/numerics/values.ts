// Float32 values as text and JSON (parsing and printing that keep NaN, ±Infinity and −0) and the
// error statistics of a quantization round trip, shared by `qrl-sim cast`/`quantize` and the golden
// methods. Not a tensor file format and not a quantizer: quantize.ts does the quantizing.

import { UsageError } from '../core/errors.js';
import { parseJsonInput } from '../core/json.js';

const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$/i;
const SPECIAL_TEXT: Record<string, number> = {
  nan: Number.NaN,
  infinity: Infinity,
  '+infinity': Infinity,
  '-infinity': -Infinity,
  inf: Infinity,
  '-inf': -Infinity,
};

/** Parses a CLI value to float32 (decimal, NaN, ±Infinity, −0). */
export function parseFloat32(text: string): number {
  const special = SPECIAL_TEXT[text.toLowerCase()];
  if (special !== undefined) return special;
  if (!NUMBER.test(text))
    throw new UsageError(`value '${text}' is not a number (decimal, NaN, Infinity, -Infinity or -0)`);
  return Math.fround(Number(text));
}

/** Formats a number so that −0, NaN and ±Infinity read back unchanged. */
export function formatValue(v: number): string {
  return Object.is(v, -0) ? '-0' : String(v);
}

// JSON has no NaN, ±Infinity or −0 literal: input files spell them as these strings.
const SPECIAL_JSON: Record<string, number> = { NaN: Number.NaN, Infinity: Infinity, '-Infinity': -Infinity, '-0': -0 };

function parseElement(v: unknown, where: string): number {
  if (typeof v === 'number') return Math.fround(v);
  if (typeof v === 'string' && v in SPECIAL_JSON) return SPECIAL_JSON[v] as number;
  throw new UsageError(`--input: element ${where} is not a number: ${JSON.stringify(v)}`);
}

/** Parses the input JSON into float32 values and a (rows, cols) shape; `oneD` when the input was a flat array. */
export function parseQuantizeInput(
  text: string,
  name = '--input',
): { x: Float32Array; shape: [number, number]; oneD: boolean } {
  const data = parseJsonInput(text, name);
  if (!Array.isArray(data)) throw new UsageError('--input: expected a JSON array of numbers or an array of rows');
  if (data.length === 0 || (Array.isArray(data[0]) && data[0].length === 0))
    throw new UsageError('--input: empty array (give at least one value to quantize)');
  if (data.length === 0 || !Array.isArray(data[0])) {
    const x = Float32Array.from(data, (v, i) => parseElement(v, `[${i}]`));
    return { x, shape: [1, x.length], oneD: true };
  }
  const rows = data as unknown[];
  const cols = (rows[0] as unknown[]).length;
  const x = new Float32Array(rows.length * cols);
  rows.forEach((row, r) => {
    if (!Array.isArray(row)) throw new UsageError(`--input: row ${r} is not an array`);
    if (row.length !== cols) throw new UsageError(`--input: row ${r} has ${row.length} values, row 0 has ${cols}`);
    row.forEach((v, c) => {
      x[r * cols + c] = parseElement(v, `[${r}][${c}]`);
    });
  });
  return { x, shape: [rows.length, cols], oneD: false };
}

/**
 * Error statistics over the elements where input and output are both finite, and `nonFinite`:
 * the number of elements whose input is finite but whose dequantized value is not (NaN or ±∞),
 * which the statistics cannot include and must not hide.
 */
export function quantizationStats(
  x: Float32Array,
  y: Float32Array,
): { maxAbsError: number; rmse: number; sqnrDb: number; nonFinite: number } {
  let maxAbs = 0;
  let sumSq = 0;
  let sumErr = 0;
  let n = 0;
  let nonFinite = 0;
  for (let i = 0; i < x.length; i++) {
    const a = x[i] as number;
    const b = y[i] as number;
    if (Number.isFinite(a) && !Number.isFinite(b)) nonFinite++;
    if (!Number.isFinite(a) || !Number.isFinite(b)) continue;
    const e = a - b;
    maxAbs = Math.max(maxAbs, Math.abs(e));
    sumSq += a * a;
    sumErr += e * e;
    n++;
  }
  const rmse = n === 0 ? 0 : Math.sqrt(sumErr / n);
  const sqnrDb = sumErr === 0 ? Infinity : 10 * Math.log10(sumSq / sumErr);
  return { maxAbsError: maxAbs, rmse, sqnrDb, nonFinite };
}
