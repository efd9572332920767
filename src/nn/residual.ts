// Residual connection out = a + b (forward/backward).
// Not a scaled or gated residual.

import type { FloatArray } from './array.js';

/**
 * Residual forward (llm.c `residual_forward`): `out = a + b`.
 *
 * @param out - (n)
 * @param a - (n)
 * @param b - (n)
 */
export function residualForward(out: FloatArray, a: FloatArray, b: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) out[i] = a[i]! + b[i]!;
}

/**
 * Residual backward, accumulating: `da += dout`, `db += dout`.
 *
 * @param da - (n) accumulated
 * @param db - (n) accumulated
 * @param dout - (n)
 */
export function residualBackward(da: FloatArray, db: FloatArray, dout: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) {
    da[i] = da[i]! + dout[i]!;
    db[i] = db[i]! + dout[i]!;
  }
}
