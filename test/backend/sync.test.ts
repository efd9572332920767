// What sync() means, for both reference policies: the rollout engine samples with the weights it was
// last synced to (the batch's weightVersion), never with weights a later step wrote. Not a test of
// the update itself (test/rl/grpo has those).

import { describe, expect, it } from 'vitest';
import { ReferenceBackend } from '../../src/backend/index.js';
import { arPolicyFactory, diffusionPolicyFactory } from '../../src/policies/index.js';
import { resolveRunConfig } from '../../src/rl/index.js';

const cases = [
  ['ar', arPolicyFactory, { policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 16 } } }],
  [
    'diffusion',
    diffusionPolicyFactory,
    {
      policy: {
        kind: 'diffusion',
        model: { C: 16, H: 2, layers: 1, hidden: 16 },
        diffusion: { generationLength: 8, blockLength: 8, steps: 2 },
      },
    },
  ],
] as const;

describe.each(cases)(
  'ReferenceBackend (%s): sync() is the only way new weights reach the rollout engine',
  (_kind, factory, extra) => {
    it('a step changes what the trainer scores, not what the rollout engine samples until the next sync', async () => {
      const config = resolveRunConfig({
        seed: 3,
        task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
        plan: 'bf16',
        optim: { lr: 0.05 },
        ...extra,
      });
      const backend = new ReferenceBackend(config, factory);
      const v0 = (await backend.sync()).weightVersion;
      const prompts = Array.from({ length: 6 }, (_, i) => backend.task.trainProblems(6, 'sync-test')[i]!.prompt);
      const before = await backend.generate({ prompts, seed: 'sync/a' });
      expect(before.weightVersion).toBe(v0);
      const rows = prompts.map((_, i) => i);
      const lp = await backend.logprobs({ batch: before, rows, policy: 'current', grad: true });
      await backend.backward(
        lp.handle!,
        Float64Array.from(before.mask, (m) => -m),
      );
      const stepped = await backend.step({ maxGradNorm: 1 });
      expect(stepped.weightVersion).toBe(v0 + 1);
      const moved = await backend.logprobs({ batch: before, rows, policy: 'current' });
      expect(Array.from(moved.logp)).not.toEqual(Array.from(lp.logp)); // the trainer sees the step
      const stale = await backend.generate({ prompts, seed: 'sync/a' });
      expect(stale.weightVersion).toBe(v0);
      expect(Array.from(stale.responses)).toEqual(Array.from(before.responses));
      expect(Array.from(stale.logpRollout)).toEqual(Array.from(before.logpRollout)); // same weights, bit for bit
      expect((await backend.sync()).weightVersion).toBe(v0 + 1);
      const fresh = await backend.generate({ prompts, seed: 'sync/a' });
      expect(fresh.weightVersion).toBe(v0 + 1);
      expect(Array.from(fresh.logpRollout)).not.toEqual(Array.from(before.logpRollout));
      await backend.close();
    });
  },
);
