// One GRPO step with truncated importance sampling (TIS), top to bottom, over the public API only:
// a quantized rollout engine samples, a BF16 trainer scores and updates. For learners; not the run
// driver (src/runs/run.ts does this with checkpoints, evaluation and every estimator).
//
// Run it:   npx tsx sims/grpo-minimal.ts          (deterministic: the same output on every run)
// Read with: docs/grpo.md (the loop's steps), docs/estimators.md (`grpo`, `tis`, `ppo-clip`).

import { ReferenceBackend, type RolloutBatch } from 'qrl-sim/backend';
import { arPolicyFactory } from 'qrl-sim/policies';
import { estimate, resolveConfig, resolveRunConfig } from 'qrl-sim/rl';
import { makeTask } from 'qrl-sim/tasks';

/** What one step printed, as numbers (the test checks them; `main` prints them). */
export interface MinimalStepResult {
  readonly rewards: readonly number[];
  readonly advantages: readonly number[];
  readonly k3: number;
  readonly tisWeights: {
    readonly min: number;
    readonly mean: number;
    readonly max: number;
    readonly capped: number;
    readonly tokens: number;
  };
  readonly loss: number;
  readonly lossFromLibrary: number;
  readonly maxGradDifference: number;
  readonly gradNorm: number;
  readonly meanLogpBefore: number;
  readonly meanLogpAfter: number;
  readonly lines: readonly string[];
}

const PROMPTS = 4; // distinct problems per step
const G = 8; // responses per problem: one GRPO group
const CAP = 2; // TIS cap C
const fmt = (x: number): string => (Math.abs(x) >= 1e-3 || x === 0 ? x.toFixed(4) : x.toExponential(3));

/** Runs one GRPO step with TIS and returns what it measured; `log` receives the printed lines. */
export async function grpoMinimal(log: (line: string) => void = () => {}): Promise<MinimalStepResult> {
  const lines: string[] = [];
  const say = (line: string): void => {
    lines.push(line);
    log(line);
  };

  // 1. Configuration. The autoregressive toy policy (C 32, 2 layers) on `reverse` (write the
  //    prompt's digits backwards). The plan `nvfp4-rollout` runs the rollout engine's GEMMs in NVFP4
  //    (4-bit weights and activations, FP8 block scales) while the trainer stays BF16: the two
  //    engines disagree slightly, which is the mismatch TIS corrects (docs/precision-plans.md).
  const config = resolveRunConfig({
    seed: 0,
    task: { name: 'reverse', options: {} },
    policy: { kind: 'ar' },
    plan: 'nvfp4-rollout',
    optim: { lr: 3e-3, maxGradNorm: 1 },
  });
  const task = makeTask('reverse', {});
  const backend = new ReferenceBackend(config, arPolicyFactory, task);
  say(`1. policy: ${(await backend.info()).parameters} parameters; plan ${config.plan} (rollout NVFP4, trainer BF16)`);

  // 2. Warm start: a few supervised steps on gold responses, so that the policy samples something
  //    worth rewarding (GRPO from random weights would see reward 0 everywhere).
  const sft = await backend.warmStart({
    task: { name: 'reverse', options: {} },
    steps: 40,
    batchSize: 32,
    lr: 3e-3,
    seed: 0,
  });
  say(`2. warm start: 40 supervised steps, loss ${fmt(sft['sft/loss_first']!)} → ${fmt(sft['sft/loss_last']!)}`);

  // 3. Sync: the rollout engine is rebuilt from the trainer's FP32 master weights (quantized to
  //    NVFP4 here). Every batch carries the weight version that generated it.
  const { weightVersion } = await backend.sync();

  // 4. Rollout: G samples per prompt from the quantized engine, with ℓroll = log π_roll(token).
  const problems = task.trainProblems(PROMPTS, 'grpo-minimal');
  const prompts = problems.flatMap((p) => Array.from({ length: G }, () => p.prompt));
  const batch: RolloutBatch = await backend.generate({ prompts, seed: 'grpo-minimal/rollout' });
  const { B, T } = batch;
  say(
    `3–4. weight version ${weightVersion}; sampled ${B} responses (${PROMPTS} prompts × ${G}), up to ${T} tokens each`,
  );

  // 5. Rewards: the task's verifiable reward of each response (tokens up to the mask's end).
  const rewards = prompts.map((_, i) => {
    const length = batch.mask.subarray(i * T, (i + 1) * T).reduce((a, m) => a + m, 0);
    const response = Array.from(batch.responses.subarray(i * T, i * T + length));
    return task.reward(problems[Math.floor(i / G)]!, response).reward;
  });
  say(
    `5. reward mean ${fmt(rewards.reduce((a, r) => a + r, 0) / B)} (per group: ${problems.map((_, g) => fmt(rewards.slice(g * G, (g + 1) * G).reduce((a, r) => a + r, 0) / G)).join(', ')})`,
  );

  // 6. GRPO advantages, one per response: A_i = (R_i − mean_g R) / (std_g R + ε), std unbiased,
  //    over the G responses of the same prompt (docs/estimators.md, `grpo`). Every token of a
  //    response gets its response's advantage.
  const advantages = rewards.map((r, i) => {
    const g = rewards.slice(Math.floor(i / G) * G, Math.floor(i / G) * G + G);
    const mean = g.reduce((a, x) => a + x, 0) / G;
    const std = Math.sqrt(g.reduce((a, x) => a + (x - mean) ** 2, 0) / (G - 1));
    return (r - mean) / (std + 1e-6);
  });
  say(`6. advantages: min ${fmt(Math.min(...advantages))}, max ${fmt(Math.max(...advantages))}`);

  // 7. ℓold: the trainer (BF16) scores the same tokens. With θ = θ_old, this pass also keeps what
  //    backward needs (grad: true), so ℓθ = ℓold here (one epoch, one mini-batch).
  const rows = Array.from({ length: B }, (_, i) => i);
  const trainer = await backend.logprobs({ batch, rows, policy: 'current', grad: true });
  const logpOld = trainer.logp;
  const mask = batch.mask;
  let tokens = 0;
  let k3Sum = 0;
  for (let k = 0; k < B * T; k++) {
    if (mask[k] === 0) continue;
    tokens += 1;
    // k3 estimator of KL(π_roll ‖ π_train) per token: r − 1 − log r with r = π_train/π_roll (docs/grpo.md)
    const logRatio = logpOld[k]! - batch.logpRollout[k]!;
    k3Sum += Math.exp(logRatio) - 1 - logRatio;
  }
  const k3 = k3Sum / tokens;
  say(`7. trainer–rollout mismatch: k3 = ${fmt(k3)} over ${tokens} tokens`);

  // 8. TIS weights: w = min(π_old / π_roll, C) = min(exp(ℓold − ℓroll), C), no gradient through w
  //    (Yao et al. 2025; docs/estimators.md, `tis`). It reweights each token's loss for having
  //    been sampled by the rollout engine rather than by the trainer's policy.
  const w = new Float64Array(B * T);
  let wMin = Infinity;
  let wMax = -Infinity;
  let wSum = 0;
  let capped = 0;
  for (let k = 0; k < B * T; k++) {
    if (mask[k] === 0) continue;
    const ratio = Math.exp(logpOld[k]! - batch.logpRollout[k]!);
    w[k] = Math.min(ratio, CAP);
    if (ratio > CAP) capped += 1;
    wMin = Math.min(wMin, w[k]!);
    wMax = Math.max(wMax, w[k]!);
    wSum += w[k]!;
  }
  say(
    `8. TIS weights (C = ${CAP}): min ${fmt(wMin)}, mean ${fmt(wSum / tokens)}, max ${fmt(wMax)}; ${capped} of ${tokens} tokens capped`,
  );

  // 9. PPO-clip loss, token-mean: L = (1/N) Σ_t w_t · max(−A_t r_t, −A_t clip(r_t, 1−ε, 1+ε)) with
  //    r_t = exp(ℓθ − ℓold) = 1 at θ = θ_old, so L = −(1/N) Σ_t w_t A_t and
  //    dL/dℓθ_t = −w_t A_t r_t / N (docs/estimators.md, `ppo-clip`, token-mean aggregation).
  let loss = 0;
  const grad = new Float64Array(B * T);
  for (let k = 0; k < B * T; k++) {
    if (mask[k] === 0) continue;
    const A = advantages[Math.floor(k / T)]!;
    loss += (-w[k]! * A) / tokens;
    grad[k] = (-w[k]! * A) / tokens;
  }
  //    The library's estimator computes the same loss and gradient from the same inputs:
  const lib = estimate(
    {
      shape: { B, T },
      logpTheta: logpOld,
      logpOld,
      logpRollout: batch.logpRollout,
      mask,
      rewards,
      groups: rows.map((i) => Math.floor(i / G)),
    },
    resolveConfig({
      advantage: { name: 'grpo' },
      correction: { name: 'tis', C: CAP },
      loss: { name: 'ppo-clip' },
      aggregation: 'token-mean',
    }),
  );
  let maxGradDifference = 0;
  for (let k = 0; k < B * T; k++)
    maxGradDifference = Math.max(maxGradDifference, Math.abs(grad[k]! - lib.gradLogpTheta[k]!));
  say(
    `9. loss ${fmt(loss)} (library: ${fmt(lib.loss)}; largest gradient difference ${maxGradDifference.toExponential(1)})`,
  );

  // 10. Backward: dL/dθ = Σ_t (dL/dℓθ_t) · dℓθ_t/dθ through the trainer's forward pass; then AdamW
  //     with the gradient norm clipped to 1. The backend owns the optimizer.
  await backend.backward(trainer.handle!, grad);
  const { gradNorm, weightVersion: after } = await backend.step({ maxGradNorm: config.optim.maxGradNorm });
  say(`10. gradient norm ${fmt(gradNorm)} (clipped to ${config.optim.maxGradNorm}); trainer weight version ${after}`);

  // 11. What the step did: the mean log-prob of the sampled tokens, weighted by advantage sign,
  //     should move up for good responses and down for bad ones. Show the plain mean before/after.
  const rescored = await backend.logprobs({ batch, rows, policy: 'current' });
  const meanOf = (l: Float64Array): number => {
    let s = 0;
    for (let k = 0; k < B * T; k++) if (mask[k] !== 0) s += Math.sign(advantages[Math.floor(k / T)]!) * l[k]!;
    return s / tokens;
  };
  const meanLogpBefore = meanOf(logpOld);
  const meanLogpAfter = meanOf(rescored.logp);
  say(
    `11. mean sign(A)·ℓ over the batch: ${fmt(meanLogpBefore)} → ${fmt(meanLogpAfter)} (up: good responses became likelier relative to bad ones)`,
  );
  await backend.close();

  return {
    rewards,
    advantages,
    k3,
    tisWeights: { min: wMin, mean: wSum / tokens, max: wMax, capped, tokens },
    loss,
    lossFromLibrary: lib.loss,
    maxGradDifference,
    gradNorm,
    meanLogpBefore,
    meanLogpAfter,
    lines,
  };
}

if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  await grpoMinimal((line) => console.log(line));
}
