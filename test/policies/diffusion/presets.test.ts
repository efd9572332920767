// Tests of the diffusion model presets: each builds its sizes, runs a rollout and the trainer's log-probs under bf16 and a quantized plan; validation names the field.
// Not the AR presets (test/policies/ar/presets.test.ts) and not the sampler's semantics.

import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/core/errors.js';
import { createDiffusionEngine, diffusionPolicyFactory } from '../../../src/policies/diffusion/engine.js';
import { diffusionModelDefaults } from '../../../src/policies/diffusion/model.js';
import {
  diffusionModelOptions,
  diffusionModelPresetNames,
  diffusionModelPresets,
} from '../../../src/policies/diffusion/presets.js';
import { resolveRunConfig } from '../../../src/rl/grpo/config.js';
import { createRng } from '../../../src/core/rng.js';
import { makeTask } from '../../../src/tasks/index.js';

function config(model: Record<string, unknown>, plan: string) {
  return resolveRunConfig({
    seed: 1,
    task: { name: 'reverse', options: { maxLength: 3, minLength: 2 } },
    plan,
    policy: { kind: 'diffusion', model, diffusion: { generationLength: 4, blockLength: 4, steps: 2, estimator: 'd1' } },
    rollout: { prompts: 2, groupSize: 2 },
    sft: { steps: 0, cache: false },
  });
}

describe('diffusion model presets', () => {
  const task = makeTask('reverse', { maxLength: 3, minLength: 2 });
  const prompts = task.trainProblems(2, 3).map((p) => [...p.prompt]);

  it('tiny is the default model; small and medium set their sizes; explicit fields win', () => {
    expect(diffusionModelPresetNames).toEqual(['tiny', 'small', 'medium']);
    const tiny = createDiffusionEngine(config({ preset: 'tiny' }, 'bf16'), task).model.config;
    const none = createDiffusionEngine(config({}, 'bf16'), task).model.config;
    expect(tiny).toEqual(none);
    expect([none.C, none.layers, none.H, none.hidden]).toEqual([
      diffusionModelDefaults.C,
      diffusionModelDefaults.layers,
      diffusionModelDefaults.H,
      diffusionModelDefaults.hidden,
    ]);
    expect(diffusionModelOptions('small', { layers: 2 })).toEqual({ ...diffusionModelPresets.small, layers: 2 });
  });

  for (const preset of diffusionModelPresetNames) {
    it(`${preset}: builds and runs a rollout and the trainer's log-probs under bf16 and fp8-rollout`, () => {
      for (const plan of ['bf16', 'fp8-rollout']) {
        const c = config({ preset }, plan);
        diffusionPolicyFactory.validate(c);
        const engine = createDiffusionEngine(c, task);
        const m = engine.model.config;
        const want = {
          ...{
            C: diffusionModelDefaults.C,
            layers: diffusionModelDefaults.layers,
            H: diffusionModelDefaults.H,
            hidden: diffusionModelDefaults.hidden,
          },
          ...diffusionModelPresets[preset],
        };
        expect({ C: m.C, layers: m.layers, H: m.H, hidden: m.hidden }).toEqual(want);
        const batch = engine.generate(prompts, createRng(2).fork('rollout'));
        const old = engine.logprobs(batch, [0, 1], { grad: false });
        let masked = 0;
        for (let k = 0; k < batch.mask.length; k++) {
          if (!batch.mask[k]) continue;
          masked++;
          expect(Number.isFinite(batch.logpRollout[k]!) && batch.logpRollout[k]! <= 0).toBe(true);
          expect(Number.isFinite(old.logp[k]!) && old.logp[k]! <= 0).toBe(true);
        }
        expect(masked).toBeGreaterThan(0);
      }
    });
  }

  it('an unknown or non-string preset is a usage error naming the field and value', () => {
    expect(() => diffusionPolicyFactory.validate(config({ preset: 'huge' }, 'bf16'))).toThrow(UsageError);
    expect(() => diffusionPolicyFactory.validate(config({ preset: 'huge' }, 'bf16'))).toThrow(
      /config\.policy\.model\.preset: must be one of tiny, small, medium, got "huge"/,
    );
    expect(() => diffusionPolicyFactory.validate(config({ preset: 3 }, 'bf16'))).toThrow(
      /config\.policy\.model\.preset: .*got 3/,
    );
    expect(() => diffusionPolicyFactory.validate(config({ preset: 'small', H: 3 }, 'bf16'))).toThrow(
      /config\.policy\.model\.H: must divide C = 64, got 3/,
    );
  });
});
