// `--preset NAME`, `--outliers N` and `--moe E,K` of the probe commands (`mismatch`, `diverge`): the
// fields of a fresh toy AR model, checked with one-line errors. Not the presets (src/policies/ar/presets.ts).

import {
  arConfig,
  arModelOptions,
  arModelPresetNames,
  createArPolicy,
  type ArModelFields,
  type ArPolicy,
} from '../policies/ar-api.js';
import type { Task } from '../tasks/task.js';
import { UsageError } from '../core/errors.js';
import { integerOption } from './parse.js';

/** `--moe E,K`: experts and top-k of a fresh MoE policy (load-balancing coefficient 0.01, unused by the probes). */
export function parseMoe(value: string): { experts: number; topK: number; auxCoeff: number } {
  const m = /^(\d+),(\d+)$/.exec(value.trim());
  const experts = m ? Number(m[1]) : NaN;
  const topK = m ? Number(m[2]) : NaN;
  if (!m || experts < 1 || experts > 64 || topK < 1 || topK > experts)
    throw new UsageError(`--moe: expected E,K with 1 ≤ K ≤ E ≤ 64 (e.g. 4,2), got '${value}'`);
  return { experts, topK, auxCoeff: 0.01 };
}

/**
 * The model fields `--preset`, `--outliers` and `--moe` ask for (the preset's, `outliers` in 0..64
 * over it, an MoE feed-forward); `--outliers` goes with `--preset` only.
 */
export function modelOption(values: {
  readonly preset?: string | undefined;
  readonly outliers?: string | undefined;
  readonly moe?: string | undefined;
}): ArModelFields {
  if (values.preset !== undefined && !(arModelPresetNames as readonly string[]).includes(values.preset)) {
    throw new UsageError(`--preset: expected one of ${arModelPresetNames.join(', ')}, got '${values.preset}'`);
  }
  if (values.outliers !== undefined && values.preset === undefined)
    throw new UsageError(`--outliers: only with --preset, got '${values.outliers}'`);
  const moe = values.moe === undefined ? undefined : parseMoe(values.moe);
  const outliers = values.outliers === undefined ? undefined : integerOption(values.outliers, 'outliers', 0, 0, 64);
  return { ...arModelOptions({ preset: values.preset, outliers }), ...(moe === undefined ? {} : { moe }) };
}

/** A fresh AR policy of `model` initialized from `seed`, with `task`'s vocabulary and room for `length` response tokens. */
export function freshArPolicy(model: ArModelFields, task: Task, length: number, seed: number): ArPolicy {
  return createArPolicy(arConfig({ ...model, vocabSize: task.vocabSize, maxLen: task.promptLength + length }), seed);
}
