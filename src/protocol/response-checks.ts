// What a backend's answers must satisfy beyond their schema, checked against the request and the
// backend's own info: ids in the vocabulary, prefix masks that end at EOS or at the length limit,
// finite log-probs ≤ 0 on the mask and 0 off it, finite entropies and gradient norms, the weight
// versions the contract promises. Pure functions over contract data; the run driver
// (runs/checked-backend.ts) stops on the first violation and `backend-check` reports them.

import type {
  BackendInfo,
  GenerateRequest,
  LogprobsRequest,
  LogprobsResult,
  RolloutBatch,
  StepResult,
} from '../core/backend-contract.js';

/** One violated promise: where (method, field, row, position) and what. */
export interface ResponseViolation {
  readonly method: 'generate' | 'logprobs' | 'step' | 'sync';
  /** Dotted path of the field, e.g. `result.logpRollout`. */
  readonly field: string;
  /** Row of the batch (generate) or of the request's rows (logprobs), when the violation has one. */
  readonly row?: number;
  /** Response position within the row, when the violation has one. */
  readonly position?: number;
  /** One line naming the value and the rule. */
  readonly message: string;
}

function at(row: number, position: number): string {
  return `[${row}, ${position}]`;
}

/**
 * The first violation of a `generate` answer, or null. `expectedVersion`: the version the last `sync`
 * returned (rollout side) or the trainer's (trainer side), undefined when not known.
 */
export function generateViolation(
  info: BackendInfo,
  request: GenerateRequest,
  batch: RolloutBatch,
  expectedVersion?: number,
): ResponseViolation | null {
  const v = (field: string, message: string, row?: number, position?: number): ResponseViolation => ({
    method: 'generate',
    field,
    message,
    ...(row === undefined ? {} : { row }),
    ...(position === undefined ? {} : { position }),
  });
  const { B, T } = batch;
  const V = info.vocabulary.size;
  const eos = info.vocabulary.eos;
  if (B !== request.prompts.length) return v('result.B', `B = ${B}, the request has ${request.prompts.length} prompts`);
  if (request.maxNewTokens !== undefined && T > request.maxNewTokens)
    return v('result.T', `T = ${T} exceeds the requested maxNewTokens ${request.maxNewTokens}`);
  if (expectedVersion !== undefined && batch.weightVersion !== expectedVersion) {
    return v(
      'result.weightVersion',
      `weightVersion ${batch.weightVersion}, but the ${request.side ?? 'rollout'} side serves version ${expectedVersion}`,
    );
  }
  for (let b = 0; b < B; b++) {
    const prompt = batch.prompts[b];
    const asked = request.prompts[b]!;
    if (prompt === undefined || prompt.length !== asked.length || prompt.some((t, j) => t !== asked[j]))
      return v('result.prompts', `prompt of row ${b} is not the one requested`, b);
    let length = 0;
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      const m = batch.mask[i]!;
      const y = batch.responses[i]!;
      const l = batch.logpRollout[i]!;
      if (m !== 0 && m !== 1) return v('result.mask', `mask${at(b, t)} = ${m} (must be 0 or 1)`, b, t);
      if (m === 1) {
        if (length !== t)
          return v(
            'result.mask',
            `mask${at(b, t)} = 1 after a 0 at position ${length} (the mask must be a prefix of ones)`,
            b,
            t,
          );
        length += 1;
        if (!Number.isInteger(y) || y < 0 || y >= V)
          return v('result.responses', `responses${at(b, t)} = ${y} outside the vocabulary [0, ${V})`, b, t);
        if (!(Number.isFinite(l) && l <= 0))
          return v('result.logpRollout', `logpRollout${at(b, t)} = ${l} on the mask (must be finite and ≤ 0)`, b, t);
        if (y === eos && t + 1 < T && batch.mask[i + 1] === 1)
          return v('result.mask', `mask${at(b, t + 1)} = 1 after EOS at position ${t}`, b, t + 1);
      } else if (l !== 0) {
        return v('result.logpRollout', `logpRollout${at(b, t)} = ${l} off the mask (must be 0)`, b, t);
      }
    }
    if (length === 0) return v('result.mask', `row ${b} has no generated token`, b);
    const limit = request.maxNewTokens ?? T;
    // AR rows end at EOS or at the limit (a diffusion row's mask is its estimator's business)
    if (info.policy === 'ar' && length < Math.min(limit, T) && batch.responses[b * T + length - 1] !== eos) {
      return v(
        'result.mask',
        `row ${b} ends after ${length} tokens without EOS (id ${eos}) and before the limit ${Math.min(limit, T)}: the declared EOS is not the one generated, or the row was cut`,
        b,
        length - 1,
      );
    }
  }
  return null;
}

/** The first violation of a `logprobs` answer, or null. */
export function logprobsViolation(
  info: BackendInfo,
  request: LogprobsRequest,
  result: LogprobsResult,
): ResponseViolation | null {
  const v = (field: string, message: string, row: number, position: number): ResponseViolation => ({
    method: 'logprobs',
    field,
    message,
    row,
    position,
  });
  const { batch, rows } = request;
  const T = batch.T;
  const entropy = info.capabilities.entropy;
  for (let r = 0; r < rows.length; r++) {
    const b = rows[r]!;
    for (let t = 0; t < T; t++) {
      const i = r * T + t;
      const on = batch.mask[b * T + t] === 1;
      const l = result.logp[i]!;
      const h = result.entropy[i]!;
      if (on) {
        if (!(Number.isFinite(l) && l <= 0))
          return v(
            'result.logp',
            `logp${at(r, t)} = ${l} on the mask of batch row ${b} (must be finite and ≤ 0)`,
            r,
            t,
          );
        if (entropy && !(Number.isFinite(h) && h >= 0))
          return v('result.entropy', `entropy${at(r, t)} = ${h} on the mask (must be finite and ≥ 0)`, r, t);
        const q = result.probSqSum?.[i];
        if (q !== undefined && !(q > 0 && q <= 1))
          return v('result.probSqSum', `probSqSum${at(r, t)} = ${q} (must be in (0, 1])`, r, t);
      } else {
        if (l !== 0) return v('result.logp', `logp${at(r, t)} = ${l} off the mask of batch row ${b} (must be 0)`, r, t);
        if (entropy && h !== 0) return v('result.entropy', `entropy${at(r, t)} = ${h} off the mask (must be 0)`, r, t);
      }
    }
  }
  return null;
}

/** The first violation of a `step` answer, or null; `expectedVersion` is the trainer's version before the step plus one. */
export function stepViolation(result: StepResult, expectedVersion?: number): ResponseViolation | null {
  if (!(Number.isFinite(result.gradNorm) && result.gradNorm >= 0))
    return {
      method: 'step',
      field: 'result.gradNorm',
      message: `gradNorm = ${result.gradNorm} (must be finite and ≥ 0)`,
    };
  if (expectedVersion !== undefined && result.weightVersion !== expectedVersion) {
    return {
      method: 'step',
      field: 'result.weightVersion',
      message: `weightVersion ${result.weightVersion} after the step, expected ${expectedVersion} (one more than before it)`,
    };
  }
  return null;
}

/** The first violation of a `sync` answer, or null: it serves the trainer's version when that is known. */
export function syncViolation(weightVersion: number, trainerVersion?: number): ResponseViolation | null {
  if (!Number.isInteger(weightVersion) || weightVersion < 0)
    return {
      method: 'sync',
      field: 'result.weightVersion',
      message: `weightVersion ${weightVersion} (must be a non-negative integer)`,
    };
  if (trainerVersion !== undefined && weightVersion !== trainerVersion) {
    return {
      method: 'sync',
      field: 'result.weightVersion',
      message: `sync serves version ${weightVersion}, the trainer is at ${trainerVersion}`,
    };
  }
  return null;
}

/** One line for a violation: method, field, row and position, message. */
export function formatViolation(v: ResponseViolation): string {
  const where = [v.row === undefined ? '' : `row ${v.row}`, v.position === undefined ? '' : `position ${v.position}`]
    .filter(Boolean)
    .join(', ');
  return `${v.method} ${v.field}${where ? ` (${where})` : ''}: ${v.message}`;
}
