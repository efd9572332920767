// Differential property testing of another implementation of `estimate`, `cast` or `quantize`
// (`qrl-sim check`): fast-check inputs, qrl-sim's answer (golden/methods.ts), the first difference
// under the golden compare rules, a shrunk counterexample. Not the transport: the caller passes `call`.

import fc from 'fast-check';
import { UsageError } from '../core/errors.js';
import { elementMatches, hexOf } from '../golden/compare.js';
import { referenceMethods } from '../golden/methods.js';
import { ESTIMATOR_RULE } from '../golden/suites/estimators.js';
import type { CompareRule } from '../golden/types.js';
import { formatValue } from '../numerics/values.js';
import { RpcCallError } from '../protocol/errors.js';
import { batchArb, castTargetArb, castValueArb, estimatorConfigArb, quantizeParamsArb } from './arbitraries.js';
import { readsTopk, topkParamsArb } from './topk-arbitraries.js';

/** The suites of `qrl-sim check`, each with the method it calls on the implementation. */
export const CHECK_SUITES = Object.freeze({ estimators: 'estimate', casts: 'cast', quantizers: 'quantize' } as const);
/** A suite name of {@link CHECK_SUITES}. */
export type CheckSuite = keyof typeof CHECK_SUITES;
/** A method the implementation answers: `estimate`, `cast` or `quantize`. */
export type CheckMethod = (typeof CHECK_SUITES)[CheckSuite];

const F32_EXACT: CompareRule = { ulp: 0 };

/** The compare rule of a result field (by its path), per method. */
function ruleFor(method: CheckMethod, path: string): { rule: CompareRule; dtype: 'F64' | 'F32' | 'I32' } {
  if (method === 'estimate')
    return path.startsWith('mask') ? { rule: 'bitwise', dtype: 'F64' } : { rule: ESTIMATOR_RULE, dtype: 'F64' };
  if (/(^|\.)codes?\b|zeroPoints/.test(path) || /\.code$/.test(path)) return { rule: 'bitwise', dtype: 'I32' };
  return { rule: F32_EXACT, dtype: 'F32' };
}

const SPECIAL: Record<string, number> = { NaN: Number.NaN, Infinity: Infinity, '-Infinity': -Infinity, '-0': -0 };
const asNumber = (v: unknown): number | null =>
  typeof v === 'number'
    ? v
    : typeof v === 'string' && (v in SPECIAL || /^[-+0-9.eE]+$/.test(v))
      ? (SPECIAL[v] ?? Number(v))
      : null;

/** First difference of `got` from `want` under the method's rules, as one line, or null. Walks only what `got` returns. */
function diffJson(method: CheckMethod, got: unknown, want: unknown, path = ''): string | null {
  if (Array.isArray(want)) {
    if (!Array.isArray(got))
      return `${path}: expected an array of ${want.length}, got ${JSON.stringify(got)?.slice(0, 80)}`;
    if (got.length !== want.length) return `${path}: ${got.length} entries, expected ${want.length}`;
    for (let i = 0; i < want.length; i++) {
      const d = diffJson(method, got[i], want[i], `${path}[${i}]`);
      if (d !== null) return d;
    }
    return null;
  }
  if (want !== null && typeof want === 'object') {
    if (got === null || typeof got !== 'object')
      return `${path}: expected an object, got ${JSON.stringify(got)?.slice(0, 80)}`;
    for (const key of Object.keys(got as object)) {
      if (
        !(key in want) ||
        key === 'stats' ||
        key === 'hex' ||
        key === 'input' ||
        (path === '' && ['format', 'profile', 'mode', 'preset', 'block'].includes(key))
      )
        continue;
      const d = diffJson(
        method,
        (got as Record<string, unknown>)[key],
        (want as Record<string, unknown>)[key],
        path === '' ? key : `${path}.${key}`,
      );
      if (d !== null) return d;
    }
    return null;
  }
  const w = asNumber(want);
  const g = asNumber(got);
  if (w === null) return null;
  const { rule, dtype } = ruleFor(method, path);
  // JSON cannot carry NaN or ±Infinity: a JSON null stands for any of them (JSON.stringify's own encoding)
  if (g === null && got === null && !Number.isFinite(w)) return null;
  if (g === null) return `${path}: got ${JSON.stringify(got)}, expected ${formatValue(w)}`;
  if (elementMatches(g, w, rule, dtype)) return null;
  const rt =
    rule === 'bitwise' ? 'bitwise' : 'ulp' in rule ? `ulp ≤ ${rule.ulp}` : `rtol ${rule.rtol} atol ${rule.atol}`;
  return `${path}: got ${formatValue(g)} (${hexOf(g, dtype)}), expected ${formatValue(w)} (${hexOf(w, dtype)}) (${rt})`;
}

/** Top-level (and, for cast, per-result) field names the implementation returned. */
function fieldsOf(method: CheckMethod, result: unknown): string[] {
  if (result === null || typeof result !== 'object') return [];
  const top = Object.keys(result as object);
  if (method === 'cast' && Array.isArray((result as { results?: unknown }).results)) {
    const first = ((result as { results: unknown[] }).results[0] ?? {}) as object;
    return top.flatMap((k) => (k === 'results' ? Object.keys(first).map((f) => `results[].${f}`) : [k]));
  }
  return top;
}

const REQUIRED: Record<CheckMethod, (r: Record<string, unknown>) => boolean> = {
  estimate: (r) => 'loss' in r,
  cast: (r) =>
    Array.isArray(r.results) &&
    r.results.every((x: unknown) => x !== null && typeof x === 'object' && 'code' in (x as object)),
  quantize: (r) => 'codes' in r,
};

/** The generator of params for `method`, with the configuration fixed when given. */
export function paramsArb(
  method: CheckMethod,
  config?: Record<string, unknown>,
): fc.Arbitrary<Record<string, unknown>> {
  if (method === 'estimate') {
    if ((config?.advantage as { name?: unknown } | undefined)?.name === 'optimal_token_baseline') {
      // veRL OTB needs Σπ² per token: any value in [0, 1], shaped like the mask (only for this fixed config,
      // so the draws of every other config are unchanged)
      const psq = fc.double({ min: 0, max: 1, noNaN: true });
      return batchArb().chain((batch) => {
        const rows = batch.mask as number[][];
        return fc
          .array(fc.array(psq, { minLength: rows[0]!.length, maxLength: rows[0]!.length }), {
            minLength: rows.length,
            maxLength: rows.length,
          })
          .map((probSqSum) => {
            const p: Record<string, unknown> = { ...batch, probSqSum, config };
            if (config?.kl === null || config?.kl === undefined) delete p.logpRef;
            return p;
          });
      });
    }
    if (readsTopk(config))
      // the sampler's distribution, only for a fixed config that reads it (every other draw unchanged)
      return batchArb().chain((batch) => {
        const rows = batch.mask as number[][];
        return topkParamsArb(rows.length, rows[0]!.length).map((extra) => {
          const p: Record<string, unknown> = { ...batch, ...extra, config };
          if (config?.kl === null || config?.kl === undefined) delete p.logpRef;
          return p;
        });
      });
    return fc
      .record({ batch: batchArb(), config: config !== undefined ? fc.constant(config) : estimatorConfigArb() })
      .map(({ batch, config: c }) => {
        const p: Record<string, unknown> = { ...batch, config: c };
        if (c.kl === null || c.kl === undefined) delete p.logpRef;
        return p;
      });
  }
  if (method === 'cast') {
    const target =
      config !== undefined ? fc.constant(config as { format: string; profile: string; mode: string }) : castTargetArb();
    return target.chain((t) =>
      fc
        .array(castValueArb(t.format), { minLength: 1, maxLength: 12 })
        .map((xs) => ({ ...t, inputs: xs.map(formatValue) })),
    );
  }
  if (config !== undefined)
    return quantizeParamsArb().map((p) => ({
      ...p,
      preset: config.preset,
      ...(config.block !== undefined ? { block: config.block } : {}),
    }));
  return quantizeParamsArb();
}

/**
 * Runs qrl-sim's answer on one generated case of the fixed `config`, so that a configuration that
 * does not fit the method fails once, before any call, rather than as a counterexample.
 */
export function checkFixedConfig(method: CheckMethod, config: Record<string, unknown>, seed: number): void {
  fc.sample(paramsArb(method, config), { numRuns: 1, seed }).forEach((p) => referenceMethods[method](p));
}

/** Options of {@link differentialCheck}. */
export interface DifferentialOptions {
  /** The method compared. */
  readonly method: CheckMethod;
  /** Calls the implementation; an error answer rejects with the JSON-RPC client's `RpcCallError` of kind `remote`, a broken transport with another kind. */
  readonly call: (method: CheckMethod, params: Record<string, unknown>) => Promise<unknown>;
  /** A fixed configuration (only the data varies), as `--config` gives it. */
  readonly config?: Record<string, unknown> | undefined;
  /** Generated cases. */
  readonly runs: number;
  /** fast-check seed. */
  readonly seed: number;
  /** Polled before each case: once true, no further case starts. */
  readonly shouldStop?: () => boolean;
}

/** What {@link differentialCheck} found. */
export interface DifferentialResult {
  /**
   * `passed`; `failed` (a difference, shrunk); `stopped` (by `shouldStop`, no difference in the cases
   * run); `missing` (a result without the method's required field); `transport` (the transport broke).
   */
  readonly outcome: 'passed' | 'failed' | 'stopped' | 'missing' | 'transport';
  /** Cases run (fast-check's count). */
  readonly numRuns: number;
  /** Cases that passed before the first failure. */
  readonly passed: number;
  /** Calls made to the implementation (shrinking included). */
  readonly calls: number;
  /** The fields the implementation returned, sorted (`results[].code` for cast's per-result fields). */
  readonly fields: readonly string[];
  /** `failed`: shrink steps, the shrunk params, the first difference and fast-check's replay path. */
  readonly numShrinks: number;
  readonly counterexample?: Record<string, unknown> | undefined;
  readonly reason?: string;
  readonly path?: string | undefined;
  /** `missing`: the start of the result that lacked the required field. */
  readonly missing?: string;
  /** `transport`: the error that broke the transport. */
  readonly transport?: Error;
}

/**
 * Differential property test of `options.call` against qrl-sim's own answer (`referenceMethods` of golden/methods.ts): every
 * field the implementation returns is compared by the golden compare rules (estimators by
 * `ESTIMATOR_RULE`, codes bitwise, values float32-exact); the first failing case is shrunk.
 */
export async function differentialCheck(options: DifferentialOptions): Promise<DifferentialResult> {
  const { method, call, config } = options;
  const reference = referenceMethods[method];
  const fields = new Set<string>();
  let calls = 0;
  let missing: string | null = null;
  let transport: RpcCallError | null = null;
  const stopped = new Error('stopped');
  let passed = 0;
  let failedOnce = false;
  const property = fc.asyncProperty(paramsArb(method, config), async (params) => {
    if (options.shouldStop?.() === true) throw stopped;
    let want: unknown;
    try {
      want = reference(params);
    } catch (error) {
      if (error instanceof UsageError) fc.pre(false);
      throw error;
    }
    let got: unknown;
    try {
      calls++;
      got = await call(method, params);
    } catch (error) {
      if (error instanceof RpcCallError && error.kind !== 'remote') {
        transport = error;
        throw error;
      }
      throw new Error(`the implementation answered with an error: ${(error as Error).message}`);
    }
    if (got === null || typeof got !== 'object' || !REQUIRED[method](got as Record<string, unknown>)) {
      missing = JSON.stringify(got)?.slice(0, 200) ?? 'nothing';
      throw new Error('missing required field');
    }
    for (const f of fieldsOf(method, got)) fields.add(f);
    const d = diffJson(method, got, want);
    if (d !== null) {
      failedOnce = true;
      throw new Error(d);
    }
    if (!failedOnce) passed++;
  });
  const result = await fc.check(property, { numRuns: options.runs, seed: options.seed, endOnFailure: false });
  const common = { numRuns: result.numRuns, passed, calls, fields: [...fields].sort(), numShrinks: result.numShrinks };
  if (options.shouldStop?.() === true && (!result.failed || result.errorInstance === stopped))
    return { outcome: 'stopped', ...common };
  if (missing !== null) return { outcome: 'missing', ...common, missing };
  if (transport !== null) return { outcome: 'transport', ...common, transport };
  if (!result.failed) return { outcome: 'passed', ...common };
  return {
    outcome: 'failed',
    ...common,
    counterexample: result.counterexample?.[0],
    reason: result.errorInstance instanceof Error ? result.errorInstance.message : String(result.errorInstance),
    path: result.counterexamplePath ?? undefined,
  };
}
