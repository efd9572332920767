// Model presets of the diffusion policy as data: named sizes selectable as `policy.model.preset`, under explicit fields.
// Not the config validation (engine.ts validateDiffusionConfig) and not the model (model.ts).

/** The size fields a diffusion preset may set, spelled as `policy.model` spells them. */
export interface DiffusionModelFields {
  /** Number of blocks. */
  readonly layers?: number;
  /** Width. */
  readonly C?: number;
  /** Heads (divides C). */
  readonly H?: number;
  /** MLP hidden width. */
  readonly hidden?: number;
}

/**
 * The diffusion model presets. `tiny` is today's default (C 32, 2 layers, 4 heads, hidden 128) and
 * sets nothing, so runs without a preset are unchanged. `small` and `medium` have the AR presets'
 * sizes (C 64 / 128, 4 layers, 4 / 8 heads, hidden 4·C). Positions stay learned: the diffusion
 * model is bidirectional over a fixed canvas of prompt + generationLength tokens whose length the
 * config fixes, and it has no RoPE (docs/policies-diffusion.md, docs/decisions.md).
 */
export const diffusionModelPresets = Object.freeze({
  tiny: Object.freeze({}),
  small: Object.freeze({ C: 64, layers: 4, H: 4, hidden: 256 }),
  medium: Object.freeze({ C: 128, layers: 4, H: 8, hidden: 512 }),
} as const satisfies { readonly [name: string]: DiffusionModelFields });

/** Names of the diffusion model presets. */
export type DiffusionModelPresetName = keyof typeof diffusionModelPresets;

/** The preset names, in table order. */
export const diffusionModelPresetNames = Object.freeze(
  Object.keys(diffusionModelPresets),
) as readonly DiffusionModelPresetName[];

/**
 * The size fields of `preset` (none when absent) with every field of `fields` that is set on top.
 * Throws an error naming `preset` and the value when the preset is unknown.
 *
 * @example
 * ```ts
 * diffusionModelOptions('small', { layers: 2 }); // { C: 64, layers: 2, H: 4, hidden: 256 }
 * ```
 */
export function diffusionModelOptions(preset: string | undefined, fields: DiffusionModelFields): DiffusionModelFields {
  if (preset !== undefined && !Object.hasOwn(diffusionModelPresets, preset)) {
    throw new Error(`preset must be one of ${diffusionModelPresetNames.join(', ')}, got ${JSON.stringify(preset)}`);
  }
  const base: DiffusionModelFields =
    preset === undefined ? {} : diffusionModelPresets[preset as DiffusionModelPresetName];
  const set = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as DiffusionModelFields;
  return { ...base, ...set };
}
