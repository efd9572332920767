// The `policy.model.moe` field, as both policies' run configs spell it. Not the MoE layer (nn/moe.ts) nor
// routing replay (moe-replay.ts).

import { z } from 'zod';

/** zod schema of `policy.model.moe`: `{ experts, topK, auxCoeff }` (auxCoeff default 0.01), null or absent for a dense model. */
export const moeModelSchema = z
  .strictObject({
    experts: z.number().int().positive(),
    topK: z.number().int().positive(),
    auxCoeff: z.number().nonnegative().default(0.01),
  })
  .nullable()
  .optional();
