// Usage errors: the one exception type library code throws for bad input; the CLI maps it to exit code 2.
// Not for internal bugs, which propagate and exit 1 with their stack.

import type { z } from 'zod';

/** A bad invocation or bad input: the CLI prints `qrl-sim: <message>` on one line and exits 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

function describe(value: unknown): string {
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  const text = JSON.stringify(value);
  return text === undefined ? String(value) : text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

/**
 * The value at `path` inside `root` (a zod issue's path into the input it rejected), or `undefined`
 * where the path leaves the objects: what an error message quotes as the offending value.
 */
export function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let node = root;
  for (const key of path) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node;
}

/**
 * The first zod issue as one line naming the field and the offending value, e.g.
 * `config.rollout.prompts: must be at most 1024, got 99999` (numeric limits), `config: unknown field 'x'`.
 */
export function zodIssueLine(error: z.ZodError, input: unknown, root = 'config'): string {
  const issue = error.issues[0];
  if (issue === undefined) return `${root}: invalid`;
  const path = [root, ...issue.path.map(String)].join('.');
  if (issue.code === 'unrecognized_keys') {
    return `${path}: unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `'${k}'`).join(', ')}`;
  }
  const got = valueAt(input, issue.path);
  // numeric limits in the wording of the rest of the CLI ("at most 1024, got 8192"), not zod's
  if ((issue.code === 'too_big' || issue.code === 'too_small') && issue.origin === 'number' && got !== undefined) {
    const limit = Number(issue.code === 'too_big' ? issue.maximum : issue.minimum);
    const bound =
      issue.code === 'too_big' ? (issue.inclusive ? 'at most' : 'below') : issue.inclusive ? 'at least' : 'above';
    return `${path}: must be ${bound} ${limit}, got ${describe(got)}`;
  }
  return `${path}: ${issue.message}${got === undefined ? '' : ` (got ${describe(got)})`}`;
}
