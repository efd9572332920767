// `refit-check`: compares what a rollout engine holds after a weight sync (a Hugging Face FP8
// checkpoint dump) with the trainer's state dict under a quantizer preset, tensor by tensor, and
// names each fault with one kind of a fixed vocabulary. Not a loader or a converter: it reads two or
// three safetensors files one tensor at a time and writes nothing; docs/refit-check.md is the guide.

import { UsageError } from '../core/errors.js';
import { decode, floatFormats } from '../numerics/formats.js';
import { quantPresets, type QuantPreset } from '../numerics/presets.js';
import { quantize } from '../numerics/quantize.js';
import { openSafetensors, type SafetensorsFile, type SafetensorsHeaderEntry } from '../protocol/safetensors.js';
import { ignoreMatchRules, type IgnoreMatchRule } from '../policies/ignore-rules.js';

/** Every finding kind, in the order the checks run for one tensor (docs/refit-check.md §2). */
export const refitFindingKinds = [
  'missing',
  'not-quantized',
  'unexpectedly-quantized',
  'unity-scale',
  'stale',
  'layout-permuted',
  'value-error',
] as const;

/** A kind of {@link refitFindingKinds}. */
export type RefitFindingKind = (typeof refitFindingKinds)[number];

/** One finding: the tensor it names, its kind, and the kind's details (docs/refit-check.md §2). */
export interface RefitFinding {
  readonly tensor: string;
  readonly kind: RefitFindingKind;
  readonly [detail: string]: unknown;
}

// The ignore-list matching rules are the plans' too (refit fault `ignore-rule`): one definition, in policies/.
export { ignoreMatchAliases, ignoreMatchRules, type IgnoreMatchRule } from '../policies/ignore-rules.js';

/**
 * The presets refit-check supports and the engine tensor that holds each one's dequant scales
 * (Hugging Face FP8 conventions: DeepSeek-V3 / Qwen3-FP8 `weight_scale_inv`, vLLM /
 * compressed-tensors `weight_scale`), with the scale tensor's accepted shapes for a [rows, cols] weight.
 */
export const refitRecipes = Object.freeze({
  'deepseek-fp8-block': {
    scaleName: 'weight_scale_inv',
    scaleShapes: (r: number, c: number, b: number) => [[Math.ceil(r / b), Math.ceil(c / b)]],
  },
  'vllm-fp8-tensor': { scaleName: 'weight_scale', scaleShapes: () => [[], [1]] },
  'vllm-fp8-token': { scaleName: 'weight_scale', scaleShapes: (r: number) => [[r], [r, 1]] },
} as const satisfies Record<
  string,
  { scaleName: string; scaleShapes: (rows: number, cols: number, block: number) => number[][] }
>);

/** A preset of {@link refitRecipes}. */
export type RefitRecipe = keyof typeof refitRecipes;

/** What to check: the files, the recipe and the ignore list. */
export interface RefitCheckOptions {
  readonly trainer: string;
  readonly engine: string;
  readonly recipe: RefitRecipe;
  /** Block size of a block recipe. @defaultValue the preset's (128) */
  readonly block?: number;
  readonly previous?: string;
  readonly ignore?: readonly string[];
  /** @defaultValue 'substring' */
  readonly match?: IgnoreMatchRule;
}

/** The result, as `--json` prints it. */
export interface RefitCheckResult {
  readonly findings: RefitFinding[];
  /** Trainer tensors checked. */
  readonly tensors: number;
  /** Of those, the ones the recipe quantizes. */
  readonly quantized: number;
  /** Engine `k_scale` / `v_scale` tensors checked. */
  readonly kvScales: number;
  readonly recipe: RefitRecipe;
  readonly block: number | null;
  readonly match: IgnoreMatchRule;
}

const E4M3_VALUES = Float32Array.from({ length: 256 }, (_, code) => decode(floatFormats.e4m3fn, code));
const fr = Math.fround;

/** A trainer or engine tensor in high precision, as float32 values and its stored bits. */
interface Dense {
  readonly values: Float32Array;
  /** The stored bits: U16 for BF16, U32 for F32 (compared bitwise). */
  readonly bits: Uint16Array | Uint32Array;
}

function dense(file: string, name: string, entry: SafetensorsHeaderEntry, bytes: Uint8Array<ArrayBuffer>): Dense {
  if (entry.dtype === 'F32') {
    const values = new Float32Array(bytes.buffer);
    return { values, bits: new Uint32Array(bytes.buffer) };
  }
  if (entry.dtype === 'BF16') {
    const bits = new Uint16Array(bytes.buffer);
    const u32 = new Uint32Array(bits.length);
    for (let i = 0; i < bits.length; i++) u32[i] = (bits[i] as number) << 16;
    return { values: new Float32Array(u32.buffer), bits };
  }
  throw new UsageError(`${file}: ${name}: dtype ${entry.dtype} (expected BF16 or F32)`);
}

/** float32 → bfloat16 bits, round to nearest even; NaN keeps its sign and becomes quiet. */
function bf16Bits(values: Float32Array): Uint16Array {
  const u = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < u.length; i++) {
    const x = u[i] as number;
    out[i] = (x & 0x7fffffff) > 0x7f800000 ? (x >>> 16) | 0x0040 : (x + 0x7fff + ((x >>> 16) & 1)) >>> 16;
  }
  return out;
}

const sameShape = (a: readonly number[], b: readonly number[]): boolean =>
  a.length === b.length && a.every((d, i) => d === b[i]);
const shapeText = (s: readonly number[]): string => `[${s.join(', ')}]`;

/** Position of flat index `i` in `shape` (row-major). */
function position(i: number, shape: readonly number[]): number[] {
  const out = new Array<number>(shape.length).fill(0);
  for (let d = shape.length - 1; d >= 0; d--) {
    const n = shape[d] as number;
    out[d] = i % n;
    i = Math.floor(i / n);
  }
  return out;
}

/** Bitwise equality of two typed arrays of the same kind. */
function equalBits(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * The row-unit permutation that turns `expected` into `engine`, or null: units are runs of
 * `unitRows` rows, each unit's key its element bits and its own scale bits. Engine unit i takes the
 * expected unit i when the keys agree, else the first unused expected unit with its key.
 */
function rowPermutation(expected: readonly string[], engine: readonly string[]): number[] | null {
  const byKey = new Map<string, number[]>();
  expected.forEach((k, j) => byKey.set(k, [...(byKey.get(k) ?? []), j]));
  const used = new Uint8Array(expected.length);
  const order: number[] = [];
  for (let i = 0; i < engine.length; i++) {
    const candidates = (byKey.get(engine[i] as string) ?? []).filter((j) => used[j] === 0);
    if (candidates.length === 0) return null;
    const j = candidates.includes(i) ? i : (candidates[0] as number);
    used[j] = 1;
    order.push(j);
  }
  return order.every((j, i) => j === i) ? null : order;
}

/** Keys of row units: `unitRows` rows of `cols` elements of `bits`, plus `scaleBits` per unit (if any). */
function unitKeys(
  bits: ArrayLike<number>,
  rows: number,
  cols: number,
  unitRows: number,
  scaleBits?: ArrayLike<number>,
  scalesPerUnit = 0,
): string[] {
  const keys: string[] = [];
  for (let u = 0; u * unitRows < rows; u++) {
    const parts: number[] = [];
    for (let i = u * unitRows * cols; i < Math.min(rows, (u + 1) * unitRows) * cols; i++) parts.push(bits[i] as number);
    parts.push(-1);
    if (scaleBits !== undefined)
      for (let k = u * scalesPerUnit; k < (u + 1) * scalesPerUnit; k++) parts.push(scaleBits[k] as number);
    keys.push(parts.join(','));
  }
  return keys;
}

function permutationFinding(tensor: string, order: number[], unitRows: number): RefitFinding {
  const n = order.length;
  const halves = n % 2 === 0 && order.every((j, i) => j === (i + n / 2) % n);
  return {
    tensor,
    kind: 'layout-permuted',
    permutation: halves ? 'halves-swapped' : unitRows === 1 ? 'rows' : 'row-blocks',
    unitRows,
    order,
  };
}

/** The recipe applied to a trainer tensor: codes, dequant scales and the scale of each element's cell. */
interface Expected {
  readonly codes: Uint8Array;
  readonly scales: Float32Array;
}

/** Checks the engine dump against the trainer's state dict under the recipe; throws {@link UsageError} for bad input. */
export function refitCheck(options: RefitCheckOptions): RefitCheckResult {
  const { recipe } = options;
  const table = refitRecipes[recipe];
  if (table === undefined)
    throw new UsageError(
      `--recipe: unsupported preset '${String(recipe)}' (supported: ${Object.keys(refitRecipes).join(', ')})`,
    );
  const preset = (quantPresets as Record<string, QuantPreset>)[recipe] as QuantPreset;
  if (options.block !== undefined && !preset.params.includes('block'))
    throw new UsageError(`--block: preset '${recipe}' has no block size`);
  const block = preset.params.includes('block') ? (options.block ?? (preset.defaultBlock as number)) : null;
  const spec = preset.build(block === null ? {} : { block });
  const match = options.match ?? 'substring';
  const matches = ignoreMatchRules[match];
  const ignore = options.ignore ?? [];
  if (match === 'regex') {
    for (const p of ignore) {
      if (!p.startsWith('re:')) continue;
      try {
        new RegExp(p.slice(3));
      } catch {
        throw new UsageError(`--ignore: '${p}' is not a valid regular expression`);
      }
    }
  }
  const open = (path: string, flag: string): SafetensorsFile => {
    try {
      return openSafetensors(path);
    } catch (error) {
      throw new UsageError(`--${flag}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
    }
  };
  const trainer = open(options.trainer, 'trainer');
  const files = [trainer];
  try {
    const engine = open(options.engine, 'engine');
    files.push(engine);
    const previous = options.previous === undefined ? undefined : open(options.previous, 'previous');
    if (previous !== undefined) files.push(previous);
    const findings: RefitFinding[] = [];
    let quantized = 0;
    const names = [...trainer.entries.keys()].sort();

    const readDense = (file: SafetensorsFile, flag: string, name: string): Dense =>
      dense(`--${flag}`, name, file.entries.get(name) as SafetensorsHeaderEntry, file.readBytes(name));
    /** The previous snapshot's tensor, when it has one of the trainer's shape. */
    const previousDense = (name: string, shape: readonly number[]): Dense | undefined => {
      const entry = previous?.entries.get(name);
      if (previous === undefined || entry === undefined) return undefined;
      if (!sameShape(entry.shape, shape))
        throw new UsageError(
          `--previous: ${name}: shape ${shapeText(entry.shape)} (the trainer's is ${shapeText(shape)})`,
        );
      return readDense(previous, 'previous', name);
    };

    for (const name of names) {
      const t = trainer.entries.get(name) as SafetensorsHeaderEntry;
      const module = name.endsWith('.weight') ? name.slice(0, -'.weight'.length) : name;
      const ignoredBy = ignore.find((p) => matches(module, p));
      const quantizes = name.endsWith('.weight') && t.shape.length === 2 && ignoredBy === undefined;
      if (quantizes) quantized++;
      const e = engine.entries.get(name);
      if (e === undefined) {
        findings.push({ tensor: name, kind: 'missing' });
        continue;
      }
      const x = readDense(trainer, 'trainer', name);
      if (!sameShape(e.shape, t.shape))
        throw new UsageError(`--engine: ${name}: shape ${shapeText(e.shape)} (the trainer's is ${shapeText(t.shape)})`);
      if (e.dtype !== 'F8_E4M3' && e.dtype !== 'BF16' && e.dtype !== 'F32')
        throw new UsageError(`--engine: ${name}: dtype ${e.dtype} (expected F8_E4M3, BF16 or F32)`);
      if (!quantizes) {
        if (e.dtype === 'F8_E4M3') {
          findings.push({ tensor: name, kind: 'unexpectedly-quantized', dtype: e.dtype, pattern: ignoredBy ?? null });
          continue;
        }
        // High precision on both sides: the engine holds the trainer's values rounded to its dtype.
        const held = readDense(engine, 'engine', name);
        const rounded = (d: Dense): ArrayLike<number> =>
          e.dtype === 'BF16'
            ? bf16Bits(d.values)
            : new Uint32Array(d.values.buffer, d.values.byteOffset, d.values.length);
        const want = rounded(x);
        if (equalBits(held.bits, want)) continue;
        const prev = previousDense(name, t.shape);
        if (prev !== undefined && equalBits(held.bits, rounded(prev))) {
          findings.push({ tensor: name, kind: 'stale' });
          continue;
        }
        if (t.shape.length === 2) {
          const [rows, cols] = t.shape as [number, number];
          const order = rowPermutation(unitKeys(want, rows, cols, 1), unitKeys(held.bits, rows, cols, 1));
          if (order !== null) {
            findings.push(permutationFinding(name, order, 1));
            continue;
          }
        }
        const wantValues =
          e.dtype === 'BF16'
            ? dense('', name, { ...e, dtype: 'BF16' }, new Uint8Array(new Uint16Array(want).buffer)).values
            : x.values;
        let count = 0;
        let first = -1;
        let maxAbsDiff = 0;
        for (let i = 0; i < held.bits.length; i++) {
          if (held.bits[i] === want[i]) continue;
          count++;
          if (first < 0) first = i;
          const d = Math.abs((held.values[i] as number) - (wantValues[i] as number));
          if (Number.isFinite(d) && d > maxAbsDiff) maxAbsDiff = d;
        }
        findings.push({
          tensor: name,
          kind: 'value-error',
          values: count,
          first: position(first, t.shape),
          maxAbsDiff,
        });
        continue;
      }
      // Quantized by the recipe: F8 codes and a scale tensor of the recipe's convention.
      if (e.dtype !== 'F8_E4M3') {
        findings.push({ tensor: name, kind: 'not-quantized', dtype: e.dtype });
        continue;
      }
      const [rows, cols] = t.shape as [number, number];
      const scaleName = `${module}.${table.scaleName}`;
      const s = engine.entries.get(scaleName);
      if (s === undefined) {
        const other = ['weight_scale', 'weight_scale_inv']
          .map((n) => `${module}.${n}`)
          .find((n) => engine.entries.has(n));
        if (other !== undefined)
          throw new UsageError(`--engine: ${other}: recipe ${recipe} keeps its scales in ${scaleName}`);
        findings.push({ tensor: scaleName, kind: 'missing' });
        continue;
      }
      const shapes: readonly (readonly number[])[] = table.scaleShapes(rows, cols, block ?? 0);
      if (s.dtype !== 'F32') throw new UsageError(`--engine: ${scaleName}: dtype ${s.dtype} (expected F32)`);
      if (!shapes.some((shape) => sameShape(s.shape, shape)))
        throw new UsageError(
          `--engine: ${scaleName}: shape ${shapeText(s.shape)} (recipe ${recipe} gives ${shapes.map(shapeText).join(' or ')})`,
        );
      const codes = engine.readBytes(name);
      const scales = new Float32Array(engine.readBytes(scaleName).buffer);
      const scaleBits = new Uint32Array(scales.buffer);
      const apply = (d: Dense): Expected => {
        const q = quantize(spec, d.values, [rows, cols]);
        return { codes: q.codes as Uint8Array, scales: q.scales };
      };
      const want = apply(x);
      const wantScaleBits = new Uint32Array(want.scales.buffer, want.scales.byteOffset, want.scales.length);
      if (equalBits(codes, want.codes) && equalBits(scaleBits, wantScaleBits)) continue;
      if (scales.every((v) => v === 1) && !want.scales.every((v) => v === 1)) {
        findings.push({ tensor: scaleName, kind: 'unity-scale', count: scales.length });
        continue;
      }
      const prevDense = previousDense(name, t.shape);
      if (prevDense !== undefined) {
        const prev = apply(prevDense);
        if (
          equalBits(codes, prev.codes) &&
          equalBits(scaleBits, new Uint32Array(prev.scales.buffer, prev.scales.byteOffset, prev.scales.length))
        ) {
          findings.push({ tensor: name, kind: 'stale' });
          continue;
        }
      }
      // Row units that carry their own scales: B rows and one row of block scales; one row and its
      // channel scale; one row under a per-tensor scale (which must then agree).
      const granularity = spec.granularity.kind;
      const unitRows = granularity === 'block' ? (block as number) : 1;
      const scalesPerUnit =
        granularity === 'block' ? Math.ceil(cols / (block as number)) : granularity === 'row' ? 1 : 0;
      if (granularity !== 'tensor' || equalBits(scaleBits, wantScaleBits)) {
        const order = rowPermutation(
          unitKeys(want.codes, rows, cols, unitRows, wantScaleBits, scalesPerUnit),
          unitKeys(codes, rows, cols, unitRows, scaleBits, scalesPerUnit),
        );
        if (order !== null) {
          findings.push(permutationFinding(name, order, unitRows));
          continue;
        }
      }
      const cell = (r: number, c: number): number =>
        granularity === 'block'
          ? Math.floor(r / (block as number)) * scalesPerUnit + Math.floor(c / (block as number))
          : granularity === 'row'
            ? r
            : 0;
      let codeCount = 0;
      let first = -1;
      let maxAbsDiff = 0;
      for (let r = 0; r < rows; r++) {
        for (let c = 0; c < cols; c++) {
          const i = r * cols + c;
          const k = cell(r, c);
          const codeDiffers = codes[i] !== want.codes[i];
          if (codeDiffers) codeCount++;
          if (!codeDiffers && scaleBits[k] === wantScaleBits[k]) continue;
          if (first < 0) first = i;
          const held = fr((E4M3_VALUES[codes[i] as number] as number) * (scales[k] as number));
          const wanted = fr((E4M3_VALUES[want.codes[i] as number] as number) * (want.scales[k] as number));
          const d = Math.abs(held - wanted);
          if (Number.isFinite(d) && d > maxAbsDiff) maxAbsDiff = d;
        }
      }
      let scaleCount = 0;
      for (let k = 0; k < scaleBits.length; k++) if (scaleBits[k] !== wantScaleBits[k]) scaleCount++;
      findings.push({
        tensor: name,
        kind: 'value-error',
        codes: codeCount,
        scales: scaleCount,
        first: position(first, t.shape),
        maxAbsDiff,
      });
    }

    // FP8 KV-cache scales the engine holds (no trainer counterpart): exactly 1 everywhere is the
    // reset of a refit that dropped the calibrated scales.
    const kvNames = [...engine.entries.keys()]
      .filter((n) => (n.endsWith('.k_scale') || n.endsWith('.v_scale')) && !trainer.entries.has(n))
      .sort();
    for (const name of kvNames) {
      const { values } = readDense(engine, 'engine', name);
      if (values.length > 0 && values.every((v) => v === 1))
        findings.push({ tensor: name, kind: 'unity-scale', count: values.length });
    }
    return { findings, tensors: names.length, quantized, kvScales: kvNames.length, recipe, block, match };
  } finally {
    for (const f of files) f.close();
  }
}
