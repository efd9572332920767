// Mismatch by response position and by response length, the sequence log-ratio, error tokens and
// repetition: the long-response diagnostics of the probes and the run metrics. Not used by any loss.

import { UsageError } from '../core/errors.js';
import type { BatchShape, MetricRecord } from './types.js';

/**
 * Lower edges of the position and length buckets: [0, 8), [8, 32), [32, 128), [128, ∞). Roughly ×4
 * apart so that four keys span the toy tasks (≤ 17 tokens: the first two) and the long tasks (≥ 64).
 */
export const LENGTH_BUCKET_EDGES = Object.freeze([0, 8, 32, 128] as const);

/** Ratio π_train/π_roll below which a token counts as an error token (QaRL §2.3's ratio-collapse tokens). */
export const ERROR_TOKEN_RATIO = 1e-2;

/** n of the n-gram repetition rate (Welleck et al. 2019, seq-rep-4). */
export const REPETITION_NGRAM = 4;

/** Inputs of {@link lengthDiagnostics} (all `(B, T)` flat; column t is response position t). */
export interface LengthDiagnosticsInput {
  /** Batch shape. */
  readonly shape: BatchShape;
  /** ℓold (trainer). */
  readonly logpOld: ArrayLike<number>;
  /** ℓroll (rollout engine). */
  readonly logpRollout: ArrayLike<number>;
  /** 1 where the token counts. */
  readonly mask: ArrayLike<number>;
  /** Response token ids; the repetition rate is NaN without them. */
  readonly responses?: ArrayLike<number> | undefined;
}

/** Mismatch over one group of tokens. */
export interface MismatchCell {
  /** Number of valid tokens in the group. */
  readonly tokens: number;
  /** mean(e^δ − δ − 1), δ = ℓold − ℓroll (0 for an empty group). */
  readonly k3: number;
  /** mean |δ| (0 for an empty group). */
  readonly meanAbsDelta: number;
}

/** A bucket [lo, hi) of positions or lengths with its mismatch. */
export interface MismatchBucket extends MismatchCell {
  /** Lower edge (inclusive). */
  readonly lo: number;
  /** Upper edge (exclusive; Infinity for the last). */
  readonly hi: number;
  /** Sequences with at least one token in the bucket (for length buckets: the sequences of that length). */
  readonly sequences: number;
}

/** What {@link lengthDiagnostics} measured. */
export interface LengthDiagnostics {
  /** Per response position t = 0 … T−1: mismatch over the valid tokens at t. */
  readonly positions: readonly MismatchCell[];
  /** Mismatch per position bucket ({@link LENGTH_BUCKET_EDGES}). */
  readonly byPosition: readonly MismatchBucket[];
  /** Mismatch per response-length bucket: each sequence's tokens go to the bucket of its valid-token count. */
  readonly byLength: readonly MismatchBucket[];
  /** Sequences with at least one valid token. */
  readonly sequences: number;
  /** mean over sequences of S = Σ_t δ_t (the log of the sequence ratio π_train(y)/π_roll(y)). */
  readonly seqLogRatioMean: number;
  /** mean over sequences of |S|. */
  readonly seqLogRatioAbsMean: number;
  /** max over sequences of |S|. */
  readonly seqLogRatioAbsMax: number;
  /** Fraction of valid tokens with e^δ < {@link ERROR_TOKEN_RATIO}. */
  readonly errorTokenFrac: number;
  /**
   * Pooled seq-rep-n (n = {@link REPETITION_NGRAM}): over all sequences, the share of a response's
   * n-grams (of its valid tokens) that already occurred earlier in the same response; NaN without
   * responses, 0 when no response has n tokens.
   */
  readonly repetitionRate: number;
}

interface Acc {
  n: number;
  k3: number;
  abs: number;
  seqs: number;
}

const acc = (): Acc => ({ n: 0, k3: 0, abs: 0, seqs: 0 });
const cell = (a: Acc): MismatchCell => ({
  tokens: a.n,
  k3: a.n > 0 ? a.k3 / a.n : 0,
  meanAbsDelta: a.n > 0 ? a.abs / a.n : 0,
});

/** Index of the bucket of `x` among {@link LENGTH_BUCKET_EDGES}. */
export function lengthBucketOf(x: number): number {
  let b = 0;
  while (b + 1 < LENGTH_BUCKET_EDGES.length && x >= LENGTH_BUCKET_EDGES[b + 1]!) b++;
  return b;
}

/**
 * The long-response diagnostics of (ℓroll, ℓold) over a (B, T) batch: mismatch (k3, mean |δ|) per
 * response position, per position bucket and per response-length bucket; the sequence log-ratio
 * S_i = Σ_t δ_{i,t}; the error-token share; and the repetition rate of the responses. Throws a
 * {@link UsageError} naming the array whose length is not B·T.
 *
 * @example
 * ```ts
 * const d = lengthDiagnostics({ shape: { B: 1, T: 2 }, logpOld: [-1, -6], logpRollout: [-1, -1], mask: [1, 1] });
 * d.errorTokenFrac; // 0.5: e^(−5) < 1e-2 at position 1
 * d.seqLogRatioAbsMax; // 5
 * ```
 */
export function lengthDiagnostics(input: LengthDiagnosticsInput): LengthDiagnostics {
  const { B, T } = input.shape;
  const { logpOld, logpRollout, mask, responses } = input;
  const named = { logpOld, logpRollout, mask, ...(responses === undefined ? {} : { responses }) };
  for (const [name, x] of Object.entries(named)) {
    if (x.length !== B * T)
      throw new UsageError(`lengthDiagnostics: ${name} must have B·T = ${B * T} entries, got ${x.length}`);
  }
  const logErr = Math.log(ERROR_TOKEN_RATIO);
  const positions = Array.from({ length: T }, acc);
  const byPosition = LENGTH_BUCKET_EDGES.map(acc);
  const byLength = LENGTH_BUCKET_EDGES.map(acc);
  let sequences = 0;
  let sSum = 0;
  let sAbs = 0;
  let sMax = 0;
  let tokens = 0;
  let errors = 0;
  let ngrams = 0;
  let repeats = 0;
  for (let i = 0; i < B; i++) {
    let length = 0;
    for (let t = 0; t < T; t++) if (mask[i * T + t] === 1) length++;
    if (length === 0) continue;
    const lb = byLength[lengthBucketOf(length)]!;
    lb.seqs += 1;
    sequences += 1;
    let s = 0;
    let lastBucket = -1;
    const body: number[] = [];
    for (let t = 0; t < T; t++) {
      const k = i * T + t;
      if (mask[k] !== 1) continue;
      const d = (logpOld[k] as number) - (logpRollout[k] as number);
      const k3 = Math.exp(d) - d - 1;
      const pb = lengthBucketOf(t);
      for (const a of [positions[t]!, byPosition[pb]!, lb]) {
        a.n += 1;
        a.k3 += k3;
        a.abs += Math.abs(d);
      }
      if (pb !== lastBucket) byPosition[pb]!.seqs += 1;
      lastBucket = pb;
      s += d;
      tokens += 1;
      if (d < logErr) errors += 1;
      if (responses !== undefined) body.push(responses[k] as number);
    }
    sSum += s;
    sAbs += Math.abs(s);
    sMax = Math.max(sMax, Math.abs(s));
    const seen = new Set<string>();
    for (let j = 0; j + REPETITION_NGRAM <= body.length; j++) {
      const key = body.slice(j, j + REPETITION_NGRAM).join(',');
      ngrams += 1;
      if (seen.has(key)) repeats += 1;
      else seen.add(key);
    }
  }
  const bucket = (a: Acc, b: number): MismatchBucket => ({
    lo: LENGTH_BUCKET_EDGES[b]!,
    hi: b + 1 < LENGTH_BUCKET_EDGES.length ? LENGTH_BUCKET_EDGES[b + 1]! : Infinity,
    sequences: a.seqs,
    ...cell(a),
  });
  return {
    positions: positions.map(cell),
    byPosition: byPosition.map(bucket),
    byLength: byLength.map(bucket),
    sequences,
    seqLogRatioMean: sequences > 0 ? sSum / sequences : 0,
    seqLogRatioAbsMean: sequences > 0 ? sAbs / sequences : 0,
    seqLogRatioAbsMax: sMax,
    errorTokenFrac: tokens > 0 ? errors / tokens : 0,
    repetitionRate: responses === undefined ? Number.NaN : ngrams > 0 ? repeats / ngrams : 0,
  };
}

/** Metric-key form of a bucket's edges: `0_8`, `128_inf`. */
const bucketKey = (b: MismatchBucket): string => `${b.lo}_${b.hi === Infinity ? 'inf' : b.hi}`;

/**
 * {@link lengthDiagnostics} as run metrics (docs/grpo.md, Metrics): `mismatch/pos_<lo>_<hi>/k3` and
 * `/abs_delta` per position bucket, `mismatch/len_<lo>_<hi>/k3` per response-length bucket — a
 * bucket's keys only when it has tokens, so short-response runs log no `128_inf` keys —,
 * `mismatch/seq_log_ratio_abs_mean|max`, `mismatch/error_token_frac` and, with responses,
 * `response/repetition_rate`.
 *
 * @example
 * ```ts
 * lengthMetrics({ shape: { B: 1, T: 1 }, logpOld: [-1], logpRollout: [-1], mask: [1] })['mismatch/pos_0_8/k3']; // 0
 * ```
 */
export function lengthMetrics(input: LengthDiagnosticsInput): MetricRecord {
  const d = lengthDiagnostics(input);
  const out: MetricRecord = {};
  for (const b of d.byPosition) {
    if (b.tokens === 0) continue;
    out[`mismatch/pos_${bucketKey(b)}/k3`] = b.k3;
    out[`mismatch/pos_${bucketKey(b)}/abs_delta`] = b.meanAbsDelta;
  }
  for (const b of d.byLength) if (b.tokens > 0) out[`mismatch/len_${bucketKey(b)}/k3`] = b.k3;
  out['mismatch/seq_log_ratio_abs_mean'] = d.seqLogRatioAbsMean;
  out['mismatch/seq_log_ratio_abs_max'] = d.seqLogRatioAbsMax;
  out['mismatch/error_token_frac'] = d.errorTokenFrac;
  if (input.responses !== undefined) out['response/repetition_rate'] = d.repetitionRate;
  return out;
}
