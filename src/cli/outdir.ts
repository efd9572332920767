// Output directories of `run`, `sweep` and `demo`: refuse to overwrite what a user already has,
// and create the directory one level at a time so that bad paths fail at once with one line.
// Not the writers of the run files (src/core/files.ts) and not the sweep logic.

import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { UsageError } from '../core/errors.js';

/** What an existing directory holds, judged by the files `run` and `sweep` write. */
export type OutDirKind = 'missing' | 'empty' | 'run' | 'sweep' | 'other';

/** Classifies `dir`: a run (config.json or metrics.jsonl), a sweep (sweep.json), empty or other. */
export function outDirKind(dir: string): OutDirKind {
  if (!existsSync(dir)) return 'missing';
  if (!statSync(dir).isDirectory()) return 'other';
  if (existsSync(join(dir, 'sweep.json'))) return 'sweep';
  if (existsSync(join(dir, 'config.json')) || existsSync(join(dir, 'metrics.jsonl'))) return 'run';
  return readdirSync(dir).length === 0 ? 'empty' : 'other';
}

function errno(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? (error instanceof Error ? error.message : String(error));
}

/**
 * Creates `dir` and its missing parents one level at a time (never `mkdir -p`, which loops
 * forever on paths such as `/proc/x`); any failure is a {@link UsageError} naming `flag` and the path.
 * @returns the directories it created, outermost first (for {@link releaseOutDir})
 */
export function makeOutDir(dir: string, flag: string): string[] {
  const path = resolve(dir);
  const missing: string[] = [];
  let at = path;
  while (!existsSync(at)) {
    missing.unshift(at);
    const up = dirname(at);
    if (up === at) break;
    at = up;
  }
  if (existsSync(at) && !statSync(at).isDirectory())
    throw new UsageError(`${flag}: '${at}' is a file, not a directory`);
  for (const d of missing) {
    try {
      mkdirSync(d);
    } catch (error) {
      throw new UsageError(`${flag}: cannot create directory '${d}' (${errno(error)})`);
    }
  }
  // A directory that exists but refuses new entries (e.g. /proc) fails here, before any work.
  const probe = join(path, `.qrl-sim-probe-${process.pid}`);
  try {
    mkdirSync(probe);
    rmdirSync(probe);
  } catch (error) {
    throw new UsageError(`${flag}: cannot write into '${path}' (${errno(error)})`);
  }
  return missing;
}

/**
 * Removes the directories {@link claimOutDir} created, innermost first, each only while it is still
 * empty: a command refused after claiming its output directory (a backend's info that does not serve
 * the config, a backend that fails to start) leaves the file system as it found it. A directory that
 * already existed, or that holds anything, stays.
 */
export function releaseOutDir(created: readonly string[]): void {
  for (const d of [...created].reverse()) {
    try {
      rmdirSync(d);
    } catch {
      return; // not empty (or gone): its parents are not empty either
    }
  }
}

/** True when the sweep in `sweepDir` lists `runDir` as one of its runs (a job of `sweep --emit-jobs`). */
function sweepListsRun(sweepDir: string, runDir: string): boolean {
  try {
    const manifest = JSON.parse(readFileSync(join(sweepDir, 'sweep.json'), 'utf8')) as { runs?: { dir?: unknown }[] };
    const rel = relative(sweepDir, runDir).split(sep).join('/');
    return (manifest.runs ?? []).some((r) => r.dir === rel);
  } catch {
    return false;
  }
}

/**
 * Refuses an output directory that already holds a run or a sweep (or, for a run, anything that
 * is not empty), so that results are never overwritten or mixed; then creates it.
 * @param want what will be written there: one run or a sweep
 * @returns the directories it created, outermost first (for {@link releaseOutDir})
 */
export function claimOutDir(dir: string, want: 'run' | 'sweep', flag = '--out'): string[] {
  const kind = outDirKind(dir);
  const hint =
    want === 'run' ? 'use --resume DIR to continue it, or another --out' : 'use another --out (or delete it)';
  if (kind === 'run') throw new UsageError(`${flag}: '${dir}' already holds a run (${hint})`);
  if (kind === 'sweep') throw new UsageError(`${flag}: '${dir}' already holds a sweep (${hint})`);
  for (let up = dirname(resolve(dir)); want === 'run'; up = dirname(up)) {
    if (existsSync(join(up, 'sweep.json')) && !sweepListsRun(up, resolve(dir))) {
      throw new UsageError(`${flag}: '${dir}' is inside the sweep directory '${up}' (give a directory outside it)`);
    }
    if (dirname(up) === up) break;
  }
  if (kind === 'other') {
    if (existsSync(dir) && !statSync(dir).isDirectory())
      throw new UsageError(`${flag}: '${dir}' is a file, not a directory`);
    throw new UsageError(`${flag}: '${dir}' is not empty (give a new or empty directory)`);
  }
  return makeOutDir(dir, flag);
}
