// Per-module precision overrides of a plan side: GEMM sites matched by name pattern (`lmHead`,
// `h*.router`, `h0.*`, `last:1.*`) get their own GEMM plan. Not the GEMM plans themselves (plans.ts).

import type { BlockGemms } from '../nn/block.js';
import type { LinearGemms } from '../nn/gemm.js';
import { blockGemmsOf, type BlockLinearSite, type PolicyNumerics } from './numerics.js';
import { z } from 'zod';
import { overridesShapeSchema, parseAt } from './plan-schema.js';
import { quantSites } from './quantized.js';

/**
 * One override: the GEMM sites whose name matches `match` use `gemm` (a GEMM plan of the same kinds
 * as a side's, built by the caller) instead of the side's. Site names: `h<l>.<site>` for the
 * linear sites of block l (`q k v o up gate down router`), `h<l>.attn` for its attention GEMMs
 * (QKᵀ, PV), and `lmHead`. A pattern is matched against the whole name; `*` matches any run of
 * characters, and a leading `first:N.` / `last:N.` stands for the blocks l < N / l ≥ layers − N
 * (NeMo-RL `num_first_layers_in_bf16` / `num_last_layers_in_bf16`).
 */
export interface PrecisionOverride<G = unknown> {
  /** Name pattern(s); the override applies when any matches. */
  readonly match: string | readonly string[];
  /** The GEMM plan of the matched sites. */
  readonly gemm: G;
}

const LAYER_PREFIX = /^(first|last):(\d+)\.(.*)$/;

function globToRegExp(glob: string): RegExp {
  return new RegExp(
    `^${glob
      .split('*')
      .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );
}

/** A compiled pattern: does it match site `name` of block `layer` (null for lmHead) in a stack of `layers` blocks? */
type Matcher = (name: string, layer: number | null, layers: number) => boolean;

function compile(pattern: string, path: string): Matcher {
  if (typeof pattern !== 'string' || pattern === '')
    throw new Error(`${path}: expected a non-empty name pattern, got ${JSON.stringify(pattern)}`);
  const m = LAYER_PREFIX.exec(pattern);
  if (m) {
    const n = Number(m[2]);
    if (!Number.isSafeInteger(n) || n < 1)
      throw new Error(`${path}: ${m[1]}:N needs N ≥ 1, got ${JSON.stringify(pattern)}`);
    const rest = globToRegExp(m[3]!);
    const first = m[1] === 'first';
    return (name, layer, layers) =>
      layer !== null && (first ? layer < n : layer >= layers - n) && rest.test(name.slice(name.indexOf('.') + 1));
  }
  const re = globToRegExp(pattern);
  return (name) => re.test(name);
}

/**
 * Whether name pattern `pattern` (see {@link PrecisionOverride}) matches site `name` of block `layer`
 * (null for `lmHead`) in a stack of `layers` blocks.
 */
export function patternMatches(pattern: string, name: string, layer: number | null, layers: number): boolean {
  return compile(pattern, 'pattern')(name, layer, layers);
}

/** Every site name of a stack of `layers` blocks, for pattern checks. */
export function siteNames(layers: number): string[] {
  const names: string[] = [];
  for (let l = 0; l < layers; l++) {
    for (const s of quantSites) if (s !== 'lmHead') names.push(`h${l}.${s}`);
    names.push(`h${l}.attn`);
  }
  names.push('lmHead');
  return names;
}

/**
 * Checks an overrides list: its shape (each `{ match, gemm }`) by zod, each pattern by compiling it;
 * `checkGemm` checks each gemm. Errors name the field under `path` and the value.
 */
export function checkOverrides(
  value: unknown,
  path: string,
  checkGemm: (gemm: unknown, path: string) => void,
): readonly PrecisionOverride[] {
  const list = parseAt(overridesShapeSchema(z.unknown().optional()), value, path);
  list.forEach((o, i) => {
    const p = `${path}[${i}]`;
    (Array.isArray(o.match) ? o.match : [o.match]).forEach((m) => compile(m, `${p}.match`));
    checkGemm(o.gemm, `${p}.gemm`);
  });
  return value as readonly PrecisionOverride[];
}

/**
 * `base` with the overridden sites taken from the numerics built for each override (`built[i]` for
 * `overrides[i]`; the first matching override wins). The KV hook stays the base's.
 *
 * @param layers - number of blocks of the stack (for `last:N.` patterns)
 */
export function overriddenNumerics(
  base: PolicyNumerics,
  overrides: readonly PrecisionOverride[],
  built: readonly PolicyNumerics[],
  layers: number,
): PolicyNumerics {
  const matchers = overrides.map((o, i) =>
    (Array.isArray(o.match) ? o.match : [o.match as string]).map((m) => compile(m, `overrides[${i}].match`)),
  );
  const pick = (name: string, layer: number | null): PolicyNumerics => {
    const i = matchers.findIndex((ms) => ms.some((m) => m(name, layer, layers)));
    return i < 0 ? base : built[i]!;
  };
  const blocks: BlockGemms[] = [];
  const block = (layer: number): BlockGemms => {
    let g = blocks[layer];
    if (g === undefined) {
      const site = (s: BlockLinearSite): LinearGemms => {
        const from = pick(`h${layer}.${s}`, layer).block(layer);
        return s === 'up' || s === 'gate' || s === 'down' ? from.mlp[s] : from[s];
      };
      const attention = pick(`h${layer}.attn`, layer).block(layer).attention;
      g = blockGemmsOf(site, attention, pick(`h${layer}.router`, layer).block(layer).router);
      blocks[layer] = g;
    }
    return g;
  };
  const head = pick('lmHead', null).lmHead();
  const label = `${base.label}; overrides ${overrides.map((o, i) => `${Array.isArray(o.match) ? o.match.join('|') : o.match} → ${built[i]!.label}`).join('; ')}`;
  return Object.freeze({ label, block, lmHead: () => head, kvHook: (l: number) => base.kvHook(l) });
}
