// The MoE policy the micro-batch tests route through: 4 experts, top-2, 2 layers, weights scaled ×8 so
// the routers are sharp and a last-bit change can flip a choice.

import { arConfig } from '../../src/policies/ar/config.js';
import { createArPolicy } from '../../src/policies/ar/model.js';
import type { Task } from '../../src/tasks/task.js';

/** A seed-7 MoE AR policy over `task`'s vocabulary with room for L response tokens, sharp routers. */
export function sharpMoePolicy(task: Task, L: number): ReturnType<typeof createArPolicy> {
  const moe = { experts: 4, topK: 2, auxCoeff: 0.01 };
  const policy = createArPolicy(
    arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + L, C: 16, H: 2, layers: 2, hidden: 16, moe }),
    7,
  );
  const d = policy.params.data;
  for (let i = 0; i < d.length; i++) d[i] = d[i]! * 8; // sharp routers
  return policy;
}
