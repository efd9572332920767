// KV-cache quantization: store/load formulas, per-tensor and per-head scales, the fixed / inference / trainer
// calibration modes with explicit state, and the edge cases (all-zero heads, NaN, empty caches).
import { describe, expect, it } from 'vitest';
import {
  type KvCacheSpec,
  kvCacheCalibrate,
  kvCacheForward,
  kvCacheState,
  kvCacheWeightUpdate,
  kvDequantize,
  kvQuantize,
} from '../../src/numerics/index.js';
import { decodeTable } from '../../src/numerics/vector.js';
import { kvFakeQuantize } from '../../src/numerics/kvcache.js';
import { createRng } from '../../src/core/rng.js';

const f32 = (...xs: number[]): Float32Array => Float32Array.from(xs);

describe('KV cache', () => {
  it('fixed mode: scale 1.0, store = satfinite e4m3(x / 1), load = q·1', () => {
    const spec: KvCacheSpec = { calibration: { mode: 'fixed' } };
    const state = kvCacheState(spec);
    expect(Array.from(state.kScale)).toEqual([1]);
    const { k, v, state: after } = kvCacheForward(spec, state, f32(1, 500, -3.3, Number.NaN), f32(0, 0, 0, 0), [2, 2]);
    expect(after).toBe(state);
    expect(Array.from(k.codes)).toEqual([0x38, 0x7e, 0xc5, 0x7f]); // 500 saturates; NaN stays NaN
    const y = kvDequantize(spec, k);
    expect(Array.from(y.slice(0, 3))).toEqual([1, 448, -3.25]);
    expect(Array.from(v.codes)).toEqual([0, 0, 0, 0]);
  });

  it('inference mode: scales from the first forward after a weight update (max|K|/200, max|V|/100), then frozen', () => {
    const spec: KvCacheSpec = { calibration: { mode: 'inference' } };
    let state = kvCacheState(spec);
    expect(state.calibrated).toBe(false);
    const step1 = kvCacheForward(spec, state, f32(400, -2), f32(-50, 1), [1, 2]);
    state = step1.state;
    expect(state.kScale[0]).toBe(2);
    expect(state.vScale[0]).toBe(0.5);
    expect(Array.from(step1.k.codes)).toEqual([0x74, 0xb8]); // 200 = 0b0_1110_100, −1 = 0b1_0111_000
    const step2 = kvCacheForward(spec, state, f32(4000, 0), f32(1, 1), [1, 2]);
    expect(step2.state.kScale[0]).toBe(2); // not recalibrated
    expect(step2.k.codes[0]).toBe(0x7e); // 2000 saturates at 448
    state = kvCacheWeightUpdate(step2.state);
    const step3 = kvCacheForward(spec, state, f32(4000, 0), f32(1, 1), [1, 2]);
    expect(step3.state.kScale[0]).toBe(20);
  });

  it('trainer mode: calibrate from a batch with configurable divisors; per-head scales; an all-zero head keeps its scale', () => {
    const spec: KvCacheSpec = {
      calibration: { mode: 'trainer', kDivisor: 448, vDivisor: 448 },
      granularity: 'head',
      heads: 2,
    };
    const state = kvCacheCalibrate(
      spec,
      kvCacheState(spec),
      f32(448, 1, 0, 0, -896, 2, 0, 0),
      f32(1, 1, 1, 1, 1, 1, 1, 1),
      [2, 4],
    );
    expect(Array.from(state.kScale)).toEqual([2, 1]);
    expect(Array.from(state.vScale)).toEqual([Math.fround(1 / 448), Math.fround(1 / 448)]);
    const q = kvQuantize(spec, f32(448, 1, 0, 0), [1, 4], state.kScale);
    expect(Array.from(kvDequantize(spec, q))).toEqual([448, 1, 0, 0]);
    // trainer mode does not recalibrate inside forward
    const f = kvCacheForward(spec, state, f32(1e6, 0, 0, 0), f32(0, 0, 0, 0), [1, 4]);
    expect(f.state).toBe(state);
  });

  it('load rounding to bf16 and empty caches', () => {
    const spec: KvCacheSpec = { calibration: { mode: 'fixed', scale: 1 / 3 }, loadFormat: 'bf16' };
    const q = kvQuantize(spec, f32(1.3), [1, 1], f32(Math.fround(1 / 3)));
    const raw = Math.fround(decodeTable('e4m3fn')[q.codes[0]!]! * Math.fround(1 / 3));
    expect(kvDequantize(spec, q)[0]).not.toBe(raw);
    expect(Math.abs(kvDequantize(spec, q)[0]! - raw)).toBeLessThan(raw * 2 ** -8);
    const empty = kvCacheForward(
      { calibration: { mode: 'inference' } },
      kvCacheState({ calibration: { mode: 'inference' } }),
      f32(),
      f32(),
      [0, 4],
    );
    expect(empty.k.codes.length).toBe(0);
    expect(empty.state.kScale[0]).toBe(1);
    expect(empty.state.calibrated).toBe(false); // the next non-empty forward still calibrates
  });

  it('bad shapes name the field', () => {
    const spec: KvCacheSpec = { calibration: { mode: 'fixed' }, heads: 3, granularity: 'head' };
    expect(() => kvQuantize(spec, f32(1, 2, 3, 4), [1, 4], f32(1, 1, 1))).toThrow(
      /x: width 4 is not a multiple of heads 3/,
    );
    expect(() => kvQuantize(spec, f32(1, 2, 3), [1, 3], f32(1))).toThrow(/scales: 1 scales for 3/);
  });
});

describe('kvFakeQuantize (the rollout KV hook)', () => {
  // Edge values; 3·1.0625, 3·1.1875, −3·0.5625 are E4M3 ties after division by the scale 3.
  const edge = [
    NaN,
    -NaN,
    Infinity,
    -Infinity,
    0,
    -0,
    1e-40,
    -1e-45,
    448,
    -448,
    449,
    1e6,
    -1e6,
    0.5,
    0.4375,
    0.46875,
    3.3e-3,
    -7.7,
    2 ** -9,
    2 ** -10,
    3.1875,
    3.5625,
    -1.6875,
  ];
  it('equals kvDequantize(kvQuantize(…)) element for element (Object.is) on edge data, per tensor and per head, with and without load rounding, for several scales', () => {
    const rng = createRng('kv-fake-quantize');
    const specs: KvCacheSpec[] = [
      { calibration: { mode: 'fixed' } },
      { calibration: { mode: 'fixed' }, loadFormat: 'bf16' },
      { calibration: { mode: 'inference' }, format: 'e5m2', loadFormat: 'bf16', granularity: 'head', heads: 3 },
      {
        calibration: { mode: 'inference' },
        format: 'e4m3fn',
        profile: 'ieee',
        granularity: 'head',
        heads: 2,
        loadFormat: 'fp16',
      },
      { calibration: { mode: 'fixed' }, format: 'e4m3fnuz', profile: 'ieee', loadFormat: 'fp32' },
    ];
    for (const spec of specs) {
      const heads = spec.granularity === 'head' ? spec.heads! : 1;
      for (const [tokens, width] of [
        [5, 12],
        [1, 6],
        [0, 6],
        [7, 18],
        [200, 6],
      ] as const) {
        const x = Float32Array.from({ length: tokens * width }, (_, i) =>
          i < edge.length ? edge[i]! : Math.fround(rng.normal() * 100),
        );
        for (const s of [1, 3, 0.01, Math.fround(1 / 3), 1e-30, 5e3]) {
          const scales = Float32Array.from({ length: heads }, (_, h) => Math.fround(s * (h + 1)));
          const want = kvDequantize(spec, kvQuantize(spec, x, [tokens, width], scales));
          const got = kvFakeQuantize(spec, x, [tokens, width], scales, new Float32Array(tokens * width));
          for (let i = 0; i < want.length; i++)
            if (!Object.is(got[i], want[i]))
              expect.fail(`${JSON.stringify(spec)} s=${s} [${tokens},${width}] i=${i}: ${got[i]} ≠ ${want[i]}`);
        }
      }
    }
  });

  it('checks shapes, scale counts and the output length', () => {
    const spec: KvCacheSpec = { calibration: { mode: 'fixed' }, granularity: 'head', heads: 2 };
    expect(() => kvFakeQuantize(spec, new Float32Array(6), [2, 3], new Float32Array(2), new Float32Array(6))).toThrow(
      /width 3 is not a multiple of heads 2/,
    );
    expect(() => kvFakeQuantize(spec, new Float32Array(8), [2, 4], new Float32Array(1), new Float32Array(8))).toThrow(
      /scales: 1 scales for 2/,
    );
    expect(() => kvFakeQuantize(spec, new Float32Array(8), [2, 4], new Float32Array(2), new Float32Array(7))).toThrow(
      /out: 7 elements, need 8/,
    );
  });
});
