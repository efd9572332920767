// Reading run directories back: config.json, metrics.jsonl, eval.jsonl, timings.jsonl and the
// error a failed sweep run leaves. Not a writer (src/core/files.ts) and no statistics.

import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { JsonInputError, parseJsonInput } from '../core/json.js';

/** One JSON line of a run file: numeric fields by metric name (`step` included). */
export type MetricLine = Readonly<Record<string, number>>;

/** The file a sweep writes into a run directory when that run fails. */
export const RUN_ERROR_FILE = 'error.json';

/** Contents of {@link RUN_ERROR_FILE}. */
export interface RunErrorFile {
  /** The error message (first line of the failure). */
  readonly error: string;
  /** The resolved config the run was started with. */
  readonly config: unknown;
}

/** Everything a report needs from one run directory. */
export interface RunRecord {
  /** The run directory. */
  readonly dir: string;
  /** The directory relative to the report root (`.` for a single run). */
  readonly name: string;
  /** The resolved config (`config.json`, or the config recorded with the error), or null. */
  readonly config: Readonly<Record<string, unknown>> | null;
  /** Lines of `metrics.jsonl` in file order. */
  readonly metrics: readonly MetricLine[];
  /** Lines of `eval.jsonl`. */
  readonly eval: readonly MetricLine[];
  /** Lines of `timings.jsonl` (seconds per phase). */
  readonly timings: readonly MetricLine[];
  /** Why the run failed, or null. */
  readonly error: string | null;
}

function readJson(path: string): unknown {
  return parseJsonInput(readFileSync(path, 'utf8'), path);
}

/**
 * Reads a JSONL run file strictly: every complete line must be a JSON object, else a
 * `JsonInputError` (src/core/json.ts) names the file and the line. A trailing line without its newline (a run
 * interrupted mid-write) is ignored; a missing file reads as empty.
 */
export function readJsonlStrict<T = unknown>(path: string): T[] {
  if (!existsSync(path)) return [];
  const lines = readFileSync(path, 'utf8').split('\n');
  lines.pop(); // the text after the last newline: empty, or a partial line
  const out: T[] = [];
  lines.forEach((line, i) => {
    if (line.trim().length === 0) return;
    let value: unknown;
    try {
      value = parseJsonInput(line, `${path} line ${i + 1}`);
    } catch (error) {
      // One line of the file was parsed: its position is a column of line i + 1, not "line 1".
      if (error instanceof JsonInputError)
        throw new JsonInputError(error.message.replace(/ at line 1 column (\d+)/, ' at column $1'));
      throw error;
    }
    if (!isObject(value))
      throw new JsonInputError(
        `${path} line ${i + 1}: expected a JSON object, got ${line.length > 40 ? `${line.slice(0, 37)}...` : line}`,
      );
    out.push(value as T);
  });
  return out;
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** True when `dir` looks like a run directory (it has a config or an error record). */
export function isRunDir(dir: string): boolean {
  return existsSync(join(dir, 'config.json')) || existsSync(join(dir, RUN_ERROR_FILE));
}

/**
 * Reads one run directory. Missing files read as empty; a trailing partial JSONL line (a run
 * interrupted mid-write) is ignored.
 * @example readRunDir('runs/seed-0').metrics.at(-1)?.['reward/mean']
 */
export function readRunDir(dir: string, root: string = dir): RunRecord {
  let config: Record<string, unknown> | null = null;
  let error: string | null = null;
  const errorPath = join(dir, RUN_ERROR_FILE);
  if (existsSync(errorPath)) {
    const e = readJson(errorPath);
    if (isObject(e)) {
      error = typeof e['error'] === 'string' ? e['error'] : JSON.stringify(e['error']);
      if (isObject(e['config'])) config = e['config'];
    }
  }
  const configPath = join(dir, 'config.json');
  if (existsSync(configPath)) {
    const c = readJson(configPath);
    if (!isObject(c)) throw new JsonInputError(`${configPath}: expected a JSON object`);
    config = c;
  }
  return {
    dir,
    name: relative(root, dir) || '.',
    config,
    metrics: readJsonlStrict<MetricLine>(join(dir, 'metrics.jsonl')),
    eval: readJsonlStrict<MetricLine>(join(dir, 'eval.jsonl')),
    timings: readJsonlStrict<MetricLine>(join(dir, 'timings.jsonl')),
    error,
  };
}

/**
 * Finds the run directories under `root`: `root` itself when it is a run directory, else every
 * run directory below it (depth ≤ 4, `checkpoints` and hidden folders skipped), sorted by path.
 */
export function findRunDirs(root: string, depth = 4): string[] {
  if (isRunDir(root)) return [root];
  if (depth === 0) return [];
  const out: string[] = [];
  for (const entry of readdirSync(root).sort()) {
    if (entry.startsWith('.') || entry === 'checkpoints') continue;
    const path = join(root, entry);
    if (statSync(path).isDirectory()) out.push(...findRunDirs(path, depth - 1));
  }
  return out;
}

/** Reads every run under `root` ({@link findRunDirs} then {@link readRunDir}). */
export function readRuns(root: string): RunRecord[] {
  return findRunDirs(root).map((dir) => readRunDir(dir, root));
}
