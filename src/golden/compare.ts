// The compare rules of qrl-golden/1 applied to two typed arrays, with a readable first mismatch
// (index, both values in hex and decimal). Not file I/O; the Python reader implements the same rules.

import type { SafetensorsDtype } from '../protocol/safetensors.js';
import type { WireArray } from '../protocol/tensor.js';
import type { CompareRule } from './types.js';

/** The first mismatch of a comparison and how many elements differ. */
export interface Mismatch {
  /** Number of elements that break the rule. */
  readonly count: number;
  /** Flat (row-major) index of the first one. */
  readonly flatIndex: number;
  /** Its multi-dimensional index. */
  readonly index: readonly number[];
  readonly got: number;
  readonly want: number;
  readonly gotHex: string;
  readonly wantHex: string;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const f64 = new Float64Array(1);
const u64 = new BigUint64Array(f64.buffer);

/** The bit pattern of `v` in `dtype`, as hex (`0x3f800000` for F32 1). */
export function hexOf(v: number, dtype: SafetensorsDtype): string {
  switch (dtype) {
    case 'F64':
      f64[0] = v;
      return `0x${(u64[0] as bigint).toString(16).padStart(16, '0')}`;
    case 'F32':
      f32[0] = v;
      return `0x${(u32[0] as number).toString(16).padStart(8, '0')}`;
    case 'I32':
      return `0x${(v >>> 0).toString(16).padStart(8, '0')}`;
    case 'U32':
      return `0x${v.toString(16).padStart(8, '0')}`;
    case 'U16':
      return `0x${v.toString(16).padStart(4, '0')}`;
    default:
      return `0x${v.toString(16).padStart(2, '0')}`;
  }
}

function orderedBits(v: number, dtype: 'F32' | 'F64'): bigint {
  let bits: bigint;
  let signMask: bigint;
  if (dtype === 'F32') {
    f32[0] = v;
    bits = BigInt(u32[0] as number);
    signMask = 0x80000000n;
  } else {
    f64[0] = v;
    bits = u64[0] as bigint;
    signMask = 0x8000000000000000n;
  }
  return bits >= signMask ? -(bits - signMask) : bits;
}

/** Units in the last place between two non-NaN floats of `dtype` (+0 and −0 are 0 apart). */
export function ulpDistance(a: number, b: number, dtype: 'F32' | 'F64'): number {
  const d = orderedBits(a, dtype) - orderedBits(b, dtype);
  return Number(d < 0n ? -d : d);
}

function sameBits(a: number, b: number, dtype: SafetensorsDtype): boolean {
  if (dtype === 'F32' || dtype === 'F64') return hexOf(a, dtype) === hexOf(b, dtype);
  return a === b;
}

/** Whether `got` satisfies `rule` against `want` (one element). */
export function elementMatches(got: number, want: number, rule: CompareRule, dtype: SafetensorsDtype): boolean {
  if (rule === 'bitwise') return sameBits(got, want, dtype);
  if (Number.isNaN(want) || Number.isNaN(got)) return Number.isNaN(want) && Number.isNaN(got);
  if (!Number.isFinite(want) || !Number.isFinite(got)) return got === want;
  if ('ulp' in rule) {
    if (dtype !== 'F32' && dtype !== 'F64') return Math.abs(got - want) <= rule.ulp;
    return ulpDistance(got, want, dtype) <= rule.ulp;
  }
  return Math.abs(got - want) <= rule.atol + rule.rtol * Math.abs(want);
}

function unravel(flat: number, shape: readonly number[]): number[] {
  const index = new Array<number>(shape.length).fill(0);
  let rest = flat;
  for (let d = shape.length - 1; d >= 0; d--) {
    const n = shape[d] as number;
    index[d] = n === 0 ? 0 : rest % n;
    rest = n === 0 ? 0 : Math.floor(rest / n);
  }
  return index;
}

/**
 * Compares `got` with `want` (same length, row-major `shape`) by `rule`; null when every element
 * matches, else the first mismatch and the count. Throws when the lengths differ.
 */
export function compareArrays(
  got: ArrayLike<number> | WireArray,
  want: ArrayLike<number> | WireArray,
  shape: readonly number[],
  rule: CompareRule,
  dtype: SafetensorsDtype,
): Mismatch | null {
  if (got.length !== want.length)
    throw new Error(`compare: got ${got.length} elements, expected ${want.length} (shape [${shape.join(', ')}])`);
  let count = 0;
  let first = -1;
  for (let i = 0; i < want.length; i++) {
    if (!elementMatches(got[i] as number, want[i] as number, rule, dtype)) {
      if (first < 0) first = i;
      count++;
    }
  }
  if (first < 0) return null;
  const g = got[first] as number;
  const w = want[first] as number;
  return {
    count,
    flatIndex: first,
    index: unravel(first, shape),
    got: g,
    want: w,
    gotHex: hexOf(g, dtype),
    wantHex: hexOf(w, dtype),
  };
}

/** A rule as text: `bitwise`, `ulp ≤ 1`, `rtol 1e-6 atol 1e-9`. */
export function ruleText(rule: CompareRule): string {
  if (rule === 'bitwise') return 'bitwise';
  if ('ulp' in rule) return `ulp ≤ ${rule.ulp}`;
  return `rtol ${rule.rtol} atol ${rule.atol}`;
}

/** One line describing a mismatch: `name[3, 1]: got -0.5 (0xbf000000), expected 0.5 (0x3f000000) — 2 of 8 differ (bitwise)`. */
export function mismatchText(name: string, m: Mismatch, total: number, rule: CompareRule): string {
  const fmt = (v: number): string => (Object.is(v, -0) ? '-0' : String(v));
  return `${name}[${m.index.join(', ')}]: got ${fmt(m.got)} (${m.gotHex}), expected ${fmt(m.want)} (${m.wantHex}) — ${m.count} of ${total} differ (${ruleText(rule)})`;
}
