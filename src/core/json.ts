// Reading JSON that users give: syntax errors and number literals that overflow float64 (1e400,
// which JSON.parse silently turns into Infinity and JSON.stringify into null) reported with the
// file, line and column. Not a schema validator: callers check the shape of what they get.

import { UsageError } from './errors.js';

/**
 * Bad JSON input (a syntax error, an overflowing number), naming the input and the line: a
 * {@link UsageError}, so the CLI prints its message on one line and exits with code 2.
 */
export class JsonInputError extends UsageError {
  constructor(message: string) {
    super(message);
    this.name = 'JsonInputError';
  }
}

/** Line and column (1-based) of character `index` of `text`. */
function position(text: string, index: number): { line: number; column: number } {
  let line = 1;
  let start = 0;
  for (let i = 0; i < index; i++) {
    if (text.charCodeAt(i) === 10) {
      line++;
      start = i + 1;
    }
  }
  return { line, column: index - start + 1 };
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/**
 * The first number literal of (syntactically valid) JSON `text` whose value is not a finite
 * float64, with its line and column, or null. Strings are skipped.
 */
export function findOverflowingNumber(text: string): { literal: string; line: number; column: number } | null {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      // A string: skip to its closing quote (escapes included).
      for (i++; i < text.length && text.charCodeAt(i) !== 34; i++) if (text.charCodeAt(i) === 92) i++;
      continue;
    }
    if (c === 45 || (c >= 48 && c <= 57)) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(text);
      if (m === null) continue;
      if (!Number.isFinite(Number(m[0]))) return { literal: m[0], ...position(text, i) };
      i += m[0].length - 1;
    }
  }
  return null;
}

/** Where a syntax error is: V8's `position N` turned into line and column. */
function syntaxWhere(text: string, message: string): string {
  const m = /position (\d+)/.exec(message);
  if (m === null) return '';
  const { line, column } = position(text, Number(m[1]));
  return ` at line ${line} column ${column}`;
}

/**
 * `JSON.parse` for user input: a syntax error or an overflowing number throws a
 * {@link JsonInputError} that starts with `name` (e.g. `--config 'sims/x.json'`) and gives the line.
 * @example parseJsonInput('[1e400]', 'input') // throws "input: 1e400 at line 1 column 2 overflows float64"
 */
export function parseJsonInput(text: string, name: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const message = error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error);
    throw new JsonInputError(`${name} is not valid JSON${syntaxWhere(text, message)} (${message})`);
  }
  const overflow = findOverflowingNumber(text);
  if (overflow !== null) {
    throw new JsonInputError(
      `${name}: ${overflow.literal} at line ${overflow.line} column ${overflow.column} overflows float64 (largest finite value ≈ 1.8e308)`,
    );
  }
  return value;
}
