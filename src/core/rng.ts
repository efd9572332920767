// Seeded random streams: every random draw in qrl-sim comes from an `Rng` made here.
// Not a cryptographic generator, and never backed by Math.random or the clock.

import seedrandom from 'seedrandom';

/** Serializable state of an {@link Rng}: its path (seed and fork names) and generator state. */
export interface RngState {
  /** The seed path, e.g. `"42/rollout/step-3"`. */
  readonly path: string;
  /** Internal state of the Alea generator (opaque, JSON-safe). */
  readonly alea: object;
}

interface AleaPrng {
  (): number;
  double(): number;
  int32(): number;
  state(): object;
}

type AleaFactory = (seed: string, options: { state: boolean | object }) => AleaPrng;

const alea = (seedrandom as unknown as { alea: AleaFactory }).alea;

/**
 * A named, seeded random stream (Alea over seedrandom).
 *
 * Streams are derived by name with {@link Rng.fork}: a child's sequence depends only on the
 * parent's path and the child's name, never on how many numbers the parent has drawn, so adding
 * a draw in one place does not shift the numbers seen elsewhere.
 *
 * @example
 * ```ts
 * const root = createRng(42);
 * const rollout = root.fork('rollout');
 * const u = rollout.uniform(); // same value for seed 42 on every machine
 * ```
 */
export class Rng {
  /** The seed path of this stream. */
  readonly path: string;
  private readonly prng: AleaPrng;

  /** @internal Use {@link createRng} or {@link Rng.fork}. */
  constructor(path: string, state?: object) {
    this.path = path;
    this.prng = alea(path, { state: state ?? true });
  }

  /** A child stream named `name`; independent of the draws already made from this one. */
  fork(name: string): Rng {
    if (name.length === 0) throw new Error('rng.fork: name must be a non-empty string');
    return new Rng(`${this.path}/${name}`);
  }

  /** Uniform double in [0, 1) with 53 random bits. */
  uniform(): number {
    return this.prng.double();
  }

  /** Uniform double in the open interval (0, 1): zero draws are redrawn. */
  uniformOpen(): number {
    for (;;) {
      const u = this.prng.double();
      if (u > 0) return u;
    }
  }

  /** Uniform unsigned 32-bit integer in [0, 2^32). */
  uint32(): number {
    return this.prng.int32() >>> 0;
  }

  /** Uniform integer in [0, n) for 1 ≤ n ≤ 2^32, without modulo bias. */
  int(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > 2 ** 32) {
      throw new Error(`rng.int: n must be an integer in [1, 2^32], got ${n}`);
    }
    const limit = 2 ** 32 - (2 ** 32 % n);
    for (;;) {
      const x = this.uint32();
      if (x < limit) return x % n;
    }
  }

  /** Standard normal draw (Box–Muller on two open-interval uniforms). */
  normal(): number {
    const u1 = this.uniformOpen();
    const u2 = this.uniform();
    return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }

  /** Fisher–Yates shuffle of `items` in place; returns the same array. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const tmp = items[i] as T;
      items[i] = items[j] as T;
      items[j] = tmp;
    }
    return items;
  }

  /** Snapshot of this stream, restorable with {@link restoreRng}. */
  state(): RngState {
    return { path: this.path, alea: this.prng.state() };
  }
}

/**
 * The root stream for a seed. Seeds may be integers or strings; `createRng(7)` and
 * `createRng('7')` are the same stream.
 */
export function createRng(seed: number | string): Rng {
  if (typeof seed === 'number' && !Number.isFinite(seed)) {
    throw new Error(`rng: seed must be finite, got ${seed}`);
  }
  return new Rng(String(seed));
}

/** Rebuild a stream from {@link Rng.state}; it continues exactly where the snapshot was taken. */
export function restoreRng(state: RngState): Rng {
  return new Rng(state.path, state.alea);
}
