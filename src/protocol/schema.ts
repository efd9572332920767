// The messages of qrl-backend/1: one zod schema per method's params and result, and the codec between
// the contract's values (typed arrays) and their JSON form (wire tensors or safetensors references);
// the `logprobs` result's codec is logprobs-json.ts. Not the transport (jsonrpc.ts, remote.ts, serve.ts) and not a backend.

import { z } from 'zod';
import type {
  GenerateRequest,
  LogprobsRequest,
  ReplayRecord,
  ReplayRecordValue,
  RolloutBatch,
} from '../core/backend-contract.js';
import { ProtocolError } from './errors.js';
import { RPC_ERRORS } from './jsonrpc.js';
import { valueAt } from '../core/errors.js';
import { readSafetensors } from './safetensors.js';
import { decodeTensor, encodeTensor, WIRE_DTYPES, type WireArray, type WireDtype, type WireTensor } from './tensor.js';

/** The protocol versions this build speaks, most preferred first. */
export const PROTOCOL_VERSIONS: readonly string[] = Object.freeze(['qrl-backend/1']);

/** The methods of qrl-backend/1, one per contract operation (`close` is `shutdown` on the wire). */
export const BACKEND_METHODS = Object.freeze([
  'info',
  'sync',
  'generate',
  'logprobs',
  'backward',
  'step',
  'setReference',
  'warmStart',
  'save',
  'load',
  'dumpEngine',
  'shutdown',
] as const);

/** A method name of {@link BACKEND_METHODS}. */
export type BackendMethod = (typeof BACKEND_METHODS)[number];

/**
 * The revisions of qrl-backend/1 that added params fields without a capability to declare them
 * (docs/adapter.md §12, Compatibility), oldest first: revision 1 (2026-11-23) is the first spec,
 * revision 2 (2026-11-23) added `info.run`, revision 3 (2026-11-25) `info.setup` and
 * `generate.maxNewTokens`. A backend written to an older revision refuses such a field as unknown
 * (−32602 naming it: every revision requires that), so the client negotiates them at `info`
 * ({@link olderRevision}). Fields added later are declared by a capability instead (as
 * `capabilities.probSqSum` declares `logprobs.probSqSum`): this table does not grow.
 */
export const UNDECLARED_FIELDS = Object.freeze([
  { method: 'info', field: 'run', revision: 2 },
  { method: 'info', field: 'setup', revision: 3 },
  { method: 'generate', field: 'maxNewTokens', revision: 3 },
] as const satisfies readonly { readonly method: BackendMethod; readonly field: string; readonly revision: number }[]);

/** The newest revision of {@link UNDECLARED_FIELDS}: what the client offers first. */
export const NEWEST_REVISION = Math.max(...UNDECLARED_FIELDS.map((f) => f.revision));

/** Whether a backend written to `revision` takes `method`'s params field `field`. */
export function takesField(revision: number, method: BackendMethod, field: string): boolean {
  const added = UNDECLARED_FIELDS.find((f) => f.method === method && f.field === field);
  return added === undefined || added.revision <= revision;
}

/**
 * The revision to fall back to when a backend answered `info` with −32602 naming `field`: the one
 * before the field's, if the field is one of {@link UNDECLARED_FIELDS} that `revision` sends with
 * `info`; otherwise undefined (the refusal is a real error).
 */
export function olderRevision(
  revision: number,
  code: number | undefined,
  field: string | undefined,
): number | undefined {
  if (code !== RPC_ERRORS.invalidParams || field === undefined) return undefined;
  const added = UNDECLARED_FIELDS.find((f) => f.method === 'info' && f.field === field);
  return added !== undefined && added.revision <= revision ? added.revision - 1 : undefined;
}

// ---------------------------------------------------------------------------------------------
// Tensors on the wire

const int = z.number().int();
const nonNegInt = int.nonnegative();
const finite = z.number().refine(Number.isFinite, 'expected a finite number');

/** `{ dtype, shape, data }`: a wire tensor (tensor.ts). */
export const wireTensorSchema = z.strictObject({
  dtype: z.enum(Object.keys(WIRE_DTYPES) as [WireDtype, ...WireDtype[]]),
  shape: z.array(nonNegInt).readonly(),
  data: z.string(),
});

/** `{ safetensors, name }`: a tensor stored in a safetensors file both sides can read (large payloads). */
export const tensorRefSchema = z.strictObject({ safetensors: z.string().min(1), name: z.string().min(1) });

/** A tensor field: inline or by reference. */
export const tensorSchema = z.union([wireTensorSchema, tensorRefSchema]);

/** `warmStart.examples`: N supervised pairs as I32 prompts (N, P), PAD-padded responses (N, L) and lengths (N). */
const sftExamplesSchema = z.strictObject({ prompts: tensorSchema, responses: tensorSchema, lengths: tensorSchema });

/** A tensor field as JSON. */
export type TensorJson = z.infer<typeof tensorSchema>;

/**
 * Decodes a tensor field (inline, or read from the referenced safetensors file) and checks its
 * dtype and shape; throws a {@link ProtocolError} naming `method` and `field`.
 */
export function tensorFromJson(
  json: TensorJson,
  method: string,
  field: string,
  expect: { readonly dtypes: readonly WireDtype[]; readonly shape?: readonly number[] },
): WireArray {
  let array: WireArray;
  let shape: readonly number[];
  try {
    if ('safetensors' in json) {
      const file = readSafetensors(json.safetensors);
      const t = Object.hasOwn(file.tensors, json.name) ? file.tensors[json.name] : undefined;
      if (t === undefined) throw new Error(`${field}: no tensor ${JSON.stringify(json.name)} in ${json.safetensors}`);
      array = t.data as WireArray;
      shape = t.shape;
    } else {
      array = decodeTensor(json as WireTensor, field);
      shape = json.shape;
    }
  } catch (error) {
    throw new ProtocolError(method, field, `${method}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const dtype = (Object.keys(WIRE_DTYPES) as WireDtype[]).find((d) => array instanceof WIRE_DTYPES[d]);
  if (dtype === undefined || !expect.dtypes.includes(dtype)) {
    throw new ProtocolError(
      method,
      `${field}.dtype`,
      `${method}: ${field}.dtype must be ${expect.dtypes.join(' or ')}, got ${dtype ?? 'unknown'}`,
    );
  }
  if (
    expect.shape !== undefined &&
    (shape.length !== expect.shape.length || shape.some((d, i) => d !== expect.shape![i]))
  ) {
    throw new ProtocolError(
      method,
      `${field}.shape`,
      `${method}: ${field}.shape must be [${expect.shape.join(', ')}], got [${shape.join(', ')}]`,
    );
  }
  return array;
}

// ---------------------------------------------------------------------------------------------
// Replay records: JSON values whose typed arrays travel as wire tensors

function isWireTensorJson(v: unknown): v is WireTensor {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const keys = Object.keys(v).sort().join();
  return keys === 'data,dtype,shape' && wireTensorSchema.safeParse(v).success;
}

function isTypedArray(v: unknown): v is WireArray {
  return ArrayBuffer.isView(v) && !(v instanceof DataView);
}

/** A replay-record value as JSON: typed arrays become 1-D wire tensors (an object with exactly `dtype`, `shape`, `data`). */
export function recordValueToJson(v: ReplayRecordValue): unknown {
  if (isTypedArray(v)) return encodeTensor(v);
  if (Array.isArray(v)) return v.map((x) => recordValueToJson(x as ReplayRecordValue));
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, recordValueToJson(x as ReplayRecordValue)]));
  }
  return v;
}

function recordValueFromJson(v: unknown, method: string, field: string): ReplayRecordValue {
  if (isWireTensorJson(v))
    return tensorFromJson(v, method, field, { dtypes: ['F64', 'F32', 'I32', 'U8'] }) as ReplayRecordValue;
  if (Array.isArray(v)) return v.map((x, i) => recordValueFromJson(x, method, `${field}.${i}`));
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, recordValueFromJson(x, method, `${field}.${k}`)]));
  }
  if (typeof v === 'number' && !Number.isFinite(v))
    throw new ProtocolError(method, field, `${method}: ${field} must be finite, got ${v}`);
  return v as ReplayRecordValue;
}

const jsonValueSchema: z.ZodType<unknown> = z.lazy(() =>
  z.union([z.null(), z.boolean(), finite, z.string(), z.array(jsonValueSchema), z.record(z.string(), jsonValueSchema)]),
);

const recordSchema = z.looseObject({ kind: z.string().min(1) });

// ---------------------------------------------------------------------------------------------
// Method schemas

const vocabularySchema = z.strictObject({
  size: int.min(1),
  pad: nonNegInt,
  bos: nonNegInt,
  eos: nonNegInt,
  sep: nonNegInt,
  mask: nonNegInt,
});
const samplingSchema = z.strictObject({
  temperature: finite.refine((t) => t > 0, 'expected > 0'),
  topK: nonNegInt,
  topP: finite.refine((p) => p > 0 && p <= 1, 'expected in (0, 1]'),
  logprob: z.enum(['processed', 'raw']),
});

/** Every method's params and result schema (JSON form, before tensors are decoded). */
export const methodSchemas = {
  info: {
    params: z.strictObject({
      protocols: z.array(z.string()).min(1).describe('the versions the client speaks, preferred first'),
      run: jsonValueSchema
        .optional()
        .describe(
          "the driver's resolved run config (revision 2); sent unless the backend refuses it as unknown, docs/adapter.md §12",
        ),
      setup: jsonValueSchema
        .optional()
        .describe(
          "the run in the protocol's terms (revision 3); sent unless the backend refuses it as unknown, docs/adapter.md §12",
        ),
    }),
    result: z.strictObject({
      protocol: z.string(),
      backend: z.strictObject({ name: z.string().min(1), version: z.string() }),
      policy: z.string().min(1),
      vocabulary: vocabularySchema,
      plan: z.strictObject({ name: z.string(), rollout: jsonValueSchema, trainer: jsonValueSchema }),
      capabilities: z.strictObject({
        logprobs: z.array(z.enum(['processed', 'raw'])),
        entropy: z.boolean(),
        warmStart: z.boolean(),
        handOver: z.boolean().optional(),
        probSqSum: z.boolean().optional(),
        dumpEngine: z
          .boolean()
          .optional()
          .describe('the backend takes dumpEngine (absent: false), docs/refit-check.md §8'),
        sftExamples: z.boolean().optional().describe('warmStart takes examples (absent: false), docs/adapter.md §3'),
        topkLogprobs: z
          .boolean()
          .optional()
          .describe(
            'the backend takes generate.topkLogprobs, logprobs.topk, backward.gradTopk (absent: false), docs/adapter.md §13',
          ),
        supportReplay: z
          .boolean()
          .optional()
          .describe(
            'an AR backend records the kept set under run.policy.sampler.supportReplay and scores over it (absent: false), docs/adapter.md §3',
          ),
      }),
      parameters: nonNegInt,
    }),
  },
  sync: { params: z.strictObject({}), result: z.strictObject({ weightVersion: nonNegInt }) },
  generate: {
    params: z.strictObject({
      prompts: z.array(z.array(nonNegInt)).min(1),
      seed: z.string().min(1),
      sampling: samplingSchema.optional(),
      maxNewTokens: int
        .min(1)
        .optional()
        .describe(
          "the most response tokens (revision 3); not sent to a backend that refused info's setup, docs/adapter.md §12",
        ),
      greedy: z.boolean().optional(),
      side: z.enum(['rollout', 'trainer']).optional(),
      topkLogprobs: int.min(1).optional().describe('K: also return the engine top-k (capabilities.topkLogprobs)'),
    }),
    result: z.lazy(() => batchSchema),
  },
  logprobs: {
    params: z.lazy(() =>
      z.strictObject({
        batch: batchSchema,
        rows: z.array(nonNegInt).min(1),
        policy: z.enum(['current', 'reference']),
        grad: z.boolean().optional(),
        routing: z.union([z.literal('rollout'), z.array(tensorSchema).min(1)]).optional(),
        returnRouting: z.boolean().optional(),
        probSqSum: z.boolean().optional(),
        topk: z.boolean().optional().describe("also return ℓ at the batch's top-k ids (capabilities.topkLogprobs)"),
      }),
    ),
    result: z.strictObject({
      logp: tensorSchema,
      entropy: tensorSchema.optional(),
      probSqSum: tensorSchema.optional(),
      topkLogp: tensorSchema.optional(),
      handle: z.string().min(1).optional(),
      routing: z.array(tensorSchema).min(1).optional(),
      routingFlipRate: z.array(finite).min(1).optional(),
    }),
  },
  backward: {
    params: z.strictObject({ handle: z.string().min(1), gradLogp: tensorSchema, gradTopk: tensorSchema.optional() }),
    result: z.null(),
  },
  step: {
    params: z.strictObject({ maxGradNorm: finite.refine((x) => x > 0, 'expected > 0') }),
    result: z.strictObject({
      gradNorm: z.number().refine((x) => !Number.isNaN(x) && x >= 0, 'expected ≥ 0'),
      weightVersion: nonNegInt,
    }),
  },
  setReference: { params: z.strictObject({}), result: z.null() },
  warmStart: {
    params: z.strictObject({
      task: z.strictObject({ name: z.string().min(1), options: jsonValueSchema }),
      steps: nonNegInt,
      batchSize: int.min(1),
      lr: finite,
      seed: int,
      examples: sftExamplesSchema.optional().describe('only to a backend with capabilities.sftExamples (§3)'),
    }),
    result: z.record(z.string(), finite),
  },
  save: { params: z.strictObject({ dir: z.string().min(1) }), result: z.null() },
  load: { params: z.strictObject({ dir: z.string().min(1) }), result: z.null() },
  dumpEngine: {
    params: z.strictObject({ dir: z.string().min(1).describe('absolute directory the two files are written to') }),
    result: z.strictObject({
      trainer: z.string().min(1).describe("the trainer's state dict, a file name under dir"),
      engine: z
        .string()
        .min(1)
        .describe('what the rollout engine computes with since the last sync, a file name under dir'),
      recipe: z.string().min(1).describe("refit-check's --recipe for the backend's rollout plan"),
      block: int.min(1).optional().describe('--block of a block recipe'),
      ignore: z.array(z.string().min(1)).describe('--ignore: the modules the plan keeps in high precision'),
      match: z.enum(['substring', 'prefix', 'regex']).describe('--match of the ignore list'),
    }),
  },
  shutdown: { params: z.strictObject({}), result: z.null() },
} as const satisfies Record<BackendMethod, { params: z.ZodType; result: z.ZodType }>;

/** A rollout batch as JSON. */
const batchSchema = z.strictObject({
  weightVersion: nonNegInt,
  B: int.min(1),
  T: nonNegInt,
  prompts: z.array(z.array(nonNegInt)),
  responses: tensorSchema,
  mask: tensorSchema,
  logpRollout: tensorSchema,
  topk: z.strictObject({ K: int.min(1), ids: tensorSchema, logp: tensorSchema }).optional(),
  record: recordSchema,
});

/** The JSON form of a method's params. */
export type ParamsJson<M extends BackendMethod> = z.infer<(typeof methodSchemas)[M]['params']>;
/** The JSON form of a method's result. */
export type ResultJson<M extends BackendMethod> = z.infer<(typeof methodSchemas)[M]['result']>;

/**
 * Validates `value` as the params (`which = 'params'`) or result of `method`; throws a
 * {@link ProtocolError} naming the method and the first bad field.
 */
export function parseMessage<M extends BackendMethod, W extends 'params' | 'result'>(
  method: M,
  which: W,
  value: unknown,
): z.infer<(typeof methodSchemas)[M][W]> {
  const schema = methodSchemas[method][which] as z.ZodType;
  const parsed = schema.safeParse(value === undefined && which === 'params' ? {} : value);
  if (parsed.success) return parsed.data as z.infer<(typeof methodSchemas)[M][W]>;
  const issue = parsed.error.issues[0]!;
  const path = issue.path.map(String);
  if (issue.code === 'unrecognized_keys' && issue.keys.length > 0) path.push(issue.keys[0]!);
  const field = which === 'params' ? path.join('.') : ['result', ...path].join('.');
  const where = field === '' ? which : field;
  throw new ProtocolError(method, field, `${method}: ${where}: ${describeIssue(issue, valueAt(value, issue.path))}`);
}

/** One issue as words: a missing field says so, a failed union says what was expected (zod's own text is "Invalid input"). */
function describeIssue(issue: z.core.$ZodIssue, got: unknown): string {
  if (issue.code === 'unrecognized_keys') return `unknown field (known fields are fixed by docs/adapter.md §3)`;
  if (got === undefined && issue.code !== 'custom') return 'required field is missing';
  const shown = JSON.stringify(got)?.slice(0, 80) ?? String(got);
  if (issue.code === 'invalid_union') {
    const tensorLike = got !== null && typeof got === 'object' && ('dtype' in got || 'safetensors' in got);
    return tensorLike
      ? `expected a wire tensor {dtype, shape, data} or a reference {safetensors, name}, got ${shown}`
      : `no accepted form matches ${shown}`;
  }
  return /received/.test(issue.message) ? issue.message : `${issue.message}, got ${shown}`;
}

// ---------------------------------------------------------------------------------------------
// Contract values ↔ JSON

/** A {@link RolloutBatch} as JSON (tensors inline). */
export function batchToJson(batch: RolloutBatch): z.infer<typeof batchSchema> {
  const { B, T } = batch;
  return {
    weightVersion: batch.weightVersion,
    B,
    T,
    prompts: batch.prompts.map((p) => [...p]),
    responses: encodeTensor(batch.responses, [B, T]),
    mask: encodeTensor(batch.mask, [B, T]),
    logpRollout: encodeTensor(batch.logpRollout, [B, T]),
    ...(batch.topk !== undefined
      ? {
          topk: {
            K: batch.topk.K,
            ids: encodeTensor(batch.topk.ids, [B, T, batch.topk.K]),
            logp: encodeTensor(batch.topk.logp, [B, T, batch.topk.K]),
          },
        }
      : {}),
    record: recordValueToJson(batch.record) as z.infer<typeof recordSchema>,
  };
}

/** Decodes a validated batch; checks every tensor's dtype and (B, T) shape, the prompts' count and the mask's values. */
export function batchFromJson(json: z.infer<typeof batchSchema>, method: string, field: string): RolloutBatch {
  const { B, T } = json;
  const shape = [B, T];
  const f = (name: string): string => (field === '' ? name : `${field}.${name}`);
  if (json.prompts.length !== B)
    throw new ProtocolError(
      method,
      f('prompts'),
      `${method}: ${f('prompts')} must hold B=${B} rows, got ${json.prompts.length}`,
    );
  const responses = tensorFromJson(json.responses, method, f('responses'), { dtypes: ['I32'], shape }) as Int32Array;
  const mask = tensorFromJson(json.mask, method, f('mask'), { dtypes: ['F64'], shape }) as Float64Array;
  const logpRollout = tensorFromJson(json.logpRollout, method, f('logpRollout'), {
    dtypes: ['F64'],
    shape,
  }) as Float64Array;
  const badMask = mask.findIndex((m) => m !== 0 && m !== 1);
  if (badMask >= 0)
    throw new ProtocolError(
      method,
      f('mask'),
      `${method}: ${f('mask')} must hold 0 or 1, got ${mask[badMask]} at ${badMask}`,
    );
  const badLogp = logpRollout.findIndex((x) => !(x <= 0));
  if (badLogp >= 0)
    throw new ProtocolError(
      method,
      f('logpRollout'),
      `${method}: ${f('logpRollout')} must hold log-probs ≤ 0, got ${logpRollout[badLogp]} at ${badLogp}`,
    );
  const record = recordValueFromJson(json.record, method, f('record')) as ReplayRecord;
  const topk = json.topk === undefined ? undefined : topkFromJson(json.topk, [B, T], method, f('topk'));
  return {
    weightVersion: json.weightVersion,
    B,
    T,
    prompts: json.prompts,
    responses,
    mask,
    logpRollout,
    ...(topk !== undefined ? { topk } : {}),
    record,
  };
}

/** Decodes a batch's `topk`: I32 ids in [−1, ∞) and F64 ℓ ≤ 0, both (B, T, K). */
function topkFromJson(
  json: { K: number; ids: TensorJson; logp: TensorJson },
  bt: readonly number[],
  method: string,
  field: string,
): NonNullable<RolloutBatch['topk']> {
  const shape = [...bt, json.K];
  const ids = tensorFromJson(json.ids, method, `${field}.ids`, { dtypes: ['I32'], shape }) as Int32Array;
  const logp = tensorFromJson(json.logp, method, `${field}.logp`, { dtypes: ['F64'], shape }) as Float64Array;
  const badId = ids.findIndex((v) => v < -1);
  const badLp = logp.findIndex((x) => !(x <= 0));
  if (badId >= 0 || badLp >= 0)
    throw new ProtocolError(
      method,
      badId >= 0 ? `${field}.ids` : `${field}.logp`,
      badId >= 0
        ? `${method}: ${field}.ids must hold ids ≥ −1 (−1 = empty slot), got ${ids[badId]} at ${badId}`
        : `${method}: ${field}.logp must hold log-probs ≤ 0, got ${logp[badLp]} at ${badLp}`,
    );
  return { K: json.K, ids, logp };
}

/** The `generate` params of a request. */
export function generateToJson(request: GenerateRequest): ParamsJson<'generate'> {
  return {
    prompts: request.prompts.map((p) => [...p]),
    seed: request.seed,
    ...(request.sampling !== undefined
      ? {
          sampling: {
            temperature: request.sampling.temperature,
            topK: request.sampling.topK,
            topP: request.sampling.topP,
            logprob: request.sampling.logprob,
          },
        }
      : {}),
    ...(request.maxNewTokens !== undefined ? { maxNewTokens: request.maxNewTokens } : {}),
    ...(request.greedy !== undefined ? { greedy: request.greedy } : {}),
    ...(request.side !== undefined ? { side: request.side } : {}),
    ...(request.topkLogprobs !== undefined && request.topkLogprobs > 0 ? { topkLogprobs: request.topkLogprobs } : {}),
  };
}

/** The `logprobs` params of a request. */
export function logprobsToJson(request: LogprobsRequest): ParamsJson<'logprobs'> {
  return {
    batch: batchToJson(request.batch),
    rows: [...request.rows],
    policy: request.policy,
    ...(request.grad !== undefined ? { grad: request.grad } : {}),
    ...(request.routing !== undefined
      ? { routing: request.routing === 'rollout' ? 'rollout' : request.routing.map((r) => encodeTensor(r)) }
      : {}),
    ...(request.returnRouting !== undefined ? { returnRouting: request.returnRouting } : {}),
    ...(request.probSqSum !== undefined ? { probSqSum: request.probSqSum } : {}),
    ...(request.topk !== undefined ? { topk: request.topk } : {}),
  };
}

/** Per-layer routing tensors (I32) of a `logprobs` request or result. */
export function routingFromJson(json: readonly TensorJson[], field: string): Int32Array[] {
  return json.map((t, l) => tensorFromJson(t, 'logprobs', `${field}.${l}`, { dtypes: ['I32'] }) as Int32Array);
}

/** Decodes validated `logprobs` params; checks the rows are inside the batch. */
export function logprobsFromJson(json: ParamsJson<'logprobs'>): LogprobsRequest {
  const batch = batchFromJson(json.batch, 'logprobs', 'batch');
  const bad = json.rows.findIndex((r) => r >= batch.B);
  if (bad >= 0)
    throw new ProtocolError(
      'logprobs',
      `rows.${bad}`,
      `logprobs: rows.${bad} = ${json.rows[bad]} is outside the batch (B=${batch.B})`,
    );
  return {
    batch,
    rows: json.rows,
    policy: json.policy,
    ...(json.grad !== undefined ? { grad: json.grad } : {}),
    ...(json.routing !== undefined
      ? { routing: json.routing === 'rollout' ? 'rollout' : routingFromJson(json.routing, 'routing') }
      : {}),
    ...(json.returnRouting !== undefined ? { returnRouting: json.returnRouting } : {}),
    ...(json.probSqSum !== undefined ? { probSqSum: json.probSqSum } : {}),
    ...(json.topk !== undefined ? { topk: json.topk } : {}),
  };
}
