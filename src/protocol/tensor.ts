// Tensors as JSON for qrl-backend/1 and `qrl-sim check`: `{ dtype, shape, data }` with the
// little-endian bytes in base64, dtype names as safetensors spells them. Not a file format (the
// safetensors writer is separate) and not a schema validator (the callers' zod schemas use this).

/** The dtypes a wire tensor can carry (safetensors names). */
export const WIRE_DTYPES = Object.freeze({
  F64: Float64Array,
  F32: Float32Array,
  I32: Int32Array,
  U8: Uint8Array,
  U16: Uint16Array,
  U32: Uint32Array,
} as const);

/** A dtype name of {@link WIRE_DTYPES}. */
export type WireDtype = keyof typeof WIRE_DTYPES;

/** A typed array of one of the {@link WIRE_DTYPES}. */
export type WireArray = Float64Array | Float32Array | Int32Array | Uint8Array | Uint16Array | Uint32Array;

/** A tensor as JSON: row-major `shape`, little-endian `data` in standard base64. */
export interface WireTensor {
  readonly dtype: WireDtype;
  readonly shape: readonly number[];
  readonly data: string;
}

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function dtypeOf(array: WireArray): WireDtype {
  for (const [name, ctor] of Object.entries(WIRE_DTYPES)) if (array instanceof ctor) return name as WireDtype;
  throw new Error('tensor: unsupported array type');
}

function byteSwap(bytes: Uint8Array, width: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i += width)
    for (let j = 0; j < width; j++) out[i + j] = bytes[i + width - 1 - j] as number;
  return out;
}

/**
 * Encodes `array` with `shape` (default: 1-D). Every bit survives: float64 log-probs, NaN payloads
 * and −0 round-trip exactly through {@link decodeTensor}.
 *
 * @example
 * ```ts
 * encodeTensor(new Float64Array([-0.5]), [1]); // { dtype: 'F64', shape: [1], data: 'AAAAAAAA4L8=' }
 * ```
 */
export function encodeTensor(array: WireArray, shape: readonly number[] = [array.length]): WireTensor {
  const size = shape.reduce((a, b) => a * b, 1);
  if (size !== array.length)
    throw new Error(`tensor: shape [${shape.join(', ')}] holds ${size} elements, the array ${array.length}`);
  let bytes: Uint8Array = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
  if (!littleEndian && array.BYTES_PER_ELEMENT > 1) bytes = byteSwap(bytes, array.BYTES_PER_ELEMENT);
  return { dtype: dtypeOf(array), shape: [...shape], data: Buffer.from(bytes).toString('base64') };
}

/**
 * Decodes a {@link WireTensor}; throws an error naming `field` when the dtype is unknown, the shape
 * is not a list of non-negative integers, or the data does not hold exactly the shape's bytes.
 */
export function decodeTensor(tensor: WireTensor, field = 'tensor'): WireArray {
  const ctor = Object.hasOwn(WIRE_DTYPES, tensor.dtype) ? WIRE_DTYPES[tensor.dtype] : undefined;
  if (ctor === undefined)
    throw new Error(
      `${field}.dtype: unknown dtype ${JSON.stringify(tensor.dtype)} (known: ${Object.keys(WIRE_DTYPES).join(', ')})`,
    );
  if (!Array.isArray(tensor.shape) || tensor.shape.some((d) => !Number.isInteger(d) || d < 0)) {
    throw new Error(`${field}.shape: expected non-negative integers, got ${JSON.stringify(tensor.shape)}`);
  }
  if (typeof tensor.data !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(tensor.data))
    throw new Error(`${field}.data: not standard base64`);
  const size = tensor.shape.reduce((a, b) => a * b, 1);
  let bytes: Uint8Array<ArrayBuffer> = new Uint8Array(Buffer.from(tensor.data, 'base64'));
  if (bytes.length !== size * ctor.BYTES_PER_ELEMENT) {
    throw new Error(
      `${field}.data: ${bytes.length} bytes for shape [${tensor.shape.join(', ')}] of ${tensor.dtype} (expected ${size * ctor.BYTES_PER_ELEMENT})`,
    );
  }
  if (!littleEndian && ctor.BYTES_PER_ELEMENT > 1) bytes = byteSwap(bytes, ctor.BYTES_PER_ELEMENT);
  return new ctor(bytes.buffer, bytes.byteOffset, size);
}
