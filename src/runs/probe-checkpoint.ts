// The checkpoints the mismatch probes load (`qrl-sim mismatch --checkpoint`): a checkpoint directory
// `run` writes, a cached warm start, their backend.json, an AR policy saved by saveCheckpoint or a
// diffusion { config, weights } file. Not the writers of those files and not the probes.

import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { REFERENCE_STATE_FILE, type ReferenceBackendState, readReferenceState } from '../backend/reference.js';
import { UsageError } from '../core/errors.js';
import { JsonInputError } from '../core/json.js';
import type { ParamStore } from '../nn/params.js';
import { arConfigFor, createArPolicy, loadCheckpoint, type ArPolicy } from '../policies/ar-api.js';
import { createDiffusionEngine, validateDiffusionConfig } from '../policies/diffusion/engine.js';
import type { DiffusionMismatchOptions } from '../policies/diffusion/mismatch.js';
import { resolveRunConfig } from '../rl/grpo/config.js';
import { makeTask, makeTaskFromConfig, taskNames } from '../tasks/registry.js';
import type { Task } from '../tasks/task.js';

/** Reads a JSON file; what it throws (a read or parse error naming the option) reaches the caller unchanged. */
export type ReadJson = (path: string) => unknown;

/**
 * A checkpoint `run` or a cached warm start wrote (a directory with backend.json, or that file), else
 * null. A broken one throws readReferenceState's error (`checkpoint: …`).
 */
function referenceState(file: string): ReferenceBackendState | null {
  const isDir = existsSync(file) && statSync(file).isDirectory();
  if (!isDir && !file.endsWith(REFERENCE_STATE_FILE)) return null;
  return readReferenceState(file);
}

const reason = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * The AR policy in `file` and its task (reverse when the file names none). A file that is not a
 * usable AR checkpoint throws an Error `'<file>' is not a usable AR checkpoint: <why>`.
 */
export function loadArProbeCheckpoint(file: string, readJson: ReadJson): { policy: ArPolicy; task: Task } {
  const state = referenceState(file);
  if (state !== null) {
    try {
      const config = resolveRunConfig(state.config);
      if (config.policy.kind !== 'ar')
        throw new Error(`its policy.kind is ${JSON.stringify(config.policy.kind)}, not "ar"`);
      const task = makeTaskFromConfig(config.task);
      const policy = createArPolicy(arConfigFor(config, task), config.seed);
      if (state.weights.length !== policy.params.data.length)
        throw new Error(`it has ${state.weights.length} weights, the model of its config ${policy.params.data.length}`);
      (policy.params as ParamStore).data.set(state.weights);
      return { policy, task };
    } catch (error) {
      throw new Error(`'${file}' is not a usable AR checkpoint: ${reason(error)}`);
    }
  }
  const json = readJson(file);
  try {
    const { policy, task } = loadCheckpoint(json);
    if (task && !taskNames.includes(task.name))
      throw new Error(`task.name must be one of ${taskNames.join(', ')}, got ${JSON.stringify(task.name)}`);
    const t = task ? makeTaskFromConfig(task) : makeTask('reverse');
    if (t.vocabSize > policy.config.vocabSize)
      throw new Error(
        `the policy's vocabSize ${policy.config.vocabSize} is smaller than task ${t.name}'s ${t.vocabSize}`,
      );
    return { policy, task: t };
  } catch (error) {
    if (error instanceof UsageError || error instanceof JsonInputError) throw error;
    throw new Error(`'${file}' is not a usable AR checkpoint: ${reason(error)}`);
  }
}

/**
 * A diffusion checkpoint: weights plus the run config that built the model (embedded, or
 * `../config.json` next to a checkpoint file), as the fields of the diffusion probe. A file that is
 * not a usable one throws an Error `'<file>' is not a usable diffusion checkpoint: <why>`.
 */
export function loadDiffusionProbeCheckpoint(
  file: string,
  readJson: ReadJson,
): Pick<DiffusionMismatchOptions, 'model' | 'params' | 'task' | 'taskOptions' | 'sampler'> {
  const readErrors = new Set<unknown>();
  const read = (path: string): Record<string, unknown> => {
    try {
      return readJson(path) as Record<string, unknown>;
    } catch (error) {
      readErrors.add(error);
      throw error;
    }
  };
  const state = referenceState(file);
  const json: Record<string, unknown> = state !== null ? { weights: state.weights, config: state.config } : read(file);
  try {
    const weights = json.weights;
    if (!Array.isArray(weights)) throw new Error('it has no weights array');
    const sibling = join(dirname(file), '..', 'config.json');
    const raw =
      (json.config as Record<string, unknown> | undefined) ?? (existsSync(sibling) ? read(sibling) : undefined);
    if (raw === undefined) throw new Error(`it has no config and there is no ${sibling}`);
    const config = resolveRunConfig({ seed: raw.seed ?? 0, task: raw.task, policy: raw.policy, plan: 'fp32' });
    if (config.policy.kind !== 'diffusion')
      throw new Error(`its policy.kind is ${JSON.stringify(config.policy.kind)}, not "diffusion"`);
    validateDiffusionConfig(config);
    const task = makeTaskFromConfig(config.task);
    const engine = createDiffusionEngine(config, task);
    if (weights.length !== engine.params.data.length)
      throw new Error(`it has ${weights.length} weights, the model of its config ${engine.params.data.length}`);
    engine.params.data.set(weights as number[]);
    const d = config.policy.diffusion;
    return {
      model: engine.model,
      params: engine.params.data,
      task: config.task.name,
      taskOptions: config.task.options,
      sampler: {
        genLength: d.generationLength,
        blockLength: d.blockLength,
        steps: d.steps,
        remasking: engine.sampler.remasking,
        temperature: engine.sampler.temperature,
      },
    };
  } catch (error) {
    if (readErrors.has(error) || error instanceof JsonInputError) throw error;
    throw new Error(`'${file}' is not a usable diffusion checkpoint: ${reason(error)}`);
  }
}
