// onnxruntime-node oracle harness: builds one- to three-node ONNX models in memory and runs them on the CPU EP, single-threaded.
// Not a reference implementation and not part of the qrl-sim library: only tests and benchmarks import it, and it asserts nothing.
//
// What ORT computes here is the oracle; this file only moves numbers across the JS boundary. Choices made,
// each forced by onnxruntime-node 1.30 (observed on linux-x64 CPU EP, see docs/oracles.md):
//
// 1. Opsets. Cast uses opset 19 for the float8 types, bf16 and fp16 (19 is the first Cast with the
//    `saturate` attribute, so every Cast session here has one schema), 23 for float4e2m1 and 24 for
//    float8e8m0 (first versions that know those types; 24 adds `round_mode`). QuantizeLinear and
//    DequantizeLinear use opset 21 (int4/uint4, `block_size`, `output_dtype`). MatMul uses opset 13.
//    The IR version is the one ONNX releases pair with the opset (onnx `docs/Versioning.md`: 13→7, 19→9,
//    21→10); opsets 23 and 24 use IR 11 (ONNX 1.18), which ORT 1.30 accepts.
// 2. ORT's Cast kernel rejects `saturate` on non-float8 targets ("Attribute saturate is only used for cast
//    to float 8 types") but accepts it for e8m0; `round_mode` exists only for e8m0. The harness throws for
//    an option the target does not take instead of sending it.
// 3. Tensors of type float8*, bfloat16 and float8e8m0 cannot cross the onnxruntime-node boundary in either
//    direction ("Unsupported data type: 17"); int4/uint4 inputs are refused ("Tensor.type is not supported:
//    int4") and an int4/uint4 graph *output* aborts the whole process (V8 out-of-memory inside
//    OrtValueToNapiValue). Therefore:
//    - values leave a model through a trailing Cast: float8/bf16/e8m0 → float, int4 → int8, uint4 → uint8;
//    - int4/uint4 inputs enter as int8/uint8 and are Cast to 4 bits inside the model (exact in range);
//    - float8 inputs (codes) and every zero point enter as initializers (raw little-endian bytes, 4-bit
//      values packed two per byte, element 0 in the low nibble, onnx `technical/int4.md`);
//    - raw storage codes are read back through ORT's constant folding: the inputs become initializers,
//      the session is created with graph optimization 'basic' and `optimizedModelFilePath`, ORT folds the
//      node with its own CPU kernel and writes the result as an initializer of the target type, which is
//      decoded here with onnx-proto. The node binding then refuses the session's float8 output type; that
//      refusal is expected and swallowed (no run ever happens on such a session). The tests check that the
//      folded codes decode (through ORT) to exactly what the runtime round trip returns.
// 4. Runtime oracle sessions use graphOptimizationLevel 'disabled' so that no Cast→Cast pair can be fused
//    or folded away; only the MatMul benchmark session uses ORT's default ('all').
// 5. Graph inputs and outputs declare an element type but no shape, so one cached session serves every
//    shape; sessions are cached per (op, types, attributes, zero point) and released by `ortDisposeSessions`.
// 6. Scales are float32 tensors; zero points are given as numbers: integer values for int8/uint8/int4/uint4,
//    raw byte codes for float8. ORT 1.30 QuantizeLinear silently ignores a nonzero float8 zero point (as the
//    ONNX reference does) while DequantizeLinear rejects it; the harness passes both through unchanged.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import onnxProto from 'onnx-proto';
import * as ort from 'onnxruntime-node';

const { onnx } = onnxProto;

/** Targets of {@link ortCastRoundTrip}: the float formats ONNX Cast knows below fp32. */
export type OrtCastTarget = 'e4m3fn' | 'e4m3fnuz' | 'e5m2' | 'e5m2fnuz' | 'bf16' | 'fp16' | 'e2m1' | 'e8m0';

/** Storage types of QuantizeLinear outputs / DequantizeLinear inputs covered by the harness. */
export type OrtQuantType = 'int8' | 'uint8' | 'int4' | 'uint4' | 'e4m3fn' | 'e4m3fnuz' | 'e5m2' | 'e5m2fnuz';

/** E8M0 rounding of ONNX Cast-24 (`round_mode`). */
export type OrtRoundMode = 'up' | 'down' | 'nearest';

/** Attributes of the float→target Cast. */
export interface OrtCastOptions {
  /** ONNX `saturate`; only float8 targets and e8m0 take it. @defaultValue the ONNX default, 1 */
  saturate?: 0 | 1;
  /** ONNX `round_mode`; only e8m0 takes it. @defaultValue the ONNX default, 'up' */
  roundMode?: OrtRoundMode;
}

/** Attributes of QuantizeLinear-21. */
export interface OrtQuantizeOptions {
  /** Storage type of the result (sets `output_dtype`, and the zero point's type). */
  outputType: OrtQuantType;
  /** Quantization axis for per-axis and blocked scales (negative counts from the end). @defaultValue 1 */
  axis?: number;
  /** Block length along `axis` for blocked quantization; 0 or absent = per-tensor / per-axis. */
  blockSize?: number;
  /** ONNX `saturate`; float8 outputs only. @defaultValue the ONNX default, 1 */
  saturate?: 0 | 1;
}

/** Attributes of DequantizeLinear-21. */
export interface OrtDequantizeOptions {
  /** Storage type of the quantized input. */
  inputType: OrtQuantType;
  /** Quantization axis for per-axis and blocked scales. @defaultValue 1 */
  axis?: number;
  /** Block length along `axis` for blocked dequantization; 0 or absent = per-tensor / per-axis. */
  blockSize?: number;
}

/** ONNX `TensorProto.DataType` numbers (onnx `onnx/onnx.proto`); onnx-proto 8 only names those up to 16. */
export const onnxDataType = {
  float: 1,
  uint8: 2,
  int8: 3,
  fp16: 10,
  bf16: 16,
  e4m3fn: 17,
  e4m3fnuz: 18,
  e5m2: 19,
  e5m2fnuz: 20,
  uint4: 21,
  int4: 22,
  e2m1: 23,
  e8m0: 24,
} as const;

/** Bits per element of each storage type the harness handles. */
const storageBits: Record<OrtCastTarget | OrtQuantType, 4 | 8 | 16> = {
  e4m3fn: 8,
  e4m3fnuz: 8,
  e5m2: 8,
  e5m2fnuz: 8,
  e8m0: 8,
  int8: 8,
  uint8: 8,
  bf16: 16,
  fp16: 16,
  e2m1: 4,
  int4: 4,
  uint4: 4,
};

const float8Types: readonly string[] = ['e4m3fn', 'e4m3fnuz', 'e5m2', 'e5m2fnuz'];

/** Opset of the float→target Cast (first Cast version that knows the type and has `saturate`). */
const castOpset: Record<OrtCastTarget, number> = {
  e4m3fn: 19,
  e4m3fnuz: 19,
  e5m2: 19,
  e5m2fnuz: 19,
  bf16: 19,
  fp16: 19,
  e2m1: 23,
  e8m0: 24,
};

/** Opset of QuantizeLinear / DequantizeLinear (blocked quantization, int4). */
export const ortQdqOpset = 21;

/** The onnxruntime-node version in use, e.g. "1.30.0". */
export const ortVersion: string = ort.env.versions.node ?? ort.env.versions.common;

/**
 * Single-threaded, sequential execution: the same settings for every session of the harness. ORT's own
 * log is limited to fatal messages: every error it logs also reaches the caller as the thrown Error.
 */
const threadOptions = {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  executionMode: 'sequential',
  logSeverityLevel: 4,
} as const;

// ---------------------------------------------------------------------------------------------------
// Model building

type Attr = onnxProto.onnx.IAttributeProto;
type Node = onnxProto.onnx.INodeProto;
type Init = onnxProto.onnx.ITensorProto;

const AttrInt = onnx.AttributeProto.AttributeType.INT;
const AttrString = onnx.AttributeProto.AttributeType.STRING;

function intAttr(name: string, i: number): Attr {
  return { name, type: AttrInt, i };
}

function stringAttr(name: string, s: string): Attr {
  return { name, type: AttrString, s: new TextEncoder().encode(s) };
}

function node(opType: string, input: string[], output: string[], attribute: Attr[] = []): Node {
  return { opType, input, output, attribute };
}

/** A graph input/output with an element type and no shape (any rank). */
function valueInfo(name: string, elemType: number): onnxProto.onnx.IValueInfoProto {
  return { name, type: { tensorType: { elemType } } };
}

/** IR version for an opset (onnx docs/Versioning.md; IR 11 for opsets 23–24, see header note 1). */
function irVersionFor(opset: number): number {
  if (opset <= 13) return 7;
  if (opset <= 19) return 9;
  if (opset <= 22) return 10;
  return 11;
}

interface GraphSpec {
  opset: number;
  nodes: Node[];
  inputs: [string, number][];
  outputs: [string, number][];
  initializers?: Init[];
}

/** Encodes a one-graph ModelProto to bytes. */
function encodeModel(g: GraphSpec): Uint8Array {
  const model = onnx.ModelProto.create({
    irVersion: irVersionFor(g.opset),
    producerName: 'qrl-sim oracle',
    opsetImport: [{ domain: '', version: g.opset }],
    graph: {
      name: 'oracle',
      node: g.nodes,
      input: g.inputs.map(([n, t]) => valueInfo(n, t)),
      output: g.outputs.map(([n, t]) => valueInfo(n, t)),
      initializer: g.initializers ?? [],
    },
  });
  return onnx.ModelProto.encode(model).finish();
}

/** An initializer from raw little-endian bytes. */
function rawInit(name: string, dataType: number, dims: readonly number[], rawData: Uint8Array): Init {
  return { name, dataType, dims: [...dims], rawData };
}

function floatInit(name: string, values: Float32Array, dims: readonly number[]): Init {
  return rawInit(
    name,
    onnxDataType.float,
    dims,
    new Uint8Array(values.buffer, values.byteOffset, values.byteLength).slice(),
  );
}

/** Packs 4-bit codes two per byte, element 0 in the low nibble. */
function packNibbles(codes: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(Math.ceil(codes.length / 2));
  for (let i = 0; i < codes.length; i++) {
    const c = (codes[i] ?? 0) & 0x0f;
    out[i >> 1]! |= i % 2 === 0 ? c : c << 4;
  }
  return out;
}

/** Unpacks `n` 4-bit codes stored two per byte, element 0 in the low nibble. */
function unpackNibbles(bytes: Uint8Array, n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = ((bytes[i >> 1] ?? 0) >> (i % 2 === 0 ? 0 : 4)) & 0x0f;
  return out;
}

/** Raw storage bytes of an integer zero point / code array for `type` (validated). */
function storageBytes(type: OrtQuantType, values: ArrayLike<number>, field: string): Uint8Array {
  const range: Record<OrtQuantType, [number, number]> = {
    int8: [-128, 127],
    uint8: [0, 255],
    int4: [-8, 7],
    uint4: [0, 15],
    e4m3fn: [0, 255],
    e4m3fnuz: [0, 255],
    e5m2: [0, 255],
    e5m2fnuz: [0, 255],
  };
  const [lo, hi] = range[type];
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!Number.isInteger(v) || v < lo || v > hi) {
      throw new RangeError(
        `${field}[${i}] = ${v} is not a ${type} ${float8Types.includes(type) ? 'byte code' : 'value'} in [${lo}, ${hi}]`,
      );
    }
  }
  if (storageBits[type] === 4) return packNibbles(values);
  return Uint8Array.from(values, (v) => v & 0xff);
}

// ---------------------------------------------------------------------------------------------------
// Sessions

const sessions = new Map<string, Promise<ort.InferenceSession>>();

/** Creates (or reuses) the session for `key`; a failed creation is not cached. */
function cachedSession(
  key: string,
  build: () => GraphSpec,
  level: 'disabled' | 'all' = 'disabled',
): Promise<ort.InferenceSession> {
  let s = sessions.get(key);
  if (s === undefined) {
    s = ort.InferenceSession.create(encodeModel(build()), { ...threadOptions, graphOptimizationLevel: level });
    sessions.set(key, s);
    s.catch(() => sessions.delete(key));
  }
  return s;
}

/** Releases every cached session (call from `afterAll` in long test files). */
export async function ortDisposeSessions(): Promise<void> {
  const all = [...sessions.values()];
  sessions.clear();
  for (const s of all) {
    try {
      await (await s).release();
    } catch {
      // a session that failed to build has nothing to release
    }
  }
}

function checkShape(field: string, length: number, shape: readonly number[]): void {
  const size = shape.reduce((a, b) => a * b, 1);
  if (shape.some((d) => !Number.isInteger(d) || d < 0) || size !== length) {
    throw new RangeError(`${field} has ${length} elements but shape [${shape.join(', ')}] holds ${size}`);
  }
}

// ---------------------------------------------------------------------------------------------------
// Cast

function castAttributes(to: OrtCastTarget, opts: OrtCastOptions): Attr[] {
  const attrs = [intAttr('to', onnxDataType[to])];
  if (opts.saturate !== undefined) {
    if (!float8Types.includes(to) && to !== 'e8m0') {
      throw new RangeError(`saturate = ${opts.saturate} does not apply to Cast to ${to} (float8 and e8m0 only)`);
    }
    attrs.push(intAttr('saturate', opts.saturate));
  }
  if (opts.roundMode !== undefined) {
    if (to !== 'e8m0')
      throw new RangeError(`roundMode = '${opts.roundMode}' does not apply to Cast to ${to} (e8m0 only)`);
    attrs.push(stringAttr('round_mode', opts.roundMode));
  }
  return attrs;
}

function castRoundTripSession(to: OrtCastTarget, opts: OrtCastOptions): Promise<ort.InferenceSession> {
  const attrs = castAttributes(to, opts);
  const key = JSON.stringify(['castRoundTrip', to, opts.saturate ?? null, opts.roundMode ?? null]);
  return cachedSession(key, () => ({
    opset: castOpset[to],
    nodes: [node('Cast', ['x'], ['q'], attrs), node('Cast', ['q'], ['y'], [intAttr('to', onnxDataType.float)])],
    inputs: [['x', onnxDataType.float]],
    outputs: [['y', onnxDataType.float]],
  }));
}

/**
 * Cast float32 → `to` → float32 in onnxruntime and return the decoded values.
 *
 * @example
 * await ortCastRoundTrip(Float32Array.of(500, 470), 'e4m3fn', { saturate: 0 }); // [NaN, NaN]
 */
export async function ortCastRoundTrip(
  values: Float32Array,
  to: OrtCastTarget,
  opts: OrtCastOptions = {},
): Promise<Float32Array> {
  const session = await castRoundTripSession(to, opts);
  const out = await session.run({ x: new ort.Tensor('float32', values, [values.length]) });
  return out['y']!.data as Float32Array;
}

const supportCache = new Map<OrtCastTarget, Promise<string | null>>();

/**
 * Why the installed onnxruntime cannot run the Cast round trip for `to`, or null when it can
 * (e.g. "Could not find an implementation for Cast(23) node with name ''" for e2m1 on ORT 1.30 CPU).
 */
export function ortSupportError(to: OrtCastTarget): Promise<string | null> {
  let p = supportCache.get(to);
  if (p === undefined) {
    p = ortCastRoundTrip(Float32Array.of(1), to).then(
      () => null,
      (e: unknown) => {
        const msg = e instanceof Error ? e.message : String(e);
        if (/Could not find an implementation|not supported|Unsupported/i.test(msg)) return msg;
        throw e;
      },
    );
    supportCache.set(to, p);
  }
  return p;
}

/**
 * Whether the installed onnxruntime CPU EP implements Cast float→`to`→float (use to skip oracle tests).
 *
 * @example
 * const skip = !(await ortSupports('e2m1')); // true on ORT 1.30
 */
export async function ortSupports(to: OrtCastTarget): Promise<boolean> {
  return (await ortSupportError(to)) === null;
}

/**
 * Runs a constant graph through ORT's constant folding and returns the raw bytes of the folded output
 * initializer (see header note 3). `outputs[0]` names the tensor to read.
 */
async function foldToRawBytes(g: GraphSpec, outType: number): Promise<{ raw: Uint8Array; int32Data: number[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'qrl-ort-'));
  const path = join(dir, 'folded.onnx');
  try {
    try {
      const s = await ort.InferenceSession.create(encodeModel(g), {
        ...threadOptions,
        graphOptimizationLevel: 'basic',
        optimizedModelFilePath: path,
      });
      await s.release(); // never run: its output type may be one the binding cannot return
    } catch (e) {
      // The binding refuses float8 / bf16 / e8m0 graph outputs after ORT has built and saved the model.
      const msg = e instanceof Error ? e.message : String(e);
      if (!/^Unsupported data type: \d+$/.test(msg)) throw e;
    }
    const folded = onnx.ModelProto.decode(readFileSync(path));
    const outName = g.outputs[0]![0];
    const left = folded.graph?.node ?? [];
    const init = (folded.graph?.initializer ?? []).find((t) => t.name === outName);
    if (left.length > 0 || init === undefined) {
      throw new Error(
        `onnxruntime did not constant-fold ${g.nodes.map((n) => n.opType).join('→')} (nodes left: ${left.map((n) => n.opType).join(', ') || 'none'})`,
      );
    }
    if (init.dataType !== outType)
      throw new Error(`folded ${outName} has dataType ${init.dataType}, expected ${outType}`);
    return { raw: init.rawData ?? new Uint8Array(0), int32Data: init.int32Data ?? [] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Storage codes from folded raw bytes: one code per element (4-bit unpacked, 16-bit little-endian). */
function codesFromFolded(
  type: OrtCastTarget | OrtQuantType,
  folded: { raw: Uint8Array; int32Data: number[] },
  n: number,
): Uint8Array | Uint16Array {
  const bits = storageBits[type];
  if (folded.raw.length === 0 && folded.int32Data.length === n) {
    return bits === 16 ? Uint16Array.from(folded.int32Data) : Uint8Array.from(folded.int32Data, (v) => v & 0xff);
  }
  if (bits === 4) return unpackNibbles(folded.raw, n);
  if (bits === 16) {
    const out = new Uint16Array(n);
    for (let i = 0; i < n; i++) out[i] = (folded.raw[2 * i] ?? 0) | ((folded.raw[2 * i + 1] ?? 0) << 8);
    return out;
  }
  return Uint8Array.from(folded.raw.subarray(0, n)); // a copy: protobufjs hands out Buffer views
}

/**
 * The raw storage codes ORT's Cast float→`to` produces (one byte per element; bf16/fp16 give a Uint16Array
 * of bit patterns). Obtained through constant folding, so each call builds a fresh model (slower than
 * {@link ortCastRoundTrip}; fine for a few hundred thousand values).
 *
 * @example
 * await ortCastCodes(Float32Array.of(480), 'e4m3fn', { saturate: 0 }); // Uint8Array [0x7e]
 */
export async function ortCastCodes(
  values: Float32Array,
  to: OrtCastTarget,
  opts: OrtCastOptions = {},
): Promise<Uint8Array | Uint16Array> {
  const folded = await foldToRawBytes(
    {
      opset: castOpset[to],
      nodes: [node('Cast', ['x'], ['q'], castAttributes(to, opts))],
      inputs: [],
      outputs: [['q', onnxDataType[to]]],
      initializers: [floatInit('x', values, [values.length])],
    },
    onnxDataType[to],
  );
  return codesFromFolded(to, folded, values.length);
}

/**
 * ORT's decoding of storage codes of `from` to float32 (codes enter as an initializer, Cast to float).
 * 8-bit types take byte codes, bf16/fp16 16-bit patterns, e2m1 one 4-bit code per element.
 *
 * @example
 * await ortDecode(Uint8Array.of(0x7e, 0x7f), 'e4m3fn'); // [448, NaN]
 */
export async function ortDecode(codes: Uint8Array | Uint16Array, from: OrtCastTarget): Promise<Float32Array> {
  const bits = storageBits[from];
  let raw: Uint8Array;
  if (bits === 16) {
    raw = new Uint8Array(codes.length * 2);
    codes.forEach((c, i) => {
      raw[2 * i] = c & 0xff;
      raw[2 * i + 1] = (c >> 8) & 0xff;
    });
  } else if (bits === 4) {
    raw = packNibbles(codes);
  } else {
    raw = Uint8Array.from(codes, (c) => c & 0xff);
  }
  const session = await ort.InferenceSession.create(
    encodeModel({
      opset: castOpset[from],
      nodes: [node('Cast', ['c'], ['y'], [intAttr('to', onnxDataType.float)])],
      inputs: [],
      outputs: [['y', onnxDataType.float]],
      initializers: [rawInit('c', onnxDataType[from], [codes.length], raw)],
    }),
    { ...threadOptions, graphOptimizationLevel: 'disabled' },
  );
  try {
    const out = await session.run({});
    return out['y']!.data as Float32Array;
  } finally {
    await session.release();
  }
}

// ---------------------------------------------------------------------------------------------------
// QuantizeLinear / DequantizeLinear (opset 21)

/** The element type values leave a model in: 4-bit widened to 8 bits, float8 decoded to float. */
function widenedType(type: OrtQuantType): number {
  if (type === 'int4') return onnxDataType.int8;
  if (type === 'uint4') return onnxDataType.uint8;
  if (float8Types.includes(type)) return onnxDataType.float;
  return onnxDataType[type];
}

function qdqAttributes(axis: number | undefined, blockSize: number | undefined): Attr[] {
  const attrs: Attr[] = [];
  if (axis !== undefined) {
    if (!Number.isInteger(axis)) throw new RangeError(`axis = ${axis} is not an integer`);
    attrs.push(intAttr('axis', axis));
  }
  if (blockSize !== undefined && blockSize !== 0) {
    if (!Number.isInteger(blockSize) || blockSize < 0)
      throw new RangeError(`blockSize = ${blockSize} is not a positive integer`);
    attrs.push(intAttr('block_size', blockSize));
  }
  return attrs;
}

function quantizeAttributes(opts: OrtQuantizeOptions): Attr[] {
  const attrs = [...qdqAttributes(opts.axis, opts.blockSize), intAttr('output_dtype', onnxDataType[opts.outputType])];
  if (opts.saturate !== undefined) {
    if (!float8Types.includes(opts.outputType)) {
      throw new RangeError(
        `saturate = ${opts.saturate} does not apply to QuantizeLinear to ${opts.outputType} (float8 only)`,
      );
    }
    attrs.push(intAttr('saturate', opts.saturate));
  }
  return attrs;
}

function zeroPointInit(type: OrtQuantType, zeroPoint: readonly number[], scaleShape: readonly number[]): Init {
  checkShape('zeroPoint', zeroPoint.length, scaleShape);
  return rawInit('z', onnxDataType[type], scaleShape, storageBytes(type, zeroPoint, 'zeroPoint'));
}

/**
 * QuantizeLinear-21 in onnxruntime: `saturate(round(x / scale) + zeroPoint)` with per-tensor, per-axis or
 * blocked scales. Returns one number per element: the integer value for int8/uint8/int4/uint4 outputs, the
 * decoded float value for float8 outputs (use {@link ortQuantizeLinearCodes} for raw codes).
 *
 * @param x - input, row-major, `shape`
 * @param scale - dequant scales (x ≈ q·scale), `scaleShape` ([] per-tensor, [D_axis] per-axis, or the input
 *   shape with dim `axis` replaced by ceil(D_axis / blockSize) for blocked quantization)
 * @param zeroPoint - null for none (zero), else values of the output type in `scaleShape` (byte codes for float8)
 * @example
 * await ortQuantizeLinear(Float32Array.of(0.5, 1.5, 2.5), [3], Float32Array.of(1), [], null, { outputType: 'int8' }); // [0, 2, 2]
 */
export async function ortQuantizeLinear(
  x: Float32Array,
  shape: readonly number[],
  scale: Float32Array,
  scaleShape: readonly number[],
  zeroPoint: readonly number[] | null,
  opts: OrtQuantizeOptions,
): Promise<Float32Array> {
  checkShape('x', x.length, shape);
  checkShape('scale', scale.length, scaleShape);
  const t = opts.outputType;
  const attrs = quantizeAttributes(opts);
  const zp = zeroPoint === null ? null : zeroPointInit(t, zeroPoint, scaleShape);
  const key = JSON.stringify([
    'quantizeLinear',
    t,
    opts.axis ?? null,
    opts.blockSize ?? null,
    opts.saturate ?? null,
    scaleShape,
    zeroPoint,
  ]);
  const session = await cachedSession(key, () => {
    const nodes = [node('QuantizeLinear', zp === null ? ['x', 's'] : ['x', 's', 'z'], ['q'], attrs)];
    const needsWiden = widenedType(t) !== onnxDataType[t];
    if (needsWiden) nodes.push(node('Cast', ['q'], ['y'], [intAttr('to', widenedType(t))]));
    return {
      opset: ortQdqOpset,
      nodes,
      inputs: [
        ['x', onnxDataType.float],
        ['s', onnxDataType.float],
      ],
      outputs: [[needsWiden ? 'y' : 'q', widenedType(t)]],
      initializers: zp === null ? [] : [zp],
    };
  });
  const out = await session.run({
    x: new ort.Tensor('float32', x, [...shape]),
    s: new ort.Tensor('float32', scale, [...scaleShape]),
  });
  const data = out[session.outputNames[0]!]!.data as Float32Array | Int8Array | Uint8Array;
  return data instanceof Float32Array ? data : Float32Array.from(data);
}

/**
 * Raw storage codes of QuantizeLinear-21 in onnxruntime, one per element (int8 as its two's-complement
 * byte, int4/uint4 as the 4-bit code 0..15, float8 as the byte code), via constant folding (header note 3).
 * Same arguments as {@link ortQuantizeLinear}.
 *
 * @example
 * await ortQuantizeLinearCodes(Float32Array.of(500), [1], Float32Array.of(1), [], null, { outputType: 'e4m3fn' }); // [0x7e]
 */
export async function ortQuantizeLinearCodes(
  x: Float32Array,
  shape: readonly number[],
  scale: Float32Array,
  scaleShape: readonly number[],
  zeroPoint: readonly number[] | null,
  opts: OrtQuantizeOptions,
): Promise<Uint8Array> {
  checkShape('x', x.length, shape);
  checkShape('scale', scale.length, scaleShape);
  const t = opts.outputType;
  const zp = zeroPoint === null ? null : zeroPointInit(t, zeroPoint, scaleShape);
  const folded = await foldToRawBytes(
    {
      opset: ortQdqOpset,
      nodes: [node('QuantizeLinear', zp === null ? ['x', 's'] : ['x', 's', 'z'], ['q'], quantizeAttributes(opts))],
      inputs: [],
      outputs: [['q', onnxDataType[t]]],
      initializers: [floatInit('x', x, shape), floatInit('s', scale, scaleShape), ...(zp === null ? [] : [zp])],
    },
    onnxDataType[t],
  );
  return codesFromFolded(t, folded, x.length) as Uint8Array;
}

/**
 * DequantizeLinear-21 in onnxruntime: `(q − zeroPoint) · scale` with per-tensor, per-axis or blocked scales.
 *
 * @param q - quantized input, `shape`: integer values for int8/uint8/int4/uint4 (int4/uint4 enter as 8-bit
 *   and are Cast to 4 bits inside the model), byte codes for float8 (entered as an initializer, so each call
 *   builds a fresh session)
 * @example
 * await ortDequantizeLinear([-8, 7], [2], Float32Array.of(0.5), [], null, { inputType: 'int4' }); // [-4, 3.5]
 */
export async function ortDequantizeLinear(
  q: ArrayLike<number>,
  shape: readonly number[],
  scale: Float32Array,
  scaleShape: readonly number[],
  zeroPoint: readonly number[] | null,
  opts: OrtDequantizeOptions,
): Promise<Float32Array> {
  checkShape('q', q.length, shape);
  checkShape('scale', scale.length, scaleShape);
  const t = opts.inputType;
  const attrs = qdqAttributes(opts.axis, opts.blockSize);
  const zp = zeroPoint === null ? null : zeroPointInit(t, zeroPoint, scaleShape);
  const qBytes = storageBytes(t, q, 'q');
  const dqInputs = zp === null ? ['q', 's'] : ['q', 's', 'z'];
  const feeds: Record<string, ort.Tensor> = { s: new ort.Tensor('float32', scale, [...scaleShape]) };
  if (float8Types.includes(t)) {
    const session = await ort.InferenceSession.create(
      encodeModel({
        opset: ortQdqOpset,
        nodes: [node('DequantizeLinear', dqInputs, ['y'], attrs)],
        inputs: [['s', onnxDataType.float]],
        outputs: [['y', onnxDataType.float]],
        initializers: [rawInit('q', onnxDataType[t], shape, qBytes), ...(zp === null ? [] : [zp])],
      }),
      { ...threadOptions, graphOptimizationLevel: 'disabled' },
    );
    try {
      return (await session.run(feeds))['y']!.data as Float32Array;
    } finally {
      await session.release();
    }
  }
  const widened = widenedType(t);
  const key = JSON.stringify(['dequantizeLinear', t, opts.axis ?? null, opts.blockSize ?? null, scaleShape, zeroPoint]);
  const session = await cachedSession(key, () => {
    const nodes: Node[] = [];
    if (widened !== onnxDataType[t]) nodes.push(node('Cast', ['q8'], ['q'], [intAttr('to', onnxDataType[t])]));
    nodes.push(node('DequantizeLinear', dqInputs, ['y'], attrs));
    return {
      opset: ortQdqOpset,
      nodes,
      inputs: [
        [widened !== onnxDataType[t] ? 'q8' : 'q', widened],
        ['s', onnxDataType.float],
      ],
      outputs: [['y', onnxDataType.float]],
      initializers: zp === null ? [] : [zp],
    };
  });
  const signed = t === 'int8' || t === 'int4';
  const qTensor = signed
    ? new ort.Tensor('int8', Int8Array.from(q), [...shape])
    : new ort.Tensor('uint8', Uint8Array.from(q), [...shape]);
  feeds[widened !== onnxDataType[t] ? 'q8' : 'q'] = qTensor;
  return (await session.run(feeds))['y']!.data as Float32Array;
}

// ---------------------------------------------------------------------------------------------------
// MatMul and repeated runs (benchmarks)

/** A session bound to fixed input tensors and a pre-allocated output, for timing repeated runs. */
export interface OrtPreparedRun {
  /** The underlying session (shared with the harness cache; do not release it directly). */
  readonly session: ort.InferenceSession;
  /** The output buffer every {@link OrtPreparedRun.run} writes into. */
  readonly output: Float32Array;
  /** Runs the session once on the bound inputs; resolves to {@link OrtPreparedRun.output}. */
  run(): Promise<Float32Array>;
}

/**
 * Binds `feeds` and a pre-allocated float32 output of `outputDims` to `session`, so that repeated runs
 * measure only ORT's execution (no model build, no input or output allocation).
 */
export function prepareOrtRun(
  session: ort.InferenceSession,
  feeds: Record<string, ort.Tensor>,
  outputDims: readonly number[],
): OrtPreparedRun {
  const outputName = session.outputNames[0]!;
  const output = new Float32Array(outputDims.reduce((a, b) => a * b, 1));
  const fetches = { [outputName]: new ort.Tensor('float32', output, [...outputDims]) };
  return {
    session,
    output,
    async run() {
      await session.run(feeds, fetches);
      return output;
    },
  };
}

function matMulSession(): Promise<ort.InferenceSession> {
  return cachedSession(
    'matMul',
    () => ({
      opset: 13,
      nodes: [node('MatMul', ['a', 'b'], ['c'])],
      inputs: [
        ['a', onnxDataType.float],
        ['b', onnxDataType.float],
      ],
      outputs: [['c', onnxDataType.float]],
    }),
    'all',
  );
}

function matMulFeeds(a: Float32Array, b: Float32Array, m: number, k: number, n: number): Record<string, ort.Tensor> {
  checkShape('a', a.length, [m, k]);
  checkShape('b', b.length, [k, n]);
  return { a: new ort.Tensor('float32', a, [m, k]), b: new ort.Tensor('float32', b, [k, n]) };
}

/**
 * C = A·B in onnxruntime (MatMul-13, fp32, single thread), A row-major (m, k), B row-major (k, n).
 *
 * @example
 * await ortMatMul(Float32Array.of(1, 2), Float32Array.of(3, 4), 1, 2, 1); // [11]
 */
export async function ortMatMul(
  a: Float32Array,
  b: Float32Array,
  m: number,
  k: number,
  n: number,
): Promise<Float32Array> {
  const session = await matMulSession();
  return (await session.run(matMulFeeds(a, b, m, k, n)))['c']!.data as Float32Array;
}

/** A {@link prepareOrtRun} for MatMul on fixed A (m, k) and B (k, n). */
export async function prepareOrtMatMul(
  a: Float32Array,
  b: Float32Array,
  m: number,
  k: number,
  n: number,
): Promise<OrtPreparedRun> {
  return prepareOrtRun(await matMulSession(), matMulFeeds(a, b, m, k, n), [m, n]);
}

/** A {@link prepareOrtRun} for the Cast float→`to`→float round trip on fixed `values`. */
export async function prepareOrtCastRoundTrip(
  values: Float32Array,
  to: OrtCastTarget,
  opts: OrtCastOptions = {},
): Promise<OrtPreparedRun> {
  const session = await castRoundTripSession(to, opts);
  return prepareOrtRun(session, { x: new ort.Tensor('float32', values, [values.length]) }, [values.length]);
}
