// Ignore lists of the stacks: how a pattern of a quantization ignore list matches a module name, and
// the Hugging Face module name of each toy GEMM site. Not a quantizer and not refit-check (which uses these rules).

import type { QuantSite } from './quantized.js';

/**
 * How an ignore pattern matches a module name (the tensor name without its final `.weight`):
 * - `substring`: the pattern occurs anywhere in the name — vLLM `is_layer_skipped(…, skip_with_substr=True)`,
 *   `substr_match`: `any(layer in prefix for layer in ignored_layers)`
 *   (vllm/model_executor/layers/quantization/utils/quant_utils.py lines 386–387, commit 01693a61), so
 *   `mlp.gate` (an MoE router) also catches `mlp.gate_up_proj` (verl issue 7519);
 * - `prefix`: the name itself or a dotted prefix of it (a whole module, or every module under a path);
 * - `regex`: compressed-tensors' convention — `re:`-prefixed patterns as a regular expression matched
 *   at the start of the name, other patterns the exact name.
 *
 * @example
 * ```ts
 * ignoreMatchRules.substring('model.layers.0.mlp.gate_up_proj', 'mlp.gate'); // true
 * ignoreMatchRules.prefix('model.layers.0.mlp.gate_up_proj', 'model.layers.0.mlp.gate'); // false
 * ```
 */
export const ignoreMatchRules = {
  substring: (module: string, pattern: string): boolean => module.includes(pattern),
  prefix: (module: string, pattern: string): boolean => module === pattern || module.startsWith(`${pattern}.`),
  regex: (module: string, pattern: string): boolean =>
    pattern.startsWith('re:') ? new RegExp(`^(?:${pattern.slice(3)})`).test(module) : module === pattern,
} as const satisfies Record<string, (module: string, pattern: string) => boolean>;

/** The stacks' names for the rules: `vllm` is `substring`, `compressed-tensors` is `regex`. */
export const ignoreMatchAliases = Object.freeze({ vllm: 'substring', 'compressed-tensors': 'regex' } as const);

/** A rule of {@link ignoreMatchRules}. */
export type IgnoreMatchRule = keyof typeof ignoreMatchRules;

/** A rule or one of its aliases ({@link ignoreMatchAliases}). */
export type IgnoreMatchName = IgnoreMatchRule | keyof typeof ignoreMatchAliases;

/** Every rule name and alias, in that order. */
export const ignoreMatchNames: readonly IgnoreMatchName[] = Object.freeze([
  ...(Object.keys(ignoreMatchRules) as IgnoreMatchRule[]),
  ...(Object.keys(ignoreMatchAliases) as (keyof typeof ignoreMatchAliases)[]),
]);

/** The rule a name or alias stands for. */
export function ignoreMatchRule(name: IgnoreMatchName): IgnoreMatchRule {
  return Object.hasOwn(ignoreMatchAliases, name)
    ? ignoreMatchAliases[name as keyof typeof ignoreMatchAliases]
    : (name as IgnoreMatchRule);
}

/**
 * The Hugging Face module name of a GEMM site of the toy's block `layer` (null for `lmHead`), as the
 * rollout engine names its modules and as docs/examples/refit (scripts/refit-example.ts) writes them:
 * `model.layers.L.self_attn.{q,k,v,o}_proj`, gate and up fused into one `model.layers.L.mlp.gate_up_proj`
 * (vLLM's merged column-parallel module), `model.layers.L.mlp.down_proj`, the router
 * `model.layers.L.mlp.gate` (Qwen3-MoE, DeepSeek-V3); in an MoE block the experts' sites are one fused
 * module `model.layers.L.mlp.experts.{gate_up_proj,down_proj}`; `lm_head`.
 *
 * @example
 * ```ts
 * engineModuleName('gate', 0, { moe: false }); // 'model.layers.0.mlp.gate_up_proj'
 * ```
 */
export function engineModuleName(site: QuantSite, layer: number | null, kind: { readonly moe: boolean }): string {
  const { moe } = kind;
  if (site === 'lmHead') return 'lm_head';
  const block = `model.layers.${layer}`;
  const mlp = moe ? `${block}.mlp.experts` : `${block}.mlp`;
  switch (site) {
    case 'q':
    case 'k':
    case 'v':
    case 'o':
      return `${block}.self_attn.${site}_proj`;
    case 'gate':
    case 'up':
      return `${mlp}.gate_up_proj`;
    case 'down':
      return `${mlp}.down_proj`;
    case 'router':
      return `${block}.mlp.gate`;
  }
}
