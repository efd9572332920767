// Model presets of the AR policy as data: named sizes selectable as `policy.model.preset`, with field overrides.
// Not the config validation (config.ts) and not the run wiring (engine.ts reads `preset` through arModelOptions).

import type { ArConfig } from './config.js';

/** The size fields a preset may set (everything of {@link ArConfig} but the task-given vocabSize and maxLen). */
export type ArModelFields = Partial<Omit<ArConfig, 'vocabSize' | 'maxLen'>>;

/**
 * The AR model presets. `tiny` is the toy default (C 32, 2 layers, 4 heads, hidden 64, learned
 * positions) and sets nothing, so runs without a preset are unchanged. `small` and `medium` are
 * larger, LLM-like shapes with rotary positions (RoPE, as in Llama/Qwen), which do not tie the
 * model to the trained lengths the way a learned (maxLen, C) table does — the point for long
 * responses. Hidden = 4·C as in GPT-2. They have two outlier channels whose norm gains start at 20
 * (`outliers`; LLM.int8() reports a few hidden dimensions at up to ≈ 20× the others at the linear
 * layers' inputs); set
 * `outliers: 0` to turn them off.
 */
export const arModelPresets = Object.freeze({
  tiny: Object.freeze({}),
  small: Object.freeze({ C: 64, layers: 4, H: 4, hidden: 256, positions: 'rope', outliers: 2, outlierMagnitude: 20 }),
  medium: Object.freeze({ C: 128, layers: 4, H: 8, hidden: 512, positions: 'rope', outliers: 2, outlierMagnitude: 20 }),
} as const satisfies { readonly [name: string]: ArModelFields });

/** Names of the AR model presets. */
export type ArModelPresetName = keyof typeof arModelPresets;

/** The preset names, in table order. */
export const arModelPresetNames = Object.freeze(Object.keys(arModelPresets)) as readonly ArModelPresetName[];

/**
 * The model fields of `options` (parsed `policy.model`): the fields of `options.preset` (none when
 * absent), then every field set in `options` on top. Throws an error naming `preset` and the value
 * when the preset is unknown.
 *
 * @example
 * ```ts
 * arModelOptions({ preset: 'small', layers: 2 }); // { C: 64, layers: 2, H: 4, hidden: 256, positions: 'rope', outliers: 2, outlierMagnitude: 20 }
 * ```
 */
export function arModelOptions(options: ArModelFields & { readonly preset?: string | undefined }): ArModelFields {
  const { preset, ...fields } = options;
  if (preset !== undefined && !Object.hasOwn(arModelPresets, preset)) {
    throw new Error(`preset must be one of ${arModelPresetNames.join(', ')}, got ${JSON.stringify(preset)}`);
  }
  const base: ArModelFields = preset === undefined ? {} : arModelPresets[preset as ArModelPresetName];
  const set = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as ArModelFields;
  return { ...base, ...set };
}
