// How often the MXFP4 QAT presets disagree: on a weight matrix, the share of 1×32 blocks whose E8M0 byte differs and
// of elements whose dequantized value differs (the sign of zero aside), rollout export (modelopt-mxfp4-qtensor)
// against each trainer rule, on N(0, 0.02²) weights kept in float32 and the same rounded to BF16; then k3 of the
// three routed-expert plans on the AR toy with 4 experts (top 2), float32 masters and the same rounded to BF16.
// Not a test. Usage: npx tsx scripts/mxfp4-qat-rules.ts [ROWS COLS]  (default 1024 4096)

import { readFileSync } from 'node:fs';
import { createRng } from '../src/core/rng.js';
import { quantPreset } from '../src/numerics/presets.js';
import { dequantize, quantize } from '../src/numerics/quantize.js';
import { round } from '../src/numerics/round.js';
import { arConfig } from '../src/policies/ar/config.js';
import { createArPolicy } from '../src/policies/ar/model.js';
import { arMismatchProbe } from '../src/policies/ar/probe.js';
import { resolvePlan, type PlanData } from '../src/policies/plans.js';
import { makeTask } from '../src/tasks/registry.js';

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

const task = makeTask('reverse');
const plans = ['mxfp4-qat-experts-matched', 'mxfp4-qat-experts-verl-cuda', 'mxfp4-qat-experts-ocp-floor'];
console.log('\nk3 on the reverse task, 4 experts top 2, 16 prompts × 16 tokens, probe seed 0; policy seeds 0, 1, 2');
console.log('| masters | plan | k3 (seed 0, 1, 2) |');
console.log('| --- | --- | --- |');
for (const masters of ['float32', 'bf16'] as const) {
  for (const name of plans) {
    const plan = resolvePlan(JSON.parse(readFileSync(`sims/plans/${name}.json`, 'utf8')) as PlanData);
    const k3 = [0, 1, 2].map((seed) => {
      const config = arConfig({
        vocabSize: task.vocabSize,
        maxLen: task.promptLength + 16,
        moe: { experts: 4, topK: 2, auxCoeff: 0.01 },
      });
      const policy = createArPolicy(config, seed);
      if (masters === 'bf16') {
        const d = policy.params.data;
        for (let i = 0; i < d.length; i++) d[i] = round('bf16', d[i] as number, { profile: 'ieee' });
      }
      const prompts = task.trainProblems(16, seed).map((q) => [...q.prompt]);
      return arMismatchProbe(policy, { plan, length: 16, prompts, seed: 0 }).diagnostics.k3;
    });
    console.log(`| ${masters} | ${name} | ${k3.map((v) => (v === 0 ? '0' : v.toPrecision(3))).join(', ')} |`);
  }
}
