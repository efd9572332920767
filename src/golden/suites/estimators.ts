// The `estimators` golden suite: batches × (advantage, correction, loss, aggregation, KL) covering
// every option of each, with the `estimate` contract's inputs and outputs. Not the estimators (src/rl).

import { estimate } from '../../rl/estimate.js';
import { parseEstimateInput } from '../../rl/schema.js';
import { createRng, type Rng } from '../../core/rng.js';
import { tensor } from '../write.js';
import type { CompareRule, GoldenCase, GoldenSuite, GoldenTensor } from '../types.js';
import { rngStreams } from '../../core/rng-streams.js';

/** Compare rule of float64 estimator outputs: tight enough for any formula bug, loose enough for a float64 re-ordering. */
export const ESTIMATOR_RULE: CompareRule = Object.freeze({ rtol: 1e-7, atol: 1e-10 });

/** An `estimate` batch as JSON, without `config` (what the golden cases and the property tests feed the contract). */
export interface BatchJson {
  logpTheta: number[][];
  logpOld: number[][];
  logpRollout: number[][];
  logpRef?: number[][];
  mask: number[][];
  rewards: number[];
  groups: number[];
}

/** The JSON input of `qrl-sim estimate` for a batch (what the golden case's tensors hold). */
export interface EstimateInputJson extends BatchJson {
  /** Σ_v π(v)² per token, only for the advantage `optimal_token_baseline`. */
  probSqSum?: number[][];
  config: Record<string, unknown>;
}

/**
 * A batch of `groups × perGroup` sequences of length T: ragged masks (one all-padding row), a
 * singleton last group, binary rewards, rollout/old/θ log-probs a small mismatch apart, one token
 * with a large rollout–old gap (huge ratio) and one with a tiny ratio.
 */
export function goldenBatch(rng: Rng, T = 6): Omit<EstimateInputJson, 'config'> {
  const groups: number[] = [];
  for (let g = 0; g < 3; g++) for (let j = 0; j < (g === 2 ? 1 : 3); j++) groups.push(g);
  const B = groups.length;
  const row = (f: (i: number, t: number) => number): number[][] =>
    Array.from({ length: B }, (_, i) => Array.from({ length: T }, (_, t) => f(i, t)));
  const lengths = groups.map((_, i) => (i === 1 ? 0 : 1 + rng.int(T)));
  const mask = row((i, t) => (t < (lengths[i] as number) ? 1 : 0));
  const logpRollout = row(() => -0.05 - 2 * rng.uniform());
  const logpOld = row((i, t) => (logpRollout[i] as number[])[t]! + 0.1 * rng.normal());
  (logpOld[0] as number[])[0] = (logpRollout[0] as number[])[0]! + 3; // ρ = e³ ≈ 20: a huge ratio
  (logpOld[2] as number[])[0] = (logpRollout[2] as number[])[0]! - 4; // ρ = e⁻⁴: a tiny ratio
  const logpTheta = row((i, t) => (logpOld[i] as number[])[t]! + 0.05 * rng.normal());
  const logpRef = row((i, t) => (logpOld[i] as number[])[t]! + 0.1 * rng.normal());
  const rewards = groups.map(() => rng.int(2));
  rewards[0] = 1;
  rewards[3] = 0;
  return { logpTheta, logpOld, logpRollout, logpRef, mask, rewards, groups };
}

/** The suite's corrections, one per name with test-sized parameters (also drawn by testing/arbitraries.ts). */
export const corrections: readonly Record<string, unknown>[] = [
  { name: 'none' },
  { name: 'token-is' },
  { name: 'tis', C: 2 },
  { name: 'seq-tis', C: 2 },
  { name: 'icepop' },
  { name: 'mis-token' },
  { name: 'mis-seq' },
  { name: 'geo-rs', lo: 0.9, hi: 1.1 },
  { name: 'rs-k1' },
  { name: 'rs-k2', hi: 0.05 },
  { name: 'rs-k3', hi: 0.05 },
  { name: 'veto', v: 0.05 },
  { name: 'batch-norm' },
  { name: 'ais' },
];
/** The suite's losses, one per name (and dual-clip), also drawn by testing/arbitraries.ts. */
export const losses: readonly Record<string, unknown>[] = [
  { name: 'ppo-clip' },
  { name: 'ppo-clip', dualClip: 3 },
  { name: 'gspo' },
  { name: 'sapo' },
  { name: 'cispo' },
  { name: 'reinforce' },
  { name: 'tbpo' },
];
const aggregations = ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean', 'seq-mean-token-sum-norm'] as const;
const advantageSpecs: readonly Record<string, unknown>[] = [
  { name: 'grpo' },
  { name: 'drgrpo' },
  { name: 'batch-std' },
];
const kls: readonly (Record<string, unknown> | null)[] = [
  null,
  { name: 'k1', coef: 0.01 },
  { name: 'k2', coef: 0.01 },
  { name: 'k3', coef: 0.01 },
  { name: 'k1+', coef: 0.01 },
  { name: 'k3+', coef: 0.01 },
];

/** The configurations: every correction × every loss, with aggregation, advantage and KL cycling through all their options, then TIS/none × PPO × every aggregation without KL. */
export function estimatorConfigs(): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  let i = 0;
  for (const correction of corrections) {
    for (const loss of losses) {
      out.push({
        advantage: advantageSpecs[i % 3],
        correction,
        loss,
        aggregation: aggregations[i % 4],
        kl: kls[i % 6],
      });
      i++;
    }
  }
  // the common production setting on its own: TIS (C = 2) or none, PPO clip, GRPO, no KL, every aggregation
  for (const correction of [{ name: 'tis', C: 2 }, { name: 'none' }]) {
    for (const aggregation of aggregations)
      out.push({ advantage: { name: 'grpo' }, correction, loss: { name: 'ppo-clip' }, aggregation, kl: null });
  }
  // the stacks' own options (appended, so earlier cases keep their indices): each with the stack's usual loss
  for (const [correction, loss, aggregation, kl] of stackCases)
    out.push({ advantage: { name: 'grpo' }, correction, loss, aggregation, kl });
  // veRL's optimal token baseline (its input probSqSum drawn from its own stream, so the batch is the same as before)
  out.push({
    advantage: { name: 'optimal_token_baseline' },
    correction: { name: 'tis', C: 2 },
    loss: { name: 'ppo-clip' },
    aggregation: 'token-mean',
    kl: null,
  });
  out.push({
    advantage: { name: 'optimal_token_baseline', handleZeroTail: false },
    correction: { name: 'none' },
    loss: { name: 'ppo-clip' },
    aggregation: 'seq-mean-token-mean',
    kl: { name: 'k3', coef: 0.01 },
  });
  return out;
}

/** The stacks' options of 2026: slime, veRL, AReaL, NeMo-RL stages and TRL, SkyRL, ROLL, veRL losses. */
const stackCases: readonly [
  Record<string, unknown> | Record<string, unknown>[],
  Record<string, unknown>,
  string,
  Record<string, unknown> | null,
][] = [
  [{ name: 'opsm', form: 'slime', delta: 0.001 }, { name: 'ppo-clip' }, 'token-mean', null],
  [
    { name: 'mis-token', denominator: 'original' },
    { name: 'ppo-clip' },
    'seq-mean-token-mean',
    { name: 'k3', coef: 0.01, mask: 'numerator' },
  ],
  [{ name: 'tis', C: 2 }, { name: 'ppo-clip' }, 'slime-per-token', null],
  [
    { name: 'rollout_rs', rollout_rs: 'token_k1,seq_max_k3', rollout_rs_threshold: '0.5_2.0,0.05' },
    { name: 'ppo-clip', dualClip: 3 },
    'token-mean',
    { name: 'k3', coef: 0.01 },
  ],
  [
    { name: 'rejection_sampling', metric: 'kl_k3', level: 'sequence', agg: 'max', upper: 0.5 },
    { name: 'ppo-clip' },
    'token-mean',
    null,
  ],
  [
    { name: 'rejection_sampling', level: 'sequence', action: 'clamp', upper: 1.2, lower: 0.8 },
    { name: 'ppo-clip' },
    'token-mean',
    null,
  ],
  [{ name: 'rejection_sampling', metric: 'binary_kl', upper: 0.02 }, { name: 'ppo-clip' }, 'token-mean', null],
  [
    [
      { name: 'seq-tis', C: 2 },
      { name: 'batch-norm', level: 'slime-sequence' },
    ],
    { name: 'ppo-clip' },
    'token-mean',
    null,
  ],
  [
    { name: 'seq_logprob_error_threshold', threshold: 1.5 },
    { name: 'ppo-clip' },
    'token-mean',
    { name: 'k3', coef: 0.01 },
  ],
  [{ name: 'none' }, { name: 'cispo', anchor: 'rollout' }, 'token-mean', null],
  [{ name: 'tis', C: 2 }, { name: 'geo_mean' }, 'seq-mean-token-mean', null],
  [{ name: 'none' }, { name: 'luspo' }, 'seq-mean-token-sum', null],
  [{ name: 'none' }, { name: 'vespo' }, 'token-mean', null],
  [{ name: 'tis', C: 2 }, { name: 'topr' }, 'token-mean', null],
];

const flat = (rows: number[][]): Float64Array => Float64Array.from(rows.flat());

function slug(config: Record<string, unknown>): string {
  const c = (
    Array.isArray(config.correction) ? config.correction[config.correction.length - 1] : config.correction
  ) as { name: string };
  const l = config.loss as { name: string; dualClip?: number };
  const k = config.kl as { name: string } | null;
  return `${c.name}.${l.name}${l.dualClip !== undefined ? '-dual' : ''}.${config.aggregation as string}.${(config.advantage as { name: string }).name}.${k ? k.name.replace('+', 'p') : 'nokl'}`;
}

function estimatorCase(config: Record<string, unknown>, index: number, seed: number): GoldenCase {
  const rng = createRng(seed).fork(rngStreams.golden.estimator(index));
  const batch = goldenBatch(rng);
  const input: EstimateInputJson = { ...batch, config };
  if (config.kl === null) delete input.logpRef;
  if ((config.advantage as { name: string }).name === 'optimal_token_baseline') {
    // Σπ² lies in [π², 1] for the sampled token's π = exp(ℓold) (clamped to 1 where the batch's ℓold > 0)
    const prng = createRng(seed).fork(rngStreams.golden.estimatorProbSqSum(index));
    input.probSqSum = input.logpOld.map((row) =>
      row.map((l) => {
        const p2 = Math.min(1, Math.exp(2 * l));
        return p2 + (1 - p2) * prng.uniform();
      }),
    );
  }
  const parsed = parseEstimateInput(input);
  const r = estimate(parsed.batch, parsed.config);
  const { B, T } = r.shape;
  const tensors: Record<string, GoldenTensor> = {
    logpTheta: tensor('input', flat(input.logpTheta), 'bitwise', [B, T]),
    logpOld: tensor('input', flat(input.logpOld), 'bitwise', [B, T]),
    logpRollout: tensor('input', flat(input.logpRollout), 'bitwise', [B, T]),
    ...(input.logpRef ? { logpRef: tensor('input', flat(input.logpRef), 'bitwise', [B, T]) } : {}),
    mask: tensor('input', flat(input.mask), 'bitwise', [B, T]),
    rewards: tensor('input', Float64Array.from(input.rewards), 'bitwise', [B]),
    groups: tensor('input', Int32Array.from(input.groups), 'bitwise', [B]),
    ...(input.probSqSum ? { probSqSum: tensor('input', flat(input.probSqSum), 'bitwise', [B, T]) } : {}),
    advantages: tensor('expected', r.advantages, ESTIMATOR_RULE, [B, T]),
    weights: tensor('expected', r.weights, ESTIMATOR_RULE, [B, T]),
    effectiveMask: tensor('expected', r.lossMask, 'bitwise', [B, T]),
    tokenLoss: tensor('expected', r.tokenLoss, ESTIMATOR_RULE, [B, T]),
    loss: tensor('expected', new Float64Array([r.loss]), ESTIMATOR_RULE, []),
    gradLogpTheta: tensor('expected', r.gradLogpTheta, ESTIMATOR_RULE, [B, T]),
  };
  for (const key of Object.keys(r.metrics).sort())
    tensors[`metric:${key}`] = tensor('expected', new Float64Array([r.metrics[key] as number]), ESTIMATOR_RULE, []);
  return {
    name: `${String(index).padStart(3, '0')}.${slug(config)}`,
    description: `estimate over ${B}×${T} (ragged masks, an empty row, a singleton group, ratios e³ and e⁻⁴) with ${JSON.stringify(config)}`,
    params: {
      advantage: (config.advantage as { name: string }).name,
      correction: Array.isArray(config.correction)
        ? config.correction.map((x: { name: string }) => x.name).join('+')
        : (config.correction as { name: string }).name,
      loss: (config.loss as { name: string }).name,
      aggregation: config.aggregation,
      kl: config.kl === null ? null : (config.kl as { name: string }).name,
      config,
    },
    tensors,
  };
}

/** Every correction × loss, the other options cycling. */
export const estimatorsSuite: GoldenSuite = {
  name: 'estimators',
  description:
    'the estimate contract (advantages, weights, masks, token loss, loss, dL/dℓθ, metrics) over every correction × loss',
  cases(seed) {
    return estimatorConfigs().map((config, i) => estimatorCase(config, i, seed));
  },
};
