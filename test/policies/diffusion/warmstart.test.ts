// Smoke test of the supervised warm start (LLaDA SFT masked-token loss with AdamW) on the reverse task, and of its loss's gradient.
// Not a convergence benchmark: a few hundred updates of a small model must cut the held-out masked loss, nothing more.

import { describe, expect, it } from 'vitest';
import { createRng } from '../../../src/core/rng.js';
import { EOS, makeTask } from '../../../src/tasks/index.js';
import {
  diffusionWarmStart,
  maskedDiffusionLoss,
  padDiffusionResponse,
} from '../../../src/policies/diffusion/warmstart.js';
import { expectGradClose } from '../../nn/gradcheck.js';
import { randomParams64, smallModel } from './helpers.js';

describe('diffusion warm start', () => {
  const task = makeTask('reverse', { maxLength: 4 });
  const N = 5;
  const model = smallModel(task.vocabSize, { C: 16, H: 2, hidden: 32, layers: 1, maxLen: 12 });
  const heldOut = task.evalProblems(32, 1);
  const evalLoss = (data: Float32Array): number =>
    maskedDiffusionLoss(
      model,
      data,
      heldOut.map((p) => p.prompt),
      heldOut.map((p) => padDiffusionResponse(task.goldResponse(p), N)),
      createRng(5),
    );

  it('drives the held-out masked-token loss down within seconds on reverse', () => {
    const start = diffusionWarmStart(model, task, { steps: 0, genLength: N, seed: 2 });
    const before = evalLoss(start.store.data);
    const { store, losses } = diffusionWarmStart(model, task, { steps: 250, genLength: N, seed: 2, lr: 1e-2 });
    const after = evalLoss(store.data);
    expect(losses.length).toBe(250);
    expect(losses.every(Number.isFinite)).toBe(true);
    expect(after).toBeLessThan(0.5 * before);
  });

  it('the SFT loss gradient matches central differences (float64)', () => {
    const params = randomParams64(model, 4, 0.4);
    const probs = task.trainProblems(3, 8);
    const prompts = probs.map((p) => p.prompt);
    const responses = probs.map((p) => padDiffusionResponse(task.goldResponse(p), N));
    const loss = (): number => maskedDiffusionLoss(model, params, prompts, responses, createRng(3), { eps: 0.2 });
    const grads = new Float64Array(params.length);
    maskedDiffusionLoss(model, params, prompts, responses, createRng(3), { eps: 0.2, grads });
    expectGradClose('sft', params, grads, loss, { rtol: 1e-5, atol: 1e-8 });
  });

  it('pads with EOS and validates its inputs', () => {
    expect(padDiffusionResponse([7, 8, EOS], 5)).toEqual([7, 8, EOS, EOS, EOS]);
    expect(() => padDiffusionResponse([5, 5, 5], 2)).toThrow(/response of 3 tokens does not fit genLength 2/);
    expect(() => diffusionWarmStart(model, makeTask('countdown'), { steps: 1 })).toThrow(
      /task countdown has vocabSize 22, more than the model's 13/,
    );
    expect(() => diffusionWarmStart(model, task, { batchSize: 0 })).toThrow(
      /batchSize must be a positive integer, got 0/,
    );
  });
});

describe('diffusionWarmStartAsync', () => {
  it('gives the same losses and weights as diffusionWarmStart and lets the event loop run between updates', async () => {
    const { diffusionWarmStartAsync } = await import('../../../src/policies/diffusion/warmstart.js');
    const task = makeTask('reverse', { maxLength: 4 });
    const model = smallModel(task.vocabSize, { C: 16, H: 2, hidden: 32, layers: 1, maxLen: 12 });
    const a = diffusionWarmStart(model, task, { steps: 3, batchSize: 4, genLength: 5, seed: 2 });
    let ticks = 0;
    const timer = setInterval(() => {
      ticks++;
    }, 0);
    const seen: number[] = [];
    const b = await diffusionWarmStartAsync(model, task, {
      steps: 3,
      batchSize: 4,
      genLength: 5,
      seed: 2,
      onProgress: () => seen.push(ticks),
    });
    clearInterval(timer);
    expect(b.losses).toEqual(a.losses);
    expect(Array.from(b.store.data)).toEqual(Array.from(a.store.data));
    expect(seen[2]!).toBeGreaterThan(seen[0]!);
  });
});
