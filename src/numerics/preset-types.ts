// The record types of the named quantizer presets (presets.ts, presets-recipes.ts): their parameters and how a
// preset builds its QuantSpec.

import type { Pow2Rounding } from './scales.js';
import type { CastProfileName } from './profiles.js';
import type { QuantSpec } from './quant-spec.js';

/** Parameters a preset may take; each preset documents which ones it reads. */
export interface QuantPresetParams {
  /** Group or block size (elements along K; B×B for block presets). */
  readonly block?: number;
  /** Round scales to powers of two (UE8M0): DeepSeek/vLLM `exp2(ceil(log2 s))`, DeepGEMM `ceil_to_ue8m0`. @defaultValue false */
  readonly ue8m0?: boolean;
  /** MX exponent rule. @defaultValue 'floor' */
  readonly exponent?: Pow2Rounding;
  /** Cast profile of the elements (MX: `satfinite` = RNE as TE/torchao; `mx` = microxcaling ties away). */
  readonly profile?: CastProfileName;
  /** amax floor of DeepSeek presets (0 = DeepSeek-V3 literal: an all-zero group gives NaN). @defaultValue 1e-4 */
  readonly eps?: number;
  /** GPTQ symmetric variant. @defaultValue false */
  readonly symmetric?: boolean;
  /** TE delayed scaling history length. @defaultValue 1024 */
  readonly historyLength?: number;
  /** TE margin. @defaultValue 0 */
  readonly margin?: number;
  /** TE amax algorithm. @defaultValue 'max' */
  readonly algorithm?: 'max' | 'most-recent';
  /** vLLM per-token `scale_ub` (upper clamp of amax). @defaultValue none */
  readonly scaleUb?: number;
  /** NVFP4 4over6 block selection error: `mae` (both libraries' default) or `mse`. @defaultValue 'mae' */
  readonly error?: 'mae' | 'mse';
  /** NVFP4 E4M3 bound of the tensor scale, 448 or 256. @defaultValue the preset's (TE 4over6: 256, FlashInfer: 448) */
  readonly tensorBound?: 448 | 256;
  /** NVFP4 per-row (per-token) global amax. @defaultValue the preset's */
  readonly rowScaled?: boolean;
}

/** A named preset: the real system it models and how to build its spec. */
export interface QuantPreset {
  /** One line: what the preset reproduces. */
  readonly description: string;
  /** Source file and function of the behaviour. */
  readonly source: string;
  /** The exact formula, as printed in docs/quantization.md. */
  readonly formula: string;
  /** Which {@link QuantPresetParams} fields it reads. */
  readonly params: readonly (keyof QuantPresetParams)[];
  /** Default group/block size, or null when the preset has none. */
  readonly defaultBlock: number | null;
  /** Builds the spec. */
  build(params: QuantPresetParams): QuantSpec;
}
