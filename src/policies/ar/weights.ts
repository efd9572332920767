// The AR policy's weights file: safetensors with one F32 tensor per ParamStore name (arParamSpecs order)
// and the ArConfig as JSON in the metadata. What an external backend loads; not the JSON checkpoint.

import { readSafetensors, writeSafetensors, type SafetensorsEntry } from '../../protocol/safetensors.js';
import { createParamStore } from '../../nn/params.js';
import { arParamSpecs, validateArConfig, type ArConfig } from './config.js';
import { ArPolicy } from './model.js';

/** The metadata key holding the {@link ArConfig} as JSON. */
export const AR_CONFIG_METADATA = 'qrl-sim.ar-config';

/**
 * Writes the policy's weights to `path` (whole or absent): tensors named and shaped as
 * {@link arParamSpecs}, float32, little-endian, metadata `qrl-sim.ar-config` = the config as JSON.
 *
 * @example
 * ```ts
 * writeArWeights(policy, 'run/weights.safetensors');
 * ```
 */
export function writeArWeights(policy: ArPolicy, path: string): void {
  const tensors: Record<string, SafetensorsEntry> = {};
  for (const e of policy.params.layout.entries) {
    tensors[e.name] = {
      data: Float32Array.from(policy.params.layout.view(policy.params.data, e.name)),
      shape: e.shape,
    };
  }
  writeSafetensors(path, tensors, { [AR_CONFIG_METADATA]: JSON.stringify(policy.config) });
}

/** Reads a weights file written by {@link writeArWeights} (or any writer following its layout) into a new policy. */
export function readArWeights(path: string): ArPolicy {
  const { tensors, metadata } = readSafetensors(path);
  const json = metadata[AR_CONFIG_METADATA];
  if (json === undefined) throw new Error(`ar weights: ${path} has no ${AR_CONFIG_METADATA} metadata`);
  const config = JSON.parse(json) as ArConfig;
  validateArConfig(config);
  const specs = arParamSpecs(config);
  const store = createParamStore(specs, 0);
  for (const s of specs) {
    const t = tensors[s.name];
    if (t === undefined) throw new Error(`ar weights: ${path} lacks tensor ${JSON.stringify(s.name)}`);
    if (t.shape.join() !== s.shape.join() || !(t.data instanceof Float32Array)) {
      throw new Error(
        `ar weights: ${s.name} must be F32 [${s.shape.join(', ')}], got ${t.data.constructor.name} [${t.shape.join(', ')}]`,
      );
    }
    store.layout.view(store.data, s.name).set(t.data);
  }
  return new ArPolicy(Object.freeze({ ...config }), store);
}
