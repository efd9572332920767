// The forward-dump file (layout qrl-dump/1): one safetensors file per forward, module name → its
// output as F32, the token ids as `__tokens__`, the forward order in the metadata. Not a comparison.

import { readSafetensors, writeSafetensors, type SafetensorsEntry } from '../protocol/safetensors.js';
import type { OpRecord } from './diverge.js';

/** Metadata key naming the layout version (value `"1"`). */
export const DUMP_VERSION_KEY = 'qrl-dump';
/** Metadata key of the JSON array of module names in forward (hook) order. */
export const DUMP_ORDER_KEY = 'qrl-dump.order';
/** Optional metadata key: JSON object module name → the dtype the module produced (e.g. `"bfloat16"`). */
export const DUMP_DTYPES_KEY = 'qrl-dump.dtypes';
/** Optional metadata key: JSON object module name → names of the recorded modules it reads. */
export const DUMP_INPUTS_KEY = 'qrl-dump.inputs';
/** Tensor name of the (B, T) token ids (I32). */
export const DUMP_TOKENS = '__tokens__';

/** A forward read from (or written to) a dump file. */
export interface ForwardDump {
  /** (B, T) token ids, row-major. */
  readonly tokens: Int32Array;
  /** Shape of `tokens`. */
  readonly tokenShape: readonly number[];
  /** The recorded outputs in forward order. */
  readonly ops: readonly OpRecord[];
  /** Module name → dtype it produced, when the writer said. */
  readonly dtypes: Readonly<Record<string, string>>;
}

/**
 * Writes `dump` as a qrl-dump/1 safetensors file: every op as an F32 tensor named by the op, the
 * token ids as I32 `__tokens__`, metadata `qrl-dump` = "1", `qrl-dump.order` (JSON array of the op
 * names), `qrl-dump.inputs` (for ops with recorded inputs) and `qrl-dump.dtypes` (when given).
 */
export function writeForwardDump(path: string, dump: ForwardDump): void {
  const tensors: Record<string, SafetensorsEntry> = { [DUMP_TOKENS]: { data: dump.tokens, shape: dump.tokenShape } };
  const inputs: Record<string, readonly string[]> = {};
  for (const op of dump.ops) {
    if (op.name === DUMP_TOKENS || op.name === '__metadata__')
      throw new Error(`dump: op name ${JSON.stringify(op.name)} is reserved`);
    tensors[op.name] = { data: op.data, shape: op.shape };
    if (op.inputs !== undefined) inputs[op.name] = op.inputs;
  }
  const metadata: Record<string, string> = {
    [DUMP_VERSION_KEY]: '1',
    [DUMP_ORDER_KEY]: JSON.stringify(dump.ops.map((o) => o.name)),
  };
  if (Object.keys(inputs).length > 0) metadata[DUMP_INPUTS_KEY] = JSON.stringify(inputs);
  if (Object.keys(dump.dtypes).length > 0) metadata[DUMP_DTYPES_KEY] = JSON.stringify(dump.dtypes);
  writeSafetensors(path, tensors, metadata);
}

function jsonField(metadata: Record<string, string>, key: string, path: string): unknown {
  const raw = metadata[key];
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    throw new Error(`dump: ${path}: metadata ${key} is not JSON`);
  }
}

/**
 * Reads a qrl-dump/1 file ({@link writeForwardDump}'s layout, or `qrl_golden.dump`'s). Errors name
 * the file and the offending field: a missing `qrl-dump` version, an order naming an absent tensor,
 * a tensor not F32, tokens not I32.
 */
export function readForwardDump(path: string): ForwardDump {
  const { tensors, metadata } = readSafetensors(path);
  if (metadata[DUMP_VERSION_KEY] !== '1')
    throw new Error(
      `dump: ${path}: metadata ${DUMP_VERSION_KEY} must be "1", got ${JSON.stringify(metadata[DUMP_VERSION_KEY] ?? null)}`,
    );
  const order = jsonField(metadata, DUMP_ORDER_KEY, path);
  if (!Array.isArray(order) || order.some((n) => typeof n !== 'string'))
    throw new Error(`dump: ${path}: metadata ${DUMP_ORDER_KEY} must be a JSON array of tensor names`);
  const inputs = (jsonField(metadata, DUMP_INPUTS_KEY, path) ?? {}) as Record<string, string[]>;
  const dtypes = (jsonField(metadata, DUMP_DTYPES_KEY, path) ?? {}) as Record<string, string>;
  const tok = tensors[DUMP_TOKENS];
  if (tok === undefined || !(tok.data instanceof Int32Array))
    throw new Error(`dump: ${path}: tensor ${DUMP_TOKENS} must be I32, got ${tok === undefined ? 'none' : tok.dtype}`);
  const ops: OpRecord[] = (order as string[]).map((name) => {
    const t = tensors[name];
    if (t === undefined)
      throw new Error(`dump: ${path}: ${DUMP_ORDER_KEY} names ${JSON.stringify(name)}, which has no tensor`);
    if (!(t.data instanceof Float32Array))
      throw new Error(`dump: ${path}: tensor ${JSON.stringify(name)} must be F32, got ${t.dtype}`);
    return { name, data: t.data, shape: t.shape, ...(Array.isArray(inputs[name]) ? { inputs: inputs[name] } : {}) };
  });
  return { tokens: tok.data, tokenShape: tok.shape, ops, dtypes };
}
