// Type declarations for the one function of `ndarray-ops` qrl-sim uses (the package ships none).
// Not a full typing of the package.

declare module 'ndarray-ops' {
  import type ndarray from 'ndarray';
  /** Copies `src` into `dst` element by element, whatever their strides. */
  export function assign(dst: ndarray.NdArray<any>, src: ndarray.NdArray<any>): void;
}
