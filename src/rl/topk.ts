// The sampler's distribution as the estimators see it: per position, the rollout engine's top-k ids
// with their ℓ (μ) and the trainer's ℓθ at the same ids (with gradient), flat (B, T, K).
// Not a sampler (src/policies/ar/topk.ts records them) and not an estimator (losses/topk-terms.ts, losses/trpl.ts).

import { UsageError } from '../core/errors.js';
import type { BatchShape } from './types.js';

/**
 * The top-k (or sampling-support) log-probs of a batch, flat `(B, T, K)` row-major: slot j of
 * position (i, t) lives at `(i·T + t)·K + j`. A slot with id −1 is empty (a support smaller than K,
 * or a masked position); its log-probs are 0 and never read.
 */
export interface TopkBatch {
  /** Slots per position. */
  readonly K: number;
  /** Vocabulary size V (the tail of a distribution is V − |ids| tokens; TRPL reads it). */
  readonly vocabSize: number;
  /** Token ids `(B, T, K)`, the engine's K most likely in order (ties: the lower id first), −1 = empty. */
  readonly ids: Int32Array;
  /** The rollout engine's ℓμ at `ids` `(B, T, K)` (the same kind as ℓroll: processed or raw). */
  readonly logpRollout: Float64Array;
  /** The trainer's ℓθ at `ids` `(B, T, K)` (the variable of `gradTopkLogpTheta`). */
  readonly logpTheta: Float64Array;
  /** Point at which detached coefficients are evaluated (finite-difference checks only). @defaultValue logpTheta */
  readonly logpThetaDetached?: Float64Array | undefined;
  /** Sampled token ids `(B, T)` (TRPL places the sampled token in the union); −1 where unknown. */
  readonly tokens?: Int32Array | undefined;
}

/** Number of valid (id ≥ 0) slots of position `k` (flat (B, T) index). */
export function slotCount(topk: TopkBatch, k: number): number {
  let n = 0;
  for (let j = 0; j < topk.K; j++) if (topk.ids[k * topk.K + j]! >= 0) n++;
  return n;
}

function numbers3(raw: unknown, field: string, B: number, T: number, K: number): number[] {
  if (!Array.isArray(raw) || raw.length !== B)
    throw new UsageError(`${field}: expected ${B} rows of ${T} positions of ${K} entries`);
  const out: number[] = [];
  for (let i = 0; i < B; i++) {
    const row = raw[i] as unknown;
    if (!Array.isArray(row) || row.length !== T)
      throw new UsageError(
        `${field}[${i}]: expected ${T} positions, got ${Array.isArray(row) ? row.length : typeof row}`,
      );
    for (let t = 0; t < T; t++) {
      const cell = row[t] as unknown;
      if (!Array.isArray(cell) || cell.length !== K)
        throw new UsageError(
          `${field}[${i}][${t}]: expected ${K} entries, got ${Array.isArray(cell) ? cell.length : JSON.stringify(cell)}`,
        );
      for (let j = 0; j < K; j++) {
        const v = cell[j] as unknown;
        if (typeof v !== 'number' || !Number.isFinite(v))
          throw new UsageError(`${field}[${i}][${t}][${j}]: expected a finite number, got ${JSON.stringify(v)}`);
        out.push(v);
      }
    }
  }
  return out;
}

/**
 * Validates `estimate`'s `topk` input: `{ vocabSize, ids, logpRollout, logpTheta, tokens? }`, the
 * three 3-D arrays `[B][T][K]` (K from the first cell), `tokens` `[B][T]`. Ids are integers in
 * [−1, V), distinct within a position; a log-prob lies in (−∞, 0]. A bad field ⇒ `UsageError`
 * naming it (`topk.ids[0][1][2]: …`).
 */
export function parseTopkInput(raw: unknown, shape: BatchShape): TopkBatch {
  const { B, T } = shape;
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw new UsageError('topk: expected an object { vocabSize, ids, logpRollout, logpTheta, tokens? }');
  const o = raw as Record<string, unknown>;
  for (const key of Object.keys(o))
    if (!['vocabSize', 'ids', 'logpRollout', 'logpTheta', 'tokens'].includes(key))
      throw new UsageError(`topk.${key}: unknown field (known: vocabSize, ids, logpRollout, logpTheta, tokens)`);
  const V = o['vocabSize'];
  if (typeof V !== 'number' || !Number.isInteger(V) || V < 1)
    throw new UsageError(`topk.vocabSize: expected a positive integer, got ${JSON.stringify(V)}`);
  const first = (o['ids'] as unknown[][] | undefined)?.[0]?.[0];
  const K = Array.isArray(first) ? first.length : 0;
  if (K < 1) throw new UsageError('topk.ids: expected [B][T][K] token ids with K ≥ 1');
  if (K > V) throw new UsageError(`topk.ids: K = ${K} exceeds topk.vocabSize = ${V}`);
  const ids = numbers3(o['ids'], 'topk.ids', B, T, K);
  for (let k = 0; k < B * T; k++) {
    const seen = new Set<number>();
    for (let j = 0; j < K; j++) {
      const v = ids[k * K + j]!;
      const where = `topk.ids[${Math.floor(k / T)}][${k % T}][${j}]`;
      if (!Number.isInteger(v) || v < -1 || v >= V)
        throw new UsageError(`${where}: expected an id in [-1, ${V}) (-1 = empty slot), got ${v}`);
      if (v >= 0 && seen.has(v)) throw new UsageError(`${where}: id ${v} appears twice at this position`);
      seen.add(v);
    }
  }
  const logp = (field: 'logpRollout' | 'logpTheta'): Float64Array => {
    const xs = numbers3(o[field], `topk.${field}`, B, T, K);
    xs.forEach((v, n) => {
      if (v > 0) {
        const k = Math.floor(n / K);
        throw new UsageError(`topk.${field}[${Math.floor(k / T)}][${k % T}][${n % K}]: a log-prob is ≤ 0, got ${v}`);
      }
    });
    return Float64Array.from(xs);
  };
  let tokens: Int32Array | undefined;
  if (o['tokens'] !== undefined) {
    const t = o['tokens'];
    if (!Array.isArray(t) || t.length !== B) throw new UsageError(`topk.tokens: expected ${B} rows of ${T} ids`);
    tokens = new Int32Array(B * T);
    for (let i = 0; i < B; i++) {
      const row = t[i] as unknown;
      if (!Array.isArray(row) || row.length !== T) throw new UsageError(`topk.tokens[${i}]: expected ${T} ids`);
      for (let c = 0; c < T; c++) {
        const v = row[c] as unknown;
        if (typeof v !== 'number' || !Number.isInteger(v) || v < -1 || v >= V)
          throw new UsageError(`topk.tokens[${i}][${c}]: expected an id in [-1, ${V}), got ${JSON.stringify(v)}`);
        tokens[i * T + c] = v;
      }
    }
  }
  return {
    K,
    vocabSize: V,
    ids: Int32Array.from(ids),
    logpRollout: logp('logpRollout'),
    logpTheta: logp('logpTheta'),
    ...(tokens !== undefined ? { tokens } : {}),
  };
}

/** Checks the lengths of a programmatic {@link TopkBatch} against the batch shape (`UsageError` naming the field). */
export function checkTopkBatch(topk: TopkBatch, shape: BatchShape): void {
  const n = shape.B * shape.T * topk.K;
  if (!Number.isInteger(topk.K) || topk.K < 1) throw new UsageError(`topk.K: expected an integer ≥ 1, got ${topk.K}`);
  for (const f of ['ids', 'logpRollout', 'logpTheta', 'logpThetaDetached'] as const) {
    const v = topk[f];
    if (v === undefined) {
      if (f === 'logpThetaDetached') continue;
      throw new UsageError(`topk.${f}: required (a flat (B·T·K) array)`);
    }
    if (v.length !== n) throw new UsageError(`topk.${f}: expected length B·T·K = ${n}, got ${v.length}`);
  }
  if (topk.tokens !== undefined && topk.tokens.length !== shape.B * shape.T)
    throw new UsageError(`topk.tokens: expected length B·T = ${shape.B * shape.T}, got ${topk.tokens.length}`);
}
