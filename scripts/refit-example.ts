// A toy model's state dict and the engine dump a healthy FP8 refit gives (the recipe applied to the
// trainer's values), for refit-check's tests and the examples in docs/examples/refit/. Not a
// converter for real checkpoints: names follow Hugging Face Llama/Qwen conventions, sizes are tiny.
//
//   npx tsx scripts/refit-example.ts   # rewrites docs/examples/refit/*.safetensors

import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ignoreMatchRules, refitRecipes, type IgnoreMatchRule, type RefitRecipe } from '../src/golden/refit-check.js';
import { quantPresets, type QuantPreset } from '../src/numerics/presets.js';
import { quantize } from '../src/numerics/quantize.js';
import { writeSafetensors, type SafetensorsEntry } from '../src/protocol/safetensors.js';

/** A tensor of the toy state dict: float32 values that are BF16-exact, and a shape. */
export interface ToyTensor {
  readonly values: Float32Array;
  readonly shape: readonly number[];
}

/** float32 → bfloat16 bits (round to nearest even; the toy has no NaN). */
export function bf16(values: Float32Array): Uint16Array {
  const u = new Uint32Array(values.buffer, values.byteOffset, values.length);
  return Uint16Array.from(u, (x) => (x + 0x7fff + ((x >>> 16) & 1)) >>> 16);
}

/** Deterministic uniform numbers in [−1, 1) (mulberry32). */
function uniform(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) / 4294967296) * 2 - 1;
  };
}

/** The toy's tensors, C = 32, one block, vocabulary 64, fused gate/up (2×64 rows), a 4-expert router `mlp.gate`. */
export const TOY_SHAPES: Readonly<Record<string, readonly number[]>> = Object.freeze({
  'model.embed_tokens.weight': [64, 32],
  'model.layers.0.input_layernorm.weight': [32],
  'model.layers.0.self_attn.q_proj.weight': [32, 32],
  'model.layers.0.self_attn.k_proj.weight': [32, 32],
  'model.layers.0.self_attn.v_proj.weight': [32, 32],
  'model.layers.0.self_attn.o_proj.weight': [32, 32],
  'model.layers.0.post_attention_layernorm.weight': [32],
  'model.layers.0.mlp.gate.weight': [4, 32],
  'model.layers.0.mlp.gate_up_proj.weight': [128, 32],
  'model.layers.0.mlp.down_proj.weight': [32, 64],
  'model.norm.weight': [32],
  'lm_head.weight': [64, 32],
});

/**
 * The trainer's state dict for `seed`, rounded to BF16: rows have different magnitudes (row r
 * scaled by 1 + r mod 5) so that row blocks and channels get different scales; norms near 1.
 */
export function toyStateDict(seed: number): Record<string, ToyTensor> {
  const next = uniform(seed);
  const out: Record<string, ToyTensor> = {};
  for (const [name, shape] of Object.entries(TOY_SHAPES)) {
    const n = shape.reduce((a, b) => a * b, 1);
    const cols = shape[shape.length - 1] as number;
    const f = new Float32Array(n);
    for (let i = 0; i < n; i++)
      f[i] = shape.length === 1 ? 1 + 0.1 * next() : 0.05 * (1 + (Math.floor(i / cols) % 5)) * next();
    const bits = bf16(f);
    out[name] = { values: new Float32Array(Uint32Array.from(bits, (b) => b << 16).buffer), shape };
  }
  return out;
}

/** The trainer's state dict as a safetensors file's entries (BF16). */
export function trainerEntries(state: Readonly<Record<string, ToyTensor>>): Record<string, SafetensorsEntry> {
  return Object.fromEntries(
    Object.entries(state).map(([name, t]) => [name, { data: bf16(t.values), shape: t.shape, dtype: 'BF16' }]),
  );
}

/** How the engine dump is made: the recipe, its block, the stack's ignore list and matching rule. */
export interface EngineRecipe {
  readonly recipe: RefitRecipe;
  readonly block?: number;
  readonly ignore: readonly string[];
  readonly match: IgnoreMatchRule;
  /** FP8 KV-cache scales of layer 0's attention. @defaultValue { k: 0.0375, v: 0.05 } */
  readonly kvScales?: { readonly k: number; readonly v: number } | null;
}

/** One weight quantized by the recipe: its F8 codes and its scale tensor (name suffix, data, shape). */
export function quantizeWeight(
  recipe: EngineRecipe,
  t: ToyTensor,
): { codes: Uint8Array; scales: Float32Array; scaleShape: readonly number[] } {
  const preset = (quantPresets as Record<string, QuantPreset>)[recipe.recipe] as QuantPreset;
  const [rows, cols] = t.shape as [number, number];
  const q = quantize(preset.build(recipe.block === undefined ? {} : { block: recipe.block }), t.values, [rows, cols]);
  return { codes: q.codes as Uint8Array, scales: q.scales, scaleShape: q.scaleShape.length === 0 ? [1] : q.scaleShape };
}

/** The engine's tensors after a healthy sync: quantized weights as F8_E4M3 + scales, the rest BF16. */
export function engineEntries(
  state: Readonly<Record<string, ToyTensor>>,
  recipe: EngineRecipe,
): Record<string, SafetensorsEntry> {
  const out: Record<string, SafetensorsEntry> = {};
  const scaleName = refitRecipes[recipe.recipe].scaleName;
  for (const [name, t] of Object.entries(state)) {
    const module = name.endsWith('.weight') ? name.slice(0, -'.weight'.length) : name;
    const ignored = recipe.ignore.some((p) => ignoreMatchRules[recipe.match](module, p));
    if (name.endsWith('.weight') && t.shape.length === 2 && !ignored) {
      const q = quantizeWeight(recipe, t);
      out[name] = { data: q.codes, shape: t.shape, dtype: 'F8_E4M3' };
      out[`${module}.${scaleName}`] = { data: q.scales, shape: q.scaleShape };
    } else out[name] = { data: bf16(t.values), shape: t.shape, dtype: 'BF16' };
  }
  const kv = recipe.kvScales === undefined ? { k: 0.0375, v: 0.05 } : recipe.kvScales;
  if (kv !== null) {
    out['model.layers.0.self_attn.k_scale'] = { data: new Float32Array([kv.k]), shape: [] };
    out['model.layers.0.self_attn.v_scale'] = { data: new Float32Array([kv.v]), shape: [] };
  }
  return out;
}

/** The recipe of the examples: 16×16 blocks; embedding, head and the MoE router kept in BF16 (prefix rule). */
export const EXAMPLE_RECIPE: EngineRecipe = Object.freeze({
  recipe: 'deepseek-fp8-block',
  block: 16,
  ignore: ['model.embed_tokens', 'lm_head', 'model.layers.0.mlp.gate'],
  match: 'prefix',
});

/** Swaps the two halves of a fused [2n, C] tensor's rows (gate/up w13 → w31) in an engine entry. */
export function swapHalves(entry: SafetensorsEntry): SafetensorsEntry {
  const rows = entry.shape[0] as number;
  const perRow = entry.data.length / rows;
  const data = entry.data.slice();
  const half = (rows / 2) * perRow;
  data.set(entry.data.subarray(half), 0);
  data.set(entry.data.subarray(0, half), half);
  return { ...entry, data };
}

/** Writes the examples: trainer.safetensors, engine.safetensors (healthy), engine-w31.safetensors (gate/up halves swapped). */
export function writeExamples(dir: string): void {
  mkdirSync(dir, { recursive: true });
  const state = toyStateDict(1);
  writeSafetensors(join(dir, 'trainer.safetensors'), trainerEntries(state));
  const engine = engineEntries(state, EXAMPLE_RECIPE);
  writeSafetensors(join(dir, 'engine.safetensors'), engine);
  const w31 = { ...engine };
  for (const n of ['model.layers.0.mlp.gate_up_proj.weight', 'model.layers.0.mlp.gate_up_proj.weight_scale_inv'])
    w31[n] = swapHalves(engine[n] as SafetensorsEntry);
  writeSafetensors(join(dir, 'engine-w31.safetensors'), w31);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeExamples(join(dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'examples', 'refit'));
}
