// The codec of the `logprobs` result of qrl-backend/1 (ℓ, entropy, Σπ², the top-k ℓ, handle, routing):
// JSON ↔ the contract's LogprobsResult. Not the params (schema.ts) and not the transport.

import type { LogprobsResult } from '../core/backend-contract.js';
import { ProtocolError } from './errors.js';
import { type ResultJson, type TensorJson, routingFromJson, tensorFromJson } from './schema.js';
import { encodeTensor } from './tensor.js';

/** A `logprobs` result as JSON. */
export function logprobsResultToJson(result: LogprobsResult, rows: number, T: number): ResultJson<'logprobs'> {
  return {
    logp: encodeTensor(result.logp, [rows, T]),
    // a backend without capabilities.entropy may leave it out
    ...((result.entropy as Float64Array | undefined) !== undefined
      ? { entropy: encodeTensor(result.entropy, [rows, T]) }
      : {}),
    ...(result.probSqSum !== undefined ? { probSqSum: encodeTensor(result.probSqSum, [rows, T]) } : {}),
    ...(result.topkLogp !== undefined
      ? { topkLogp: encodeTensor(result.topkLogp, [rows, T, result.topkLogp.length / Math.max(1, rows * T)]) }
      : {}),
    ...(result.handle !== undefined ? { handle: result.handle } : {}),
    ...(result.routing !== undefined ? { routing: result.routing.map((r) => encodeTensor(r)) } : {}),
    ...(result.routingFlipRate !== undefined ? { routingFlipRate: [...result.routingFlipRate] } : {}),
  };
}

/** What a `logprobs` request asked for, as {@link logprobsResultFromJson} checks the answer against it. */
export interface LogprobsAsked {
  /** Rows requested, and the batch's positions per row. */
  readonly rows: number;
  readonly T: number;
  /** Whether the request asked for a gradient handle. */
  readonly grad: boolean;
  /** @defaultValue true */
  readonly entropyRequired?: boolean;
  /** @defaultValue false */
  readonly probSqSumAsked?: boolean;
  /** @defaultValue 0 */
  readonly topkK?: number;
}

/**
 * Decodes a validated `logprobs` result for a request of `rows` rows of a batch of `T` positions.
 * `entropy` may be absent only when the backend declared `capabilities.entropy: false`
 * (`entropyRequired` false); it is then NaN at every position. `probSqSum` must be present, F64
 * `(rows, T)` with values in [0, 1], when the request asked for it (`probSqSumAsked`); `topkLogp`
 * F64 `(rows, T, K)` of log-probs ≤ 0 when the request set `topk` on a batch of K slots (`topkK` > 0).
 */
export function logprobsResultFromJson(json: ResultJson<'logprobs'>, asked: LogprobsAsked): LogprobsResult {
  const { rows, T, grad, entropyRequired = true, probSqSumAsked = false, topkK = 0 } = asked;
  const shape = [rows, T];
  const logp = logprobTensor(json.logp, 'result.logp', shape);
  if (json.entropy === undefined && entropyRequired) {
    throw new ProtocolError(
      'logprobs',
      'result.entropy',
      'logprobs: result.entropy is missing, and the backend declared capabilities.entropy = true (declare false to omit it)',
    );
  }
  const entropy =
    json.entropy === undefined
      ? new Float64Array(rows * T).fill(Number.NaN)
      : (tensorFromJson(json.entropy, 'logprobs', 'result.entropy', { dtypes: ['F64'], shape }) as Float64Array);
  if (grad && json.handle === undefined)
    throw new ProtocolError('logprobs', 'result.handle', 'logprobs: result.handle is required when grad is set');
  if (probSqSumAsked && json.probSqSum === undefined)
    throw new ProtocolError(
      'logprobs',
      'result.probSqSum',
      'logprobs: result.probSqSum is required when the request sets probSqSum',
    );
  const probSqSum =
    json.probSqSum === undefined
      ? undefined
      : (tensorFromJson(json.probSqSum, 'logprobs', 'result.probSqSum', { dtypes: ['F64'], shape }) as Float64Array);
  const badSq = probSqSum === undefined ? -1 : probSqSum.findIndex((x) => !(x >= 0 && x <= 1));
  if (badSq >= 0)
    throw new ProtocolError(
      'logprobs',
      'result.probSqSum',
      `logprobs: result.probSqSum must hold sums of squared probabilities in [0, 1], got ${probSqSum?.[badSq]} at ${badSq}`,
    );
  const topkLogp = topkK > 0 ? topkResult(json.topkLogp, [rows, T, topkK]) : undefined;
  return {
    logp,
    entropy,
    ...(probSqSum !== undefined ? { probSqSum } : {}),
    ...(topkLogp !== undefined ? { topkLogp } : {}),
    ...(json.handle !== undefined ? { handle: json.handle } : {}),
    ...(json.routing !== undefined ? { routing: routingFromJson(json.routing, 'result.routing') } : {}),
    ...(json.routingFlipRate !== undefined ? { routingFlipRate: json.routingFlipRate } : {}),
  };
}

/** Decodes `result.topkLogp` (required when asked): F64 of the given shape, log-probs ≤ 0. */
function topkResult(json: TensorJson | undefined, shape: readonly number[]): Float64Array {
  if (json === undefined)
    throw new ProtocolError(
      'logprobs',
      'result.topkLogp',
      'logprobs: result.topkLogp is required when the request sets topk',
    );
  return logprobTensor(json, 'result.topkLogp', shape);
}

/** Decodes an F64 tensor of the given shape whose every entry is a log-prob ≤ 0 (−∞ allowed, NaN not). */
function logprobTensor(json: TensorJson, field: string, shape: readonly number[]): Float64Array {
  const x = tensorFromJson(json, 'logprobs', field, { dtypes: ['F64'], shape }) as Float64Array;
  const bad = x.findIndex((v) => !(v <= 0));
  if (bad >= 0)
    throw new ProtocolError('logprobs', field, `logprobs: ${field} must hold log-probs ≤ 0, got ${x[bad]} at ${bad}`);
  return x;
}
