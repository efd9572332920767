// Immutability checks of the GEMM's identity-cached operands, on demand: given QuantizedTensors (gemm-caches.ts) and
// Float32Arrays marked with markGemmOperandImmutable (the fp32 kernel keeps their packed panels). Not a cache: with
// checks off (the default) every function here returns at once; with them on it only reads, so no result moves.

import type { QuantizedTensor } from './quant-spec.js';

let checksOn = typeof process !== 'undefined' && process.env.QRL_CHECK_GEMM_CACHES === '1';

/**
 * Turns the immutability check of cached GEMM operands on or off (off by default; QRL_CHECK_GEMM_CACHES=1 turns it
 * on at load). On, every QuantizedTensor given to `gemm` is fingerprinted (a 32-bit FNV-1a of its codes, scales,
 * zero points and global scale) at its first call, and each later call verifies it; so is every Float32Array marked
 * immutable, each time the fp32 kernel reuses its panels: O(elements) per call, so for tests and debugging runs, not
 * for speed. Returns the previous setting. @internal
 *
 * @example
 * ```ts
 * const before = setGemmCacheChecks(true);
 * gemm(out, x, wq, m, n, k);
 * wq.codes[0] ^= 1;              // writing into a cached operand …
 * gemm(out, x, wq, m, n, k);     // … throws: 'gemm: a cached operand changed …'
 * setGemmCacheChecks(before);
 * ```
 */
export function setGemmCacheChecks(on: boolean): boolean {
  const before = checksOn;
  checksOn = on;
  return before;
}

/** Fingerprints of given QuantizedTensors at their first GEMM with checks on. */
const fingerprints = new WeakMap<QuantizedTensor, number>();

/** FNV-1a over the bytes of `x`, continuing from `h`. */
function fnv1a(h: number, x: ArrayBufferView): number {
  const bytes = new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ (bytes[i] as number), 0x01000193) >>> 0;
  return h;
}

function fingerprintOf(q: QuantizedTensor): number {
  let h = fnv1a(0x811c9dc5, q.codes);
  h = fnv1a(h, q.scales);
  if (q.zeroPoints !== undefined) h = fnv1a(h, q.zeroPoints);
  return fnv1a(h, Float64Array.of(q.globalScale ?? 1));
}

/**
 * With checks on: records `q`'s fingerprint at its first sight and throws at a later one where it differs (a cached
 * decoding, a dequantized copy or the "seen" mark of `q` would then be stale). With checks off: nothing.
 */
export function verifyCachedOperand(q: QuantizedTensor): void {
  if (!checksOn) return;
  const now = fingerprintOf(q);
  const then = fingerprints.get(q);
  if (then === undefined) fingerprints.set(q, now);
  else if (then !== now) {
    throw new Error(
      `gemm: a cached operand changed after its first GEMM (QuantizedTensor ${q.shape[0]}×${q.shape[1]} ${q.spec.format}: fingerprint 0x${then.toString(16)} → 0x${now.toString(16)}); ` +
        'a QuantizedTensor is a value: quantize a new one instead of writing into its codes or scales',
    );
  }
}

/** Fingerprints of arrays marked immutable, at their first panel reuse with checks on. */
const arrayFingerprints = new WeakMap<Float32Array, number>();

/**
 * With checks on: records the fingerprint of an array marked immutable (markGemmOperandImmutable) at its first GEMM and
 * throws at a later one where it differs (its kept panels would be stale). With checks off: nothing.
 */
export function verifyImmutableArray(b: Float32Array): void {
  if (!checksOn) return;
  const now = fnv1a(0x811c9dc5, b);
  const then = arrayFingerprints.get(b);
  if (then === undefined) arrayFingerprints.set(b, now);
  else if (then !== now) {
    throw new Error(
      `gemm: a cached operand changed after its first GEMM (Float32Array of ${b.length} marked immutable: fingerprint 0x${then.toString(16)} → 0x${now.toString(16)}); ` +
        'markGemmOperandImmutable promises it is never written again: copy it instead',
    );
  }
}
