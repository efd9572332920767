// How often the MXFP4 QAT presets disagree on a weight matrix: the share of 1×32 blocks whose E8M0 byte differs
// and of elements whose dequantized value differs (the sign of zero aside), rollout export (modelopt-mxfp4-qtensor)
// against each trainer rule, on N(0, 0.02²) weights kept in float32 and the same rounded to BF16. Not a test.
// Usage: npx tsx scripts/mxfp4-qat-rules.ts [ROWS COLS]  (default 1024 4096)

import { createRng } from '../src/core/rng.js';
import { quantPreset } from '../src/numerics/presets.js';
import { dequantize, quantize } from '../src/numerics/quantize.js';
import { round } from '../src/numerics/round.js';

const rows = Number(process.argv[2] ?? 1024);
const cols = Number(process.argv[3] ?? 4096);
const rng = createRng('mxfp4-qat-rules');
const f32 = new Float32Array(rows * cols);
for (let i = 0; i < f32.length; i++) f32[i] = Math.fround(0.02 * rng.normal());
const bf16 = f32.map((v) => round('bf16', v, { profile: 'ieee' }));

const rollout = 'modelopt-mxfp4-qtensor';
console.log(`${rows}×${cols} weights, N(0, 0.02²); rollout ${rollout}`);
console.log('| weights | trainer preset | blocks with another E8M0 byte | elements with another value |');
console.log('| --- | --- | --- | --- |');
for (const [label, w] of [
  ['float32', f32],
  ['bf16', bf16],
] as const) {
  const ref = quantize(quantPreset(rollout), w, [rows, cols]);
  const refValues = dequantize(ref);
  for (const trainer of ['megatron-lite-mxfp4-qat', 'modelopt-mxfp4-fake-cuda', 'mxfp4']) {
    const q = quantize(quantPreset(trainer), w, [rows, cols]);
    const values = dequantize(q);
    let blocks = 0;
    for (let b = 0; b < ref.scaleCodes!.length; b++) if (ref.scaleCodes![b] !== q.scaleCodes![b]) blocks++;
    let elements = 0;
    for (let i = 0; i < values.length; i++) if (values[i] !== refValues[i]) elements++; // −0 === 0
    const pct = (k: number, n: number): string => `${k} (${((100 * k) / n).toPrecision(3)} %)`;
    console.log(`| ${label} | ${trainer} | ${pct(blocks, ref.scaleCodes!.length)} | ${pct(elements, values.length)} |`);
  }
}
