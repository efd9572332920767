// Shared argument parsing for `qrl-sim` subcommands: parseArgs with one-line usage errors, flags
// given twice refused, negative numbers accepted as option values, integers with documented bounds,
// and the option groups several commands share (so each command states only its own flags).
// Not command logic; each command validates its own values.

import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from '../core/errors.js';

type Options = NonNullable<ParseArgsConfig['options']>;

/** @internal The parsed options and positionals of {@link parseCommandArgs}. */
export interface ParsedCommandArgs<T extends Options> {
  values: ReturnType<typeof parseArgs<{ args: string[]; options: T; allowPositionals: true; strict: true }>>['values'];
  positionals: string[];
}

/** A token that reads as a negative number (`-1`, `-0.5`, `-1e3`, `-Infinity`), not as a flag. */
const NEGATIVE = /^-(\d|\.\d|Infinity$|inf$)/i;

/**
 * Joins `--name -1` into `--name=-1` for string options, so that a negative number can be given
 * as a value without `--` or `=` (parseArgs would otherwise read `-1` as a short flag).
 */
function joinNegativeValues(args: string[], options: Options): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === '--') {
      out.push(...args.slice(i));
      break;
    }
    const name = a.startsWith('--') && !a.includes('=') ? a.slice(2) : undefined;
    const next = args[i + 1];
    if (name !== undefined && options[name]?.type === 'string' && next !== undefined && NEGATIVE.test(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

/**
 * `parseArgs` in strict mode whose errors become {@link UsageError}. A flag given twice is an
 * error unless the option is `multiple`; `--opt -1` passes `-1` as the value.
 */
export function parseCommandArgs<T extends Options>(
  args: string[],
  options: T,
  allowPositionals = false,
): ParsedCommandArgs<T> {
  const joined = joinNegativeValues(args, options);
  let parsed;
  try {
    parsed = parseArgs({
      args: joined,
      options,
      allowPositionals: allowPositionals as true,
      strict: true,
      tokens: true,
    });
  } catch (error) {
    const message = error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error);
    const negative = /Unknown option '-(\d|\.|Infinity)/.test(message) ? " (put '--' before negative values)" : '';
    throw new UsageError(`${message.replace(/\. To specify a positional argument.*$/, '')}${negative}`);
  }
  const seen = new Set<string>();
  for (const token of parsed.tokens ?? []) {
    if (token.kind !== 'option' || options[token.name]?.multiple === true) continue;
    if (seen.has(token.name)) throw new UsageError(`--${token.name}: given twice (give each option once)`);
    seen.add(token.name);
  }
  return { values: parsed.values, positionals: parsed.positionals };
}

/** `--name VALUE` options, one per name: `strings('config', 'out')` is `{ config: { type: 'string' }, out: … }`. */
export function strings<const N extends string>(
  ...names: readonly N[]
): { readonly [K in N]: { readonly type: 'string' } } {
  return Object.fromEntries(names.map((n) => [n, { type: 'string' }])) as {
    readonly [K in N]: { readonly type: 'string' };
  };
}

/** `--name` switches, one per name: `booleans('json')` is `{ json: { type: 'boolean' } }`. */
export function booleans<const N extends string>(
  ...names: readonly N[]
): { readonly [K in N]: { readonly type: 'boolean' } } {
  return Object.fromEntries(names.map((n) => [n, { type: 'boolean' }])) as {
    readonly [K in N]: { readonly type: 'boolean' };
  };
}

/** A string option that may be given several times (`--set a=1 --set b=2`); its value is a list. */
export const REPEATED = Object.freeze({ type: 'string', multiple: true } as const);

/** An external backend (`run`, `backend-check`): `--backend COMMAND|URL`, `--timeout MS`, `--startup-timeout MS`. */
export const BACKEND_OPTIONS = strings('backend', 'timeout', 'startup-timeout', 'token-file');

/** A fresh toy AR model of the probes (`mismatch`, `diverge`): `--preset NAME`, `--outliers N`, `--moe E,K`. */
export const MODEL_OPTIONS = strings('preset', 'outliers', 'moe');

/** Runs in parallel (`sweep`, `demo`, `lab`): `--seeds N`, `--workers N`, `--out DIR`. */
export const PARALLEL_OPTIONS = strings('seeds', 'workers', 'out');

/**
 * `--timeout MS` and `--startup-timeout MS` of {@link BACKEND_OPTIONS}: integers ≥ 1; the startup
 * timeout (the first info) defaults to the request timeout, which defaults to `fallbackMs`.
 */
export function backendTimeouts(
  values: { readonly timeout?: string | undefined; readonly 'startup-timeout'?: string | undefined },
  fallbackMs: number,
): { timeoutMs: number; startupTimeoutMs: number } {
  const timeoutMs = integerOption(values.timeout, 'timeout', fallbackMs, 1);
  return { timeoutMs, startupTimeoutMs: integerOption(values['startup-timeout'], 'startup-timeout', timeoutMs, 1) };
}

/** The value of a required string option, or a {@link UsageError} naming it. */
export function required(value: string | undefined, name: string): string {
  if (value === undefined || value === '') throw new UsageError(`missing required option --${name}`);
  return value;
}

/** Decimal or exponent notation of a number (`12`, `-3`, `1e9`, `2.5E3`). */
const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$/i;

/**
 * Parses an integer option in `[min, max]`; `1e9` and `2.0` are integers, `1.5` is not. Throws a
 * {@link UsageError} naming the option, the bounds and the value.
 */
export function integerOption(
  value: string | undefined,
  name: string,
  fallback: number,
  min = Number.MIN_SAFE_INTEGER,
  max = Number.MAX_SAFE_INTEGER,
): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!DECIMAL.test(value) || !Number.isSafeInteger(n) || n < min || n > max) {
    const bounds =
      min > Number.MIN_SAFE_INTEGER && max < Number.MAX_SAFE_INTEGER
        ? ` in ${min}..${max}`
        : min > Number.MIN_SAFE_INTEGER
          ? ` ≥ ${min}`
          : max < Number.MAX_SAFE_INTEGER
            ? ` ≤ ${max}`
            : '';
    throw new UsageError(`--${name}: expected an integer${bounds}, got '${value}'`);
  }
  return n === 0 ? 0 : n;
}

/** Most GRPO steps of a run: the same bound as the config field `steps` (docs/grpo.md). */
export const MAX_STEPS = 100_000;

/** Largest seed: seeds are unsigned 32-bit integers (docs/decisions.md, "Seeds are unsigned 32-bit integers"). */
export const MAX_SEED = 0xffffffff;

/** Parses `--seed`: an integer in 0..2³²−1; −1 and other negatives are refused with the range. */
export function seedOption(value: string | undefined, fallback = 0, name = 'seed'): number {
  return integerOption(value, name, fallback, 0, MAX_SEED);
}

/**
 * Refuses options that the chosen mode ignores, e.g. `demo --numerics --seeds 3`: each entry of
 * `ignored` is an option name that must be absent, and `mode` names the mode in the message.
 */
export function refuseIgnored(values: Record<string, unknown>, ignored: readonly string[], mode: string): void {
  for (const name of ignored) {
    if (values[name] !== undefined && values[name] !== false) throw new UsageError(`--${name}: not used ${mode}`);
  }
}
