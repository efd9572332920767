// The files qrl-sim ships that its commands name: the bundled run configs (sims/NAME.json, taken by
// `--config NAME`) and the docs pages its output points to. Not the configs' contents nor the docs.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join, relative, sep } from 'node:path';
import { UsageError } from '../core/errors.js';
import { packageRoot } from '../runs/lab.js';

/** The names of the bundled run configs (`sims/*.json`, without `.json`), sorted. */
export function bundledConfigNames(root = packageRoot()): string[] {
  const dir = join(root, 'sims');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => basename(f, '.json'))
    .sort();
}

/** True when `arg` is a bare name (no path separator, no `.json`): a bundled config when no such file exists. */
function isBareName(arg: string): boolean {
  return arg.length > 0 && !arg.includes('/') && !arg.includes(sep) && !arg.endsWith('.json');
}

/**
 * The file `--config ARG` reads: ARG itself when it exists or looks like a path, else the bundled
 * `sims/ARG.json`. A bare name that is neither names the bundled configs.
 */
export function resolveConfigPath(arg: string, flag = '--config', root = packageRoot()): string {
  if (!isBareName(arg) || existsSync(arg)) return arg;
  const names = bundledConfigNames(root);
  if (names.includes(arg)) return join(root, 'sims', `${arg}.json`);
  throw new UsageError(`${flag}: no file '${arg}' and no bundled config of that name (bundled: ${names.join(', ')})`);
}

/** The text of a bundled config, for `qrl-sim run --print-config NAME > my.json`. */
export function bundledConfigText(name: string, root = packageRoot()): string {
  const names = bundledConfigNames(root);
  if (!names.includes(name))
    throw new UsageError(`--print-config: unknown bundled config '${name}' (bundled: ${names.join(', ')})`);
  return readFileSync(join(root, 'sims', `${name}.json`), 'utf8');
}

/**
 * A docs page of the package as a path to print: `docs/…` as written when the working directory is
 * the package root (a checkout), else the path from the working directory to the installed package's
 * copy (`node_modules/qrl-sim/docs/…`; the docs ship in the package).
 */
export function docRef(page: string, cwd = process.cwd(), root = packageRoot()): string {
  const rel = relative(cwd, join(root, page));
  return rel.startsWith('..') ? join(root, page) : rel;
}

/**
 * `text` (a command's help) with every `docs/…` and `sims/…` path that is in the package written as
 * {@link docRef} writes it: unchanged in a checkout, the path into the installed package elsewhere,
 * so a page or an example config named there can be opened or pasted as printed.
 */
export function packagePathsIn(text: string, cwd = process.cwd(), root = packageRoot()): string {
  return text.replace(/(?<![\w./-])(?:docs|sims)\/[\w./-]*[\w/]/g, (path) =>
    existsSync(join(root, path)) ? docRef(path, cwd, root) : path,
  );
}
