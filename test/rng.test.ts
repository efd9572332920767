import { describe, expect, it } from 'vitest';
import { createRng, restoreRng } from '../src/core/rng.js';

describe('rng', () => {
  it('is reproducible from the seed and independent across forks', () => {
    const a = createRng(42).fork('rollout');
    const b = createRng('42').fork('rollout');
    const xs = Array.from({ length: 5 }, () => a.uniform());
    expect(Array.from({ length: 5 }, () => b.uniform())).toEqual(xs);
    const c = createRng(42).fork('trainer');
    expect(c.uniform()).not.toBe(xs[0]);
  });

  it('forks do not depend on draws from the parent', () => {
    const p1 = createRng(7);
    const p2 = createRng(7);
    p2.uniform();
    p2.uniform();
    expect(p1.fork('x').uint32()).toBe(p2.fork('x').uint32());
  });

  it('restores a snapshot exactly', () => {
    const r = createRng(3);
    r.uniform();
    const s = JSON.parse(JSON.stringify(r.state()));
    const next = [r.uniform(), r.int(10), r.normal()];
    const q = restoreRng(s);
    expect([q.uniform(), q.int(10), q.normal()]).toEqual(next);
  });

  it('int is unbiased in range and rejects bad n', () => {
    const r = createRng(1);
    const counts = [0, 0, 0];
    for (let i = 0; i < 30000; i++) counts[r.int(3)]!++;
    for (const c of counts) expect(Math.abs(c - 10000)).toBeLessThan(400);
    expect(() => r.int(0)).toThrow(/n must be/);
    expect(() => createRng(Number.NaN)).toThrow(/seed/);
  });

  it('uniformOpen never returns 0', () => {
    const r = createRng(5);
    for (let i = 0; i < 10000; i++) expect(r.uniformOpen()).toBeGreaterThan(0);
  });
});
