// The contract as data: docs/qrl-backend-1.schema.json is what src/protocol/json-schema.ts generates
// from the zod schemas (regenerate with `npx tsx scripts/protocol-schema.ts`), with params and result
// of every method; the Python SDK's tests validate its messages against the file
// (python/tests/test_schema.py).

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { protocolJsonSchema, protocolJsonSchemaText } from '../../src/protocol/json-schema.js';
import { BACKEND_METHODS, recordValueToJson } from '../../src/protocol/schema.js';
import { diffusionRecordSchema } from '../../src/protocol/record-schemas.js';
import { createDiffusionEngine } from '../../src/policies/diffusion/engine.js';
import { resolveRunConfig } from '../../src/rl/grpo/config.js';
import { makeTask } from '../../src/tasks/registry.js';
import { createRng } from '../../src/core/rng.js';

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

describe('records.diffusion: the masked-diffusion record on the wire', () => {
  it('validates the record the in-process diffusion engine sends, with and without support, and refuses a broken one', () => {
    for (const sampler of [{}, { topK: 4, supportReplay: true }]) {
      const config = resolveRunConfig({
        task: { name: 'reverse' },
        policy: { kind: 'diffusion', diffusion: { generationLength: 8, blockLength: 4, steps: 4 }, sampler },
      });
      const engine = createDiffusionEngine(config, makeTask('reverse'));
      const batch = engine.generate(
        [
          [1, 5, 6, 3],
          [1, 7, 8, 3],
        ],
        createRng('0/step-1/rollout'),
      );
      const json = recordValueToJson(batch.record as never) as Record<string, unknown>;
      expect(diffusionRecordSchema.safeParse(json).success).toBe(true);
      expect('support' in json).toBe('supportReplay' in sampler);
      const schema = protocolJsonSchema().records as Record<string, Record<string, unknown>>;
      expect(Object.keys(schema)).toEqual(['diffusion']);
      expect(diffusionRecordSchema.safeParse({ ...json, estimator: 'mean-field' }).success).toBe(false);
      const { estimatorSeed: _seed, ...missing } = json;
      expect(diffusionRecordSchema.safeParse(missing).success).toBe(false);
    }
  });
});
