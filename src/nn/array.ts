// Array type shared by the neural-network layers: FloatArray (Float32Array or Float64Array) and helpers.
// Not a tensor library: no shapes or strides are stored; every layer receives its sizes explicitly.

/**
 * The element storage every layer works on. A layer's outputs and caches have the type of its
 * inputs, so the same code runs in float32 (the simulator) and float64 (the gradient checks).
 * Arithmetic is done in JS doubles and rounded once when stored into the typed array.
 */
export type FloatArray = Float32Array | Float64Array;

/**
 * A zero-filled array of the same element type as `like`, with `n` elements.
 *
 * @example
 * ```ts
 * const y = allocLike(new Float64Array(3), 6); // Float64Array(6)
 * ```
 */
export function allocLike(like: FloatArray, n: number): FloatArray {
  return like instanceof Float32Array ? new Float32Array(n) : new Float64Array(n);
}

/**
 * Transpose of a row-major `rows × cols` matrix into `out` (`cols × rows`).
 * Used to express every matrix product as `A · Bᵀ` for a {@link GemmFn}.
 */
export function transpose(out: FloatArray, a: FloatArray, rows: number, cols: number): void {
  // out: (cols, rows), a: (rows, cols)
  for (let r = 0; r < rows; r++) {
    const ar = r * cols;
    for (let c = 0; c < cols; c++) out[c * rows + r] = a[ar + c]!;
  }
}

/** Throws unless `a` has at least `n` elements; `what` names the argument in the message. */
export function checkLength(what: string, a: ArrayLike<number>, n: number): void {
  if (a.length < n) throw new Error(`${what}: expected at least ${n} elements, got length ${a.length}`);
}

/** Throws unless `v` is a positive integer; `what` names the size in the message. */
export function checkSize(what: string, v: number): void {
  if (!Number.isInteger(v) || v < 1) throw new Error(`${what} must be a positive integer, got ${v}`);
}
