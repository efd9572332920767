// Training smoke test of the AR policy (supervised warm start on `reverse`) and the checkpoint round trip.
// Not the GRPO loop: only cross-entropy on gold responses.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  arConfig,
  computeLogprobs,
  createArPolicy,
  fp32Numerics,
  loadCheckpoint,
  rollout,
  saveCheckpoint,
  sftStep,
  trainSupervised,
  numericsFor,
  precisionPlans,
} from '../../../src/policies/index.js';
import { policyStore } from '../../../src/policies/ar/supervised.js';
import { AdamW } from '../../../src/nn/index.js';
import { createRng } from '../../../src/core/rng.js';
import { makeTask } from '../../../src/tasks/index.js';
import { runCli } from '../../cli/io.js';

const task = makeTask('reverse');
const maxLen = task.promptLength + task.responseLength;

describe('supervised warm start', () => {
  it('cross-entropy on reverse falls from ≈ log V to under half within 80 steps, and greedy rewards rise', () => {
    const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen }), 1);
    const evalSet = task.evalProblems(32, 1);
    const meanReward = (): number => {
      const r = rollout(
        policy,
        evalSet.map((p) => [...p.prompt]),
        { maxNewTokens: task.responseLength, numerics: fp32Numerics(), rng: createRng(0), greedy: true },
      );
      let s = 0;
      evalSet.forEach((p, b) => {
        s += task.reward(p, Array.from(r.tokens.subarray(b * maxLen + task.promptLength, (b + 1) * maxLen))).reward;
      });
      return s / evalSet.length;
    };
    const before = meanReward();
    const { losses, optimizer } = trainSupervised(policy, task, { steps: 80, batchSize: 32, seed: 3 });
    const first = losses[0]!;
    const last = losses.slice(-5).reduce((a, b) => a + b) / 5;
    expect(first).toBeGreaterThan(0.9 * Math.log(task.vocabSize));
    expect(last).toBeLessThan(first / 2);
    expect(optimizer.stepCount).toBe(80);
    expect(meanReward()).toBeGreaterThan(before + 0.3);
  });

  it('trains under a BF16 trainer plan too, calling the numerics factory once per step', () => {
    const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen }), 6);
    let built = 0;
    const { losses } = trainSupervised(policy, task, {
      steps: 25,
      batchSize: 16,
      numerics: () => {
        built++;
        return numericsFor(precisionPlans.bf16.trainer);
      },
    });
    expect(built).toBe(25);
    expect(losses.slice(-3).reduce((a, b) => a + b) / 3).toBeLessThan(0.8 * losses[0]!);
  });

  it('sftStep masks prompt and padding: the loss is the mean NLL of the response tokens', () => {
    const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen }), 2);
    const [p1, p2] = task.trainProblems(2, 4);
    const batch = [p1!, p2!].map((p) => ({ prompt: p.prompt, response: task.goldResponse(p) }));
    const Lmax = Math.max(...batch.map((e) => e.response.length));
    const tokens: number[] = [];
    const mask: number[] = [];
    for (const e of batch) {
      tokens.push(...e.prompt, ...e.response, ...new Array(Lmax - e.response.length).fill(0));
      mask.push(...e.response.map(() => 1), ...new Array(Lmax - e.response.length).fill(0));
    }
    const lp = computeLogprobs(policy, tokens, 2, task.promptLength, mask, { numerics: fp32Numerics() });
    const n = mask.reduce((a, b) => a + b);
    const nll = -lp.logp.reduce((a, b) => a + b) / n;
    const { loss } = sftStep(policy, new AdamW(policyStore(policy), { lr: 1e-3 }), batch);
    expect(Math.abs(loss - nll)).toBeLessThan(1e-6);
  });
});

describe('checkpoint', () => {
  it('round-trips the policy bit for bit through JSON and is loadable by qrl-sim mismatch', async () => {
    const policy = createArPolicy(
      arConfig({ vocabSize: task.vocabSize, maxLen: 40, positions: 'rope', tiedEmbeddings: true }),
      5,
    );
    const text = JSON.stringify(saveCheckpoint(policy, { name: 'reverse', options: task.options }));
    const { policy: back, task: t } = loadCheckpoint(JSON.parse(text));
    expect(t?.name).toBe('reverse');
    expect(back.config).toEqual(policy.config);
    expect(Array.from(back.params.data).every((x, i) => Object.is(x, policy.params.data[i]))).toBe(true);
    const file = join(mkdtempSync(join(tmpdir(), 'qrl-ar-')), 'policy.json');
    writeFileSync(file, text);
    const out = await runCli([
      'mismatch',
      '--policy',
      'ar',
      '--plan',
      'bf16',
      '--length',
      '8',
      '--checkpoint',
      file,
      '--json',
    ]);
    expect(out.code).toBe(0);
    expect(JSON.parse(out.out).k3).toBe(0);
    const tooLong = await runCli([
      'mismatch',
      '--policy',
      'ar',
      '--plan',
      'bf16',
      '--length',
      '64',
      '--checkpoint',
      file,
    ]);
    expect(tooLong.code).toBe(2);
    expect(tooLong.err).toMatch(/--length/);
  });

  it('rejects malformed checkpoints naming the field', () => {
    const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen }), 5);
    const good = saveCheckpoint(policy);
    expect(() => loadCheckpoint({ ...good, format: 'x' })).toThrow(/format/);
    expect(() => loadCheckpoint({ ...good, config: { ...good.config, H: 5 } })).toThrow(/H must divide C/);
    expect(() => loadCheckpoint({ ...good, params: { ...good.params, data: good.params.data.slice(1) } })).toThrow(
      /data length/,
    );
  });
});

describe('trainSupervisedAsync', () => {
  it('gives the same losses and weights as trainSupervised and lets the event loop run between steps', async () => {
    const { trainSupervisedAsync } = await import('../../../src/policies/ar/supervised.js');
    const sync = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen }), 1);
    const async_ = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen }), 1);
    const a = trainSupervised(sync, task, { steps: 4, batchSize: 4, seed: 5 });
    let ticks = 0;
    const timer = setInterval(() => {
      ticks++;
    }, 0);
    const seen: number[] = [];
    const b = await trainSupervisedAsync(async_, task, {
      steps: 4,
      batchSize: 4,
      seed: 5,
      onProgress: () => seen.push(ticks),
    });
    clearInterval(timer);
    expect(b.losses).toEqual(a.losses);
    expect(Array.from(policyStore(async_).data)).toEqual(Array.from(policyStore(sync).data));
    // A 0 ms interval fires only when the loop gets control: the count grows between steps.
    expect(seen[3]!).toBeGreaterThan(seen[0]!);
  });
});
