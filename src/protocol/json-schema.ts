// The contract as data: a JSON Schema (draft 2020-12) for every qrl-backend/1 method's params and
// result, generated from the zod schemas the TypeScript side validates with (schema.ts), for backends
// written in other languages. Not the validation itself: checks a schema cannot state (base64 lengths,
// (B, T) shapes, mask values, ℓ ≤ 0, finiteness) stay in the codec and in docs/adapter.md.

import { z } from 'zod';
import { BACKEND_METHODS, methodSchemas, PROTOCOL_VERSIONS } from './schema.js';
import { recordSchemas } from './record-schemas.js';

/**
 * The JSON Schema document of qrl-backend/1: `methods.<name>.params` and `methods.<name>.result`, and
 * `records.<kind>`: the replay record of each policy kind qrl-sim defines (a batch's `record` stays
 * open to other kinds).
 */
export function protocolJsonSchema(): Record<string, unknown> {
  const methods: Record<string, unknown> = {};
  for (const m of BACKEND_METHODS) {
    const s = methodSchemas[m];
    methods[m] = {
      params: z.toJSONSchema(s.params as z.ZodType, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' }),
      result: z.toJSONSchema(s.result as z.ZodType, { io: 'output', unrepresentable: 'any', target: 'draft-2020-12' }),
    };
  }
  const records: Record<string, unknown> = {};
  for (const [kind, s] of Object.entries(recordSchemas))
    records[kind] = z.toJSONSchema(s, { io: 'output', unrepresentable: 'any', target: 'draft-2020-12' });
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: `${PROTOCOL_VERSIONS[0]} messages`,
    description:
      'Params and result of every qrl-backend/1 method (docs/adapter.md §3), generated from src/protocol/schema.ts by `npx tsx scripts/protocol-schema.ts`. Checks a schema cannot state (tensor byte lengths and (B, T) shapes, mask values, log-probs ≤ 0, finite numbers) are the codec’s.',
    protocol: PROTOCOL_VERSIONS[0],
    methods,
    records,
  };
}

/** {@link protocolJsonSchema} as the text of the checked-in file (2-space indent, final newline). */
export function protocolJsonSchemaText(): string {
  return `${JSON.stringify(protocolJsonSchema(), null, 2)}\n`;
}
