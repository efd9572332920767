// JSON checkpoint of an AR policy (config, FP32 master weights, optional task) and its loader.
// Not the GRPO loop's run checkpoint (optimizer and RNG states belong to the loop).

import { ParamStore, type ParamStoreJson } from '../../nn/params.js';
import type { TaskName } from '../../tasks/task.js';
import { validateArConfig, type ArConfig } from './config.js';
import { ArPolicy } from './model.js';

/** The task a checkpoint was trained on (so a probe can draw matching prompts). */
export interface CheckpointTask {
  /** Registry name. */
  readonly name: TaskName;
  /** The task's options. */
  readonly options: object;
}

/** JSON form of an AR policy: weights are exact (float32 → double → JSON round-trips). */
export interface ArCheckpoint {
  /** Always `"qrl-sim/ar-policy"`. */
  readonly format: 'qrl-sim/ar-policy';
  /** Always 1. */
  readonly version: 1;
  /** Model config. */
  readonly config: ArConfig;
  /** Parameter specs and master weights. */
  readonly params: ParamStoreJson;
  /** Training task, if any. */
  readonly task?: CheckpointTask;
}

/**
 * A JSON-safe checkpoint of `policy` (write it with `JSON.stringify`). The policy must be backed by a
 * `ParamStore` (float32 master weights).
 *
 * @example
 * ```ts
 * writeFileSync('policy.json', JSON.stringify(saveCheckpoint(policy, { name: 'reverse', options: task.options })));
 * ```
 */
export function saveCheckpoint(policy: ArPolicy, task?: CheckpointTask): ArCheckpoint {
  if (!(policy.params instanceof ParamStore)) throw new Error('saveCheckpoint: policy.params must be a ParamStore');
  return {
    format: 'qrl-sim/ar-policy',
    version: 1,
    config: { ...policy.config },
    params: policy.params.toJSON(),
    ...(task ? { task: { name: task.name, options: { ...task.options } } } : {}),
  };
}

/** Rebuilds the policy (bit for bit) and its task from {@link saveCheckpoint}'s output; errors name the bad field. */
export function loadCheckpoint(json: unknown): { policy: ArPolicy; task?: CheckpointTask } {
  if (typeof json !== 'object' || json === null) throw new Error('checkpoint: expected a JSON object');
  const c = json as Partial<ArCheckpoint>;
  if (c.format !== 'qrl-sim/ar-policy')
    throw new Error(`checkpoint: format must be "qrl-sim/ar-policy", got ${JSON.stringify(c.format)}`);
  if (c.version !== 1) throw new Error(`checkpoint: version must be 1, got ${JSON.stringify(c.version)}`);
  if (typeof c.config !== 'object' || c.config === null) throw new Error('checkpoint: config must be an object');
  validateArConfig(c.config);
  const p = c.params;
  if (typeof p !== 'object' || p === null || !Array.isArray(p.specs) || !Array.isArray(p.data))
    throw new Error('checkpoint: params must be { specs: [...], data: [...] }');
  if (!p.data.every((x) => typeof x === 'number')) throw new Error('checkpoint: params.data must hold only numbers');
  const policy = new ArPolicy(Object.freeze({ ...c.config }), ParamStore.fromJSON(p));
  return c.task ? { policy, task: c.task } : { policy };
}
