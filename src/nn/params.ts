// Flat parameter store: one Float32Array of FP32 master weights with named views, a matching
// gradient buffer, seeded GPT-2-style initialization and JSON-safe serialization. Not an optimizer.

import { createRng, type Rng } from '../core/rng.js';
import type { FloatArray } from './array.js';
import { rngStreams } from '../core/rng-streams.js';

/** How a parameter is initialized. */
export type ParamInit =
  | { readonly kind: 'normal'; readonly std: number }
  | { readonly kind: 'constant'; readonly value: number };

/** Declaration of one named parameter tensor. */
export interface ParamSpec {
  /** Unique name, e.g. `"h0.attn.wq"`. */
  readonly name: string;
  /** Row-major shape, e.g. `[OC, C]`. */
  readonly shape: readonly number[];
  /** Initialization rule. */
  readonly init: ParamInit;
}

/** Where a named parameter lives inside the flat buffer. */
export interface ParamEntry extends ParamSpec {
  /** First element in the flat buffer. */
  readonly offset: number;
  /** Number of elements (product of the shape). */
  readonly size: number;
}

/**
 * Layout of named tensors in one flat buffer, independent of the buffer's element type (the
 * gradient checks lay out the same parameters in a Float64Array).
 */
export class ParamLayout {
  /** Entries in declaration order (which is also buffer order). */
  readonly entries: readonly ParamEntry[];
  /** Total number of elements. */
  readonly size: number;
  private readonly byName: ReadonlyMap<string, ParamEntry>;

  /** Lays out `specs` contiguously in declaration order. */
  constructor(specs: readonly ParamSpec[]) {
    const entries: ParamEntry[] = [];
    const byName = new Map<string, ParamEntry>();
    let offset = 0;
    for (const s of specs) {
      if (byName.has(s.name)) throw new Error(`params: duplicate name ${JSON.stringify(s.name)}`);
      if (s.shape.length === 0 || s.shape.some((d) => !Number.isInteger(d) || d < 1)) {
        throw new Error(`params: shape of ${s.name} must be positive integers, got [${s.shape.join(', ')}]`);
      }
      const size = s.shape.reduce((a, b) => a * b, 1);
      const e: ParamEntry = { name: s.name, shape: [...s.shape], init: s.init, offset, size };
      entries.push(e);
      byName.set(s.name, e);
      offset += size;
    }
    this.entries = entries;
    this.size = offset;
    this.byName = byName;
  }

  /** The entry called `name`; throws if there is none. */
  entry(name: string): ParamEntry {
    const e = this.byName.get(name);
    if (!e) throw new Error(`params: no parameter named ${JSON.stringify(name)}`);
    return e;
  }

  /** Whether a parameter called `name` exists. */
  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** The view of parameter `name` inside `buffer` (no copy). */
  view<A extends FloatArray>(buffer: A, name: string): A {
    const e = this.entry(name);
    return buffer.subarray(e.offset, e.offset + e.size) as A;
  }

  /** Names of the 2-D weights (the tensors AdamW decays), in buffer order. */
  weights2d(): string[] {
    return this.entries.filter((e) => e.shape.length === 2).map((e) => e.name);
  }

  /**
   * Writes the initial values into `buffer`. Each tensor draws from its own stream
   * `rng.fork(name)`, so adding a parameter does not change the others' values.
   */
  initialize(buffer: FloatArray, rng: Rng): void {
    for (const e of this.entries) {
      const r = rng.fork(rngStreams.params.tensor(e.name));
      for (let i = 0; i < e.size; i++) {
        buffer[e.offset + i] = e.init.kind === 'normal' ? e.init.std * r.normal() : e.init.value;
      }
    }
  }
}

/** JSON-safe form of a {@link ParamStore} (values are exact: float32 → double → JSON round-trips). */
export interface ParamStoreJson {
  /** The parameter declarations, in buffer order. */
  readonly specs: ParamSpec[];
  /** The master weights. */
  readonly data: number[];
}

/**
 * One flat Float32Array of FP32 master weights with named views and a gradient buffer of the same
 * layout.
 *
 * @example
 * ```ts
 * const store = createParamStore([{ name: 'w', shape: [4, 8], init: { kind: 'normal', std: 0.02 } }], 42);
 * const w = store.param('w'); // Float32Array view (4·8)
 * store.grad('w')[0] += 1;
 * ```
 */
export class ParamStore {
  /** Names, offsets and shapes. */
  readonly layout: ParamLayout;
  /** (size) FP32 master weights. */
  readonly data: Float32Array;
  /** (size) gradients, same layout. */
  readonly grads: Float32Array;

  /** Wraps existing buffers (use {@link createParamStore} to make and initialize one). */
  constructor(layout: ParamLayout, data?: Float32Array) {
    if (data && data.length !== layout.size)
      throw new Error(`params: data length must be ${layout.size}, got ${data.length}`);
    this.layout = layout;
    this.data = data ?? new Float32Array(layout.size);
    this.grads = new Float32Array(layout.size);
  }

  /** View of the weights of `name`. */
  param(name: string): Float32Array {
    return this.layout.view(this.data, name);
  }

  /** View of the gradient of `name`. */
  grad(name: string): Float32Array {
    return this.layout.view(this.grads, name);
  }

  /** View of the weights of `name`, or null when there is no such parameter (for optional biases). */
  paramOrNull(name: string): Float32Array | null {
    return this.layout.has(name) ? this.param(name) : null;
  }

  /** View of the gradient of `name`, or null when there is no such parameter. */
  gradOrNull(name: string): Float32Array | null {
    return this.layout.has(name) ? this.grad(name) : null;
  }

  /** Sets every gradient to 0. */
  zeroGrad(): void {
    this.grads.fill(0);
  }

  /** Names of the 2-D weights (decayed by AdamW). */
  weights2d(): string[] {
    return this.layout.weights2d();
  }

  /** JSON-safe snapshot of the specs and weights (gradients are not saved). */
  toJSON(): ParamStoreJson {
    return {
      specs: this.layout.entries.map(({ name, shape, init }) => ({ name, shape: [...shape], init })),
      data: Array.from(this.data),
    };
  }

  /** Rebuilds a store from {@link ParamStore.toJSON}; values are restored bit for bit. */
  static fromJSON(json: ParamStoreJson): ParamStore {
    const layout = new ParamLayout(json.specs);
    if (json.data.length !== layout.size)
      throw new Error(`params: data length must be ${layout.size}, got ${json.data.length}`);
    return new ParamStore(layout, Float32Array.from(json.data));
  }
}

/**
 * A store laid out from `specs` and initialized from `createRng(seed).fork('init')`.
 */
export function createParamStore(specs: readonly ParamSpec[], seed: number | string): ParamStore {
  const store = new ParamStore(new ParamLayout(specs));
  store.layout.initialize(store.data, createRng(seed).fork(rngStreams.params.init));
  return store;
}

/** GPT-2 initialization constants (nanoGPT `_init_weights`). */
export const GPT2_INIT = Object.freeze({
  /** std of every weight matrix and embedding. */
  std: 0.02,
  /** std of a residual projection (attention output, MLP down) in a model with `nLayer` blocks. */
  residualStd: (nLayer: number): number => 0.02 / Math.sqrt(2 * nLayer),
});
