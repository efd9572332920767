// The zod schemas of a precision plan given as data (plan, sides, GEMM plans, refit chains,
// overrides) and `parseAt`, which turns the outermost issue into one error naming the path and the
// value. Not the values of numerics specs (formats, quantizer presets) nor a side's `engine`
// (checkEngineExecution, which knows the side's role): their builders check them.

import { z } from 'zod';
import { valueAt } from '../core/errors.js';
import { quantSites, type QuantSite } from './quantized.js';
import { ignoreMatchNames, type IgnoreMatchName } from './ignore-rules.js';

/** `JSON.stringify(value)`, or `String(value)` where JSON has no text for it (`undefined`). */
function show(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}

/** `root` followed by `path`: `.key` for a key, `[i]` for an array index (`plan.rollout.overrides[0].gemm`). */
function pathText(root: string, path: readonly PropertyKey[]): string {
  let s = root;
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : `.${String(p)}`;
  return s;
}

/**
 * The issue to report: the outermost (shortest path), and at equal depth an unknown field before
 * the rest, so a misspelt key is named rather than the field it left missing.
 */
function outermost(issues: readonly z.core.$ZodIssue[]): z.core.$ZodIssue | undefined {
  let best: z.core.$ZodIssue | undefined;
  for (const issue of issues) {
    if (best === undefined || issue.path.length < best.path.length) best = issue;
    else if (
      issue.path.length === best.path.length &&
      issue.code === 'unrecognized_keys' &&
      best.code !== 'unrecognized_keys'
    )
      best = issue;
  }
  return best;
}

/**
 * `value` checked by `schema`, or an `Error` whose message names the field under `root` and the
 * offending value: `plan.rollout.decode: expected "incremental" or "recompute", got "fast"`, or
 * `plan.rollout.gemm: unknown field 'speed' (expected one of kind, operands, …)`.
 */
export function parseAt<T>(schema: z.ZodType<T>, value: unknown, root: string): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = outermost(result.error.issues);
  if (issue === undefined) throw new Error(`${root}: invalid, got ${show(value)}`);
  const where = pathText(root, issue.path);
  if (issue.code === 'unrecognized_keys' || issue.code === 'custom') throw new Error(`${where}: ${issue.message}`);
  throw new Error(`${where}: ${issue.message}, got ${show(valueAt(value, issue.path))}`);
}

/** A strict object: an unknown key is refused naming it and the known ones; a non-object is `expected <what>`. */
function strict<S extends z.ZodRawShape>(shape: S, what = 'an object') {
  return z.strictObject(shape, {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? `unknown field ${issue.keys.map((k) => `'${k}'`).join(', ')} (expected one of ${Object.keys(shape).join(', ')})`
        : `expected ${what}`,
  });
}

/** A value whose domain its builder checks (a format name, a quantizer preset, a number). */
const checkedByBuilder = z.unknown().optional();

/**
 * The shape of a GEMM plan: a union on `kind`, each variant's keys (unknown ones refused). The
 * values are checked by building the numerics (`numericsFor`).
 */
export const gemmPlanShapeSchema = z.discriminatedUnion(
  'kind',
  [
    strict({ kind: z.literal('fp32') }),
    strict({
      kind: z.literal('rounding'),
      operands: checkedByBuilder,
      out: checkedByBuilder,
      accumulator: checkedByBuilder,
      splitK: checkedByBuilder,
      profile: checkedByBuilder,
      splitKMaxRows: checkedByBuilder,
    }),
    strict({
      kind: z.literal('quantized'),
      weights: checkedByBuilder,
      activations: checkedByBuilder,
      accumulator: checkedByBuilder,
      promoteEvery: checkedByBuilder,
      chunk: checkedByBuilder,
      splitK: checkedByBuilder,
      out: checkedByBuilder,
      exclude: checkedByBuilder,
      plainOperands: checkedByBuilder,
      attention: checkedByBuilder,
      kvCache: checkedByBuilder,
      backward: checkedByBuilder,
    }),
  ],
  {
    error: (issue) =>
      issue.code === 'invalid_union' ? 'expected "fp32", "rounding" or "quantized"' : 'expected an object',
  },
);

/** The shape of a refit chain (docs/refit.md); each checkpoint step's preset is checked by `quantPreset`. */
export const refitChainShapeSchema = strict({
  source: z.enum(['fp32', 'bf16'], { error: 'expected "fp32" or "bf16"' }).optional(),
  checkpoint: z.array(checkedByBuilder, { error: 'expected an array of { preset, params? }' }).optional(),
  exclude: z
    .array(
      z.enum([...quantSites] as [QuantSite, ...QuantSite[]], {
        error: `expected a site among ${quantSites.join(', ')}`,
      }),
      { error: `expected a list of sites among ${quantSites.join(', ')}` },
    )
    .optional(),
  fuse: z
    .array(z.enum(['qkv', 'gate-up'], { error: 'expected "qkv" or "gate-up"' }), {
      error: 'expected a list of "qkv", "gate-up"',
    })
    .optional(),
  transport: strict({
    kind: z.literal('blockwise-fp8', { error: 'expected "blockwise-fp8"' }),
    block: z
      .number({ error: 'expected a positive integer' })
      .int({ error: 'expected a positive integer' })
      .min(1, { error: 'expected a positive integer' })
      .optional(),
    power2Scale: z.boolean({ error: 'expected true or false' }).optional(),
    amaxEpsilon: z
      .number({ error: 'expected a finite number ≥ 0' })
      .min(0, { error: 'expected a finite number ≥ 0' })
      .optional(),
    scaleLayout: z.enum(['raw', 'mn-major-packed'], { error: 'expected "raw" or "mn-major-packed"' }).optional(),
    engineScaleLayout: z.enum(['raw', 'mn-major-packed'], { error: 'expected "raw" or "mn-major-packed"' }).optional(),
  }).optional(),
  faults: z
    .array(
      z.discriminatedUnion(
        'kind',
        [
          strict({ kind: z.literal('halves-swapped') }),
          strict({
            kind: z.literal('rows-permuted'),
            sites: z
              .array(
                z.enum([...quantSites] as [QuantSite, ...QuantSite[]], {
                  error: `expected a site among ${quantSites.join(', ')}`,
                }),
              )
              .optional(),
            block: z.number().int().positive({ error: 'expected a positive integer' }).optional(),
          }),
          strict({ kind: z.literal('stale-sync') }),
          strict({
            kind: z.literal('unity-kv-scales'),
            which: z.enum(['k', 'v', 'kv'], { error: 'expected "k", "v" or "kv"' }).optional(),
          }),
          strict({
            kind: z.literal('ignore-rule'),
            ignore: z.array(z.string().min(1, { error: 'expected a non-empty pattern' }), {
              error: 'expected a list of module-name patterns',
            }),
            match: z
              .enum([...ignoreMatchNames] as [IgnoreMatchName, ...IgnoreMatchName[]], {
                error: `expected one of ${ignoreMatchNames.join(', ')}`,
              })
              .optional(),
          }),
        ],
        {
          error:
            'expected a fault { kind: "halves-swapped" | "rows-permuted" | "stale-sync" | "unity-kv-scales" | "ignore-rule" }',
        },
      ),
      { error: 'expected a list of faults' },
    )
    .optional(),
});

/** The shape of an overrides list with `gemm` checked by `gemm`; each pattern's syntax is checked by compiling it. */
export function overridesShapeSchema(gemm: z.ZodType) {
  return z.array(
    strict(
      {
        match: z.union(
          [z.string(), z.array(z.string()).min(1, { error: 'expected a pattern or a non-empty list of patterns' })],
          {
            error: 'expected a pattern or a non-empty list of patterns',
          },
        ),
        gemm,
      },
      '{ match, gemm }',
    ),
    { error: 'expected an array of { match, gemm }' },
  );
}

/**
 * What the trainer pads each micro-batch's sequences to before its forward (a plan's `trainer.padding`):
 * - `max-length`: every pass has the call's P + L columns, L the rollout's response slots (HF
 *   `padding="max_length"`; the default, as before this field);
 * - `longest-in-batch`: every micro-batch has P + the call's longest response (TRL 1.13 GRPO: the
 *   generation batch padded once, micro-batches sliced by rows);
 * - `longest-in-micro-batch`: each micro-batch has P + its own longest response (OpenRLHF's
 *   `concat_experiences` per micro-batch; HF `padding="longest"` per collated batch).
 * A response's length is its last slot with mask 1, plus one. docs/precision-plans.md.
 */
export const trainerPaddings = ['max-length', 'longest-in-batch', 'longest-in-micro-batch'] as const;

/** One of {@link trainerPaddings}. */
export type TrainerPadding = (typeof trainerPaddings)[number];

/** The shape of one side of a plan given as data. */
export const planSideShapeSchema = strict({
  gemm: gemmPlanShapeSchema,
  decode: z.enum(['incremental', 'recompute'], { error: 'expected "incremental" or "recompute"' }).optional(),
  logprob: z.enum(['processed', 'raw'], { error: 'expected "processed" or "raw"' }).optional(),
  refit: refitChainShapeSchema.optional(),
  overrides: overridesShapeSchema(gemmPlanShapeSchema).optional(),
  engine: checkedByBuilder,
  temperatureAt: z
    .enum(['before-log-softmax', 'after-log-softmax'], {
      error: 'expected "before-log-softmax" or "after-log-softmax"',
    })
    .optional(),
  microBatch: z
    .number({ error: 'expected a positive integer' })
    .int({ error: 'expected a positive integer' })
    .min(1, { error: 'expected a positive integer' })
    .optional(),
  padding: z
    .enum(trainerPaddings, { error: `expected one of ${trainerPaddings.map((p) => `"${p}"`).join(', ')}` })
    .optional(),
});

/** The shape of a plan given as data: both sides, an optional name and description. */
export const planDataShapeSchema = strict({
  name: z.string({ error: 'expected a non-empty string' }).min(1, { error: 'expected a non-empty string' }).optional(),
  description: z.string({ error: 'expected a string' }).optional(),
  rollout: planSideShapeSchema,
  trainer: planSideShapeSchema,
});
