// The few pieces both WebAssembly kernels share: LEB128 and section encoding, the one-function module
// layout (a function and its memory exported), and the typed slice of the WebAssembly JS API. Not a kernel.

/** Unsigned LEB128 (sizes, indices, memarg fields). */
export function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let byte = n & 0x7f;
    n >>>= 7;
    if (n !== 0) byte |= 0x80;
    out.push(byte);
  } while (n !== 0);
  return out;
}

/** Signed LEB128 of a 32-bit integer (i32.const immediates). */
export function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const byte = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (byte & 0x40) === 0) || (n === -1 && (byte & 0x40) !== 0)) {
      out.push(byte);
      return out;
    }
    out.push(byte | 0x80);
  }
}

function str(s: string): number[] {
  return [...uleb(s.length), ...Array.from(new TextEncoder().encode(s))];
}

function section(id: number, body: number[]): number[] {
  return [id, ...uleb(body.length), ...body];
}

/** One function of a {@link wasmModule}: `params` i32 parameters, no result, its encoded body (locals and code, with its size prefix). */
export interface WasmFunctionDef {
  readonly params: number;
  readonly body: number[];
  /** The export name; unset: internal (callable by index from the other functions). */
  readonly name?: string;
}

/**
 * A module of `functions` (function i has index i), one type per distinct parameter count, and one
 * memory of one initial page; exports the named functions and the memory as `mem`.
 */
export function wasmModule(functions: readonly WasmFunctionDef[]): Uint8Array {
  const i32 = 0x7f;
  const arities = [...new Set(functions.map((f) => f.params))];
  const types = arities.flatMap((p) => [0x60, p, ...new Array<number>(p).fill(i32), 0]);
  const exported = functions.flatMap((f, i) => (f.name === undefined ? [] : [...str(f.name), 0x00, ...uleb(i)]));
  const exportCount = functions.filter((f) => f.name !== undefined).length + 1;
  return Uint8Array.from([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(1, [...uleb(arities.length), ...types]),
    ...section(3, [...uleb(functions.length), ...functions.flatMap((f) => uleb(arities.indexOf(f.params)))]),
    ...section(5, [1, 0x00, 1]),
    ...section(7, [...uleb(exportCount), ...exported, ...str('mem'), 0x02, 0]),
    ...section(10, [...uleb(functions.length), ...functions.flatMap((f) => f.body)]),
  ]);
}

/**
 * A module with one function `name` of `params` i32 parameters and no result, whose encoded body
 * (locals and code, with its size prefix) is `body`, and one memory of one initial page; exports the
 * function as `name` and the memory as `mem`.
 */
export function oneFunctionModule(name: string, params: number, body: number[]): Uint8Array {
  return wasmModule([{ name, params, body }]);
}

/** A kernel instance's memory (the project's `lib` has no DOM/WebAssembly typings). @internal */
export interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}

/** The parts of the WebAssembly JS API the kernels use. */
interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: Record<string, unknown> };
}

/** The WebAssembly JS API, or undefined where the runtime has none. */
export const wasmApi = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;

/** A kernel: the exported function of a {@link oneFunctionModule} instance and its memory. @internal */
export interface WasmFunction<F> {
  readonly memory: WasmMemory;
  readonly fn: F;
}

/**
 * The kernel of the module `bytes()` builds, instantiated on the first call and kept: its function
 * `name` and its memory, or null where the runtime has no WebAssembly (SIMD) or the module does not
 * validate.
 * @internal
 */
export function lazyOneFunction<F>(bytes: () => Uint8Array, name: string): () => WasmFunction<F> | null {
  let instance: WasmFunction<F> | null | undefined;
  return () => {
    if (instance !== undefined) return instance;
    try {
      const b = bytes();
      if (wasmApi === undefined || !wasmApi.validate(b)) return (instance = null);
      const inst = new wasmApi.Instance(new wasmApi.Module(b));
      instance = { memory: inst.exports['mem'] as WasmMemory, fn: inst.exports[name] as F };
    } catch {
      instance = null;
    }
    return instance;
  };
}
