// The decode step's rounded K/V copy (AttentionGemms.decodeRounding, src/nn/attention-decode.ts): rows whose
// bits change between steps must be rounded again, including changes a float comparison does not see (the sign of
// a zero next to another zero, NaN payloads), rows past the ends of earlier calls, and another cache layout.

import { describe, expect, it } from 'vitest';
import { attentionDecodeForward, gemmSequential, type AttentionGemms, type GemmFn } from '../../src/nn/index.js';
import { createRng } from '../../src/core/rng.js';

/** A "rounding" that makes every bit visible: −0 → 7, each NaN payload → its own number, else x + 1. */
function roundB(dst: Float32Array, src: Float32Array): void {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < src.length; i++) {
    const x = src[i]!;
    dst[i] = Object.is(x, -0) ? 7 : Number.isNaN(x) ? (bits[i]! & 0xffff) - 100 : Math.fround(x + 1);
  }
}

const rounding: GemmFn = (out, a, b, m, n, k) => {
  const r = new Float32Array(n * k);
  roundB(r, b as Float32Array);
  gemmSequential(out, a, r, m, n, k);
};
const base: AttentionGemms = {
  qk: rounding,
  pv: rounding,
  dScores: gemmSequential,
  dValues: gemmSequential,
  dQuery: gemmSequential,
  dKey: gemmSequential,
};
const fast: AttentionGemms = {
  ...base,
  decodeRounding: { qk: rounding, pv: rounding, roundB, qkRoundedB: gemmSequential, pvRoundedB: gemmSequential },
};

function setNaN(x: Float32Array, i: number, payload: number): void {
  new Uint32Array(x.buffer, x.byteOffset, x.length)[i] = 0x7fc00000 | payload;
}

describe('decode rounding of cached K/V rows', () => {
  it('rounds again every row whose bits changed: ±0 beside a zero, NaN payloads, any position; equals rounding at every step', () => {
    for (const [B, H, hs, tCap] of [
      [2, 2, 4, 9],
      [3, 1, 3, 7],
    ] as const) {
      const C = H * hs;
      const rng = createRng(B * 10 + hs);
      const kCache = Float32Array.from({ length: B * tCap * C }, () => Math.fround(rng.normal()));
      const vCache = Float32Array.from({ length: B * tCap * C }, () => Math.fround(rng.normal()));
      const q = Float32Array.from({ length: B * C }, () => Math.fround(rng.normal()));
      for (let i = 0; i < 4; i++) kCache[i] = 0; // a run of zeros at an even start (two float32 zeros share a double)
      const edits: ((t: number) => void)[] = [
        () => {}, // the first step rounds every row
        () => {
          kCache[1] = -0;
        }, // +0 → −0 after a +0 (element 2w+1 of a double whose element 2w is +0): equal as doubles
        () => {
          kCache[1] = 0;
        },
        () => {
          kCache[3] = -0;
        },
        () => setNaN(vCache, 3 * C + 1, 5),
        () => setNaN(vCache, 3 * C + 1, 9), // another NaN payload
        () => {
          vCache[(tCap + 1) * C + 2] = Math.fround(vCache[(tCap + 1) * C + 2]! * 2);
        },
        (t) => {
          kCache[(tCap * (B - 1) + t) * C - 1] = 0.5;
        }, // the last element of a row (odd index where C is odd)
      ];
      for (let step = 0; step < 2 * tCap; step++) {
        const tLen = 1 + ((step * 5) % tCap); // lengths that go up and down, as a later rollout's prefill does
        edits[step % edits.length]!(tLen);
        const got = new Float32Array(B * C);
        const want = new Float32Array(B * C);
        attentionDecodeForward(got, null, q, kCache, vCache, tLen, B, tCap, C, H, { gemms: fast });
        attentionDecodeForward(want, null, q, kCache, vCache, tLen, B, tCap, C, H, { gemms: base });
        for (let i = 0; i < B * C; i++)
          expect(Object.is(got[i], want[i]), `B ${B} hs ${hs} step ${step} at ${i}: ${got[i]} vs ${want[i]}`).toBe(
            true,
          );
      }
    }
  });

  it('a cache array seen with another row layout is rounded afresh', () => {
    const kCache = new Float32Array(2 * 6 * 4); // zeros: a row never rounded and its rounded copy (0) would agree on raw bits
    const vCache = new Float32Array(2 * 6 * 4);
    const q = new Float32Array(8).fill(0.25);
    const run = (gemms: AttentionGemms, B: number, tCap: number, C: number, H: number, tLen: number): Float32Array => {
      const out = new Float32Array(B * C);
      attentionDecodeForward(out, null, q.subarray(0, B * C), kCache, vCache, tLen, B, tCap, C, H, { gemms });
      return out;
    };
    run(fast, 2, 12, 2, 1, 2); // rounds elements [0, 4) and [24, 28) only
    const got = run(fast, 2, 6, 4, 2, 6); // the first two rows of each sequence are now elements [0, 8) and [24, 32)
    const want = run(base, 2, 6, 4, 2, 6);
    for (let i = 0; i < got.length; i++) expect(Object.is(got[i], want[i]), `at ${i}`).toBe(true);
  });
});
