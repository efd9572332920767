// `--set path.to.field=value` overrides for run configs. Not the config schema itself
// (rl/grpo/config.ts) and no validation of values beyond parsing.

/**
 * Parses one override `path.to.field=value`. The value is JSON when it parses as JSON
 * (`3`, `true`, `null`, `"x"`, `[1,2]`, `{"a":1}`), else the raw string (`tis`, `bf16`).
 */
export function parseOverride(text: string): { path: string[]; value: unknown } {
  const eq = text.indexOf('=');
  if (eq <= 0) throw new Error(`--set '${text}': expected path.to.field=value`);
  const path = text.slice(0, eq).split('.');
  if (path.some((p) => p.length === 0 || !/^[A-Za-z_][\w-]*$/.test(p))) {
    throw new Error(`--set '${text}': bad field path '${text.slice(0, eq)}'`);
  }
  const raw = text.slice(eq + 1);
  let value: unknown = raw;
  try {
    value = JSON.parse(raw);
  } catch (error) {
    // A bare word such as tis or bf16 stays a string; a value that starts as JSON (an object, an
    // array or a quoted string) and does not parse is a typo, not a string.
    if (/^\s*[[{"]/.test(raw))
      throw new Error(`--set '${text}': the value is not valid JSON (${(error as Error).message.split('\n')[0]})`);
  }
  return { path, value };
}

/** Returns a deep copy of `config` with each override applied (objects are created along the path). */
export function applyOverrides(config: unknown, overrides: readonly string[]): unknown {
  const root = structuredClone(config ?? {}) as Record<string, unknown>;
  for (const text of overrides) {
    const { path, value } = parseOverride(text);
    let node: Record<string, unknown> = root;
    for (const key of path.slice(0, -1)) {
      const next = node[key];
      if (next === undefined) node[key] = {};
      else if (typeof next !== 'object' || next === null || Array.isArray(next)) {
        throw new Error(`--set '${text}': '${key}' is not an object`);
      }
      node = node[key] as Record<string, unknown>;
    }
    node[path[path.length - 1] as string] = value;
  }
  return root;
}
