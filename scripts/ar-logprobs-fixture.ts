// Writes a fixture for the numpy backend's agreement test: the TypeScript AR policy's weights
// (weights.safetensors), a token batch and its trainer log-probs under the fp32 and bf16 plans (and at the rollout's top-k ids, `topk.ids`/`topk.logp`: K = 5), and its
// rollout-engine log-probs under fp8-tensor-rollout (case.safetensors, `logp.rollout.fp8-tensor-rollout.τ`, with a float32 accumulator `….fp32-accumulator.τ` and with the H200's Hopper settings `….sm90.τ`). Usage: `node --import tsx scripts/ar-logprobs-fixture.ts OUT_DIR`.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { arConfig, computeLogprobs, createArPolicy, rollout, writeArWeights } from '../src/policies/index.js';
import { numericsFor, precisionPlan } from '../src/policies/plans.js';
import { createRng } from '../src/core/rng.js';
import { writeSafetensors } from '../src/protocol/safetensors.js';

const out = process.argv[2];
if (out === undefined) {
  console.error('usage: ar-logprobs-fixture.ts OUT_DIR');
  process.exit(2);
}
mkdirSync(out, { recursive: true });
const policy = createArPolicy(arConfig({ vocabSize: 13, maxLen: 15 }), 42);
// Sharpen the freshly initialized weights so the log-probs are not all ≈ −log V.
for (let i = 0; i < policy.params.data.length; i++) policy.params.data[i] = Math.fround(policy.params.data[i]! * 4);
writeArWeights(policy, join(out, 'weights.safetensors'));
const prompts = [
  [1, 7, 9, 11, 3],
  [1, 5, 6, 8, 3],
  [1, 12, 10, 9, 3],
  [1, 6, 6, 5, 3],
];
const P = 5;
const r = rollout(policy, prompts, {
  maxNewTokens: 8,
  numerics: numericsFor(precisionPlan('fp32').rollout),
  rng: createRng(7).fork('fixture'),
  eos: null,
  topkLogprobs: 5, // the engine's top-k (tokens and ℓroll as without it)
});
const B = prompts.length;
const L = r.responseLength;
const tensors: Record<string, { data: Float64Array | Int32Array; shape: number[] }> = {
  tokens: { data: r.tokens, shape: [B, P + L] },
  mask: { data: Float64Array.from(r.responseMask), shape: [B, L] },
  'topk.ids': { data: r.topk!.ids, shape: [B, L, 5] },
  'topk.logp': { data: r.topk!.logp, shape: [B, L, 5] },
};
for (const plan of ['fp32', 'bf16']) {
  for (const tau of [1, 0.7]) {
    const lp = computeLogprobs(policy, r.tokens, B, P, r.responseMask, {
      numerics: numericsFor(precisionPlan(plan).trainer),
      temperature: tau,
      topk: { K: 5, ids: r.topk!.ids },
    });
    tensors[`logp.${plan}.${tau}`] = { data: lp.logp, shape: [B, L] };
    tensors[`topkLogp.${plan}.${tau}`] = { data: lp.topkLogp!, shape: [B, L, 5] };
    tensors[`entropy.${plan}.${tau}`] = { data: lp.entropy, shape: [B, L] };
  }
}
// The same FP8 rollout with float32 accumulation instead of Hopper's (what torch._scaled_mm does on a CPU).
const fp8 = precisionPlan('fp8-tensor-rollout').rollout;
const fp8Fp32Acc = { ...fp8, gemm: { ...fp8.gemm, accumulator: 'fp32' } } as typeof fp8;
// And with Hopper's accumulator at the hardware's own settings (an H200 measured: chunks of 32, promoted every 4;
// docs/gpu-check.md), not the plan's toy-sized chunks of 16 promoted every chunk.
const fp8Sm90 = { ...fp8, gemm: { ...fp8.gemm, chunk: 32, promoteEvery: 4 } } as typeof fp8;
for (const tau of [1, 0.7]) {
  for (const [name, side] of [
    ['fp8-tensor-rollout', fp8],
    ['fp8-tensor-rollout.fp32-accumulator', fp8Fp32Acc],
    ['fp8-tensor-rollout.sm90', fp8Sm90],
  ] as const) {
    const lp = computeLogprobs(policy, r.tokens, B, P, r.responseMask, {
      numerics: numericsFor(side),
      temperature: tau,
    });
    tensors[`logp.rollout.${name}.${tau}`] = { data: lp.logp, shape: [B, L] };
  }
}
writeSafetensors(join(out, 'case.safetensors'), tensors, { promptLength: String(P) });
