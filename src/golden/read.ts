// Reads a golden directory back in TypeScript: the manifest and each case's tensors as `ndarray`
// views. Not the Python reader (python/qrl_golden) and not comparison (compare.ts).

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ndarray from 'ndarray';
import { readSafetensors } from '../protocol/safetensors.js';
import { GOLDEN_SCHEMA, type GoldenCase, type GoldenManifest, type GoldenTensor } from './types.js';

/** A golden directory opened for reading. */
export interface GoldenReader {
  readonly manifest: GoldenManifest;
  /** Every case of `suite`, tensors loaded (throws naming the suite when it is absent). */
  cases(suite: string): GoldenCase[];
}

/** Opens a golden directory written by `qrl-sim golden` (schema qrl-golden/1). */
export function readGolden(dir: string): GoldenReader {
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as GoldenManifest;
  if (manifest.schema !== GOLDEN_SCHEMA)
    throw new Error(`${dir}/manifest.json: schema ${JSON.stringify(manifest.schema)}, expected ${GOLDEN_SCHEMA}`);
  return {
    manifest,
    cases(suite) {
      const entry = manifest.suites[suite];
      if (entry === undefined)
        throw new Error(`${dir}: no suite '${suite}' (suites: ${Object.keys(manifest.suites).join(', ')})`);
      return entry.cases.map((c) => {
        const { tensors } = readSafetensors(join(dir, c.file));
        const out: Record<string, GoldenTensor> = {};
        for (const [name, info] of Object.entries(c.tensors)) {
          const t = tensors[name];
          if (t === undefined) throw new Error(`${c.file}: tensor '${name}' listed in the manifest is missing`);
          out[name] = {
            role: info.role,
            array: ndarray(t.data, [...t.shape]),
            compare: info.compare,
            ...(info.dtype !== t.dtype || t.dtype.startsWith('F8') ? { dtype: t.dtype } : {}),
          };
        }
        return {
          name: c.file.slice(suite.length + 1, -'.safetensors'.length),
          description: c.description,
          params: c.params,
          tensors: out,
        };
      });
    },
  };
}
