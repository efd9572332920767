// Number formats as data: one record per format with its derived constants, and generic decode.
// Not rounding or casting (see round.ts and vector.ts) and never a per-format code path.

/** How a float format spends its codes on NaN. */
export type NanEncoding =
  /** Exponent all ones with a non-zero mantissa is NaN, mantissa zero is ±Inf (IEEE 754). */
  | 'ieee'
  /** Only the code with exponent and mantissa all ones is NaN (OCP E4M3, E8M0). */
  | 'all-ones'
  /** The negative-zero code 0b1000…0 is the single NaN ("fnuz" formats). */
  | 'neg-zero'
  /** No NaN at all (OCP FP6, FP4). */
  | 'none';

/** Names of the float formats qrl-sim emulates. */
export type FloatFormatName =
  | 'e4m3fn'
  | 'e4m3fnuz'
  | 'e5m2'
  | 'e5m2fnuz'
  | 'e3m2'
  | 'e2m3'
  | 'e2m1'
  | 'e8m0'
  | 'bf16'
  | 'fp16'
  | 'tf32'
  | 'fp32';

/** Names of the integer formats. */
export type IntFormatName = 'int8' | 'uint8' | 'int4' | 'uint4';

/** The defining fields of a float format (what a user writes to add a format). */
export interface FloatFormatSpec {
  readonly kind: 'float';
  readonly name: string;
  /** Total width in bits (sign + exponent + mantissa). */
  readonly bits: number;
  readonly expBits: number;
  readonly manBits: number;
  readonly bias: number;
  /** Whether there is a sign bit (E8M0 has none). */
  readonly signed: boolean;
  readonly hasInf: boolean;
  readonly nanEncoding: NanEncoding;
  readonly hasNegZero: boolean;
  /**
   * Whether exponent field 0 encodes subnormals (2^(1−bias)·M/2^m). When false, exponent 0 is an
   * ordinary binade 2^(−bias)·(1 + M/2^m) and the format has no zero (E8M0).
   */
  readonly hasSubnormals: boolean;
  /** One line: what the format is and where it is used. */
  readonly description: string;
}

/** A float format with the constants derived from its spec. */
export interface FloatFormat extends FloatFormatSpec {
  /** Number of distinct codes, 2^bits. */
  readonly codeCount: number;
  /** Unbiased exponent of the smallest normal binade (1 − bias, or −bias without subnormals). */
  readonly emin: number;
  /** Unbiased exponent of the largest finite binade. */
  readonly emax: number;
  readonly maxFinite: number;
  readonly minNormal: number;
  /** Smallest positive value (equals `minNormal` when there are no subnormals). */
  readonly minSubnormal: number;
  /** Code of +maxFinite. */
  readonly maxCode: number;
  /** Mask of the sign bit (0 for unsigned formats). */
  readonly signMask: number;
  /** Code of +Inf, or null. */
  readonly infCode: number | null;
  /**
   * NaN codes, ascending: all of them for formats of at most 8 bits; for the wide IEEE formats
   * (bf16, fp16, tf32, fp32) a representative set. Test a code with {@link isNanCode}.
   */
  readonly nanCodes: readonly number[];
  /** Whether the format has a zero. */
  readonly hasZero: boolean;
}

/** An integer format (two's complement or unsigned). */
export interface IntFormat {
  readonly kind: 'int';
  readonly name: IntFormatName;
  readonly bits: number;
  readonly signed: boolean;
  readonly min: number;
  readonly max: number;
  readonly description: string;
}

const pow2 = (e: number): number => 2 ** e;

function isNanFields(spec: FloatFormatSpec, sign: number, e: number, m: number): boolean {
  const eAll = pow2(spec.expBits) - 1;
  const mAll = pow2(spec.manBits) - 1;
  switch (spec.nanEncoding) {
    case 'ieee':
      return e === eAll && m !== 0;
    case 'all-ones':
      return e === eAll && m === mAll;
    case 'neg-zero':
      return sign === 1 && e === 0 && m === 0;
    case 'none':
      return false;
  }
}

function fieldsOf(spec: FloatFormatSpec, code: number): { sign: number; e: number; m: number } {
  const magBits = spec.signed ? spec.bits - 1 : spec.bits;
  const sign = spec.signed ? Math.floor(code / pow2(magBits)) : 0;
  const rest = code % pow2(magBits);
  return { sign, e: Math.floor(rest / pow2(spec.manBits)), m: rest % pow2(spec.manBits) };
}

function decodeFields(spec: FloatFormatSpec, sign: number, e: number, m: number): number {
  if (isNanFields(spec, sign, e, m)) return Number.NaN;
  const s = sign === 1 ? -1 : 1;
  if (spec.hasInf && e === pow2(spec.expBits) - 1 && m === 0) return s * Infinity;
  if (e === 0 && spec.hasSubnormals) return s * pow2(1 - spec.bias) * (m / pow2(spec.manBits));
  return s * pow2(e - spec.bias) * (1 + m / pow2(spec.manBits));
}

/** Derives a {@link FloatFormat} from its spec (validates the spec). */
export function defineFloatFormat(spec: FloatFormatSpec): FloatFormat {
  const { bits, expBits, manBits, signed } = spec;
  if (bits !== (signed ? 1 : 0) + expBits + manBits) {
    throw new Error(`format ${spec.name}: bits ${bits} ≠ sign + expBits + manBits`);
  }
  if (!spec.hasSubnormals && manBits !== 0) {
    throw new Error(`format ${spec.name}: formats without subnormals must have manBits 0`);
  }
  if (!signed && spec.hasNegZero) throw new Error(`format ${spec.name}: unsigned formats have no −0`);
  const codeCount = pow2(bits);
  const signMask = signed ? pow2(bits - 1) : 0;
  const eAll = pow2(expBits) - 1;
  const mAll = pow2(manBits) - 1;
  // Largest finite code: the top binade unless it is reserved for Inf/NaN, the top mantissa
  // unless that one code is NaN.
  const topReserved = spec.nanEncoding === 'ieee' || spec.hasInf || (spec.nanEncoding === 'all-ones' && manBits === 0);
  const maxE = topReserved ? eAll - 1 : eAll;
  const maxM = spec.nanEncoding === 'all-ones' && !topReserved ? mAll - 1 : mAll;
  const maxCode = maxE * pow2(manBits) + maxM;
  const maxFinite = decodeFields(spec, 0, maxE, maxM);
  const minSubnormal = spec.hasSubnormals ? decodeFields(spec, 0, 0, 1) : decodeFields(spec, 0, 0, 0);
  const nanCodes: number[] = [];
  let infCode: number | null = null;
  // Enumerate by fields rather than by code so that 32-bit formats stay cheap.
  for (const sign of signed ? [0, 1] : [0]) {
    for (const e of [0, eAll]) {
      for (const m of manBits > 4 ? [0, 1, pow2(manBits - 1), pow2(manBits) - 1] : range(pow2(manBits))) {
        const code = sign * signMask + e * pow2(manBits) + m;
        const value = decodeFields(spec, sign, e, m);
        if (Number.isNaN(value)) nanCodes.push(code);
        else if (value === Infinity) infCode = code;
      }
    }
  }
  const emin = spec.hasSubnormals ? 1 - spec.bias : -spec.bias;
  return {
    ...spec,
    codeCount,
    emin,
    emax: exponentOf(maxFinite),
    maxFinite,
    minNormal: pow2(emin),
    minSubnormal,
    maxCode,
    signMask,
    infCode,
    nanCodes: [...new Set(nanCodes)].sort((a, b) => a - b),
    hasZero: spec.hasSubnormals,
  };
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

/**
 * Decodes one code of `format` to its exact value (a JS number; NaN for NaN codes).
 *
 * @example
 * ```ts
 * decode(floatFormats.e4m3fn, 0x7e); // 448
 * ```
 */
export function decode(format: FloatFormatSpec, code: number): number {
  const { sign, e, m } = fieldsOf(format, code);
  return decodeFields(format, sign, e, m);
}

/** Whether `code` is a NaN code of `format`. */
export function isNanCode(format: FloatFormatSpec, code: number): boolean {
  const { sign, e, m } = fieldsOf(format, code);
  return isNanFields(format, sign, e, m);
}

/**
 * Code of an exactly representable value of `format` with the given sign; `magnitude` must be
 * 0 (for formats with a zero) or a finite value of the format, else this throws.
 */
export function encodeExact(format: FloatFormat, negative: boolean, magnitude: number): number {
  const sign = negative && format.signed ? format.signMask : 0;
  if (magnitude === 0) {
    if (!format.hasZero) throw new Error(`format ${format.name} has no zero`);
    return sign;
  }
  const e = Math.max(exponentOf(magnitude), format.emin);
  const fieldE = format.hasSubnormals && magnitude < format.minNormal ? 0 : e + format.bias;
  const scaled = magnitude / pow2(e - format.manBits);
  const m = fieldE === 0 && format.hasSubnormals ? scaled : scaled - pow2(format.manBits);
  if (!Number.isInteger(m) || m < 0 || m >= pow2(format.manBits) || magnitude > format.maxFinite) {
    throw new Error(`${magnitude} is not a finite value of ${format.name}`);
  }
  return sign + fieldE * pow2(format.manBits) + m;
}

const f64 = new Float64Array(1);
const u32of64 = new Uint32Array(f64.buffer);

/** floor(log2(|x|)) for finite non-zero x, exact (read from the float64 exponent field). */
export function exponentOf(x: number): number {
  f64[0] = x;
  const hi = u32of64[1] as number;
  const biased = (hi >>> 20) & 0x7ff;
  if (biased !== 0) return biased - 1023;
  // float64 subnormal: normalise first.
  return exponentOf(x * 2 ** 64) - 64;
}

/** Whether the sign bit of `x` is set (works for −0 and, on V8, for negative NaNs). */
export function signBit(x: number): boolean {
  f64[0] = x;
  return (u32of64[1] as number) >>> 31 === 1;
}

/** The families of formats that share every field but the widths: bias 2^(e−1) − 1 unless FNUZ (2^(e−1)). */
type Family = 'ieee' | 'ocp-mx' | 'fnuz';

/** A signed format of `family` with `expBits` e and `manBits` m: 1 + e + m bits. */
function familyFormat(
  family: Family,
  name: FloatFormatName,
  widths: { readonly expBits: number; readonly manBits: number },
  description: string,
): FloatFormatSpec {
  const { expBits, manBits } = widths;
  const ieee = family === 'ieee';
  return {
    kind: 'float',
    name,
    bits: 1 + expBits + manBits,
    expBits,
    manBits,
    bias: 2 ** (expBits - 1) - (family === 'fnuz' ? 0 : 1),
    signed: true,
    hasInf: ieee,
    nanEncoding: ieee ? 'ieee' : family === 'fnuz' ? 'neg-zero' : 'none',
    hasNegZero: family !== 'fnuz',
    hasSubnormals: true,
    description,
  };
}

const floatSpecs: Record<FloatFormatName, FloatFormatSpec> = {
  e4m3fn: {
    kind: 'float',
    name: 'e4m3fn',
    bits: 8,
    expBits: 4,
    manBits: 3,
    bias: 7,
    signed: true,
    hasInf: false,
    nanEncoding: 'all-ones',
    hasNegZero: true,
    hasSubnormals: true,
    description: 'OCP FP8 E4M3: max 448 = 0b0_1111_110 = 1.75·2^8, NaN only S.1111.111, no Inf',
  },
  e4m3fnuz: familyFormat(
    'fnuz',
    'e4m3fnuz',
    { expBits: 4, manBits: 3 },
    'FP8 E4M3 FNUZ (AMD MI300): max 240 = 0b0_1111_111 = 1.875·2^7, NaN = 0x80, no −0',
  ),
  e5m2: familyFormat(
    'ieee',
    'e5m2',
    { expBits: 5, manBits: 2 },
    'OCP FP8 E5M2: max 57344 = 0b0_11110_11 = 1.75·2^15, Inf 0x7C, NaN S.11111.{01,10,11}',
  ),
  e5m2fnuz: familyFormat(
    'fnuz',
    'e5m2fnuz',
    { expBits: 5, manBits: 2 },
    'FP8 E5M2 FNUZ: max 57344 = 0b0_11111_11 = 1.75·2^15, NaN = 0x80, no −0',
  ),
  e3m2: familyFormat(
    'ocp-mx',
    'e3m2',
    { expBits: 3, manBits: 2 },
    'OCP MX FP6 E3M2: max 28 = 0b0_111_11 = 1.75·2^4, no Inf/NaN',
  ),
  e2m3: familyFormat(
    'ocp-mx',
    'e2m3',
    { expBits: 2, manBits: 3 },
    'OCP MX FP6 E2M3: max 7.5 = 0b0_11_111 = 1.875·2^2, no Inf/NaN',
  ),
  e2m1: familyFormat(
    'ocp-mx',
    'e2m1',
    { expBits: 2, manBits: 1 },
    'OCP MX FP4 E2M1 (MXFP4/NVFP4 element): values 0, .5, 1, 1.5, 2, 3, 4, 6; no Inf/NaN',
  ),
  e8m0: {
    kind: 'float',
    name: 'e8m0',
    bits: 8,
    expBits: 8,
    manBits: 0,
    bias: 127,
    signed: false,
    hasInf: false,
    nanEncoding: 'all-ones',
    hasNegZero: false,
    hasSubnormals: false,
    description: 'OCP E8M0 (UE8M0) MX scale: 2^(E−127), 0x00 = 2^-127, 0xFF = NaN, no zero, no sign',
  },
  bf16: familyFormat(
    'ieee',
    'bf16',
    { expBits: 8, manBits: 7 },
    'bfloat16: fp32 range with 8 significant bits; max (2−2^-7)·2^127',
  ),
  fp16: familyFormat('ieee', 'fp16', { expBits: 5, manBits: 10 }, 'IEEE binary16: max 65504 = 0b0_11110_1111111111'),
  tf32: familyFormat(
    'ieee',
    'tf32',
    { expBits: 8, manBits: 10 },
    'NVIDIA TF32 tensor-core input: fp32 range, 10 mantissa bits (19-bit code here)',
  ),
  fp32: familyFormat('ieee', 'fp32', { expBits: 8, manBits: 23 }, 'IEEE binary32'),
};

/** Every float format, by name (frozen). */
export const floatFormats: Readonly<Record<FloatFormatName, FloatFormat>> = Object.freeze(
  Object.fromEntries(
    Object.entries(floatSpecs).map(([name, spec]) => [name, Object.freeze(defineFloatFormat(spec))]),
  ) as Record<FloatFormatName, FloatFormat>,
);

/** Every integer format, by name (frozen). */
export const intFormats: Readonly<Record<IntFormatName, IntFormat>> = Object.freeze({
  int8: {
    kind: 'int',
    name: 'int8',
    bits: 8,
    signed: true,
    min: -128,
    max: 127,
    description: "two's complement 8-bit",
  },
  uint8: { kind: 'int', name: 'uint8', bits: 8, signed: false, min: 0, max: 255, description: 'unsigned 8-bit' },
  int4: { kind: 'int', name: 'int4', bits: 4, signed: true, min: -8, max: 7, description: "two's complement 4-bit" },
  uint4: { kind: 'int', name: 'uint4', bits: 4, signed: false, min: 0, max: 15, description: 'unsigned 4-bit' },
});

/** Looks up a float format by name; throws an error naming the known formats otherwise. */
export function floatFormat(name: string): FloatFormat {
  const format = (floatFormats as Record<string, FloatFormat>)[name];
  if (format === undefined) {
    throw new Error(`unknown float format '${name}' (known: ${Object.keys(floatFormats).join(', ')})`);
  }
  return format;
}
