// zod schemas of the estimators that read the sampler's distribution (TRPL, score centering) and of the
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

/** zod schema of `config.scoreCentering` (prime-rl score centering, two forms). */
export const scoreCenteringSpecSchema = z.strictObject({
  form: z.enum(['proportional-tail', 'ipo']).default('proportional-tail'),
  eps: nonNegative().default(0.3),
  maxRatio: z
    .number()
    .gte(1, { error: (iss) => `must be >= 1, got ${String(iss.input)}` })
    .default(1e4),
});

/** Resolved score-centering spec. */
export type ScoreCenteringSpec = z.output<typeof scoreCenteringSpecSchema>;
