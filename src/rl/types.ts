// Shared shapes of the estimator library: flat (B, T) batches, the `{ value, metrics }` result, safe exp.
// Not an ndarray wrapper and not a tensor library: every field is a plain row-major Float64Array.

/**
 * Shape of a batch: `B` sequences (rows) × `T` token positions (columns).
 * Every per-token field is a flat, row-major `Float64Array` of length `B * T`:
 * entry (i, t) lives at index `i * T + t`. Per-sequence fields have length `B`.
 */
export interface BatchShape {
  /** Number of sequences (rows). */
  readonly B: number;
  /** Number of token positions per row (padded length). */
  readonly T: number;
}

/** Flat metric record: name → number (names are listed in docs/estimators.md). */
export type MetricRecord = Record<string, number>;

/** What every estimator, loss, aggregation and diagnostic returns. */
export interface Estimate<V> {
  /** The computed quantity. */
  readonly value: V;
  /** Named scalars for logging (documented per estimator). */
  readonly metrics: MetricRecord;
}

/** Parameters of an estimator that reads none (`none`, `token-is`, `reinforce`). */
export type NoParams = Readonly<Record<never, never>>;

/** Safety bound on log-ratios before `exp`, as in verl (`SAFETY_BOUND = 20`). */
export const LOG_RATIO_BOUND = 20;

/** `exp(clamp(x, -20, 20))`: the bounded exponential used for every IS ratio. */
export function boundedExp(x: number): number {
  return Math.exp(Math.min(LOG_RATIO_BOUND, Math.max(-LOG_RATIO_BOUND, x)));
}

/** Number of valid tokens (mask = 1) per row: `(B)`. */
export function rowCounts(mask: Float64Array, shape: BatchShape): Float64Array {
  const { B, T } = shape;
  const n = new Float64Array(B);
  for (let i = 0; i < B; i++) {
    let s = 0;
    for (let t = 0; t < T; t++) s += mask[i * T + t]!;
    n[i] = s;
  }
  return n;
}

/** Mean of `xs`, summed in index order (0 when empty). */
export function mean(xs: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += xs[i]!;
  return xs.length > 0 ? s / xs.length : 0;
}

/** Bessel-corrected standard deviation of `xs` (torch `.std()`), 0 with fewer than 2 values. */
export function sampleStd(xs: ArrayLike<number>): number {
  if (xs.length < 2) return 0;
  const m = mean(xs);
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += (xs[i]! - m) ** 2;
  return Math.sqrt(s / (xs.length - 1));
}

/**
 * Per-row sums Σ_t f(k) over the valid tokens (mask = 1) of each row, added in token order, and the number
 * of valid tokens of each row: both `(B)`.
 */
export function rowMaskedSums(
  mask: Float64Array,
  shape: BatchShape,
  f: (k: number) => number,
): { sums: Float64Array; counts: Float64Array } {
  const { B, T } = shape;
  const sums = new Float64Array(B);
  const counts = new Float64Array(B);
  for (let i = 0; i < B; i++) {
    let s = 0;
    let n = 0;
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (mask[k] !== 1) continue;
      s += f(k);
      n += 1;
    }
    sums[i] = s;
    counts[i] = n;
  }
  return { sums, counts };
}

/** Masked mean of `x` over entries with mask 1 (0 when no entry is valid). */
export function maskedMean(x: Float64Array, mask: Float64Array): number {
  let s = 0;
  let n = 0;
  for (let k = 0; k < x.length; k++) {
    if (mask[k] === 1) {
      s += x[k]!;
      n += 1;
    }
  }
  return n > 0 ? s / n : 0;
}

/**
 * Reads an input record written with a field's former name: for each `old → now` of `renames`, a record
 * with `old` set and `now` absent is returned as a copy with `now` set to that value (the entry points
 * `applyCorrection`, `mismatchDiagnostics`, `stackMetrics` and `policyObjective` accept the former
 * names listed in docs/estimators.md "Masks" this way). Records already using
 * the current names come back unchanged (the same object).
 * @example acceptRenamed({ mask: m }, { mask: 'responseMask' }) // { mask: m, responseMask: m }
 */
export function acceptRenamed<R extends object>(input: R, renames: Readonly<Record<string, string>>): R {
  let out: R = input;
  for (const [old, now] of Object.entries(renames)) {
    const record = out as Record<string, unknown>;
    if (record[now] === undefined && record[old] !== undefined) out = { ...out, [now]: record[old] };
  }
  return out;
}
