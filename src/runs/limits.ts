// Upper bounds on the model sizes a run config may ask for (`policy.model`), checked before
// anything is written: beyond them a run exhausts memory or trains for days instead of failing.
// Not the policies' own validation (shapes, divisibility), which runs after this.

import { UsageError } from '../core/errors.js';
import type { RunConfig } from '../rl/grpo/config.js';

/**
 * Largest value of each size field of `policy.model` (both policies spell them the same way), and
 * of the weights in the blocks, `layers · (4·C² + 3·C·hidden·max(1, moe.experts))`.
 * The largest preset (`medium`: C 128, 4 layers, hidden 512) holds 1.05 M block weights.
 */
export const MODEL_LIMITS = Object.freeze({
  C: 1024,
  H: 64,
  layers: 64,
  hidden: 8192,
  maxLen: 4096,
  experts: 64,
  blockWeights: 2 ** 25,
});

/** The sizes assumed for a field the config leaves to the preset: the largest preset's. */
const LARGEST_PRESET = { C: 128, layers: 4, hidden: 512 } as const;

/**
 * Throws a {@link UsageError} naming `policy.model.<field>`, its value and its bound when a size
 * field of the model is beyond {@link MODEL_LIMITS}, or the blocks would hold more weights than
 * the bound. Fields that are not numbers are left to the policy's validation.
 */
export function checkModelLimits(config: RunConfig): void {
  const model = config.policy.model as Record<string, unknown>;
  const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  for (const field of ['C', 'H', 'layers', 'hidden', 'maxLen'] as const) {
    const v = num(model[field]);
    if (v !== undefined && v > MODEL_LIMITS[field])
      throw new UsageError(`config.policy.model.${field}: at most ${MODEL_LIMITS[field]}, got ${v}`);
  }
  const moe = model['moe'] as Record<string, unknown> | null | undefined;
  const experts = moe !== null && typeof moe === 'object' ? num(moe['experts']) : undefined;
  if (experts !== undefined && experts > MODEL_LIMITS.experts)
    throw new UsageError(`config.policy.model.moe.experts: at most ${MODEL_LIMITS.experts}, got ${experts}`);
  const C = num(model['C']) ?? LARGEST_PRESET.C;
  const layers = num(model['layers']) ?? LARGEST_PRESET.layers;
  const hidden = num(model['hidden']) ?? LARGEST_PRESET.hidden;
  const weights = layers * (4 * C * C + 3 * C * hidden * Math.max(1, experts ?? 1));
  if (weights > MODEL_LIMITS.blockWeights) {
    throw new UsageError(
      `config.policy.model: layers ${layers} × (4·C² + 3·C·hidden${experts !== undefined ? '·experts' : ''}) = ${weights} block weights, at most ${MODEL_LIMITS.blockWeights} (C ${C}, hidden ${hidden})`,
    );
  }
}
