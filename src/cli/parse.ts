// Shared argument parsing for `qrl-sim` subcommands: parseArgs with one-line usage errors.
// Not command logic; each command validates its own values.

import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from '../errors.js';

type Options = NonNullable<ParseArgsConfig['options']>;

/** @internal The parsed options and positionals of {@link parseCommandArgs}. */
export interface ParsedCommandArgs<T extends Options> {
  values: ReturnType<typeof parseArgs<{ args: string[]; options: T; allowPositionals: true; strict: true }>>['values'];
  positionals: string[];
}

/** `parseArgs` in strict mode whose errors become {@link UsageError} with a hint for negatives. */
export function parseCommandArgs<T extends Options>(args: string[], options: T, allowPositionals = false): ParsedCommandArgs<T> {
  try {
    const parsed = parseArgs({ args, options, allowPositionals: allowPositionals as true, strict: true });
    return { values: parsed.values, positionals: parsed.positionals };
  } catch (error) {
    const message = error instanceof Error ? error.message.split('\n')[0] ?? '' : String(error);
    const negative = /Unknown option '-(\d|\.|Infinity)/.test(message) ? " (put '--' before negative values)" : '';
    throw new UsageError(`${message.replace(/\. To specify a positional argument.*$/, '')}${negative}`);
  }
}

/** The value of a required string option, or a {@link UsageError} naming it. */
export function required(value: string | undefined, name: string): string {
  if (value === undefined || value === '') throw new UsageError(`missing required option --${name}`);
  return value;
}

/** Parses an integer option; throws a {@link UsageError} naming the option and value. */
export function integerOption(value: string | undefined, name: string, fallback: number, min = Number.MIN_SAFE_INTEGER): number {
  if (value === undefined) return fallback;
  if (!/^[+-]?\d+$/.test(value) || Number(value) < min || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(`--${name}: expected an integer${min > Number.MIN_SAFE_INTEGER ? ` ≥ ${min}` : ''}, got '${value}'`);
  }
  return Number(value);
}
