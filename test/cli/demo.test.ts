import { describe, expect, it } from 'vitest';
import { runCli } from './io.js';

describe('qrl-sim demo', () => {
  it('prints the profile comparison and the per-format error table, reproducibly', async () => {
    const a = await runCli(['demo', '--numerics', '--seed', '1']);
    expect(a.code).toBe(0);
    expect(a.out).toMatch(/ort-1\.30/);
    const row485 = a.out.split('\n').find((l) => l.trim().startsWith('485'));
    // ieee → NaN, satfinite → 448, torch-2.13 → 448, torch-2.11 → NaN, ml-dtypes → NaN, onnx-sat → 448, ort-1.30 → 448 (quirk), vllm-fp8 → 448, mx → 448
    expect(row485?.trim().split(/\s+/)).toEqual(['485', 'NaN', '448', '448', 'NaN', 'NaN', '448', '448', '448', '448']);
    const sqnr = (name: string) =>
      Number(
        a.out
          .split('\n')
          .find((l) => l.startsWith(name))
          ?.trim()
          .split(/\s+/)
          .pop(),
      );
    expect(sqnr('fp16')).toBeGreaterThan(sqnr('e4m3fn'));
    expect(sqnr('e4m3fn')).toBeGreaterThan(sqnr('e2m1'));
    expect((await runCli(['demo', '--numerics', '--seed', '1'])).out).toBe(a.out);
  });
});

describe('qrl-sim demo (the sweep)', () => {
  it('rejects the numerics-only --seed without --numerics', async () => {
    const r = await runCli(['demo', '--seed', '1']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--seed goes with --numerics/);
  });
});
