// The sweep grid: `key=v1,v2;key2=v3` parsed into axes, short key aliases, and the cartesian
// product of grid points. Not validation of the values (sweep.ts resolves every point's config).

import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { findOverflowingNumber } from '../core/json.js';
import { UsageError } from '../core/errors.js';
import { applyOverrides } from './overrides.js';

/** A short grid key and the config path it stands for. */
export interface GridAlias {
  /** Dotted config path. */
  readonly path: string;
  /**
   * True for estimator specs: a bare name `tis` becomes the whole spec `{ "name": "tis" }` (default
   * hyper-parameters), so that no hyper-parameter of another estimator leaks into it.
   */
  readonly spec?: boolean;
  /**
   * True for the plan: a value ending in `.json` names a plan file (`{ name?, description?, rollout,
   * trainer }`, docs/precision-plans.md) whose contents become the value, read when the grid is
   * parsed, relative to {@link GridParseOptions.root}.
   */
  readonly planFile?: boolean;
}

/**
 * Short grid keys. Any other key is taken as a config path (`optim.lr`, `estimators.correction.C`).
 * @example GRID_ALIASES.correction // { path: 'estimators.correction', spec: true }
 */
export const GRID_ALIASES: Readonly<Record<string, GridAlias>> = Object.freeze({
  correction: { path: 'estimators.correction', spec: true },
  loss: { path: 'estimators.loss', spec: true },
  advantage: { path: 'estimators.advantage', spec: true },
  aggregation: { path: 'estimators.aggregation', spec: true },
  plan: { path: 'plan', planFile: true },
  task: { path: 'task.name' },
  policy: { path: 'policy.kind' },
  lr: { path: 'optim.lr' },
});

/** One axis of the grid. */
export interface GridAxis {
  /** The key as written (alias or path). */
  readonly key: string;
  /** The config path it sets. */
  readonly path: string;
  /** The values as written. */
  readonly texts: readonly string[];
  /** The values to set (parsed like `--set` values; estimator names wrapped into specs). */
  readonly values: readonly unknown[];
}

/** One grid point: a value per axis. */
export interface GridPoint {
  /** `key=value` pairs as written, e.g. `correction=tis, plan=bf16` (`base` for an empty grid). */
  readonly label: string;
  /** A directory name made of the pairs, e.g. `correction-tis_plan-bf16`. */
  readonly dirName: string;
  /** `--set`-style overrides `path=<json>` that make this point. */
  readonly overrides: readonly string[];
}

/** Splits `text` on `sep` outside quotes, brackets and braces. */
function splitTopLevel(text: string, sep: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote = false;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quote) {
      if (ch === '\\') i++;
      else if (ch === '"') quote = false;
    } else if (ch === '"') quote = true;
    else if (ch === '[' || ch === '{') depth++;
    else if (ch === ']' || ch === '}') depth--;
    else if (ch === sep && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

/** A grid value parsed like a `--set` value: JSON when it parses, else the raw string. */
function parseValue(text: string, key: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (error) {
    if (/^\s*[[{"]/.test(text))
      throw new UsageError(
        `--grid: ${key}=${text}: the value is not valid JSON (${(error as Error).message.split('\n')[0]})`,
      );
    return text;
  }
  const overflow = findOverflowingNumber(text);
  if (overflow !== null) throw new UsageError(`--grid: ${key}=${text}: ${overflow.literal} overflows float64`);
  return value;
}

/** Options of {@link parseGrid}. */
export interface GridParseOptions {
  /** Directory that plan files of the `plan` key are relative to. @defaultValue the working directory */
  readonly root?: string;
}

/** The plan file `text` names, parsed (a `UsageError` naming the grid value when it is missing or not JSON). */
function readPlanFile(text: string, key: string, root: string | undefined): unknown {
  const file = root === undefined || isAbsolute(text) ? text : join(root, text);
  if (!existsSync(file)) throw new UsageError(`--grid: ${key}=${text}: no such plan file`);
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as unknown;
  } catch (error) {
    throw new UsageError(
      `--grid: ${key}=${text}: the plan file is not valid JSON (${(error as Error).message.split('\n')[0]})`,
    );
  }
}

/**
 * Parses `--grid "correction=none,tis,ais;plan=bf16,fp16"` into axes. Keys are aliases
 * ({@link GRID_ALIASES}) or config paths; values are separated by commas (commas inside JSON
 * values are kept); a `plan` value ending in `.json` is a plan file (`plan=fp8-kv,sims/plans/x.json`).
 * An empty key or value list, an empty value, a repeated key, `seed` or a missing plan file
 * throw a `UsageError`.
 */
export function parseGrid(text: string, options: GridParseOptions = {}): GridAxis[] {
  const axes: GridAxis[] = [];
  if (text.trim() === '') return axes;
  for (const entry of splitTopLevel(text, ';')) {
    const eq = entry.indexOf('=');
    if (eq < 0) throw new UsageError(`--grid: '${entry.trim()}' is not key=v1,v2,…`);
    const key = entry.slice(0, eq).trim();
    if (key === '') throw new UsageError(`--grid: empty key in '${entry.trim()}'`);
    if (!/^[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*$/.test(key))
      throw new UsageError(`--grid: bad key '${key}' (an alias or a dotted config path)`);
    if (key === 'seed') throw new UsageError(`--grid: 'seed' cannot be a grid key; use --seeds N`);
    const alias = GRID_ALIASES[key];
    const path = alias?.path ?? key;
    if (axes.some((a) => a.path === path)) throw new UsageError(`--grid: key '${key}' (${path}) appears twice`);
    const rawValues = entry.slice(eq + 1);
    if (rawValues.trim() === '') throw new UsageError(`--grid: key '${key}' has an empty value list`);
    const texts = splitTopLevel(rawValues, ',').map((v) => v.trim());
    if (texts.some((v) => v === ''))
      throw new UsageError(`--grid: key '${key}' has an empty value in '${rawValues.trim()}'`);
    if (new Set(texts).size !== texts.length)
      throw new UsageError(`--grid: key '${key}' repeats a value in '${rawValues.trim()}'`);
    const values = texts.map((t) => {
      if (alias?.planFile === true && t.endsWith('.json')) return readPlanFile(t, key, options.root);
      const v = parseValue(t, key);
      return alias?.spec === true && typeof v === 'string' ? { name: v } : v;
    });
    axes.push({ key, path, texts, values });
  }
  return axes;
}

function dirSafe(text: string): string {
  return text.replace(/[^A-Za-z0-9.+-]+/g, '-').replace(/^-+|-+$/g, '') || 'x';
}

/** The cartesian product of the axes, first axis slowest; an empty grid is one point `base`. */
export function gridPoints(axes: readonly GridAxis[]): GridPoint[] {
  let points: { pairs: [GridAxis, number][] }[] = [{ pairs: [] }];
  for (const axis of axes)
    points = points.flatMap((p) =>
      axis.values.map((_, i) => ({ pairs: [...p.pairs, [axis, i] as [GridAxis, number]] })),
    );
  const used = new Map<string, number>();
  return points.map(({ pairs }) => {
    const label = pairs.length === 0 ? 'base' : pairs.map(([a, i]) => `${a.key}=${a.texts[i]}`).join(', ');
    let dirName =
      pairs.length === 0
        ? 'base'
        : pairs
            .map(([a, i]) => `${dirSafe(a.key)}-${dirSafe(a.texts[i] as string)}`)
            .join('_')
            .slice(0, 100);
    const seen = used.get(dirName) ?? 0;
    used.set(dirName, seen + 1);
    if (seen > 0) dirName = `${dirName}~${seen + 1}`;
    return { label, dirName, overrides: pairs.map(([a, i]) => `${a.path}=${JSON.stringify(a.values[i])}`) };
  });
}

/** Applies a point's overrides to a raw config; a path through a non-object is a `UsageError`. */
export function applyGridPoint(raw: unknown, point: GridPoint): unknown {
  try {
    return applyOverrides(raw, point.overrides);
  } catch (error) {
    throw new UsageError(
      `grid point ${point.label}: ${error instanceof Error ? error.message.replace(/^--set /, '') : String(error)}`,
    );
  }
}
