// Writes a golden directory: one safetensors file per case under DIR/<suite>/ and DIR/manifest.json
// last. Not the suites' content (suites/) and not reading (read.ts).

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ndarray from 'ndarray';
import { assign } from 'ndarray-ops';
import { type SafetensorsEntry, writeSafetensors } from '../protocol/safetensors.js';
import { WIRE_DTYPES, type WireArray } from '../protocol/tensor.js';
import {
  GOLDEN_SCHEMA,
  type CompareRule,
  type GoldenCase,
  type GoldenManifest,
  type GoldenSuite,
  type GoldenTensor,
  type ManifestCase,
} from './types.js';

/** A tensor of role `role` over `data` with row-major `shape` (default 1-D). */
export function tensor(
  role: GoldenTensor['role'],
  data: WireArray,
  compare: CompareRule,
  shape: readonly number[] = [data.length],
  dtype?: GoldenTensor['dtype'],
): GoldenTensor {
  return { role, array: ndarray(data, [...shape]), compare, ...(dtype !== undefined ? { dtype } : {}) };
}

/** A row-major copy of any `ndarray` view (ndarray-ops `assign` walks the strides). */
export function contiguous(view: ndarray.NdArray<WireArray>): WireArray {
  const size = view.shape.reduce((a, b) => a * b, 1);
  const rowMajor =
    view.offset === 0 &&
    view.data.length === size &&
    view.stride.every((s, d) => s === view.shape.slice(d + 1).reduce((a, b) => a * b, 1));
  if (rowMajor || size === 0) return view.data;
  const ctor = Object.values(WIRE_DTYPES).find((c) => view.data instanceof c);
  if (ctor === undefined) throw new Error('golden: unsupported array type');
  const out = new ctor(size);
  assign(ndarray(out, [...view.shape]), view);
  return out;
}

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** qrl-sim's version (package.json) and, when the package is a git checkout, its commit. */
export function qrlSimIdentity(): { version: string; commit?: string } {
  const version = (JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;
  // An installed package (node_modules/qrl-sim) has no .git of its own: git would name the commit of
  // the project around it.
  if (!existsSync(join(packageRoot, '.git'))) return { version };
  try {
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], {
      cwd: packageRoot,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    return /^[0-9a-f]{40}$/.test(commit) ? { version, commit } : { version };
  } catch {
    return { version };
  }
}

const CASE_NAME = /^[A-Za-z0-9._-]+$/;

/** A case's manifest entry and the tensors of its file (the file's bytes: `encodeSafetensors(tensors, caseMetadata(...))`). */
export function caseEntry(
  suite: string,
  c: GoldenCase,
): { manifest: ManifestCase; tensors: Record<string, SafetensorsEntry> } {
  if (!CASE_NAME.test(c.name))
    throw new Error(`golden: ${suite}: case name '${c.name}' has characters other than letters, digits, '.', '-', '_'`);
  const tensors: Record<string, SafetensorsEntry> = {};
  const info: Record<string, ManifestCase['tensors'][string]> = {};
  for (const [name, t] of Object.entries(c.tensors)) {
    const data = contiguous(t.array);
    const entry: SafetensorsEntry = {
      data,
      shape: t.array.shape,
      ...(t.dtype !== undefined ? { dtype: t.dtype } : {}),
    };
    tensors[name] = entry;
    const dtype =
      t.dtype ??
      (Object.entries(WIRE_DTYPES).find(([, ctor]) => data instanceof ctor)?.[0] as SafetensorsEntry['dtype']);
    info[name] = {
      role: t.role,
      dtype: dtype as NonNullable<SafetensorsEntry['dtype']>,
      shape: [...t.array.shape],
      compare: t.compare,
    };
  }
  return {
    manifest: { file: `${suite}/${c.name}.safetensors`, description: c.description, params: c.params, tensors: info },
    tensors,
  };
}

/** The safetensors metadata of a case file. */
export function caseMetadata(suite: string, name: string): Record<string, string> {
  return { schema: GOLDEN_SCHEMA, suite, case: name };
}

/** Options of {@link writeGolden}. */
export interface WriteGoldenOptions {
  readonly seed: number;
  /** The command line recorded in the manifest. */
  readonly command: string;
  /** Called after each suite with its case count, bytes written and milliseconds. */
  readonly onSuite?: (suite: string, cases: number, bytes: number, ms: number) => void;
  /**
   * The suites of the directory's existing manifest (written with the same seed), kept in the new
   * manifest unless regenerated; a regenerated suite keeps its place, a new one comes after them.
   * @defaultValue none: the manifest lists the suites written now
   */
  readonly keep?: GoldenManifest['suites'];
}

/**
 * Generates `suites` into `dir` and writes `manifest.json` (last, whole or not at all). The same
 * seed gives byte-identical files. Suites are validated before anything is written.
 */
export function writeGolden(dir: string, suites: readonly GoldenSuite[], options: WriteGoldenOptions): GoldenManifest {
  const steps = goldenWriteSteps(dir, suites, options);
  for (let r = steps.next(); ; r = steps.next()) if (r.done === true) return r.value;
}

/**
 * {@link writeGolden} one case at a time: yields after each case file (`stop()` then ends it
 * early), returns the manifest. A stopped generation writes `manifest.json` for the suites it
 * finished whole, so the directory's manifest never lists a file of another generation.
 * @internal
 */
export function* goldenWriteSteps(
  dir: string,
  suites: readonly GoldenSuite[],
  options: WriteGoldenOptions & { readonly stopped?: () => boolean },
): Generator<{ suite: string; done: number; of: number }, GoldenManifest, void> {
  const entries: Record<string, { readonly description: string; readonly cases: readonly ManifestCase[] }> = {
    ...options.keep,
  };
  for (const suite of suites) {
    if (options.stopped?.() === true) break;
    const start = performance.now();
    const cases = suite.cases(options.seed);
    const names = new Set<string>();
    mkdirSync(join(dir, suite.name), { recursive: true });
    let bytes = 0;
    const list: ManifestCase[] = [];
    let whole = true;
    for (const c of cases) {
      if (names.has(c.name)) throw new Error(`golden: ${suite.name}: duplicate case name '${c.name}'`);
      names.add(c.name);
      const { manifest, tensors } = caseEntry(suite.name, c);
      const path = join(dir, manifest.file);
      writeSafetensors(path, tensors, caseMetadata(suite.name, c.name));
      bytes += statSync(path).size;
      list.push(manifest);
      yield { suite: suite.name, done: list.length, of: cases.length };
      if (options.stopped?.() === true && list.length < cases.length) {
        whole = false;
        break;
      }
    }
    if (!whole) {
      // Its files are now partly of this generation: the kept entry no longer describes them.
      delete entries[suite.name];
      break;
    }
    entries[suite.name] = { description: suite.description, cases: list };
    options.onSuite?.(suite.name, cases.length, bytes, performance.now() - start);
  }
  const manifest: GoldenManifest = {
    schema: GOLDEN_SCHEMA,
    qrlSim: qrlSimIdentity(),
    command: options.command,
    seed: options.seed,
    suites: entries,
  };
  const tmp = join(dir, `manifest.json.tmp-${process.pid}`);
  writeFileSync(tmp, `${JSON.stringify(manifest, null, 1)}\n`);
  renameSync(tmp, join(dir, 'manifest.json'));
  return manifest;
}
