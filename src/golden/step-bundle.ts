// qrl-step/1: one training step of an RL stack as a directory (manifest.json + tensors.safetensors),
// read and verified here (format, every tensor's sha256, shapes). Written by any stack through
// python/qrl_golden/bundle.py (docs/replay.md). Not the replay: src/golden/replay.ts.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError } from '../core/errors.js';
import { openSafetensors } from '../protocol/safetensors.js';

/** The format tag of a step bundle's manifest. */
export const STEP_FORMAT = 'qrl-step/1';

/**
 * Every field of qrl-step/1 (the same table as `FIELDS` of python/qrl_golden/bundle.py; a test keeps
 * them equal): shape letters B rows, P prompt columns, T completion columns, `1` a broadcast column,
 * `|` alternatives, `''` a scalar.
 */
export const stepFields = Object.freeze({
  prompt_ids: { shape: 'BP', kind: 'int', required: false, meaning: 'prompt token ids, padded as the stack pads them' },
  prompt_mask: { shape: 'BP', kind: 'int', required: false, meaning: '1 on prompt tokens, 0 on padding' },
  completion_ids: { shape: 'BT', kind: 'int', required: true, meaning: 'completion token ids, right-padded' },
  completion_mask: {
    shape: 'BT',
    kind: 'int',
    required: true,
    meaning: '1 on completion tokens the model produced, 0 on padding',
  },
  loss_mask: {
    shape: 'BT',
    kind: 'int',
    required: false,
    meaning: 'the mask the loss runs over when it is not completion_mask (tool tokens, truncated rows)',
  },
  group: {
    shape: 'B',
    kind: 'int',
    required: false,
    meaning: 'which prompt each row answers (rows of a group share an id); needed to recompute advantages',
  },
  rewards: {
    shape: 'B',
    kind: 'float',
    required: false,
    meaning: "the scalar reward of each row, after the stack's reward weighting",
  },
  advantages: { shape: 'B|BT', kind: 'float', required: true, meaning: 'the advantages the loss used' },
  logp: {
    shape: 'BT',
    kind: 'float',
    required: true,
    meaning: 'ℓθ: log-probs of the policy being trained, the tensor the gradient is taken of',
  },
  logp_old: {
    shape: 'BT',
    kind: 'float',
    required: false,
    meaning: 'ℓold: the behaviour policy of the ratio; absent = the stack used ℓθ detached',
  },
  logp_rollout: {
    shape: 'BT',
    kind: 'float',
    required: false,
    meaning: "ℓroll: the rollout engine's log-probs of the sampled tokens",
  },
  logp_ref: { shape: 'BT', kind: 'float', required: false, meaning: 'ℓref: the reference policy of the KL term' },
  is_weight: {
    shape: 'BT|B1',
    kind: 'float',
    required: false,
    meaning: 'the rollout-correction weight the stack multiplied into the loss',
  },
  token_loss: {
    shape: 'BT|B1',
    kind: 'float',
    required: true,
    meaning: 'the per-token loss before the mask and the aggregation',
  },
  loss: { shape: '', kind: 'float', required: true, meaning: 'the scalar loss that was differentiated' },
  grad_logp: { shape: 'BT', kind: 'float', required: true, meaning: 'd loss / d ℓθ' },
} as const);

/** A field name of qrl-step/1. */
export type StepFieldName = keyof typeof stepFields;

/** One tensor of a bundle, widened to float64 (integers are exact below 2^53). */
export interface StepTensor {
  readonly dtype: 'F64' | 'F32' | 'I64' | 'I32';
  readonly shape: readonly number[];
  readonly values: Float64Array;
}

/** What manifest.json holds. */
export interface StepManifest {
  readonly format: string;
  readonly stack: { readonly name: string; readonly version: string };
  readonly step: number | null;
  /** The stack's options exactly as the user gave them. */
  readonly options: Readonly<Record<string, unknown>>;
  /** Optional: a qrl-sim estimate config to replay with instead of mapping `options` (stacks without an options table). */
  readonly estimator?: unknown;
  readonly fields: readonly string[];
  readonly tensors: Readonly<
    Record<string, { readonly dtype: string; readonly shape: readonly number[]; readonly sha256: string }>
  >;
  readonly metrics: Readonly<Record<string, number>>;
  readonly extra?: unknown;
}

/** A verified bundle: its manifest, its tensors and the sizes B, P, T they agree on. */
export interface StepBundle {
  readonly dir: string;
  readonly manifest: StepManifest;
  readonly tensors: Readonly<Partial<Record<StepFieldName, StepTensor>>>;
  readonly B: number;
  readonly T: number;
}

const WIDTH = { F64: 8, F32: 4, I64: 8, I32: 4 } as const;

function bad(dir: string, message: string): never {
  throw new UsageError(`bundle ${dir}: ${message}`);
}

function decode(dtype: keyof typeof WIDTH, bytes: Uint8Array<ArrayBuffer>): Float64Array {
  const n = bytes.length / WIDTH[dtype];
  switch (dtype) {
    case 'F64':
      return new Float64Array(bytes.buffer, 0, n).slice();
    case 'F32':
      return Float64Array.from(new Float32Array(bytes.buffer, 0, n));
    case 'I32':
      return Float64Array.from(new Int32Array(bytes.buffer, 0, n));
    case 'I64':
      return Float64Array.from(new BigInt64Array(bytes.buffer, 0, n), (v) => Number(v));
  }
}

/** The shape letters a tensor of `shape` binds under `spec` (`'BT|B1'`: a last column of 1 picks `B1`). */
function letters(spec: string, shape: readonly number[]): string | undefined {
  const options = spec.split('|').filter((o) => o.length === shape.length);
  if (options.length <= 1) return options[0];
  return shape[shape.length - 1] === 1
    ? (options.find((o) => o.endsWith('1')) ?? options[0])
    : options.find((o) => !o.endsWith('1'));
}

/**
 * Reads and verifies the bundle in `dir`: format, the required fields, every tensor's sha256 against
 * manifest.json, dtypes, and shapes that agree on B, P and T. A bad bundle is a `UsageError` of one
 * line naming the field (a missing field, a hash that does not match, a shape that disagrees).
 */
export function readStepBundle(dir: string): StepBundle {
  let manifest: StepManifest;
  try {
    manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as StepManifest;
  } catch (error) {
    bad(
      dir,
      `manifest.json: ${error instanceof SyntaxError ? `not JSON (${error.message})` : 'cannot be read (is this a qrl-step/1 directory?)'}`,
    );
  }
  if (manifest === null || typeof manifest !== 'object') bad(dir, 'manifest.json: expected an object');
  if (manifest.format !== STEP_FORMAT)
    bad(dir, `format: expected '${STEP_FORMAT}', got ${JSON.stringify(manifest.format)}`);
  if (typeof manifest.stack?.name !== 'string' || typeof manifest.stack?.version !== 'string')
    bad(dir, `stack: expected { name, version } strings, got ${JSON.stringify(manifest.stack)}`);
  if (manifest.options === null || typeof manifest.options !== 'object' || Array.isArray(manifest.options))
    bad(dir, `options: expected an object, got ${JSON.stringify(manifest.options)}`);
  if (manifest.tensors === null || typeof manifest.tensors !== 'object')
    bad(dir, 'tensors: expected an object of { dtype, shape, sha256 }');
  const listed = manifest.tensors;
  for (const name of Object.keys(listed))
    if (!Object.hasOwn(stepFields, name)) bad(dir, `${name}: not a qrl-step/1 field`);
  for (const [name, spec] of Object.entries(stepFields))
    if (spec.required && !Object.hasOwn(listed, name)) bad(dir, `${name}: required field missing`);
  let file;
  try {
    file = openSafetensors(join(dir, 'tensors.safetensors'));
  } catch (error) {
    bad(
      dir,
      `tensors.safetensors: ${error instanceof Error ? error.message.replace(/^safetensors: /, '') : String(error)}`,
    );
  }
  const tensors: Partial<Record<StepFieldName, StepTensor>> = {};
  const dims: Record<string, number> = {};
  try {
    for (const [name, entry] of Object.entries(listed) as [StepFieldName, StepManifest['tensors'][string]][]) {
      const header = file.entries.get(name);
      if (header === undefined) bad(dir, `${name}: listed in manifest.json but not in tensors.safetensors`);
      if (!Object.hasOwn(WIDTH, header.dtype))
        bad(dir, `${name}: dtype ${header.dtype} (expected F64, F32, I64 or I32)`);
      const kind = stepFields[name].kind;
      if ((kind === 'int') !== header.dtype.startsWith('I'))
        bad(dir, `${name}: dtype ${header.dtype} where ${kind === 'int' ? 'an integer' : 'a float'} dtype is expected`);
      const bytes = file.readBytes(name);
      const digest = createHash('sha256').update(bytes).digest('hex');
      if (digest !== entry.sha256)
        bad(
          dir,
          `${name}: sha256 ${digest.slice(0, 12)}… does not match manifest.json's ${String(entry.sha256).slice(0, 12)}… (the tensor's bytes changed)`,
        );
      const shape = header.shape;
      const choice = letters(stepFields[name].shape, shape);
      if (choice === undefined)
        bad(
          dir,
          `${name}: shape [${shape.join(', ')}] where (${stepFields[name].shape.split('|').join(') or (') || 'a scalar'}) is expected`,
        );
      [...choice].forEach((letter, i) => {
        const size = shape[i]!;
        if (letter === '1') {
          if (size !== 1) bad(dir, `${name}: expected a broadcast column of 1, got ${size}`);
          return;
        }
        const have = dims[letter];
        if (have !== undefined && have !== size)
          bad(dir, `${name}: ${letter} = ${size} where the other fields say ${have}`);
        dims[letter] = size;
      });
      tensors[name] = {
        dtype: header.dtype as StepTensor['dtype'],
        shape,
        values: decode(header.dtype as keyof typeof WIDTH, bytes),
      };
    }
  } finally {
    file.close();
  }
  return { dir, manifest, tensors, B: dims.B ?? 0, T: dims.T ?? 0 };
}

/** The field table of docs/replay.md (generated by scripts/doc-tables.ts). */
export function stepFieldsTableMarkdown(): string {
  const rows = Object.entries(stepFields).map(
    ([name, f]) =>
      `| \`${name}\` | ${
        f.shape === ''
          ? 'scalar'
          : f.shape
              .split('|')
              .map((s) => `(${s.split('').join(', ')})`)
              .join(' or ')
      } | ${f.kind} | ${f.required ? 'yes' : 'no'} | ${f.meaning} |`,
  );
  return ['| field | shape | dtype | required | meaning |', '| --- | --- | --- | --- | --- |', ...rows].join('\n');
}
