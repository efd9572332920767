// `qrl-sim replay` on bundles written here: a bundle made from the oracle's own estimate replays with
// every stage agreeing, and a change planted in one field is named at its stage and position; bad
// bundles (a missing field, a changed byte, shapes that disagree, an unknown field) and options the
// TRL table cannot map are exit 2 with one line naming them; the TRL 1.13 table maps each loss type.

import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { estimate, sequenceAdvantages } from '../../src/rl/estimate.js';
import { replayStep } from '../../src/golden/replay.js';
import { trlEstimateConfig } from '../../src/golden/stack-options.js';
import { readStepBundle } from '../../src/golden/step-bundle.js';
import { runCli } from '../cli/io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-replay-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

type Arrays = Record<string, { data: Float32Array | BigInt64Array; shape: number[] }>;
let counter = 0;

/** Writes a bundle as qrl_golden.bundle.write does (sorted tensors, sha256 of each tensor's bytes). */
function writeBundle(arrays: Arrays, manifest: Record<string, unknown> = {}): string {
  const dir = join(root, `b${counter++}`);
  mkdirSync(dir);
  const header: Record<string, unknown> = {};
  const tensors: Record<string, unknown> = {};
  const blobs: Uint8Array[] = [];
  let offset = 0;
  for (const name of Object.keys(arrays).sort()) {
    const { data, shape } = arrays[name]!;
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const dtype = data instanceof Float32Array ? 'F32' : 'I64';
    header[name] = { dtype, shape, data_offsets: [offset, offset + bytes.length] };
    tensors[name] = { dtype, shape, sha256: createHash('sha256').update(bytes).digest('hex') };
    blobs.push(bytes);
    offset += bytes.length;
  }
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - (text.length % 8)) % 8);
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(text.length));
  writeFileSync(join(dir, 'tensors.safetensors'), Buffer.concat([length, Buffer.from(text), ...blobs]));
  writeFileSync(
    join(dir, 'manifest.json'),
    JSON.stringify({
      format: 'qrl-step/1',
      stack: { name: 'trl', version: '1.13.0' },
      step: 0,
      options: { loss_type: 'grpo', beta: 0.04 },
      fields: Object.keys(arrays).sort(),
      tensors,
      metrics: {},
      ...manifest,
    }),
  );
  return dir;
}

const B = 4;
const T = 3;
const f32 = (xs: ArrayLike<number>) => Float32Array.from(xs);
const i64 = (xs: ArrayLike<number>) => BigInt64Array.from(Array.from(xs), (x) => BigInt(x));

/** A step computed by the oracle itself under TRL's grpo + β = 0.04, in float32 as a stack stores it. */
function oracleStep(): Arrays {
  const mask = [1, 1, 1, 1, 1, 0, 1, 0, 0, 1, 1, 1];
  const logp = [-1.2, -0.3, -2.0, -0.7, -1.1, -9, -0.4, -9, -9, -1.6, -0.9, -0.2].map(Math.fround);
  const logpOld = logp.map((x, k) =>
    Math.fround(x + [0.3, -0.25, 0.1, -0.05, 0.4, 0, 0.02, 0, 0, -0.3, 0.15, 0.05][k]!),
  );
  const logpRef = logp.map((x, k) => Math.fround(x - 0.1 * ((k % 3) - 1)));
  const rewards = [1, 0, 0.5, 0.25];
  const group = [0, 0, 1, 1];
  const config = trlEstimateConfig({ loss_type: 'grpo', beta: 0.04 });
  const adv = sequenceAdvantages(Float64Array.from(rewards), group, config.advantage).value.map(Math.fround);
  const r = estimate(
    {
      shape: { B, T },
      logpTheta: logp,
      logpOld,
      logpRollout: logpOld,
      logpRef,
      mask,
      advantages: Array.from(adv, (a, i) => Array.from({ length: T }, () => a)).flat(),
    },
    config,
  );
  return {
    completion_ids: { data: i64(mask.map((m, k) => (m ? 5 + k : 0))), shape: [B, T] },
    completion_mask: { data: i64(mask), shape: [B, T] },
    group: { data: i64(group), shape: [B] },
    rewards: { data: f32(rewards), shape: [B] },
    advantages: { data: f32(adv), shape: [B] },
    logp: { data: f32(logp), shape: [B, T] },
    logp_old: { data: f32(logpOld), shape: [B, T] },
    logp_ref: { data: f32(logpRef), shape: [B, T] },
    token_loss: { data: f32(r.tokenLoss), shape: [B, T] },
    loss: { data: f32([r.loss]), shape: [] },
    grad_logp: { data: f32(r.gradLogpTheta), shape: [B, T] },
  };
}

describe('replay of bundles written here', () => {
  it("the oracle's own step in float32 replays with every stage agreeing (exit 0)", async () => {
    const dir = writeBundle(oracleStep());
    const out = await runCli(['replay', dir, '--json']);
    expect(out.code, out.err).toBe(0);
    const r = JSON.parse(out.out) as {
      stages: { name: string; status: string; maxDiff: number; bound: number }[];
      firstDifference: string | null;
    };
    expect(r.firstDifference).toBeNull();
    expect(r.stages.map((s) => [s.name, s.status])).toEqual([
      ['advantages', 'agree'],
      ['correction', 'not-applicable'],
      ['token-loss', 'agree'],
      ['aggregation', 'agree'],
      ['loss', 'agree'],
      ['gradient', 'agree'],
      ['metrics', 'not-captured'],
    ]);
    for (const s of r.stages.filter((x) => x.status === 'agree')) expect(s.maxDiff).toBeLessThanOrEqual(s.bound);
    const text = await runCli(['replay', dir]);
    expect(text.out).toMatch(/^stage +status/);
    expect(text.out).toMatch(/every compared stage agrees \(trl 1\.13\.0, step 0\)/);
  });

  it('a change in one field is named at its stage with its position and sizes (exit 1)', async () => {
    const cases: [string, (a: Arrays) => void, string, number[]][] = [
      [
        'advantages',
        (a) => {
          a.advantages!.data[2] = Math.fround((a.advantages!.data[2] as number) * 1.01);
        },
        'advantages',
        [2],
      ],
      [
        'token_loss',
        (a) => {
          a.token_loss!.data[4] = Math.fround((a.token_loss!.data[4] as number) + 1e-3);
        },
        'token-loss',
        [1, 1],
      ],
      [
        'loss',
        (a) => {
          a.loss!.data[0] = Math.fround((a.loss!.data[0] as number) + 1e-3);
        },
        'aggregation',
        [],
      ],
      [
        'grad_logp',
        (a) => {
          a.grad_logp!.data[9] = Math.fround((a.grad_logp!.data[9] as number) * 1.001);
        },
        'gradient',
        [3, 0],
      ],
    ];
    for (const [field, plant, stage, at] of cases) {
      const arrays = oracleStep();
      plant(arrays);
      const result = replayStep(readStepBundle(writeBundle(arrays)));
      expect(result.firstDifference, field).toBe(stage);
      const s = result.stages.find((x) => x.name === stage)!;
      expect(s.position, field).toEqual(at);
      expect(s.maxDiff!, field).toBeGreaterThan(s.bound!);
    }
    const out = await runCli([
      'replay',
      writeBundle(
        (() => {
          const a = oracleStep();
          a.grad_logp!.data[9] = 1;
          return a;
        })(),
      ),
    ]);
    expect(out.code).toBe(1);
    expect(out.out).toMatch(/first difference: gradient at \[3, 0\]: stack 1, oracle /);
  });

  it('a bad bundle is exit 2 with one line naming the field', async () => {
    const missing = oracleStep();
    delete missing.grad_logp;
    const wrongShape = oracleStep();
    wrongShape.logp_old = { data: f32(new Array(B * (T + 1)).fill(-1)), shape: [B, T + 1] };
    const flipped = writeBundle(oracleStep());
    const file = join(flipped, 'tensors.safetensors');
    const bytes = readFileSync(file);
    bytes[bytes.length - 1]! ^= 0x80; // the last byte: token_loss's (sorted last)
    writeFileSync(file, bytes);
    const cases: [string, RegExp][] = [
      [writeBundle(missing), /grad_logp: required field missing/],
      [writeBundle(wrongShape), /logp_old: T = 4 where the other fields say 3/],
      [flipped, /token_loss: sha256 [0-9a-f]{12}… does not match manifest\.json's/],
      [writeBundle(oracleStep(), { format: 'qrl-step/0' }), /format: expected 'qrl-step\/1', got "qrl-step\/0"/],
      [
        writeBundle({ ...oracleStep(), entropy: { data: f32([0, 0, 0, 0]), shape: [B] } }),
        /entropy: not a qrl-step\/1 field/,
      ],
      [
        writeBundle({ ...oracleStep(), group: { data: f32([0, 0, 1, 1]), shape: [B] } }),
        /group: dtype F32 where an integer dtype is expected/,
      ],
      [
        writeBundle(oracleStep(), { options: { loss_type: 'grpo', beta: 0.04, top_entropy_quantile: 0.2 } }),
        /options\.top_entropy_quantile: 0\.2 cannot be mapped \(no qrl-sim equivalent/,
      ],
      [
        writeBundle(oracleStep(), { options: { loss_type: 'grpo', beta: 0.04, frobnicate: 1 } }),
        /options\.frobnicate: 1 cannot be mapped \(not in qrl-sim's table of TRL 1\.13 options/,
      ],
      [
        writeBundle(oracleStep(), { stack: { name: 'verl', version: '0.7' } }),
        /stack\.name: no option table for 'verl'.*"estimator"/,
      ],
      [join(root, 'nowhere'), /BUNDLE: .*nowhere does not exist/],
    ];
    for (const [dir, pattern] of cases) {
      const out = await runCli(['replay', dir]);
      expect(out.code, `${dir}: ${out.err}`).toBe(2);
      expect(out.err.trim().split('\n')).toHaveLength(1);
      expect(out.err).toMatch(pattern);
    }
  });

  it("a stack without an option table replays with the qrl-sim config in the manifest's estimator", async () => {
    const config = {
      advantage: { name: 'grpo', eps: 1e-4 },
      loss: { name: 'ppo-clip' },
      aggregation: 'seq-mean-token-mean',
      kl: { name: 'k3', coef: 0.04, biasCorrection: 'old' },
    };
    const out = await runCli([
      'replay',
      writeBundle(oracleStep(), {
        stack: { name: 'verl', version: '0.7.1' },
        options: { 'actor_rollout_ref.actor.loss_agg_mode': 'seq-mean-token-mean' },
        estimator: config,
      }),
    ]);
    expect(out.code, out.err).toBe(0);
  });
});

describe("TRL 1.13's options as a qrl-sim estimate config", () => {
  const map = (o: Record<string, unknown>) => {
    const c = trlEstimateConfig(o);
    return { advantage: c.advantage.name, loss: c.loss, aggregation: c.aggregation, kl: c.kl };
  };
  it('each loss type and level (grpo_trainer.py l.3202–3277)', () => {
    expect(map({})).toMatchObject({
      advantage: 'grpo',
      loss: { name: 'ppo-clip', epsLow: 0.2, epsHigh: 0.2 },
      aggregation: { name: 'token-mean' },
      kl: null,
    });
    expect(map({ loss_type: 'grpo', epsilon_high: 0.28 })).toMatchObject({
      loss: { name: 'ppo-clip', epsLow: 0.2, epsHigh: 0.28 },
      aggregation: { name: 'seq-mean-token-mean' },
    });
    expect(map({ loss_type: 'grpo', delta: 1.5 }).loss).toMatchObject({ name: 'ppo-clip', dualClip: 1.5 });
    expect(map({ loss_type: 'grpo', importance_sampling_level: 'sequence' })).toMatchObject({
      loss: { name: 'gspo', epsLow: 0.2, epsHigh: 0.2 },
      aggregation: { name: 'seq-mean-token-mean' },
    });
    expect(map({ loss_type: 'bnpo' }).aggregation).toEqual({ name: 'token-mean' });
    expect(map({ loss_type: 'dr_grpo', max_completion_length: 7 }).aggregation).toEqual({
      name: 'seq-mean-token-sum-norm',
      normalizer: 7,
    });
    expect(map({ loss_type: 'dr_grpo' }).aggregation).toEqual({ name: 'seq-mean-token-sum-norm', normalizer: 256 });
    expect(map({ loss_type: 'cispo', epsilon_high: 5 }).loss).toMatchObject({ name: 'cispo', epsLow: 1, epsHigh: 4 });
    expect(map({ loss_type: 'sapo', sapo_temperature_neg: 2 }).loss).toMatchObject({
      name: 'sapo',
      tauPos: 1,
      tauNeg: 2,
    });
    expect(map({ loss_type: 'luspo', importance_sampling_level: 'sequence' })).toMatchObject({
      loss: { name: 'luspo' },
      aggregation: { name: 'seq-mean-token-sum' },
    });
    expect(map({ loss_type: 'vespo' })).toMatchObject({
      loss: { name: 'vespo', kPos: 2, lambdaPos: 3, kNeg: 3, lambdaNeg: 2 },
      aggregation: { name: 'token-mean' },
    });
  });
  it('advantages and the KL term (l.2787–2813, l.3191–3198)', () => {
    expect(trlEstimateConfig({ scale_rewards: 'group' }).advantage).toEqual({
      name: 'grpo',
      eps: 1e-4,
      singleton: 'zero',
    });
    expect(trlEstimateConfig({ scale_rewards: 'none' }).advantage.name).toBe('drgrpo');
    expect(trlEstimateConfig({ scale_rewards: 'batch' }).advantage).toEqual({ name: 'batch-std', eps: 1e-4 });
    expect(map({ beta: 0.04 }).kl).toMatchObject({ name: 'k3', coef: 0.04, biasCorrection: 'old' });
    expect(map({ beta: 0.04, use_bias_correction_kl: false }).kl).toMatchObject({ biasCorrection: 'none' });
  });
  it("TRL's vLLM importance-sampling modes (l.2682–2726)", () => {
    const corr = (o: Record<string, unknown>) => trlEstimateConfig({ use_vllm: true, ...o }).correction;
    expect(corr({})).toEqual([
      { name: 'icepop', lo: Number.MIN_VALUE, hi: 3, level: 'sequence', denominator: 'original' },
    ]);
    expect(corr({ vllm_importance_sampling_mode: 'token_truncate', vllm_importance_sampling_clip_max: 2 })).toEqual([
      { name: 'tis', C: 2 },
    ]);
    expect(corr({ vllm_importance_sampling_mode: 'token_truncate', vllm_importance_sampling_clip_min: 0.5 })).toEqual([
      { name: 'tis', C: 3, lo: 0.5 },
    ]);
    expect(corr({ vllm_importance_sampling_mode: 'sequence_truncate', vllm_importance_sampling_cap: 5 })).toEqual([
      { name: 'seq-tis', C: 5 },
    ]);
    expect(corr({ vllm_importance_sampling_mode: 'token_mask', vllm_importance_sampling_clip_min: 0.5 })).toEqual([
      { name: 'icepop', lo: 0.5, hi: 3, level: 'token', denominator: 'original' },
    ]);
    expect(corr({ vllm_importance_sampling_correction: false })).toEqual([{ name: 'none' }]);
    expect(trlEstimateConfig({ vllm_importance_sampling_mode: 'token_mask' }).correction).toEqual([{ name: 'none' }]);
    expect(trlEstimateConfig({ use_vllm: true }).diagnostics.stacks).toEqual(['trl']);
  });
  it('options it cannot map name themselves', () => {
    for (const [o, pattern] of [
      [
        { loss_type: 'cispo' },
        /options\.epsilon_high: null cannot be mapped \(TRL's cispo caps the ratio at epsilon_high itself/,
      ],
      [{ loss_type: 'luspo' }, /options\.importance_sampling_level: "token" cannot be mapped/],
      [{ loss_type: 'ppo' }, /options\.loss_type: "ppo" cannot be mapped \(TRL 1\.13 knows/],
      [
        { importance_sampling_level: 'sequence', beta: 0.1 },
        /options\.use_bias_correction_kl: true cannot be mapped \(at sequence level/,
      ],
      [
        { use_vllm: true, loss_type: 'vespo' },
        /options\.vllm_importance_sampling_correction: true cannot be mapped \(TRL's vespo folds/,
      ],
      [
        { use_vllm: true, vllm_importance_sampling_clip_max: null },
        /options\.vllm_importance_sampling_clip_max: null cannot be mapped/,
      ],
      [
        { use_vllm: true, vllm_importance_sampling_mode: 'token' },
        /options\.vllm_importance_sampling_mode: "token" cannot be mapped/,
      ],
      [{ gradient_accumulation_steps: 4 }, /options\.gradient_accumulation_steps: 4 cannot be mapped/],
      [{ multi_objective_aggregation: 'normalize_then_sum' }, /options\.multi_objective_aggregation/],
      [{ scale_rewards: 'token' }, /options\.scale_rewards: "token" cannot be mapped/],
    ] as const) {
      expect(() => trlEstimateConfig(o)).toThrow(pattern);
    }
  });
});
