// Cast benchmark: E4M3FN encode+decode of the vector cast (satfinite) vs onnxruntime's Cast→Cast
// round trip on the same values, single thread, in one process. Prints figures; asserts nothing.

import { decodeArray, encodeArray } from '../src/numerics/index.js';
import { createRng } from '../src/core/rng.js';
import { ortCastBench } from './ort.js';

/** One printed benchmark line. */
export interface BenchLine {
  readonly name: string;
  readonly figures: Record<string, number>;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

/** Runs the cast benchmark on `n` values (16 M by default) and returns its figures. */
export async function benchCast(n = 16 * 1024 * 1024, repeats = 5): Promise<BenchLine> {
  const rng = createRng(0).fork('bench-cast');
  const src = new Float32Array(n);
  for (let i = 0; i < n; i++) src[i] = rng.normal() * 64;
  const codes = new Uint8Array(n);
  const out = new Float32Array(n);
  const ours = (): void => {
    encodeArray('e4m3fn', src, { profile: 'satfinite' }, codes);
    decodeArray('e4m3fn', codes, out);
  };
  ours(); // warm-up and JIT
  const oursMs: number[] = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = process.hrtime.bigint();
    ours();
    oursMs.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const ort = await ortCastBench(src, 'e4m3fn', { saturate: 1 });
  const ortOut = await ort.once();
  for (let i = 0; i < n; i++) {
    if (!Object.is(ortOut[i], out[i])) throw new Error(`bench: qrl-sim and onnxruntime disagree at ${i} (${src[i]})`);
  }
  const ortMs: number[] = [];
  for (let r = 0; r < repeats; r++) ortMs.push((await ort.time(1)).msPerRun);
  const oursNs = (median(oursMs) * 1e6) / n;
  const ortNs = (median(ortMs) * 1e6) / n;
  return {
    name: `cast e4m3fn satfinite encode+decode, ${n} values (median of ${repeats})`,
    figures: { qrlSimNsPerValue: oursNs, onnxruntimeNsPerValue: ortNs, speedup: ortNs / oursNs },
  };
}
