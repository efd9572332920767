// Runs the examples of docs/library.md (docs/examples/*.ts, imported through the package subpaths) and checks package.json `exports`.
// Not a test of the estimators or the casts themselves: those have their own suites; here the figures are recomputed independently where cheap.

import { mkdtempSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fakeQuantExample } from '../../docs/examples/fake-quant.js';
import { estimateExample } from '../../docs/examples/estimate-batch.js';
import { runGrpoExample } from '../../docs/examples/run-grpo.js';
import { estimate, resolveConfig, UsageError } from '../../src/index.js';

const root = new URL('../../', import.meta.url);

describe('docs/library.md examples', () => {
  it('fake-quantizes: e4m3fn values, 500 saturates to 448, per-token quantizer round-trips within one e4m3 step', () => {
    const { elementwise, perToken } = fakeQuantExample();
    expect(elementwise).toEqual([Math.fround(0.1015625), -1.25, 3.25, 448]);
    for (const [i, x] of [0.1, -1.3, 3.14159, 500].entries())
      expect(Math.abs((perToken[i] as number) - x)).toBeLessThanOrEqual(Math.abs(x) / 8);
  });

  it('estimate: plain arrays give the same loss and gradient as Float64Array inputs; the gradient is zero on masked tokens', () => {
    const r = estimateExample();
    const typed = estimate(
      {
        shape: { B: 2, T: 3 },
        logpTheta: Float64Array.from([-1.0, -0.5, -2.0, -0.3, -1.2, 0.0]),
        logpOld: Float64Array.from([-1.1, -0.5, -2.1, -0.3, -1.0, 0.0]),
        logpRollout: Float64Array.from([-1.2, -0.4, -2.0, -0.35, -1.1, 0.0]),
        mask: Float64Array.from([1, 1, 1, 1, 1, 0]),
        rewards: Float64Array.from([1, 0]),
      },
      resolveConfig({
        advantage: { name: 'grpo' },
        correction: { name: 'tis', C: 2 },
        loss: { name: 'ppo-clip' },
        aggregation: 'token-mean',
      }),
    );
    expect(r.loss).toBe(typed.loss);
    expect(r.grad).toEqual(Array.from(typed.gradLogpTheta));
    expect(r.grad[5]).toBe(0);
    expect(Number.isFinite(r.loss)).toBe(true);
    expect(r.clipFrac).toBeDefined();
  });

  it('estimate names the field of a wrong-length or nested array', () => {
    const config = resolveConfig({});
    const base = {
      shape: { B: 1, T: 2 },
      logpTheta: [-1, -1],
      logpOld: [-1, -1],
      logpRollout: [-1, -1],
      mask: [1, 1],
      rewards: [1],
    };
    expect(() => estimate({ ...base, logpOld: [-1] }, config)).toThrow(UsageError);
    expect(() => estimate({ ...base, logpOld: [-1] }, config)).toThrow(
      /batch\.logpOld: expected length B·T = 2, got 1/,
    );
    expect(() => estimate({ ...base, mask: [[1, 1]] as unknown as number[] }, config)).toThrow(
      /batch\.mask: .*nested rows/,
    );
  });

  it('runs GRPO programmatically: two steps, deterministic metrics', async () => {
    const a = mkdtempSync(join(tmpdir(), 'qrl-example-'));
    const b = mkdtempSync(join(tmpdir(), 'qrl-example-'));
    try {
      const rewards = await runGrpoExample(a);
      expect(rewards).toHaveLength(2);
      for (const r of rewards) expect(r).toBeGreaterThanOrEqual(0);
      await runGrpoExample(b);
      expect(readFileSync(join(b, 'metrics.jsonl'), 'utf8')).toBe(readFileSync(join(a, 'metrics.jsonl'), 'utf8'));
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });
});

describe('package.json exports', () => {
  const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
    exports: Record<string, string | { types: string; import: string }>;
  };
  it('every layer subpath names a dist entry with types, built from src/<layer>/index.ts', () => {
    for (const [subpath, target] of Object.entries(pkg.exports)) {
      if (typeof target === 'string') continue;
      const layer = subpath === '.' ? '' : `${subpath.slice(2)}/`;
      expect(target.import).toBe(`./dist/${layer}index.js`);
      expect(target.types).toBe(`./dist/${layer}index.d.ts`);
      expect(existsSync(new URL(`src/${layer}index.ts`, root))).toBe(true);
    }
    for (const layer of ['numerics', 'nn', 'rl', 'policies', 'backend', 'runs'])
      expect(pkg.exports[`./${layer}`]).toBeDefined();
  });
});
