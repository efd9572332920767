import { describe, expect, it } from 'vitest';
import { benchGemm } from '../../bench/gemm.js';

describe('bench/gemm', () => {
  it('reports GFLOP/s for qrl-sim and onnxruntime and agrees with MatMul to float32 rounding', async () => {
    const lines: string[] = [];
    const rows = await benchGemm({ out: (t) => lines.push(t) }, [16], 1);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.qrlGflops).toBeGreaterThan(0);
    expect(rows[0]!.ortGflops).toBeGreaterThan(0);
    expect(rows[0]!.maxRelDiff).toBeLessThan(1e-5);
    expect(lines.join('\n')).toMatch(/qrl-sim GFLOP\/s/);
  });
});
