// zod schemas of the estimators that read the sampler's distribution (TRPL, DPPO top-k, score centering) and of the
// exact on-policy ratio; registered in schema.ts. Not the estimators (losses/trpl.ts, losses/score-centering.ts).

import { z } from 'zod';

const positive = (): z.ZodNumber => z.number().gt(0, { error: (iss) => `must be > 0, got ${String(iss.input)}` });
const nonNegative = (): z.ZodNumber => z.number().gte(0, { error: (iss) => `must be >= 0, got ${String(iss.input)}` });

/** zod schema of the `trpl` loss (prime-rl trpl_loss.py @776e97b `trpl_loss_fn` defaults). */
export const trplLossSchema = z.strictObject({
  name: z.literal('trpl'),
  alpha: nonNegative().default(1),
  klBound: positive().default(0.05),
  defaultLogProb: z
    .number()
    .lt(0, { error: (iss) => `must be < 0, got ${String(iss.input)}` })
    .default(-27.6),
  bisectSteps: z
    .number()
    .int({ error: (iss) => `must be an integer in [1, 200], got ${String(iss.input)}` })
    .gte(1, { error: (iss) => `must be an integer in [1, 200], got ${String(iss.input)}` })
    .lte(200, { error: (iss) => `must be an integer in [1, 200], got ${String(iss.input)}` })
    .default(24),
  sampledOld: z.enum(['default', 'rollout']).default('default'),
});

const dppoTopkFields = {
  epsLow: nonNegative().default(0.15),
  epsHigh: nonNegative().default(0.15),
  c: positive().default(20),
};

/** zod schema of the `dppo-topk-tv` loss (TRL `DPPOConfig` defaults: epsilon = epsilon_high = 0.15, clip_ratio_c 20). */
export const dppoTopkTvLossSchema = z.strictObject({ name: z.literal('dppo-topk-tv'), ...dppoTopkFields });

/** zod schema of the `dppo-topk-kl` loss (the same TRL defaults; the paper suggests 0.05 for KL). */
export const dppoTopkKlLossSchema = z.strictObject({ name: z.literal('dppo-topk-kl'), ...dppoTopkFields });

/**
 * The token-level IS rule w(r) the `vime` form applies to the head ratios p/q and the tail ratio 1/ρ
 * (vime `importance_weights(ratio, mode, low, high)`): `one` w = 1 (no IS), `clamp` w = min(hi, max(lo, r))
 * (TIS), `band` w = r·1[lo ≤ r ≤ hi] (IcePop).
 */
export const scoreCenteringWeightSchema = z.discriminatedUnion('rule', [
  z.strictObject({ rule: z.literal('one') }),
  z.strictObject({ rule: z.literal('clamp'), lo: nonNegative(), hi: positive() }),
  z.strictObject({ rule: z.literal('band'), lo: nonNegative(), hi: positive() }),
]);

/** One of the rules of {@link scoreCenteringWeightSchema}. */
export type ScoreCenteringWeight = z.output<typeof scoreCenteringWeightSchema>;

/** zod schema of `config.scoreCentering` (prime-rl's two forms and vime's IS-weighted one). */
export const scoreCenteringSpecSchema = z.strictObject({
  form: z.enum(['proportional-tail', 'ipo', 'vime']).default('proportional-tail'),
  eps: nonNegative().default(0.3),
  maxRatio: z
    .number()
    .gte(1, { error: (iss) => `must be >= 1, got ${String(iss.input)}` })
    .default(1e4),
  /** `vime` only: the IS rule; absent, resolveConfig takes it from the correction chain. */
  weight: scoreCenteringWeightSchema.optional(),
});

/** zod schema of `config.topkKl` (EMA-PG top-k KL; ema-pg verl actor config defaults). */
export const topkKlSpecSchema = z.strictObject({
  type: z.enum(['full_reverse', 'full_forward']).default('full_reverse'),
  coef: nonNegative().default(0.001),
  tailSampling: z.boolean().default(true),
  iw: z.boolean().default(false),
  /** Bounds on the `iw` weight (`kl_iw_clip_lower` / `kl_iw_clip_upper`); read only with `iw`, as ema-pg reads them. */
  iwClip: z
    .strictObject({ lower: z.number().optional(), upper: z.number().optional() })
    .refine((b) => b.lower === undefined || b.upper === undefined || b.lower <= b.upper, {
      error: (iss) => {
        const b = iss.input as { lower: number; upper: number };
        return `lower ${b.lower} is above upper ${b.upper} (torch.clamp would then give upper everywhere)`;
      },
    })
    .optional(),
});

/** Resolved top-k KL spec. */
export type TopkKlSpec = z.output<typeof topkKlSpecSchema>;

/** Resolved score-centering spec. */
export type ScoreCenteringSpec = z.output<typeof scoreCenteringSpecSchema>;
