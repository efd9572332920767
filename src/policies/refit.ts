// The refit chain as data: how the weights a plan side computes with are derived from the FP32 master
// (BF16-rounded export, checkpoint quantize→dequantize steps, fused tensors sharing scales), applied
// as a PolicyNumerics wrapper that swaps each forward GEMM's weight. Not a quantizer (numerics core).

import type { FloatArray } from '../nn/array.js';
import type { GemmFn, LinearGemms } from '../nn/gemm.js';
import type { BlockGemms } from '../nn/block.js';
import type { StackWeights } from '../nn/stack.js';
import type { MlpGemms } from '../nn/mlp.js';
import { floatFormats } from '../numerics/formats.js';
import { dequantize, quantize, type QuantSpec } from '../numerics/quantize.js';
import { quantPreset } from '../numerics/presets.js';
import { fakeQuant } from '../numerics/vector.js';
import type { PolicyNumerics } from './numerics.js';
import { parseAt, refitChainShapeSchema } from './plan-schema.js';
import { type OperandQuantPlan, type QuantSite } from './quantized.js';
import { engineModuleName, ignoreMatchRule, ignoreMatchRules, type IgnoreMatchName } from './ignore-rules.js';
import type { KvCacheHook } from '../nn/block-decode.js';
import { kvFakeQuantize, type KvCacheSpec } from '../numerics/kvcache.js';
import {
  blockwiseCastToFp8,
  dequantBlockwiseFp8,
  loadWireScale,
  wireScale,
  type ScaleLayout,
} from '../numerics/fp8-transport.js';

/** Tensors that a fused refit quantizes as one (rows stacked): `qkv` = [Wq; Wk; Wv], `gate-up` = [Wgate; Wup]. */
export type RefitFusion = 'qkv' | 'gate-up';

/**
 * A refit that goes wrong without an error, as the stacks reported in 2026 (docs/refit.md, "Faults"),
 * applied after the chain's last step:
 * - `halves-swapped`: every MLP's (and expert's) gate and up weights reach the engine exchanged — a
 *   fused w13 read as w31 (verl issue 7986);
 * - `rows-permuted`: the weights of `sites` reach the engine with their output rows permuted — each
 *   pair of `block`-row blocks exchanged, as checkpoint-layout weights written into a repacked buffer
 *   (verl issues 7986, 7470);
 * - `stale-sync`: the engine keeps the linear weights of the previous sync (a sync that moves the
 *   version but not the weights; the first sync is right; embeddings and norms, which no refit
 *   carries, are current);
 * - `unity-kv-scales`: the engine's FP8 KV-cache scales are reset to 1.0 by the sync and stay there
 *   (no recalibration): the K and/or V rows of the cache are stored as `e4m3(x / 1)` and loaded as
 *   `q · 1` instead of with the calibrated scale (NeMo-RL issues 3225/3226; vLLM issue 54705 for V).
 *   Needs a side whose GEMM plan has a `kvCache` quantizer;
 * - `ignore-rule`: the engine keeps in high precision the modules its ignore list catches under its
 *   matching rule, instead of the side's own exclusions: `ignore` patterns matched with `match`
 *   ({@link ignoreMatchRules}) against each site's engine module name ({@link engineModuleName}).
 *   Caught sites run the side's plain BF16 GEMMs, every other site the quantized GEMMs — under
 *   `substring`, `mlp.gate` (meant for the routers) also catches every dense `mlp.gate_up_proj`
 *   (verl issue 7519); under `prefix`, `mlp.gate` catches nothing, so what the plan keeps in
 *   BF16 gets quantized. Needs a side whose GEMM plan is `quantized`.
 */
export type RefitFault =
  | { readonly kind: 'halves-swapped' }
  | { readonly kind: 'rows-permuted'; readonly sites?: readonly QuantSite[]; readonly block?: number }
  | { readonly kind: 'stale-sync' }
  | {
      readonly kind: 'unity-kv-scales';
      /** Which scales are reset. @defaultValue 'kv' */
      readonly which?: 'k' | 'v' | 'kv';
    }
  | {
      readonly kind: 'ignore-rule';
      /** The engine's ignore list (module-name patterns). */
      readonly ignore: readonly string[];
      /** The engine's matching rule or its alias. @defaultValue 'substring' (vLLM) */
      readonly match?: IgnoreMatchName;
    };

/**
 * Pre-quantized FP8 transport (docs/refit.md, "Pre-quantized transport"): the trainer sends each linear
 * weight as blockwise E4M3 codes with FP32 `weight_scale_inv` (SkyRL's blockwise cast), its scale in
 * `scaleLayout`, and the engine's loader reads it in `engineScaleLayout`; a layout the loader does not
 * expect fails the sync with an error naming both (see {@link loadWireScale}).
 */
export interface RefitTransport {
  /** Discriminant: blockwise E4M3 codes + FP32 block scales. */
  readonly kind: 'blockwise-fp8';
  /** Block edge (SkyRL: 128; the toy's 16). @defaultValue 16 */
  readonly block?: number;
  /** Power-of-two scales, 2^⌈log2f s⌉ (SkyRL with `NVTE_FP8_BLOCK_SCALING_FP32_SCALES=0`). @defaultValue false */
  readonly power2Scale?: boolean;
  /** Amax floor ε, used as max(ε, 1e-10) (`NVTE_FP8_BLOCK_AMAX_EPSILON`). @defaultValue 0 */
  readonly amaxEpsilon?: number;
  /** The layout the trainer sends the scale in. @defaultValue 'raw' */
  readonly scaleLayout?: ScaleLayout;
  /** The layout the engine's loader expects (vLLM: raw; SGLang's DeepGEMM path: mn-major-packed). @defaultValue 'raw' */
  readonly engineScaleLayout?: ScaleLayout;
}

/**
 * The refit chain of a plan side: what the side's GEMMs receive as weights, derived from the FP32
 * master at every weight sync, in this order:
 *
 * 1. `source`: `fp32` (the master itself) or `bf16` (the export the trainer sends, every weight
 *    rounded to BF16, round to nearest even);
 * 2. each step of `checkpoint` in turn: quantize with the step's quantizer and dequantize (an FP8
 *    checkpoint the engine loads; the side's own weight quantizer then re-quantizes the result —
 *    the quant → dequant → requant chain), on every linear site except `exclude`; tensors named by
 *    `fuse` are stacked along their output rows and quantized as one tensor, so they share
 *    per-tensor (or per-column-block) scales;
 * 3. `transport`: the result sent pre-quantized (blockwise E4M3 + FP32 scales, in a scale layout) and
 *    dequantized by the engine, on every site but `exclude`.
 *
 * Only the forward GEMMs use the refitted weights; the backward (trainer side) uses the master.
 */
export interface RefitChain {
  /** Where the chain starts. @defaultValue 'fp32' */
  readonly source?: 'fp32' | 'bf16';
  /** Checkpoint quantize→dequantize steps, in order. @defaultValue [] */
  readonly checkpoint?: readonly OperandQuantPlan[];
  /** Sites the checkpoint steps leave alone. @defaultValue ['lmHead', 'router'] (slime's convert_hf_to_fp8.py skips lm_head, router, gate) */
  readonly exclude?: readonly QuantSite[];
  /** Tensors quantized as one by the checkpoint steps. @defaultValue [] */
  readonly fuse?: readonly RefitFusion[];
  /** The weights sent pre-quantized after the checkpoint steps. @defaultValue absent (sent as values) */
  readonly transport?: RefitTransport;
  /** Silent refit faults to plant (docs/refit.md "Faults"). @defaultValue [] (a healthy refit) */
  readonly faults?: readonly RefitFault[];
}

function specOf(p: OperandQuantPlan, field: string): QuantSpec {
  if (typeof p !== 'object' || p === null || typeof p.preset !== 'string')
    throw new Error(`${field}: expected { preset, params? }, got ${JSON.stringify(p)}`);
  try {
    return quantPreset(p.preset, p.params ?? {});
  } catch (error) {
    throw new Error(`${field}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/**
 * Checks a refit chain given as data (unknown keys, values, quantizer presets); errors name the field
 * under `path`. Returns it unchanged.
 */
export function checkRefitChain(value: unknown, path = 'refit'): RefitChain {
  const chain = parseAt(refitChainShapeSchema, value, path);
  chain.checkpoint?.forEach((p, i) => specOf(p as OperandQuantPlan, `${path}.checkpoint[${i}]`));
  const seen = new Set<string>();
  chain.faults?.forEach((f, i) => {
    if ((f.kind === 'ignore-rule' || f.kind === 'unity-kv-scales') && seen.has(f.kind))
      throw new Error(
        `${path}.faults[${i}]: a second ${f.kind} fault (an engine has one ignore list and one set of KV scales), got ${JSON.stringify(f)}`,
      );
    seen.add(f.kind);
    if (f.kind === 'ignore-rule' && ignoreMatchRule(f.match ?? 'substring') === 'regex') {
      f.ignore.forEach((p, j) => {
        if (!p.startsWith('re:')) return;
        try {
          new RegExp(p.slice(3));
        } catch {
          throw new Error(
            `${path}.faults[${i}].ignore[${j}]: not a valid regular expression, got ${JSON.stringify(p)}`,
          );
        }
      });
    }
  });
  return value as RefitChain;
}

/**
 * The sites an `ignore-rule` fault keeps in high precision, by override name (`h<l>.<site>`,
 * `lmHead`; docs/precision-overrides.md): every linear site of `weights` whose engine module name
 * ({@link engineModuleName}) matches one of `fault.ignore` under `fault.match`.
 *
 * @example
 * ```ts
 * ignoredSites({ kind: 'ignore-rule', ignore: ['mlp.gate'], match: 'substring' }, policy.weights); // ['h0.up', 'h0.gate', 'h1.up', 'h1.gate']
 * ```
 */
export function ignoredSites(fault: Extract<RefitFault, { kind: 'ignore-rule' }>, weights: StackWeights): string[] {
  const matches = ignoreMatchRules[ignoreMatchRule(fault.match ?? 'substring')];
  const caught = (site: QuantSite, layer: number | null, moe: boolean): boolean =>
    fault.ignore.some((p) => matches(engineModuleName(site, layer, { moe }), p));
  const names: string[] = [];
  weights.blocks.forEach((b, l) => {
    const moe = b.moe !== undefined && b.moe !== null;
    const sites: QuantSite[] = ['q', 'k', 'v', 'o', 'up', 'gate', 'down', ...(moe ? (['router'] as const) : [])];
    for (const s of sites) if (caught(s, l, moe)) names.push(`h${l}.${s}`);
  });
  if (caught('lmHead', null, false)) names.push('lmHead');
  return names;
}

/** One linear weight of the stack: its site, its array and its (rows, cols) shape. */
interface SiteWeight {
  readonly site: QuantSite;
  readonly w: FloatArray;
  readonly n: number;
  readonly k: number;
}

/** The linear weights of one feed-forward (dense MLP or one expert) in refit order. */
function mlpWeights(m: { up: FloatArray; gate: FloatArray | null; down: FloatArray }, C: number): SiteWeight[][] {
  const Hd = m.up.length / C;
  const up: SiteWeight = { site: 'up', w: m.up, n: Hd, k: C };
  const groups: SiteWeight[][] = m.gate ? [[{ site: 'gate', w: m.gate, n: Hd, k: C }, up]] : [[up]];
  groups.push([{ site: 'down', w: m.down, n: C, k: Hd }]);
  return groups;
}

/**
 * Every linear weight of a stack, grouped: a group of several tensors is what `fuse` may stack
 * ([q, k, v] per block, [gate, up] per MLP or expert); others are singletons.
 */
function weightGroups(w: StackWeights): SiteWeight[][] {
  const C = w.lnf.length;
  const groups: SiteWeight[][] = [];
  for (const b of w.blocks) {
    groups.push([
      { site: 'q', w: b.wq, n: C, k: C },
      { site: 'k', w: b.wk, n: C, k: C },
      { site: 'v', w: b.wv, n: C, k: C },
    ]);
    groups.push([{ site: 'o', w: b.wo, n: C, k: C }]);
    if (b.mlp) groups.push(...mlpWeights(b.mlp, C));
    if (b.moe) {
      groups.push([{ site: 'router', w: b.moe.router, n: b.moe.router.length / C, k: C }]);
      for (const e of b.moe.experts) groups.push(...mlpWeights(e, C));
    }
  }
  groups.push([{ site: 'lmHead', w: w.lmHead, n: w.lmHead.length / C, k: C }]);
  return groups;
}

/** Quantize→dequantize of `x` (rows, cols) with `spec`. */
function quantDequant(spec: QuantSpec, x: Float32Array, rows: number, cols: number): Float32Array {
  return dequantize(quantize(spec, x, [rows, cols]));
}

/**
 * The refitted weights of `weights` under `chain`: a map from each linear weight array (by identity)
 * to the array the side's forward GEMMs get instead. Arrays the chain leaves unchanged map to a copy
 * equal to the original.
 *
 * @example
 * ```ts
 * const map = refitWeights(policy.weights, { source: 'bf16', checkpoint: [{ preset: 'deepseek-fp8-block', params: { block: 16 } }] });
 * ```
 */
export function refitWeights(weights: StackWeights, chain: RefitChain): Map<FloatArray, Float32Array> {
  checkRefitChain(chain);
  const steps = (chain.checkpoint ?? []).map((p, i) => specOf(p, `refit.checkpoint[${i}]`));
  const exclude = chain.exclude ?? ['lmHead', 'router'];
  const fuse = chain.fuse ?? [];
  const bf16 = floatFormats.bf16;
  const out = new Map<FloatArray, Float32Array>();
  for (const group of weightGroups(weights)) {
    const values = group.map((g) => {
      const x = Float32Array.from(g.w);
      return chain.source === 'bf16' ? fakeQuant(bf16, x, { profile: 'ieee' }) : x;
    });
    const fused =
      group.length > 1 &&
      ((group[0]!.site === 'q' && fuse.includes('qkv')) || (group[0]!.site === 'gate' && fuse.includes('gate-up')));
    for (const spec of steps) {
      if (fused && !group.some((g) => exclude.includes(g.site))) {
        const k = group[0]!.k;
        const rows = group.reduce((s, g) => s + g.n, 0);
        const stacked = new Float32Array(rows * k); // (Σ n, k) the fused tensor
        let o = 0;
        values.forEach((v) => {
          stacked.set(v, o);
          o += v.length;
        });
        const dq = quantDequant(spec, stacked, rows, k);
        o = 0;
        values.forEach((v, i) => {
          values[i] = dq.slice(o, o + v.length);
          o += v.length;
        });
        continue;
      }
      group.forEach((g, i) => {
        if (!exclude.includes(g.site)) values[i] = quantDequant(spec, values[i]!, g.n, g.k);
      });
    }
    if (chain.transport !== undefined)
      group.forEach((g, i) => {
        if (!exclude.includes(g.site)) values[i] = transported(chain.transport!, values[i]!, g);
      });
    group.forEach((g, i) => out.set(g.w, values[i]!));
  }
  for (const fault of chain.faults ?? []) plantFault(weights, out, fault);
  return out;
}

/** One weight through the pre-quantized transport: cast, scale on the wire, the engine's load and dequant. */
function transported(t: RefitTransport, x: Float32Array, g: SiteWeight): Float32Array {
  const block = t.block ?? 16;
  const sent = blockwiseCastToFp8(x, g.n, g.k, {
    block,
    ...(t.power2Scale !== undefined ? { power2Scale: t.power2Scale } : {}),
    ...(t.amaxEpsilon !== undefined ? { amaxEpsilon: t.amaxEpsilon } : {}),
  });
  let scale: Float32Array;
  try {
    scale = loadWireScale(wireScale(sent, t.scaleLayout ?? 'raw'), t.engineScaleLayout ?? 'raw', g.n, g.k, block);
  } catch (error) {
    throw new Error(`refit.transport: ${g.site} (${g.n}×${g.k}): ${(error as Error).message}`);
  }
  return dequantBlockwiseFp8(sent.codes, scale, g.n, g.k, block);
}

/** Exchanges each pair of `block`-row blocks of a (rows, cols) array (a trailing odd block stays). */
function swapRowBlocks(x: Float32Array, rows: number, cols: number, block: number): Float32Array {
  const y = Float32Array.from(x);
  for (let b = 0; (b + 2) * block <= rows; b += 2) {
    y.set(x.subarray((b + 1) * block * cols, (b + 2) * block * cols), b * block * cols);
    y.set(x.subarray(b * block * cols, (b + 1) * block * cols), (b + 1) * block * cols);
  }
  return y;
}

/** Applies one fault to the refitted map (in place). */
function plantFault(weights: StackWeights, out: Map<FloatArray, Float32Array>, fault: RefitFault): void {
  // Not a change of the weights: stale-sync is a property of the syncs and unity-kv-scales of the KV hook
  // (both applied by refittedNumerics), ignore-rule of which GEMMs the side runs (sideNumerics).
  if (fault.kind === 'stale-sync' || fault.kind === 'unity-kv-scales' || fault.kind === 'ignore-rule') return;
  const feedForwards = weights.blocks.flatMap((b) => [...(b.mlp ? [b.mlp] : []), ...(b.moe ? b.moe.experts : [])]);
  if (fault.kind === 'halves-swapped') {
    for (const m of feedForwards) {
      if (m.gate === null) continue;
      const gate = out.get(m.gate)!;
      out.set(m.gate, out.get(m.up)!);
      out.set(m.up, gate);
    }
    return;
  }
  const sites = fault.sites ?? ['q', 'k', 'v', 'o', 'gate', 'up', 'down'];
  const block = fault.block ?? 16;
  for (const group of weightGroups(weights)) {
    for (const g of group) if (sites.includes(g.site)) out.set(g.w, swapRowBlocks(out.get(g.w)!, g.n, g.k, block));
  }
}

/**
 * What a `stale-sync` engine served last, by the weights it refits (its lmHead array, whose identity
 * is the engine's across syncs): the values it will serve at the next sync.
 */
const staleServed = new WeakMap<FloatArray, Map<FloatArray, Float32Array>>();

function swapLinear(inner: LinearGemms, map: Map<FloatArray, Float32Array>): LinearGemms {
  const forward: GemmFn = (out, a, b, m, n, k) => inner.forward(out, a, map.get(b) ?? b, m, n, k);
  return Object.freeze({
    forward,
    dgrad: inner.dgrad,
    wgrad: inner.wgrad,
  });
}

/**
 * `inner`'s KV hook, with the K and/or V rows the hook writes stored under scale 1 (a
 * `unity-kv-scales` fault): the faulted rows as written are kept, `inner` quantizes both rows with
 * its scales (its calibration, on the first call, sees the same unquantized cache as without the
 * fault), and each faulted row is then replaced by `kvDequantize(kvQuantize(row, scales = 1))`.
 */
function unityKvHook(inner: KvCacheHook, spec: KvCacheSpec, which: 'k' | 'v' | 'kv'): KvCacheHook {
  const ones = new Float32Array((spec.granularity ?? 'tensor') === 'head' ? (spec.heads ?? 1) : 1).fill(1);
  let raw = new Float32Array(0); // (B, C) row t of every sequence, as written
  let loaded = new Float32Array(0); // (B, C) the same rows stored and loaded under scale 1
  return (kCache, vCache, t, B, tCap, C) => {
    const faulted = which === 'k' ? [kCache] : which === 'v' ? [vCache] : [kCache, vCache];
    if (raw.length < faulted.length * B * C) raw = new Float32Array(faulted.length * B * C);
    if (loaded.length < B * C) loaded = new Float32Array(B * C);
    faulted.forEach((cache, f) => {
      for (let b = 0; b < B; b++) for (let c = 0; c < C; c++) raw[(f * B + b) * C + c] = cache[(b * tCap + t) * C + c]!;
    });
    inner(kCache, vCache, t, B, tCap, C);
    faulted.forEach((cache, f) => {
      const rows = kvFakeQuantize(
        spec,
        raw.subarray(f * B * C, (f + 1) * B * C),
        [B, C],
        ones,
        loaded.subarray(0, B * C),
      );
      for (let b = 0; b < B; b++) for (let c = 0; c < C; c++) cache[(b * tCap + t) * C + c] = rows[b * C + c]!;
    });
  };
}

/**
 * `inner` with every linear forward GEMM's weight operand replaced by its refitted array (the
 * backward GEMMs and attention unchanged; the KV hook unchanged unless a `unity-kv-scales` fault
 * resets its scales, which needs the side's KV-cache quantizer as `kvCache`). Build it at each
 * weight sync, like `inner`. The `ignore-rule` fault is applied by `sideNumerics` (it chooses which
 * GEMMs `inner` has).
 */
export function refittedNumerics(
  inner: PolicyNumerics,
  weights: StackWeights,
  chain: RefitChain,
  kvCache?: KvCacheSpec,
): PolicyNumerics {
  let map = refitWeights(weights, chain);
  if (chain.faults?.some((f) => f.kind === 'stale-sync')) {
    // serve what the previous sync refitted (the first sync is right), and keep this one for the next
    const previous = staleServed.get(weights.lmHead);
    staleServed.set(weights.lmHead, map);
    if (previous !== undefined) map = new Map([...map.keys()].map((w) => [w, previous.get(w) ?? map.get(w)!]));
  }
  const blocks: BlockGemms[] = [];
  const block = (layer: number): BlockGemms => {
    let g = blocks[layer];
    if (g === undefined) {
      const b = inner.block(layer);
      const mlp: MlpGemms = Object.freeze({
        up: swapLinear(b.mlp.up, map),
        gate: swapLinear(b.mlp.gate, map),
        down: swapLinear(b.mlp.down, map),
      });
      g = Object.freeze({
        q: swapLinear(b.q, map),
        k: swapLinear(b.k, map),
        v: swapLinear(b.v, map),
        o: swapLinear(b.o, map),
        mlp,
        attention: b.attention,
        ...(b.router ? { router: swapLinear(b.router, map) } : {}),
      });
      blocks[layer] = g;
    }
    return g;
  };
  const head = swapLinear(inner.lmHead(), map);
  const parts = [
    chain.source === 'bf16' ? 'bf16 export' : null,
    ...(chain.checkpoint ?? []).map((p) => `ckpt ${p.preset}${p.params?.ue8m0 ? ' ue8m0' : ''}`),
    (chain.fuse ?? []).length ? `fused ${chain.fuse!.join('+')}` : null,
    chain.transport !== undefined
      ? `sent blockwise-fp8 ${chain.transport.scaleLayout ?? 'raw'}${chain.transport.power2Scale ? ' pow2' : ''} → engine ${chain.transport.engineScaleLayout ?? 'raw'}`
      : null,
    ...(chain.faults ?? []).map(
      (f) =>
        `fault ${f.kind}${f.kind === 'unity-kv-scales' ? ` ${f.which ?? 'kv'}` : f.kind === 'ignore-rule' ? ` ${f.match ?? 'substring'} [${f.ignore.join(', ')}]` : ''}`,
    ),
  ].filter(Boolean);
  const unity = chain.faults?.find((f) => f.kind === 'unity-kv-scales');
  let kvHook = (l: number): KvCacheHook | null => inner.kvHook(l);
  if (unity !== undefined) {
    if (kvCache === undefined)
      throw new Error(`refit.faults: unity-kv-scales needs a KV-cache quantizer (gemm.kvCache), the side has none`);
    const hooks: KvCacheHook[] = [];
    kvHook = (l) => {
      const h = inner.kvHook(l);
      if (h === null) return null;
      return (hooks[l] ??= unityKvHook(h, kvCache, unity.which ?? 'kv'));
    };
  }
  return Object.freeze({
    label: `${inner.label}; refit ${parts.join(' → ') || 'fp32 master'}`,
    block,
    lmHead: () => head,
    kvHook,
  });
}
