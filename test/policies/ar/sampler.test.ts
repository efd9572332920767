// Sampler properties: top-k/top-p never emit excluded tokens, greedy picks the argmax with ties to the
// lowest id, and sampling frequencies follow the processed distribution.

import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { logSumExp, processedSupport, resolveSampler, sampleToken } from '../../../src/policies/ar/sampler.js';
import { createRng } from '../../../src/core/rng.js';

/** The allowed set by the definition, written independently: rank, cut to k, then the nucleus. */
function allowed(z: number[], tau: number, topK: number, topP: number): Set<number> {
  const V = z.length;
  let order = z.map((_, v) => v).sort((a, b) => z[b]! - z[a]! || a - b);
  if (topK > 0 && topK < V) order = order.slice(0, topK);
  if (topP >= 1) return new Set(order);
  const m = z[order[0]!]! / tau;
  const w = order.map((v) => Math.exp(z[v]! / tau - m));
  const s = w.reduce((a, b) => a + b);
  const kept = new Set<number>();
  let before = 0;
  order.forEach((v, i) => {
    if (i === 0 || before < topP) kept.add(v);
    before += w[i]! / s;
  });
  return kept;
}

const rowArb = fc.integer({ min: 2, max: 24 }).chain((V) =>
  fc.record({
    // Small integers make ties common; the scale spreads them.
    z: fc.array(fc.integer({ min: -6, max: 6 }), { minLength: V, maxLength: V }),
    scale: fc.constantFrom(0.3, 1, 2.5),
    tau: fc.constantFrom(0.5, 1, 1.7),
    topK: fc.integer({ min: 0, max: V + 1 }),
    topP: fc.constantFrom(1, 0.95, 0.7, 0.3, 0.05),
    seed: fc.integer({ min: 0, max: 1 << 30 }),
  }),
);

describe('AR sampler', () => {
  test.prop([rowArb])(
    'top-k/top-p never emit an excluded token, and the reported processed ℓ is the renormalized log-prob',
    (c) => {
      const z = c.z.map((x) => Math.fround(x * c.scale));
      const logits = Float32Array.from(z);
      const V = z.length;
      const s = resolveSampler({ temperature: c.tau, topK: c.topK, topP: c.topP });
      const ok = allowed(z, c.tau, c.topK, c.topP);
      const keep = new Uint8Array(V);
      processedSupport(logits, 0, V, s, keep);
      expect(new Set(Array.from(keep).flatMap((k, v) => (k ? [v] : [])))).toEqual(ok);
      const rng = createRng(c.seed);
      for (let i = 0; i < 40; i++) {
        const d = sampleToken(logits, 0, V, s, rng, keep);
        expect(ok.has(d.token)).toBe(true);
        expect(d.logpProcessed).toBeCloseTo(z[d.token]! / c.tau - logSumExp(logits, 0, V, c.tau, keep), 12);
        expect(d.logpProcessed).toBeLessThanOrEqual(1e-15);
        expect(d.logpRaw).toBeCloseTo(z[d.token]! - logSumExp(logits, 0, V, 1), 12);
      }
    },
  );

  test.prop([rowArb])('greedy picks the argmax of the raw logits, ties to the lowest id, and draws nothing', (c) => {
    const logits = Float32Array.from(c.z.map((x) => x * c.scale));
    const V = logits.length;
    const max = Math.max(...logits);
    const rng = createRng(c.seed);
    const before = rng.state();
    const d = sampleToken(logits, 0, V, resolveSampler({ greedy: true, topK: c.topK }), rng, new Uint8Array(V));
    expect(d.token).toBe(Array.from(logits).indexOf(max));
    expect(d.logpProcessed).toBe(0);
    expect(rng.state()).toEqual(before);
  });

  it('sampling frequencies follow softmax(z/τ) restricted to the top-k set', () => {
    const logits = Float32Array.from([0.5, 2, -1, 1.5, 1, 0]);
    const V = logits.length;
    const s = resolveSampler({ temperature: 0.9, topK: 4 });
    const keep = new Uint8Array(V);
    const rng = createRng(77);
    const n = 40_000;
    const counts = new Array<number>(V).fill(0);
    for (let i = 0; i < n; i++) counts[sampleToken(logits, 0, V, s, rng, keep).token]!++;
    processedSupport(logits, 0, V, s, keep);
    const lse = logSumExp(logits, 0, V, 0.9, keep);
    for (let v = 0; v < V; v++) {
      const p = keep[v] ? Math.exp(logits[v]! / 0.9 - lse) : 0;
      const sd = Math.sqrt((p * (1 - p)) / n);
      expect(Math.abs(counts[v]! / n - p)).toBeLessThanOrEqual(4 * sd + 1e-12);
    }
    expect(counts[2]).toBe(0);
    expect(counts[5]).toBe(0);
  });

  it('rejects bad options naming the field', () => {
    expect(() => resolveSampler({ temperature: -1 })).toThrow(/temperature/);
    expect(() => resolveSampler({ topK: 1.5 })).toThrow(/topK/);
    expect(() => resolveSampler({ topP: 1.2 })).toThrow(/topP/);
  });
});
