// Tests of the mixture-of-experts layer: finite-difference gradients (router through the gates,
// experts, input, load-balancing loss), replay equivalence, top-k ties and the flip-rate diagnostic.

import { describe, expect, it } from 'vitest';
import { fc, test } from '@fast-check/vitest';
import {
  createMoeCache,
  moeAuxLoss,
  moeBackward,
  moeForward,
  routingFlipRate,
  topKExperts,
  type MoeConfig,
  type MoeWeights,
} from '../../src/nn/moe.js';
import type { MlpKind } from '../../src/nn/mlp.js';
import { dotProbe, expectGradClose, randn, rngFor } from './gradcheck.js';
import type { Rng } from '../../src/core/rng.js';

function weights(r: Rng, E: number, C: number, Hd: number, kind: MlpKind, zero = false): MoeWeights {
  const t = (n: number): Float64Array => (zero ? new Float64Array(n) : randn(r, n, 0.7));
  return {
    router: t(E * C),
    experts: Array.from({ length: E }, () => ({
      up: t(Hd * C),
      upBias: null,
      gate: kind === 'swiglu' ? t(Hd * C) : null,
      gateBias: null,
      down: t(C * Hd),
      downBias: null,
    })),
  };
}

const RUNS = { numRuns: 15 };

describe('moe layer', () => {
  test.prop(
    [
      fc.integer({ min: 1, max: 5 }),
      fc.integer({ min: 1, max: 4 }),
      fc.integer({ min: 1, max: 4 }),
      fc.integer({ min: 1, max: 4 }),
      fc.constantFrom<MlpKind>('gelu', 'swiglu'),
      fc.double({ min: 0, max: 0.5, noNaN: true }),
      fc.nat(),
    ],
    RUNS,
  )(
    'gradients of input, router and every expert (routing held fixed), with the aux loss',
    (N, C, E, kRaw, kind, alpha, seed) => {
      const k = Math.min(kRaw, E);
      const cfg: MoeConfig = { experts: E, topK: k, kind };
      const Hd = 3;
      const r = rngFor(seed, 'moe');
      const x = randn(r, N * C);
      const w = weights(r, E, C, Hd, kind);
      const R = randn(r, N * C);
      const out = new Float64Array(N * C);
      const cache = createMoeCache(x, N, cfg);
      moeForward(out, cache, x, w, N, C, Hd, cfg);
      const routing = cache.routing.slice();
      const loss = (): number => {
        const c = createMoeCache(x, N, cfg);
        moeForward(out, c, x, w, N, C, Hd, cfg, undefined, routing);
        return dotProbe(out, R) + alpha * moeAuxLoss(c, N, cfg);
      };
      loss();
      const dx = new Float64Array(N * C);
      const g = weights(r, E, C, Hd, kind, true);
      moeBackward(dx, g, R, cache, x, w, N, C, Hd, cfg, undefined, alpha);
      expectGradClose('dx', x, dx, loss);
      expectGradClose('drouter', w.router as Float64Array, g.router, loss);
      w.experts.forEach((we, e) => {
        expectGradClose(`dup${e}`, we.up as Float64Array, g.experts[e]!.up, loss);
        expectGradClose(`ddown${e}`, we.down as Float64Array, g.experts[e]!.down, loss);
        if (kind === 'swiglu')
          expectGradClose(`dgate${e}`, we.gate as Float64Array, g.experts[e]!.gate as Float64Array, loss);
      });
    },
  );

  test.prop([fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 5 }), fc.nat()], RUNS)(
    'replaying a pass’s own routing reproduces it bit for bit (float32)',
    (N, E, seed) => {
      const cfg: MoeConfig = { experts: E, topK: Math.min(2, E), kind: 'swiglu' };
      const C = 4;
      const Hd = 5;
      const r = rngFor(seed, 'moe-replay');
      const x = Float32Array.from(randn(r, N * C));
      const w64 = weights(r, E, C, Hd, 'swiglu');
      const w: MoeWeights = {
        router: Float32Array.from(w64.router),
        experts: w64.experts.map((e) => ({
          ...e,
          up: Float32Array.from(e.up),
          gate: Float32Array.from(e.gate!),
          down: Float32Array.from(e.down),
        })),
      };
      const a = new Float32Array(N * C);
      const ca = createMoeCache(x, N, cfg);
      moeForward(a, ca, x, w, N, C, Hd, cfg);
      const b = new Float32Array(N * C);
      const cb = createMoeCache(x, N, cfg);
      moeForward(b, cb, x, w, N, C, Hd, cfg, undefined, ca.routing.slice());
      expect(Array.from(b).map((v, i) => Object.is(v, a[i]))).not.toContain(false);
      expect(Array.from(cb.gates)).toEqual(Array.from(ca.gates));
    },
  );

  it('uniform router: the aux loss is 1 and the gates split evenly', () => {
    const cfg: MoeConfig = { experts: 4, topK: 2, kind: 'gelu' };
    const N = 4;
    const x = new Float64Array(N * 2).fill(1);
    const w = weights(rngFor(1, 'u'), 4, 2, 2, 'gelu');
    (w.router as Float64Array).fill(0);
    const cache = createMoeCache(x, N, cfg);
    moeForward(new Float64Array(N * 2), cache, x, w, N, 2, 2, cfg);
    // Ties rank by the lower index: every token picks experts 0 and 1.
    expect(Array.from(cache.routing)).toEqual([0, 1, 0, 1, 0, 1, 0, 1]);
    expect(Array.from(cache.gates)).toEqual(new Array(8).fill(0.5));
    // f = (1/2, 1/2, 0, 0), P = 1/4 each: L = 4·(1/2·1/4 + 1/2·1/4) = 1.
    expect(moeAuxLoss(cache, N, cfg)).toBe(1);
  });

  it('top-k ranks by probability, ties by the lower index', () => {
    const out = new Int32Array(3);
    topKExperts([0.1, 0.3, 0.3, 0.2, 0.1], 0, 5, 3, out, 0);
    expect(Array.from(out)).toEqual([1, 2, 3]);
  });

  it('rejects a replay that names an unknown or repeated expert', () => {
    const cfg: MoeConfig = { experts: 3, topK: 2, kind: 'gelu' };
    const w = weights(rngFor(2, 'r'), 3, 2, 2, 'gelu');
    const x = new Float64Array(2);
    const run = (replay: number[]) => () =>
      moeForward(
        new Float64Array(2),
        createMoeCache(x, 1, cfg),
        x,
        w,
        1,
        2,
        2,
        cfg,
        undefined,
        Int32Array.from(replay),
      );
    expect(run([0, 3])).toThrow('replay routing[1] must be an expert in [0, 3), got 3');
    expect(run([1, 1])).toThrow('names expert 1 twice');
    expect(run([1])).toThrow('must hold N·k = 2 experts');
    expect(run([-1, 2])).toThrow('replay routing of token 0 mixes −1 and experts (-1, 2)');
  });

  it('a replay row of −1 (a position never run by the recording engine) takes the own top-k', () => {
    const cfg: MoeConfig = { experts: 4, topK: 2, kind: 'gelu' };
    const N = 3;
    const C = 3;
    const r = rngFor(5, 'm1');
    const x = Float64Array.from(randn(r, N * C));
    const w = weights(r, 4, C, 2, 'gelu');
    const own = createMoeCache(x, N, cfg);
    const a = new Float64Array(N * C);
    moeForward(a, own, x, w, N, C, 2, cfg);
    // token 0 and 2 replay given experts (token 0: the own choice reversed, token 2: a different set); token 1 is −1
    const other = [0, 1, 2, 3].filter((e) => !own.routing.subarray(4, 6).includes(e));
    const replay = Int32Array.from([own.routing[1]!, own.routing[0]!, -1, -1, other[0]!, other[1]!]);
    const cache = createMoeCache(x, N, cfg);
    const b = new Float64Array(N * C);
    moeForward(b, cache, x, w, N, C, 2, cfg, undefined, replay);
    expect(Array.from(cache.routing)).toEqual([
      own.routing[1],
      own.routing[0],
      own.routing[2],
      own.routing[3],
      other[0],
      other[1],
    ]);
    expect(Array.from(b.subarray(C, 2 * C))).toEqual(Array.from(a.subarray(C, 2 * C))); // token 1: own routing, same output
    expect(Array.from(b.subarray(2 * C))).not.toEqual(Array.from(a.subarray(2 * C))); // token 2: the replayed experts
  });

  it('flip rate counts (token, expert) pairs chosen by one routing and not the other', () => {
    // Token 0: {0,1} vs {1,0} (same set), token 1: {2,3} vs {2,0} (one flip), token 2: {1,2} vs {0,3} (two).
    const a = Int32Array.from([0, 1, 2, 3, 1, 2]);
    const b = Int32Array.from([1, 0, 2, 0, 0, 3]);
    expect(routingFlipRate(a, b, 3, 2)).toBe(3 / 6);
    expect(routingFlipRate(a, a, 3, 2)).toBe(0);
    expect(routingFlipRate(new Int32Array(0), new Int32Array(0), 0, 2)).toBe(0);
  });
});
