// Reading what users hand the CLI: JSON files (syntax, overflow, the file named in the error),
// `--set` values and the shared token of an HTTP backend. Not a schema: the commands validate the
// shape of what they read.

import { readFileSync } from 'node:fs';
import { findOverflowingNumber, parseJsonInput } from '../core/json.js';
import { UsageError } from '../core/errors.js';
import { TOKEN_ENV } from '../protocol/http-guard.js';

/** Reads and parses a JSON file; every failure is a one-line error naming `flag` and the path. */
export function readJsonFile(path: string, flag: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(`${flag}: cannot read '${path}' (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  return parseJsonInput(text, `${flag} '${path}'`);
}

/** Refuses `--set` values whose number overflows float64 (`--set optim.lr=1e400`). */
export function checkSetValues(sets: readonly string[]): void {
  const seen = new Map<string, string>();
  for (const text of sets) {
    const eq = text.indexOf('=');
    if (eq < 0) continue;
    const key = text.slice(0, eq);
    const earlier = seen.get(key);
    if (earlier !== undefined)
      throw new UsageError(`--set: '${key}' given twice ('${earlier}' and '${text}'; give each field once)`);
    seen.set(key, text);
    const raw = text.slice(eq + 1);
    try {
      JSON.parse(raw);
    } catch {
      continue; // not JSON: the value is taken as a string (malformed JSON is refused by parseOverride)
    }
    const overflow = findOverflowingNumber(raw);
    if (overflow !== null) throw new UsageError(`--set '${text}': ${overflow.literal} overflows float64`);
  }
}

/**
 * The shared token of an HTTP backend (docs/adapter.md, Security): the contents of `--token-file`
 * without surrounding whitespace, else the environment's QRL_BACKEND_TOKEN; undefined when neither
 * is set (an empty variable is unset). An unreadable or empty file is a {@link UsageError}.
 */
export function backendToken(tokenFile: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (tokenFile === undefined) {
    const value = env[TOKEN_ENV]?.trim();
    return value === undefined || value === '' ? undefined : value;
  }
  let text: string;
  try {
    text = readFileSync(tokenFile, 'utf8').trim();
  } catch (error) {
    throw new UsageError(
      `--token-file: cannot read '${tokenFile}' (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
    );
  }
  if (text === '') throw new UsageError(`--token-file: '${tokenFile}' is empty`);
  return text;
}
