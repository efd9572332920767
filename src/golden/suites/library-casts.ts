// The `library-casts` golden suite: the cast profiles named after a library that runs here (torch,
// ml_dtypes, onnxruntime), each covered format, on a dense input set (every bf16 bit pattern and
// every tie between bf16 neighbours, float32 subnormals, random float32 bit patterns, specials).
// python/qrl_golden/library_casts.py casts the same inputs with the real library and compares.

import { floatFormats, type FloatFormatName } from '../../numerics/formats.js';
import { castProfile, type CastProfileName } from '../../numerics/profiles.js';
import { scalarEncoder } from '../../numerics/round.js';
import { allocCodes } from '../../numerics/vector.js';
import { createRng } from '../../core/rng.js';
import { tensor } from '../write.js';
import type { GoldenCase, GoldenSuite } from '../types.js';
import { castInputs } from './casts.js';
import { rngStreams } from '../../core/rng-streams.js';

/** Float32 subnormals sampled (each with both signs). */
const SUBNORMALS = 2048;
/** Random float32 bit patterns (any sign, exponent, NaN payloads included). */
const RANDOM = 8192;

/**
 * The profiles named after a library that the project's Python environment installs, and the
 * library each reproduces: the rows of the cast agreement table in docs/numerics.md.
 */
export const libraryCastProfiles: Readonly<Partial<Record<CastProfileName, string>>> = Object.freeze({
  'torch-2.13': 'torch 2.13 Tensor.to',
  'torch-2.13-scalar': 'torch 2.13 Tensor.to, scalar CPU kernel',
  'torch-2.11': 'torch 2.11 Tensor.to',
  'ml-dtypes': 'ml_dtypes 0.6 astype',
  'ort-1.30': 'onnxruntime 1.30 Cast saturate=0',
  'onnx-sat': 'onnxruntime 1.30 Cast saturate=1',
});

/** Float32 specials as bit patterns: ±0, ±Inf, NaNs of both signs with several payloads. */
const SPECIALS = [
  0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff,
  0xffffffff, 0x7fa00000, 0xffa00000, 0x7fc00001, 0xffc00001, 0x7fbfffff, 0x7f808000,
];

/** The shared inputs: every bf16 pattern, every bf16 tie (pattern + half a bf16 ulp), subnormals, random patterns, specials. */
function denseInputs(seed: number): Uint32Array {
  const rng = createRng(seed).fork(rngStreams.golden.libraryCasts);
  const out = new Uint32Array(2 * 65536 + 2 * SUBNORMALS + RANDOM + SPECIALS.length);
  let n = 0;
  for (let p = 0; p < 65536; p++) {
    out[n++] = (p << 16) >>> 0;
    out[n++] = ((p << 16) | 0x8000) >>> 0;
  }
  for (let i = 0; i < SUBNORMALS; i++) {
    const m = 1 + rng.int(0x7fffff);
    out[n++] = m;
    out[n++] = (0x80000000 | m) >>> 0;
  }
  for (let i = 0; i < RANDOM; i++) out[n++] = rng.uint32();
  for (const s of SPECIALS) out[n++] = s >>> 0;
  return out;
}

function libraryCastCase(
  profileName: CastProfileName,
  formatName: FloatFormatName,
  dense: Uint32Array,
  seed: number,
): GoldenCase {
  const format = floatFormats[formatName];
  // the format's own codes, ties ±1 ulp and overflow edges (the casts suite's inputs) after the dense set
  const own = new Uint32Array(castInputs(format, createRng(seed).fork(rngStreams.golden.casts(format.name))).buffer);
  const bits = new Uint32Array(dense.length + own.length);
  bits.set(dense);
  bits.set(own, dense.length);
  const inputs = new Float32Array(bits.buffer);
  const encoder = scalarEncoder(format, profileName, 'rne');
  const codes = allocCodes(format, inputs.length);
  // The float32 → double load keeps a NaN's sign bit (see casts.ts).
  for (let i = 0; i < inputs.length; i++) codes[i] = encoder(inputs[i] as number);
  return {
    name: `${format.name}.${profileName}`,
    description: `${format.name} under cast profile ${profileName} (rne), the behaviour of ${libraryCastProfiles[profileName]}: ${inputs.length} float32 inputs (every bf16 pattern and bf16 tie, ${2 * SUBNORMALS} subnormals, ${RANDOM} random patterns, specials, the format's codes and ties ±1 ulp)`,
    params: {
      format: format.name,
      profile: profileName,
      mode: 'rne',
      bits: format.bits,
      library: libraryCastProfiles[profileName],
    },
    tensors: {
      input: tensor('input', inputs, 'bitwise'),
      codes: tensor('expected', codes, 'bitwise'),
    },
  };
}

/** Every library-named profile × covered format, rne, on the dense inputs. */
export const libraryCastsSuite: GoldenSuite = {
  name: 'library-casts',
  description:
    'float32 → format codes under every cast profile named after an installed library (torch, ml_dtypes, onnxruntime), on every bf16 pattern and tie, subnormals, random patterns and specials',
  cases(seed) {
    const dense = denseInputs(seed);
    const out: GoldenCase[] = [];
    for (const name of Object.keys(libraryCastProfiles) as CastProfileName[]) {
      for (const format of Object.keys(castProfile(name).formats) as FloatFormatName[])
        out.push(libraryCastCase(name, format, dense, seed));
    }
    return out;
  },
};
