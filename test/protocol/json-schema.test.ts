// The contract as data: docs/qrl-backend-1.schema.json is what src/protocol/json-schema.ts generates
// from the zod schemas (regenerate with `npx tsx scripts/protocol-schema.ts`), with params and result
// of every method; the Python SDK's tests validate its messages against the file
// (python/tests/test_schema.py).

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { protocolJsonSchema, protocolJsonSchemaText } from '../../src/protocol/json-schema.js';
import { BACKEND_METHODS } from '../../src/protocol/schema.js';

describe('the JSON Schema of qrl-backend/1', () => {
  it('is checked in as generated (npx tsx scripts/protocol-schema.ts)', () => {
    expect(readFileSync('docs/qrl-backend-1.schema.json', 'utf8')).toBe(protocolJsonSchemaText());
  });

  it('states params and result of every method, strict objects, the generate fields of the strict driver', () => {
    const methods = protocolJsonSchema().methods as Record<
      string,
      { params: Record<string, unknown>; result: Record<string, unknown> }
    >;
    expect(Object.keys(methods)).toEqual([...BACKEND_METHODS]);
    const generate = methods.generate!.params as {
      properties: Record<string, { minimum?: number }>;
      additionalProperties: boolean;
      required: string[];
    };
    expect(generate.additionalProperties).toBe(false);
    expect(generate.required).toEqual(['prompts', 'seed']);
    expect(generate.properties.maxNewTokens).toMatchObject({ type: 'integer', minimum: 1 });
    expect(Object.keys(generate.properties.sampling as object)).toContain('properties');
    const lp = methods.logprobs!.result as { required: string[] };
    expect(lp.required).toEqual(['logp']); // entropy may be omitted under capabilities.entropy = false
  });
});
