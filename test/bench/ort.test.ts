// Tests of the onnxruntime benchmark helpers: they run the right computation and report consistent timings.
// Not a benchmark: no timing is asserted beyond being positive and finite.
import { afterAll, describe, expect, it } from 'vitest';
import { disposeOrtBenches, ortCastBench, ortMatMulBench } from '../../bench/ort.js';

afterAll(disposeOrtBenches);

describe('bench/ort', () => {
  it('cast bench rounds to e4m3fn with saturation and times n runs', async () => {
    const b = await ortCastBench(Float32Array.of(500, 17, -1e9, 0.3));
    expect(b.label).toMatch(/e4m3fn saturate=1, 4 values/);
    expect(Array.from(await b.once())).toEqual([448, 16, -448, Math.fround(0.3125)]);
    const t = await b.time(3);
    expect(t.runs).toBe(3);
    expect(t.totalMs).toBeGreaterThan(0);
    expect(t.msPerRun).toBeCloseTo(t.totalMs / 3, 12);
    expect(t.nsPerValue).toBeCloseTo((t.msPerRun * 1e6) / 4, 6);
    await expect(b.time(0)).rejects.toThrow(/runs = 0/);
  });

  it('matmul bench multiplies and reports GFLOP/s from 2·m·k·n', async () => {
    const b = await ortMatMulBench(Float32Array.of(1, 2, 3, 4, 5, 6), Float32Array.of(1, 0, 0, 1, 1, 1), 2, 3, 2);
    expect(Array.from(await b.once())).toEqual([4, 5, 10, 11]);
    const t = await b.time(2);
    expect(t.gflops).toBeCloseTo(24 / (t.msPerRun * 1e6), 9);
    expect(Number.isFinite(t.gflops) && t.gflops > 0).toBe(true);
  });
});
