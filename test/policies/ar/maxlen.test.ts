// `policy.model.maxLen` of the AR policy: used when given (the learned position table grows with it),
// prompt + response when absent, and refused naming the field when too small. Not the diffusion
// policy's (test/policies/diffusion/engine.test.ts).

import { describe, expect, it } from 'vitest';
import { arPolicyFactory } from '../../../src/policies/index.js';
import { arConfigFor } from '../../../src/policies/ar/engine.js';
import { resolveRunConfig } from '../../../src/rl/index.js';
import { makeTask } from '../../../src/tasks/index.js';

const task = makeTask('reverse', {});
const config = (model: Record<string, unknown>) =>
  resolveRunConfig({ task: { name: 'reverse', options: {} }, policy: { kind: 'ar', model } });

describe('AR policy.model.maxLen', () => {
  it('defaults to prompt + response and takes a larger value as given', () => {
    expect(arConfigFor(config({}), task).maxLen).toBe(task.promptLength + task.responseLength);
    expect(arConfigFor(config({ maxLen: 64 }), task).maxLen).toBe(64);
    const small = arPolicyFactory.create(config({}), task).params.data.length;
    const large = arPolicyFactory.create(config({ maxLen: 64 }), task).params.data.length;
    expect(large - small).toBe((64 - task.promptLength - task.responseLength) * 32); // learned (maxLen, C = 32) positions
  });

  it('a maxLen below prompt + response is refused naming the field, at validation', () => {
    expect(() => arPolicyFactory.validate(config({ maxLen: 5 }))).toThrow(
      /config\.policy\.model\.maxLen: must be at least prompt \+ response = \d+ \+ \d+ = \d+ tokens for task 'reverse', got 5/,
    );
  });
});
