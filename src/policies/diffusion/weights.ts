// The diffusion policy's weights file, the hand-over format of a backend without a warm start of its
// own (docs/adapter.md §7, "The diffusion record"): weights.safetensors with the ParamStore names of
// the model a run config implies, F32, and the model's shape as JSON under DIFFUSION_CONFIG_METADATA.
// Not the checkpoint (the reference backend saves its own) and not a reader.

import type { RunConfig } from '../../rl/grpo/config.js';
import type { Task } from '../../tasks/task.js';
import type { ParamSpec } from '../../nn/params.js';
import { diffusionModelFor } from './engine.js';

/** The safetensors metadata key holding the diffusion model's shape (`{vocabSize, maxLen, C, H, layers, hidden}`). */
export const DIFFUSION_CONFIG_METADATA = 'qrl-sim.diffusion-config';

/** The parameter specs (buffer order) and the metadata JSON of the weights file of a run's diffusion model. */
export function diffusionWeightsLayout(
  config: RunConfig,
  task: Task,
): { specs: readonly ParamSpec[]; configJson: string } {
  const model = diffusionModelFor(config, task);
  const { vocabSize, maxLen, C, H, layers, hidden, moe } = model.config;
  return {
    specs: model.specs,
    configJson: JSON.stringify({ vocabSize, maxLen, C, H, layers, hidden, ...(moe ? { moe } : {}) }),
  };
}
