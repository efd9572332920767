// Validation of task options with zod, turning the first problem into one error naming the option and value.
// Not the run config (which embeds these schemas) and not where defaults are explained (see docs/tasks.md).

import { z } from 'zod';
import { valueAt } from '../core/errors.js';

/** An integer option in `[min, max]`. */
export function intOption(min: number, max: number) {
  const error = `must be an integer in [${min}, ${max}]`;
  return z.number({ error }).int({ error }).min(min, { error }).max(max, { error });
}

/** A fraction option in the open interval `(0, 1)`. */
export function fractionOption() {
  const error = 'must be a number in the open interval (0, 1)';
  return z.number({ error }).gt(0, { error }).lt(1, { error });
}

/** The option of a task whose train/eval split is a hash of the problem (`hashSplit` in task.ts). */
export interface HashSplitOptions {
  /**
   * Fraction of the problem space held out for evaluation, by a hash of the problem (its key;
   * countdown: its number multiset and target). A larger fraction only adds problems to `eval`.
   * @defaultValue 0.1
   */
  readonly evalFraction: number;
}

/** Zod shape of {@link HashSplitOptions}, spread into a task's options schema. */
export const hashSplitOptionsShape = Object.freeze({ evalFraction: fractionOption().default(0.1) });

function show(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'bigint' || value === undefined) return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * `input` parsed by `schema` (defaults filled in, unknown keys rejected), or an `Error` such as
 * `reverse: option maxLength must be an integer in [1, 8], got 9`.
 */
export function parseOptions<T>(task: string, schema: z.ZodType<T>, input: unknown): T {
  const result = schema.safeParse(input ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (issue === undefined) throw new Error(`${task}: invalid options ${show(input)}`);
  if (issue.code === 'unrecognized_keys') {
    throw new Error(`${task}: unknown field ${issue.keys.map((k) => `'${k}'`).join(', ')}`);
  }
  if (issue.path.length === 0) {
    throw new Error(`${task}: options must be an object, got ${show(input)}`);
  }
  const name = issue.path.map(String).join('.');
  throw new Error(`${task}: option ${name} ${issue.message}, got ${show(valueAt(input, issue.path))}`);
}

/** Throws `task: option lowName (low) must be ≤ highName (high)` unless `low ≤ high`. */
export function checkOrdered(task: string, lowName: string, low: number, highName: string, high: number): void {
  if (low > high) {
    throw new Error(`${task}: option ${lowName} (${low}) must be ≤ ${highName} (${high})`);
  }
}
