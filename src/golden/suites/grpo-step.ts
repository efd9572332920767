// The `grpo-step` golden suite: one whole GRPO step of the toy AR policy under the `bf16` and
// `fp8-rollout` plans, built from library pieces (rollout, trainer log-probs, estimate, backward, AdamW).

import { AdamW } from '../../nn/adamw.js';
import type { ParamStore } from '../../nn/params.js';
import {
  arConfig,
  backwardLogprobs,
  computeLogprobs,
  createArPolicy,
  rollout,
  rolloutResponses,
  trainSupervised,
} from '../../policies/ar-api.js';
import { numericsFor, precisionPlan } from '../../policies/plans.js';
import { estimate } from '../../rl/estimate.js';
import { parseEstimateInput } from '../../rl/schema.js';
import { createRng } from '../../core/rng.js';
import { makeTask } from '../../tasks/registry.js';
import { tensor } from '../write.js';
import type { CompareRule, GoldenCase, GoldenSuite, GoldenTensor } from '../types.js';
import { ESTIMATOR_RULE } from './estimators.js';
import { rngStreams } from '../../core/rng-streams.js';

/** Float32 model outputs (log-probs, gradients, updated weights): a GPU port differs by accumulation order. qrl-sim reproduces them bit for bit. */
export const MODEL_RULE: CompareRule = Object.freeze({ rtol: 1e-4, atol: 1e-6 });

const PROMPTS = 2;
const GROUP = 3;
const CONFIG = {
  advantage: { name: 'grpo' },
  correction: { name: 'tis', C: 2 },
  loss: { name: 'ppo-clip' },
  aggregation: 'token-mean',
  kl: null,
};
const LR = 1e-2;
const WARM_STEPS = 40;

function grpoStepCase(planName: 'bf16' | 'fp8-rollout', seed: number): GoldenCase {
  const task = makeTask('reverse');
  const config = arConfig({
    vocabSize: task.vocabSize,
    maxLen: task.promptLength + task.responseLength,
    C: 16,
    H: 2,
    layers: 1,
    hidden: 32,
  });
  const policy = createArPolicy(config, `golden/grpo-step/${seed}`);
  // a short supervised warm start, so that rewards differ within groups and the gradient is not zero
  trainSupervised(policy, task, { steps: WARM_STEPS, batchSize: 16, seed });
  const plan = precisionPlan(planName);
  const weightsBefore = Float32Array.from(policy.params.data);
  // 1. prompts, each repeated GROUP times (one group per prompt)
  const problems = task.trainProblems(PROMPTS, seed);
  const prompts = problems.flatMap((p) => Array.from({ length: GROUP }, () => [...p.prompt]));
  const groups = problems.flatMap((_, g) => Array.from({ length: GROUP }, () => g));
  // 2. rollout under the plan's rollout numerics: tokens and ℓroll
  const r = rollout(policy, prompts, {
    maxNewTokens: task.responseLength,
    numerics: numericsFor(plan.rollout),
    rng: createRng(seed).fork(rngStreams.golden.grpoStepRollout),
    temperature: 1,
  });
  const responses = rolloutResponses(r);
  const rewards = responses.map((resp, i) => task.reward(problems[Math.floor(i / GROUP)]!, resp).reward);
  // 3. trainer recompute under the trainer numerics: ℓold (= ℓθ before the first update)
  const old = computeLogprobs(policy, r.tokens, r.B, r.promptLength, r.responseMask, {
    numerics: numericsFor(plan.trainer),
    temperature: 1,
  });
  const B = r.B;
  const L = r.responseLength;
  const rows = (x: ArrayLike<number>): number[][] =>
    Array.from({ length: B }, (_, b) => Array.from(x).slice(b * L, (b + 1) * L));
  // 4. estimate: advantages, correction weights, loss, dL/dℓθ
  const { batch, config: estConfig } = parseEstimateInput({
    logpTheta: rows(old.logp),
    logpOld: rows(old.logp),
    logpRollout: rows(r.logpRollout),
    mask: rows(r.responseMask),
    rewards,
    groups,
    config: CONFIG,
  });
  const est = estimate(batch, estConfig);
  // 5. backward through the trainer forward, then one AdamW step
  policy.params.grads.fill(0);
  backwardLogprobs(policy, old, est.gradLogpTheta);
  const grads = Float32Array.from(policy.params.grads);
  new AdamW(policy.params as ParamStore, { lr: LR, weightDecay: 0.01 }).step();
  const weightsAfter = Float32Array.from(policy.params.data);

  const tensors: Record<string, GoldenTensor> = {};
  for (const e of policy.params.layout.entries)
    tensors[`weight:${e.name}`] = tensor('input', weightsBefore.slice(e.offset, e.offset + e.size), 'bitwise', e.shape);
  tensors.prompts = tensor('input', Int32Array.from(prompts.flat()), 'bitwise', [B, r.promptLength]);
  tensors.tokens = tensor('input', r.tokens, 'bitwise', [B, r.promptLength + L]);
  tensors.responseMask = tensor('input', Float64Array.from(r.responseMask), 'bitwise', [B, L]);
  tensors.rewards = tensor('input', Float64Array.from(rewards), 'bitwise', [B]);
  tensors.groups = tensor('input', Int32Array.from(groups), 'bitwise', [B]);
  tensors.logpRollout = tensor('expected', r.logpRollout, MODEL_RULE, [B, L]);
  tensors.logpOld = tensor('expected', old.logp, MODEL_RULE, [B, L]);
  tensors.advantages = tensor('expected', est.advantages, ESTIMATOR_RULE, [B, L]);
  tensors.correctionWeights = tensor('expected', est.weights, ESTIMATOR_RULE, [B, L]);
  tensors.loss = tensor('expected', new Float64Array([est.loss]), ESTIMATOR_RULE, []);
  tensors.gradLogpTheta = tensor('expected', est.gradLogpTheta, ESTIMATOR_RULE, [B, L]);
  for (const e of policy.params.layout.entries)
    tensors[`grad:${e.name}`] = tensor('expected', grads.slice(e.offset, e.offset + e.size), MODEL_RULE, e.shape);
  for (const e of policy.params.layout.entries)
    tensors[`updated:${e.name}`] = tensor(
      'expected',
      weightsAfter.slice(e.offset, e.offset + e.size),
      MODEL_RULE,
      e.shape,
    );
  return {
    name: planName,
    description: `one GRPO step of the AR toy on 'reverse' (${PROMPTS} prompts × ${GROUP} samples) under plan ${planName}: after ${WARM_STEPS} supervised warm-start steps: rollout, trainer log-probs, TIS + PPO token-mean, backward, AdamW (lr ${LR}, weight decay 0.01 on 2-D weights)`,
    params: {
      plan: planName,
      task: 'reverse',
      warmStartSteps: WARM_STEPS,
      model: {
        vocabSize: config.vocabSize,
        maxLen: config.maxLen,
        C: config.C,
        H: config.H,
        layers: config.layers,
        hidden: config.hidden,
        norm: config.norm,
        mlp: config.mlp,
        positions: config.positions,
      },
      estimate: CONFIG,
      adamw: { lr: LR, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01 },
      temperature: 1,
    },
    tensors,
  };
}

/** One step under each of the two plans. */
export const grpoStepSuite: GoldenSuite = {
  name: 'grpo-step',
  description:
    'one whole GRPO step of the AR toy (bf16, fp8-rollout): weights, tokens, ℓroll, ℓold, advantages, weights, loss, every gradient, updated weights',
  cases(seed) {
    return (['bf16', 'fp8-rollout'] as const).map((p) => grpoStepCase(p, seed));
  },
};
