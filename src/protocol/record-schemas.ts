// The JSON forms of the replay records a batch carries in `record`, as zod schemas: the
// masked-diffusion policy's `DiffusionEngineRecord` on the wire (docs/adapter.md, "The diffusion
// record"). The batch schema itself keeps `record` open (any object with a `kind`), so an engine of
// another kind is never refused; these schemas are the contract of the kinds qrl-sim defines, exported
// into docs/qrl-backend-1.schema.json (`records.<kind>`) for backends written in other languages.
// Not the codec: typed arrays still cross as 1-D wire tensors (schema.ts recordValueToJson).

import { z } from 'zod';

const nonNegInt = z.number().int().nonnegative();

/** A 1-D wire tensor of one dtype inside a record (records carry inline tensors only). */
function recordTensor(dtype: 'I32' | 'U8', what: string) {
  return z.strictObject({ dtype: z.literal(dtype), shape: z.array(nonNegInt).min(1), data: z.string() }).describe(what);
}

/** One sampled sequence of a diffusion batch (`DiffusionSequence`, src/policies/diffusion/sampler.ts). */
export const diffusionSequenceSchema = z.strictObject({
  id: z
    .string()
    .min(1)
    .describe("the row stream's path, e.g. 42/step-3/rollout/row-5; with estimatorSeed it names the d1 and ELBO views"),
  prompt: z.array(nonNegInt).describe('the P prompt tokens'),
  response: z.array(nonNegInt).describe('the N committed response tokens, past EOS too'),
  commitStep: z
    .union([
      recordTensor(
        'I32',
        '(N) the global sampler step 0 … S−1 that committed each slot; the state at step k is the prompt, response[j] where commitStep[j] < k, MASK elsewhere',
      ),
      z.null(),
    ])
    .describe('null for a sequence that was not sampled (trajectory cannot score it)'),
});

/** `DiffusionEngineRecord` (src/policies/diffusion/engine.ts) as JSON: what `generate` returns and `logprobs` gets back. */
export const diffusionRecordSchema = z.strictObject({
  kind: z.literal('diffusion'),
  sequences: z.array(diffusionSequenceSchema).min(1).describe('one per batch row, in row order'),
  estimator: z.enum(['trajectory', 'd1', 'elbo']).describe('the log-prob estimator of both sides'),
  estimatorSeed: z
    .string()
    .min(1)
    .describe(
      'the generate request’s seed: the d1 prompt masks and ELBO views are drawn from the stream createRng(estimatorSeed), forked by the estimator name, then by the sequence id',
    ),
  temperature: z.number().describe('τ of every log-prob of the batch: the sampling temperature, 1 for greedy batches'),
  support: recordTensor(
    'U8',
    '(B·N·V) 0/1, with supportReplay and a truncating sampler: the kept set of the draw that committed each slot',
  ).optional(),
  moeRouting: z
    .array(recordTensor('I32', 'one layer’s experts of the rollout-side forward that gave ℓroll'))
    .optional()
    .describe('MoE models only'),
});

/** The record schemas by `kind`. */
export const recordSchemas = { diffusion: diffusionRecordSchema } as const;
