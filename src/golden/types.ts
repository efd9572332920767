// The qrl-golden/1 data model: compare rules, tensors with roles, cases, suites and the manifest.
// Not the writer or reader (write.ts, read.ts) and not any suite's content (suites/).

import type ndarray from 'ndarray';
import type { SafetensorsDtype } from '../protocol/safetensors.js';
import type { WireArray } from '../protocol/tensor.js';

/** Schema name written into every manifest. */
export const GOLDEN_SCHEMA = 'qrl-golden/1';

/**
 * How a user's output is compared with an expected tensor:
 * - `'bitwise'`: identical bit patterns (integer codes, masks; float NaN payloads and −0 included);
 * - `{ ulp: k }`: float values at most k units in the last place apart (counted on the ordered
 *   integer line of the dtype, where +0 and −0 coincide); any NaN matches any NaN;
 * - `{ rtol, atol }`: |got − want| ≤ atol + rtol·|want|; NaN matches NaN, ±Inf must match exactly.
 */
export type CompareRule = 'bitwise' | { readonly ulp: number } | { readonly rtol: number; readonly atol: number };

/** A tensor of a golden case: an `ndarray` view over a typed array (any strides; written row-major). */
export interface GoldenTensor {
  /** `input`: what the implementation under test receives; `expected`: what it must produce. */
  readonly role: 'input' | 'expected';
  readonly array: ndarray.NdArray<WireArray>;
  /** Stored dtype when it refines the array's (U8 codes stored as `F8_E4M3` / `F8_E5M2`). */
  readonly dtype?: SafetensorsDtype;
  readonly compare: CompareRule;
}

/** One case: a file of tensors with a description and the JSON parameters that produced it. */
export interface GoldenCase {
  /** File stem, unique within the suite (letters, digits, `.`, `-`, `_`). */
  readonly name: string;
  readonly description: string;
  readonly params: Readonly<Record<string, unknown>>;
  /** Tensors in file order. */
  readonly tensors: Readonly<Record<string, GoldenTensor>>;
}

/** A suite: a named generator of cases, deterministic in the seed. */
export interface GoldenSuite {
  readonly name: string;
  /** One line for `--help` and the docs. */
  readonly description: string;
  /** Builds every case; the same seed gives the same cases, bit for bit. */
  cases(seed: number): GoldenCase[];
}

/** A tensor's entry in the manifest: the {@link GoldenTensor}'s role and compare rule, with the stored dtype and shape in place of the array. */
export interface ManifestTensor extends Pick<GoldenTensor, 'role' | 'compare'> {
  readonly dtype: SafetensorsDtype;
  readonly shape: readonly number[];
}

/** A case's entry in the manifest: the {@link GoldenCase}'s description and params, with its file in place of its name and tensor entries in place of its tensors. */
export interface ManifestCase extends Omit<GoldenCase, 'name' | 'tensors'> {
  /** Path relative to the golden directory, e.g. `casts/e4m3fn.satfinite.rne.safetensors`. */
  readonly file: string;
  readonly tensors: Readonly<Record<string, ManifestTensor>>;
}

/** `manifest.json` of a golden directory. */
export interface GoldenManifest {
  readonly schema: typeof GOLDEN_SCHEMA;
  readonly qrlSim: { readonly version: string; readonly commit?: string };
  readonly command: string;
  readonly seed: number;
  readonly suites: Readonly<Record<string, { readonly description: string; readonly cases: readonly ManifestCase[] }>>;
}
