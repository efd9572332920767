// The safetensors file format (8-byte little-endian header length, JSON header, raw little-endian
// data), written and read for golden references, weights and large protocol payloads. Not a tensor
// library: tensors are typed arrays with a shape.

import { closeSync, fstatSync, fsyncSync, openSync, readFileSync, readSync, renameSync, writeSync } from 'node:fs';
import { threadId } from 'node:worker_threads';
import { WIRE_DTYPES, type WireArray, type WireDtype } from './tensor.js';

/** A named tensor of a safetensors file. `dtype` may refine the array's own (U8 data stored as F8_E4M3, U16 bits as BF16). */
export interface SafetensorsEntry {
  readonly data: WireArray;
  readonly shape: readonly number[];
  /** Stored dtype; defaults to the array's. `F8_E4M3` / `F8_E5M2` need a Uint8Array of codes, `BF16` / `F16` a Uint16Array of bits. */
  readonly dtype?: SafetensorsDtype;
}

/** The dtypes this module writes and reads: the wire dtypes, the two 8-bit float formats and the two 16-bit ones (as their bits). */
export type SafetensorsDtype = WireDtype | 'F8_E4M3' | 'F8_E5M2' | 'BF16' | 'F16';

const BYTE_DTYPES: readonly SafetensorsDtype[] = ['U8', 'F8_E4M3', 'F8_E5M2'];
const HALF_DTYPES: readonly SafetensorsDtype[] = ['U16', 'BF16', 'F16'];

/** The wire dtype whose array holds a stored dtype's elements (F8 codes in U8, BF16/F16 bits in U16). */
function storageDtype(dtype: SafetensorsDtype): WireDtype {
  if (BYTE_DTYPES.includes(dtype)) return 'U8';
  if (HALF_DTYPES.includes(dtype)) return 'U16';
  return dtype as WireDtype;
}
const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
let tempCounter = 0;

function arrayDtype(array: WireArray): WireDtype {
  for (const [name, ctor] of Object.entries(WIRE_DTYPES)) if (array instanceof ctor) return name as WireDtype;
  throw new Error('safetensors: unsupported array type');
}

/**
 * Serialises named tensors (in the given key order; safetensors itself sorts nothing) with an
 * optional `__metadata__` of string values. The header is padded with spaces to a multiple of 8 bytes.
 */
export function encodeSafetensors(
  tensors: Readonly<Record<string, SafetensorsEntry>>,
  metadata?: Readonly<Record<string, string>>,
): Uint8Array {
  if (!littleEndian) throw new Error('safetensors: big-endian hosts are not supported');
  const header: Record<string, unknown> = {};
  if (metadata !== undefined) header.__metadata__ = metadata;
  let offset = 0;
  const parts: Uint8Array[] = [];
  for (const [name, entry] of Object.entries(tensors)) {
    if (name === '__metadata__') throw new Error('safetensors: "__metadata__" is reserved');
    const own = arrayDtype(entry.data);
    const dtype = entry.dtype ?? own;
    if (dtype !== own && storageDtype(dtype) !== own)
      throw new Error(`safetensors: ${name}: a ${own} array cannot be stored as ${dtype}`);
    const size = entry.shape.reduce((a, b) => a * b, 1);
    if (size !== entry.data.length)
      throw new Error(
        `safetensors: ${name}: shape [${entry.shape.join(', ')}] holds ${size} elements, the array ${entry.data.length}`,
      );
    const bytes = new Uint8Array(entry.data.buffer, entry.data.byteOffset, entry.data.byteLength);
    header[name] = { dtype, shape: [...entry.shape], data_offsets: [offset, offset + bytes.length] };
    parts.push(bytes);
    offset += bytes.length;
  }
  let json = JSON.stringify(header);
  const pad = (8 - (Buffer.byteLength(json) % 8)) % 8;
  json += ' '.repeat(pad);
  const head = Buffer.from(json, 'utf8');
  const out = new Uint8Array(8 + head.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true);
  out.set(head, 8);
  let at = 8 + head.length;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A tensor read back from a safetensors file. */
export interface SafetensorsTensor {
  readonly dtype: SafetensorsDtype;
  readonly shape: readonly number[];
  /** The data, copied into an aligned typed array (F8 codes as a Uint8Array). */
  readonly data: WireArray;
}

/** Parses a safetensors buffer; throws naming the tensor and the inconsistency. */
export function decodeSafetensors(bytes: Uint8Array): {
  tensors: Record<string, SafetensorsTensor>;
  metadata: Record<string, string>;
} {
  if (bytes.length < 8) throw new Error('safetensors: shorter than its 8-byte header length');
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  if (8 + n > bytes.length) throw new Error(`safetensors: header length ${n} exceeds the file`);
  const header = JSON.parse(Buffer.from(bytes.subarray(8, 8 + n)).toString('utf8')) as Record<string, unknown>;
  const body = bytes.subarray(8 + n);
  const tensors: Record<string, SafetensorsTensor> = {};
  let metadata: Record<string, string> = {};
  for (const [name, raw] of Object.entries(header)) {
    if (name === '__metadata__') {
      metadata = raw as Record<string, string>;
      continue;
    }
    const info = raw as { dtype: SafetensorsDtype; shape: number[]; data_offsets: [number, number] };
    const wire = storageDtype(info.dtype);
    const ctor = Object.hasOwn(WIRE_DTYPES, wire) ? WIRE_DTYPES[wire as WireDtype] : undefined;
    if (ctor === undefined) throw new Error(`safetensors: ${name}: unsupported dtype ${JSON.stringify(info.dtype)}`);
    const [begin, end] = info.data_offsets;
    const size = info.shape.reduce((a, b) => a * b, 1);
    if (end - begin !== size * ctor.BYTES_PER_ELEMENT || end > body.length)
      throw new Error(
        `safetensors: ${name}: data_offsets [${begin}, ${end}] do not fit shape [${info.shape.join(', ')}] of ${info.dtype}`,
      );
    const copy = new Uint8Array(body.subarray(begin, end));
    tensors[name] = { dtype: info.dtype, shape: info.shape, data: new ctor(copy.buffer, 0, size) };
  }
  return { tensors, metadata };
}

/** Writes a safetensors file whole or not at all (temp file in the same directory, fsync, rename). */
export function writeSafetensors(
  path: string,
  tensors: Readonly<Record<string, SafetensorsEntry>>,
  metadata?: Readonly<Record<string, string>>,
): void {
  const bytes = encodeSafetensors(tensors, metadata);
  const tmp = `${path}.tmp-${process.pid}-${threadId}-${tempCounter++}`;
  const fd = openSync(tmp, 'w');
  try {
    writeSync(fd, bytes);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

/** Reads a safetensors file. */
export function readSafetensors(path: string): {
  tensors: Record<string, SafetensorsTensor>;
  metadata: Record<string, string>;
} {
  return decodeSafetensors(new Uint8Array(readFileSync(path)));
}

/** One tensor of a safetensors header: where its bytes lie in the file (absolute offsets). */
export interface SafetensorsHeaderEntry {
  readonly dtype: string;
  readonly shape: readonly number[];
  /** Absolute byte offsets [begin, end) in the file. */
  readonly begin: number;
  readonly end: number;
}

/** A safetensors file opened for reading tensor by tensor: the header only, the data left on disk. */
export interface SafetensorsFile {
  /** Tensors in header order (dtype as written: it is not checked here). */
  readonly entries: ReadonlyMap<string, SafetensorsHeaderEntry>;
  /** Reads one tensor's raw little-endian bytes (a fresh, aligned copy). */
  readBytes(name: string): Uint8Array<ArrayBuffer>;
  close(): void;
}

/** Largest header accepted by {@link openSafetensors} (the safetensors crate's own limit is 100 MB). */
const MAX_HEADER_BYTES = 100_000_000;

/**
 * Opens a safetensors file and reads only its header; {@link SafetensorsFile.readBytes} then reads
 * one tensor's bytes by offset, so a caller holds one tensor at a time. Throws naming the file and
 * the inconsistency (header length, JSON, offsets outside the file, shape and offsets that disagree
 * for a dtype whose width is known).
 */
export function openSafetensors(path: string): SafetensorsFile {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    const head8 = Buffer.alloc(8);
    if (size < 8 || readSync(fd, head8, 0, 8, 0) !== 8)
      throw new Error(`safetensors: ${path}: shorter than its 8-byte header length`);
    const n = Number(head8.readBigUInt64LE(0));
    if (n > MAX_HEADER_BYTES || 8 + n > size)
      throw new Error(`safetensors: ${path}: header length ${n} exceeds the file`);
    const head = Buffer.alloc(n);
    readSync(fd, head, 0, n, 8);
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(head.toString('utf8')) as Record<string, unknown>;
    } catch {
      throw new Error(`safetensors: ${path}: the header is not JSON`);
    }
    const widths: Record<string, number> = {
      F64: 8,
      F32: 4,
      I32: 4,
      U32: 4,
      I64: 8,
      U64: 8,
      BF16: 2,
      F16: 2,
      U16: 2,
      I16: 2,
      U8: 1,
      I8: 1,
      F8_E4M3: 1,
      F8_E5M2: 1,
      BOOL: 1,
    };
    const entries = new Map<string, SafetensorsHeaderEntry>();
    for (const [name, raw] of Object.entries(header)) {
      if (name === '__metadata__') continue;
      const info = raw as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      const shape = info.shape;
      const offsets = info.data_offsets;
      if (
        typeof info.dtype !== 'string' ||
        !Array.isArray(shape) ||
        !shape.every((d) => Number.isSafeInteger(d) && (d as number) >= 0) ||
        !Array.isArray(offsets) ||
        offsets.length !== 2 ||
        !offsets.every((d) => Number.isSafeInteger(d) && (d as number) >= 0)
      ) {
        throw new Error(`safetensors: ${path}: ${name}: malformed header entry`);
      }
      const [b, e] = offsets as [number, number];
      const width = widths[info.dtype];
      const count = (shape as number[]).reduce((a, d) => a * d, 1);
      if (e < b || 8 + n + e > size || (width !== undefined && e - b !== count * width)) {
        throw new Error(
          `safetensors: ${path}: ${name}: data_offsets [${b}, ${e}] do not fit shape [${(shape as number[]).join(', ')}] of ${info.dtype} in the file`,
        );
      }
      entries.set(name, { dtype: info.dtype, shape: shape as number[], begin: 8 + n + b, end: 8 + n + e });
    }
    return {
      entries,
      readBytes(name) {
        const entry = entries.get(name);
        if (entry === undefined) throw new Error(`safetensors: ${path}: no tensor ${JSON.stringify(name)}`);
        const out = new Uint8Array(entry.end - entry.begin);
        let at = 0;
        while (at < out.length) {
          const got = readSync(fd, out, at, out.length - at, entry.begin + at);
          if (got === 0) throw new Error(`safetensors: ${path}: ${name}: file ends inside the tensor`);
          at += got;
        }
        return out;
      },
      close: () => closeSync(fd),
    };
  } catch (error) {
    closeSync(fd);
    throw error;
  }
}
