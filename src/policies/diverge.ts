// First-divergence localisation: two forwards recorded op by op (a reference and a candidate side),
// compared in forward order with max |Δ|, ulp distances and the "added beyond the numerics" test.
// Not a file format (dump.ts reads and writes the recordings) and not the CLI (src/cli/diverge.ts).

import { floatFormats, type FloatFormatName } from '../numerics/formats.js';

/** One recorded op output of a forward: a name, its values, and the names of the ops it reads. */
export interface OpRecord {
  /** Op or module name, e.g. `h0.q` or `model.layers.0.self_attn.q_proj`. */
  readonly name: string;
  /** Output values (any shape, flattened row-major). */
  readonly data: Float32Array;
  /** Shape of `data`. */
  readonly shape: readonly number[];
  /**
   * Names of the recorded ops whose outputs this op reads (its data-flow inputs). Absent: the op
   * recorded just before it (or none for the first); empty: it reads only the token ids.
   */
  readonly inputs?: readonly string[];
}

/** Options of {@link compareForwards}. */
export interface DivergeOptions {
  /**
   * Working format F of the ulp distances and of the unit roundoff u_F in the divergence test.
   * @defaultValue 'bf16'
   */
  readonly format?: FloatFormatName;
  /** Tolerance κ in units of u_F (see {@link compareForwards}). @defaultValue 4 */
  readonly tolerance?: number;
}

/** The comparison of one op. */
export interface DivergeRow {
  /** Op name. */
  readonly name: string;
  /** Element count. */
  readonly size: number;
  /** max_i |a_i − b_i| (reference a, candidate b). */
  readonly maxAbsDelta: number;
  /** mean_i |a_i − b_i|. */
  readonly meanAbsDelta: number;
  /** Share of elements whose float32 bits differ. */
  readonly fracDiffer: number;
  /** max_i |a_i − b_i| in float32 ulps at a_i ({@link ulpDistances}). */
  readonly maxUlpFp32: number;
  /** max_i |a_i − b_i| in ulps of F at a_i. */
  readonly maxUlp: number;
  /** Normwise relative error r = max |a − b| / max |a| (0 if both are all zero; ∞ if only a is). */
  readonly relError: number;
  /** r_in: the largest r over the op's inputs (0 without inputs). */
  readonly relErrorIn: number;
  /** r − r_in: the relative error this op added to what it received. */
  readonly added: number;
  /** True when the op added more than κ·u_F: `r > r_in + κ·u_F`. */
  readonly exceeds: boolean;
}

/** What {@link compareForwards} returns. */
export interface DivergeReport {
  /** Working format F. */
  readonly format: FloatFormatName;
  /** κ. */
  readonly tolerance: number;
  /** u_F = 2^−(m+1), m the mantissa bits of F. */
  readonly unitRoundoff: number;
  /** One row per op of the reference, in forward order. */
  readonly rows: readonly DivergeRow[];
  /** The first op whose float32 outputs differ at all (null: bitwise equal forwards). */
  readonly firstDiffer: string | null;
  /** The first op that adds more than κ·u_F ({@link DivergeRow.exceeds}), or null. */
  readonly firstDivergence: string | null;
  /** The op with the largest `added` (null without rows or when nothing is added). */
  readonly largestAdded: string | null;
}

/**
 * The spacing of `format`'s grid at magnitude |x|: 2^(max(⌊log2 |x|⌋, emin) − m), m the mantissa
 * bits and emin the smallest normal exponent (so below the normal range, the subnormal step).
 */
export function ulpOf(format: FloatFormatName, x: number): number {
  const f = floatFormats[format];
  const ax = Math.abs(x);
  const e = ax === 0 || !Number.isFinite(ax) ? f.emin : Math.max(Math.floor(Math.log2(ax)), f.emin);
  // log2 can land one off near powers of two; correct so that 2^e ≤ |x| < 2^(e+1).
  const exp = ax >= 2 ** (e + 1) ? e + 1 : ax !== 0 && ax < 2 ** e && e > f.emin ? e - 1 : e;
  return 2 ** (exp - f.manBits);
}

/**
 * Per element, |a − b| in ulps of `format` at the reference value a ({@link ulpOf}): not rounded,
 * so a difference below the grid shows as a fraction. NaN against a number is ∞; NaN against NaN 0.
 */
export function ulpDistances(a: Float32Array, b: Float32Array, format: FloatFormatName): Float64Array {
  if (a.length !== b.length) throw new Error(`ulpDistances: lengths differ (${a.length} vs ${b.length})`);
  const out = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (Number.isNaN(x) || Number.isNaN(y)) out[i] = Number.isNaN(x) && Number.isNaN(y) ? 0 : Infinity;
    else out[i] = x === y ? 0 : Math.abs(x - y) / ulpOf(format, x);
  }
  return out;
}

function relativeError(
  a: Float32Array,
  b: Float32Array,
): { maxAbs: number; meanAbs: number; rel: number; differ: number } {
  let maxAbs = 0;
  let sumAbs = 0;
  let maxRef = 0;
  let differ = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    const dd = Number.isNaN(d) ? (Object.is(a[i], b[i]) ? 0 : Infinity) : d;
    if (dd > maxAbs) maxAbs = dd;
    sumAbs += dd;
    if (Math.abs(a[i]!) > maxRef) maxRef = Math.abs(a[i]!);
    if (!Object.is(a[i], b[i])) differ++;
  }
  const rel = maxAbs === 0 ? 0 : maxRef === 0 ? Infinity : maxAbs / maxRef;
  return { maxAbs, meanAbs: a.length ? sumAbs / a.length : 0, rel, differ };
}

/**
 * Compares two recorded forwards op by op, in the reference's order (every reference op must be in
 * the candidate with the same size). For each op with reference output a and candidate output b:
 * max and mean |a − b|, the largest distance in float32 ulps and in ulps of F at a ({@link ulpDistances}), and the normwise relative error
 * `r = ‖a − b‖∞ / ‖a‖∞`. The op's inputs bring `r_in = max r` over them (its recorded `inputs`, else
 * the op before it). **Divergence criterion:** an op *exceeds what the numerics alone explain* when
 * it adds more than κ unit roundoffs of F to the error it received,
 *
 * `r > r_in + κ·u_F`,  u_F = 2^−(m_F+1)
 *
 * — a rounding difference of the working format at the op (operand or output rounding, a different
 * summation order) moves r by at most a few u_F; more means the op *amplifies* (cancellation, a
 * softmax or norm on small values, a flipped routing decision) or the two sides compute something
 * else (quantized operands coarser than F, different semantics). `firstDivergence` is the first such
 * op in forward order; `firstDiffer` the first op whose float32 bits differ at all.
 *
 * @example
 * ```ts
 * const report = compareForwards(trainerOps, rolloutOps, { format: 'bf16', tolerance: 4 });
 * report.firstDivergence; // e.g. 'h0.q'
 * ```
 */
export function compareForwards(
  reference: readonly OpRecord[],
  candidate: readonly OpRecord[],
  options: DivergeOptions = {},
): DivergeReport {
  const format = options.format ?? 'bf16';
  if (!Object.hasOwn(floatFormats, format))
    throw new Error(
      `diverge: format must be one of ${Object.keys(floatFormats).join(', ')}, got ${JSON.stringify(format)}`,
    );
  const tolerance = options.tolerance ?? 4;
  if (!Number.isFinite(tolerance) || tolerance < 0)
    throw new Error(`diverge: tolerance must be a finite number ≥ 0, got ${tolerance}`);
  const unitRoundoff = 2 ** -(floatFormats[format].manBits + 1);
  const byName = new Map(candidate.map((r) => [r.name, r] as const));
  const relOf = new Map<string, number>();
  const rows: DivergeRow[] = [];
  reference.forEach((ref, index) => {
    const cand = byName.get(ref.name);
    if (cand === undefined)
      throw new Error(`diverge: op ${JSON.stringify(ref.name)} of the reference is not in the candidate`);
    if (cand.data.length !== ref.data.length)
      throw new Error(
        `diverge: op ${JSON.stringify(ref.name)} has ${ref.data.length} elements in the reference, ${cand.data.length} in the candidate`,
      );
    const { maxAbs, meanAbs, rel, differ } = relativeError(ref.data, cand.data);
    const inputs = ref.inputs ?? (index > 0 ? [reference[index - 1]!.name] : []);
    let relIn = 0;
    for (const name of inputs) {
      const r = relOf.get(name);
      if (r === undefined)
        throw new Error(
          `diverge: op ${JSON.stringify(ref.name)} reads ${JSON.stringify(name)}, which is not recorded before it`,
        );
      relIn = Math.max(relIn, r);
    }
    relOf.set(ref.name, rel);
    let maxUlp32 = 0;
    let maxUlp = 0;
    if (differ > 0) {
      for (const d of ulpDistances(ref.data, cand.data, 'fp32')) if (d > maxUlp32) maxUlp32 = d;
      for (const d of ulpDistances(ref.data, cand.data, format)) if (d > maxUlp) maxUlp = d;
    }
    const added = rel === relIn ? 0 : rel - relIn;
    rows.push({
      name: ref.name,
      size: ref.data.length,
      maxAbsDelta: maxAbs,
      meanAbsDelta: meanAbs,
      fracDiffer: ref.data.length ? differ / ref.data.length : 0,
      maxUlpFp32: maxUlp32,
      maxUlp,
      relError: rel,
      relErrorIn: relIn,
      added,
      exceeds: rel > relIn + tolerance * unitRoundoff,
    });
  });
  const firstDiffer = rows.find((r) => r.fracDiffer > 0)?.name ?? null;
  const firstDivergence = rows.find((r) => r.exceeds)?.name ?? null;
  let largestAdded: string | null = null;
  let best = 0;
  for (const r of rows) if (r.added > best) ((best = r.added), (largestAdded = r.name));
  return { format, tolerance, unitRoundoff, rows, firstDiffer, firstDivergence, largestAdded };
}
