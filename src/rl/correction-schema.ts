// The zod schema of the correction chain of `estimate` (every correction's name, hyper-parameters and defaults)
// and the number fields every estimator schema shares. schema.ts composes the whole config from it.

import { z } from 'zod';
import { parseVerlRs } from './correction/rejection.js';

/** A number > 0, with the message the CLI prints. */
export const positive = (): z.ZodNumber =>
  z.number().gt(0, { error: (iss) => `must be > 0, got ${String(iss.input)}` });
/** A number ≥ 0, with the message the CLI prints. */
export const nonNegative = (): z.ZodNumber =>
  z.number().gte(0, { error: (iss) => `must be >= 0, got ${String(iss.input)}` });
/** A number ≥ 1, with the message the CLI prints. */
export const atLeastOne = (): z.ZodNumber =>
  z.number().gte(1, { error: (iss) => `must be >= 1, got ${String(iss.input)}` });
const denominator = z.enum(['kept', 'original']);

function loBelowC(v: { C: number; lo?: number | undefined }, ctx: z.RefinementCtx): void {
  if (v.lo !== undefined && v.lo > v.C)
    ctx.addIssue({ code: 'custom', path: ['lo'], message: `must be <= C (${v.C}), got ${v.lo}` });
}

function bandSchema<N extends 'rs-k1' | 'geo-rs'>(
  name: N,
  lo: number,
  hi: number,
  level: 'token' | 'seq-sum' | 'seq-mean',
) {
  return z
    .strictObject({
      name: z.literal(name),
      level: z.enum(['token', 'seq-sum', 'seq-mean']).default(level),
      lo: positive().optional(),
      hi: positive().optional(),
      verlBand: z.boolean().default(false),
      denominator: denominator.default('kept'),
    })
    .transform((v) => {
      const lo2 = v.lo ?? (v.hi !== undefined ? 1 / v.hi : lo);
      const hi2 = v.hi ?? (v.lo !== undefined ? 1 / v.lo : hi);
      return { ...v, lo: lo2, hi: hi2 };
    })
    .superRefine((v, ctx) => {
      if (v.lo > v.hi) ctx.addIssue({ code: 'custom', path: ['lo'], message: `must be <= hi (${v.hi}), got ${v.lo}` });
    });
}

/** zod schema of one correction stage (defaults from docs/estimators.md). */
export const correctionSpecSchema = z.discriminatedUnion('name', [
  z.strictObject({ name: z.literal('none') }),
  z.strictObject({ name: z.literal('token-is') }),
  z
    .strictObject({
      name: z.literal('tis'),
      C: positive().default(2),
      lo: nonNegative().optional(),
      anchor: z.enum(['old', 'current']).optional(),
    })
    .superRefine(loBelowC),
  z
    .strictObject({ name: z.literal('seq-tis'), C: positive().default(2), lo: nonNegative().optional() })
    .superRefine(loBelowC),
  z
    .strictObject({
      name: z.literal('icepop'),
      lo: positive().default(0.5),
      hi: positive().default(5),
      level: z.enum(['token', 'sequence']).default('token'),
      denominator: denominator.default('original'),
    })
    .superRefine((v, ctx) => {
      if (v.lo > v.hi) ctx.addIssue({ code: 'custom', path: ['lo'], message: `must be <= hi (${v.hi}), got ${v.lo}` });
    }),
  z.strictObject({ name: z.literal('mis-token'), C: positive().default(2), denominator: denominator.default('kept') }),
  z.strictObject({ name: z.literal('mis-seq'), C: positive().default(2), denominator: denominator.default('kept') }),
  bandSchema('geo-rs', 0.999, 1.001, 'seq-mean'),
  bandSchema('rs-k1', 0.5, 2, 'seq-sum'),
  z.strictObject({
    name: z.literal('rs-k2'),
    level: z.enum(['token', 'seq-sum', 'seq-mean', 'seq-max']).default('seq-mean'),
    hi: positive().default(0.01),
    denominator: denominator.default('kept'),
  }),
  z.strictObject({
    name: z.literal('rs-k3'),
    level: z.enum(['token', 'seq-sum', 'seq-mean', 'seq-max']).default('seq-mean'),
    hi: positive().default(0.01),
    denominator: denominator.default('kept'),
  }),
  z.strictObject({ name: z.literal('veto'), v: positive().default(1e-4), denominator: denominator.default('kept') }),
  z.strictObject({
    name: z.literal('batch-norm'),
    level: z.enum(['token', 'sequence', 'slime-sequence']).default('token'),
  }),
  z.strictObject({
    name: z.literal('ais'),
    C: atLeastOne().default(5),
    delta: positive().default(0.02),
    gamma: positive().default(1.2),
    betaVar: nonNegative().default(1),
    eps: positive().default(1e-6),
  }),
  z.strictObject({
    name: z.literal('opsm'),
    delta: nonNegative().default(1e-4),
    denominator: denominator.default('original'),
    form: z.enum(['deepseek', 'slime']).optional(),
  }),
  z
    .strictObject({
      name: z.literal('outlier-veto'),
      lo: nonNegative().default(1e-4),
      hi: positive().default(100),
      denominator: denominator.default('kept'),
    })
    .superRefine((v, ctx) => {
      if (v.lo > v.hi) ctx.addIssue({ code: 'custom', path: ['lo'], message: `must be <= hi (${v.hi}), got ${v.lo}` });
    }),
  z
    .strictObject({
      name: z.literal('dp-filter'),
      lo: z.number().default(-0.2),
      hi: z.number().default(0.2),
      level: z.enum(['token', 'sequence', 'roll-geometric', 'roll-sequence']).default('token'),
      denominator: denominator.default('kept'),
    })
    .superRefine((v, ctx) => {
      if (v.lo > v.hi) ctx.addIssue({ code: 'custom', path: ['lo'], message: `must be <= hi (${v.hi}), got ${v.lo}` });
    }),
  z.strictObject({
    name: z.literal('m2po'),
    tau: nonNegative().default(0.04),
    denominator: denominator.default('kept'),
  }),
  z
    .strictObject({
      name: z.literal('rollout_rs'),
      rollout_rs: z.string().default('seq_mean_k3'),
      rollout_rs_threshold: z.union([z.string(), positive()]).default(0.01),
      denominator: denominator.default('kept'),
    })
    .superRefine((v, ctx) => {
      try {
        parseVerlRs(v.rollout_rs, v.rollout_rs_threshold);
      } catch (e) {
        const msg = (e as Error).message;
        ctx.addIssue({
          code: 'custom',
          path: [msg.startsWith('rollout_rs_threshold') ? 'rollout_rs_threshold' : 'rollout_rs'],
          message: msg.replace(/^rollout_rs(_threshold)?: /, ''),
        });
      }
    }),
  z.strictObject({
    name: z.literal('seq_logprob_error_threshold'),
    threshold: positive().default(2),
    denominator: denominator.default('kept'),
  }),
  z
    .strictObject({
      name: z.literal('rejection_sampling'),
      level: z.enum(['token', 'sequence']).default('token'),
      action: z.enum(['mask', 'clamp']).default('mask'),
      metric: z.enum(['ratio', 'kl_k1', 'kl_k2', 'kl_k3', 'binary_kl']).default('ratio'),
      agg: z.enum(['sum', 'mean', 'max']).default('mean'),
      upper: z.number().default(5),
      lower: z.number().nullable().default(null),
      denominator: denominator.default('original'),
    })
    .superRefine((v, ctx) => {
      // AReaL RejectionSamplingConfig.__post_init__ (areal/api/cli_args.py l.1602–1660)
      const issue = (path: string, message: string): void => ctx.addIssue({ code: 'custom', path: [path], message });
      if (v.lower !== null && v.lower > v.upper) issue('lower', `must be <= upper (${v.upper}), got ${v.lower}`);
      if (v.metric === 'ratio' && v.upper <= 1) issue('upper', `must be > 1 for metric 'ratio', got ${v.upper}`);
      if (v.metric === 'ratio' && v.lower !== null && v.lower <= 0)
        issue('lower', `must be > 0 for metric 'ratio', got ${v.lower}`);
      if ((v.metric === 'kl_k2' || v.metric === 'kl_k3' || v.metric === 'binary_kl') && v.upper <= 0)
        issue('upper', `must be > 0 for metric '${v.metric}', got ${v.upper}`);
      if (v.action === 'clamp' && v.metric !== 'ratio')
        issue('action', `'clamp' needs metric 'ratio', got metric '${v.metric}'`);
    }),
]);
