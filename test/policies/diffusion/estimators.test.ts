// Tests of the trajectory, d1 and elbo log-prob estimators: float64 finite-difference gradients, rollout = trainer bit for bit under equal numerics, non-zero finite mismatch under a quantized rollout, estimator semantics.
// Not the sampler mechanics (sampler.test.ts) and not the warm start.

import { describe, expect, it } from 'vitest';
import { createParamStore } from '../../../src/nn/index.js';
import { createRng } from '../../../src/core/rng.js';
import { EOS, MASK, makeTask } from '../../../src/tasks/index.js';
import { fp32Numerics } from '../../../src/policies/numerics.js';
import {
  d1MaskedView,
  diffusionCompletionMask,
  diffusionEstimatorNames,
  diffusionEstimators,
  diffusionLogprobs,
  type DiffusionEstimatorName,
} from '../../../src/policies/diffusion/estimators.js';
import { createDiffusionModel } from '../../../src/policies/diffusion/model.js';
import { sampleDiffusion, type DiffusionSequence } from '../../../src/policies/diffusion/sampler.js';
import { expectGradClose } from '../../nn/gradcheck.js';
import { e4m3TestNumerics, randomParams32, randomParams64, smallModel } from './helpers.js';

const fp32 = fp32Numerics();

describe('gradient of Σ r·ℓ (float64, central differences over every parameter)', () => {
  const task = makeTask('reverse', { maxLength: 3 });
  const model = smallModel(task.vocabSize, { C: 8, H: 2, hidden: 16, layers: 2, maxLen: 12 });
  const params = randomParams64(model, 21);
  const prompts = task.trainProblems(2, 9).map((p) => p.prompt);
  const rollout = sampleDiffusion(
    { model, params, numerics: fp32 },
    prompts,
    { genLength: 4, blockLength: 2, steps: 4, temperature: 0.8 },
    createRng(4),
  );
  const cases: [DiffusionEstimatorName, object][] = [
    ['trajectory', { temperature: 0.8 }],
    ['d1', { seed: 3, pMaskPrompt: 0.5 }],
    ['elbo', { seed: 3, elboSamples: 3 }],
  ];
  for (const [name, options] of cases) {
    it(name, () => {
      const r = Float64Array.from({ length: 2 * 4 }, (_, k) => Math.sin(1 + 3 * k));
      const loss = (): number => {
        const lp = diffusionLogprobs(name, model, params, rollout.sequences, fp32, options).logp;
        return lp.reduce((a, x, k) => a + r[k]! * x, 0);
      };
      const grads = new Float64Array(params.length);
      diffusionLogprobs(name, model, params, rollout.sequences, fp32, options).backward(r, grads);
      expect(grads.some((g) => Math.abs(g) > 1e-3)).toBe(true);
      expectGradClose(name, params, grads, loss, { rtol: 1e-5, atol: 1e-8 });
    });
  }

  it('backward accumulates (two calls give twice the gradient)', () => {
    const lp = diffusionEstimators.d1(model, params, rollout.sequences, fp32, { seed: 1 });
    const once = new Float64Array(params.length);
    lp.backward(new Float64Array(8).fill(1), once);
    const twice = new Float64Array(params.length);
    lp.backward(new Float64Array(8).fill(1), twice);
    lp.backward(new Float64Array(8).fill(1), twice);
    twice.forEach((g, i) => expect(g).toBeCloseTo(2 * once[i]!, 12));
    expect(() => lp.backward(new Float64Array(3), once)).toThrow(/dlogp must have B·N = 8 entries, got 3/);
  });
});

describe('rollout vs trainer log-probs', () => {
  const task = makeTask('sudoku4');
  const model = createDiffusionModel({ vocabSize: task.vocabSize });
  const store = createParamStore(model.specs, 5);
  const params = randomParams32(model, 6, 0.15);
  const prompts = task.trainProblems(4, 2).map((p) => p.prompt);
  const sampler = { genLength: 24, blockLength: 8, steps: 12, temperature: 0.9 };

  const concat = (parts: Float64Array[]): Float64Array => Float64Array.from(parts.flatMap((p) => Array.from(p)));
  const expectIdentical = (a: Float64Array, b: Float64Array): void => {
    expect(a.length).toBe(b.length);
    a.forEach((x, k) => {
      if (!Object.is(x, b[k])) expect.fail(`slot ${k}: ${x} vs ${b[k]}`);
    });
  };

  for (const [label, w] of [
    ['GPT-2 init', store.data],
    ['random weights', params],
  ] as const) {
    it(`identical numerics ⇒ identical (Object.is) log-probs for trajectory and d1, whatever the trainer's mini-batches (${label})`, () => {
      const rollout = sampleDiffusion(
        { model, params: w, numerics: fp32Numerics() },
        prompts,
        sampler,
        createRng(1).fork('rollout'),
      );
      const opts = { seed: 77, temperature: rollout.logpTemperature };
      const halves = [rollout.sequences.slice(0, 1), rollout.sequences.slice(1)];
      const traj = concat(halves.map((s) => diffusionEstimators.trajectory(model, w, s, fp32Numerics(), opts).logp));
      expectIdentical(rollout.logpRollout, traj);
      for (const name of ['d1', 'elbo'] as const) {
        const roll = diffusionLogprobs(name, model, w, rollout.sequences, fp32Numerics(), opts).logp;
        const train = concat(halves.map((s) => diffusionLogprobs(name, model, w, s, fp32Numerics(), opts).logp));
        expectIdentical(roll, train);
      }
      expect(rollout.logpRollout.every((x) => Number.isFinite(x) && x < 0)).toBe(true);
    });
  }

  it('quantized rollout numerics (e4m3fn, per-tensor) ⇒ non-zero, finite mismatch under every estimator', () => {
    const rollout = sampleDiffusion(
      { model, params, numerics: e4m3TestNumerics() },
      prompts,
      sampler,
      createRng(1).fork('rollout'),
    );
    const opts = { seed: 77, temperature: rollout.logpTemperature };
    for (const name of diffusionEstimatorNames) {
      const roll =
        name === 'trajectory'
          ? rollout.logpRollout
          : diffusionLogprobs(name, model, params, rollout.sequences, e4m3TestNumerics(), opts).logp;
      const old = diffusionLogprobs(name, model, params, rollout.sequences, fp32, opts).logp;
      let maxAbs = 0;
      old.forEach((x, k) => {
        expect(Number.isFinite(x) && Number.isFinite(roll[k]!), `${name} slot ${k}`).toBe(true);
        maxAbs = Math.max(maxAbs, Math.abs(x - roll[k]!));
      });
      expect(maxAbs, name).toBeGreaterThan(1e-6);
      expect(maxAbs, name).toBeLessThan(5);
    }
  });
});

describe('estimator semantics', () => {
  const task = makeTask('reverse');
  const model = smallModel(task.vocabSize);
  const params = randomParams32(model, 3);
  const seqs: DiffusionSequence[] = task.trainProblems(3, 4).map((p, i) => ({
    id: `s${i}`,
    prompt: p.prompt,
    response: [...task.goldResponse(p), ...new Array<number>(8 - task.goldResponse(p).length).fill(EOS)],
    commitStep: null,
  }));

  it('d1: the view depends on the seed and the sequence id, not on the batch', () => {
    const a = diffusionEstimators.d1(model, params, seqs, fp32, { seed: 1 }).logp;
    const b = diffusionEstimators.d1(model, params, seqs, fp32, { seed: 2 }).logp;
    const last = diffusionEstimators.d1(model, params, seqs.slice(2), fp32, { seed: 1 }).logp;
    expect(Array.from(a)).not.toEqual(Array.from(b));
    expect(Array.from(last)).toEqual(Array.from(a.subarray(16)));
  });

  it('d1 masks each prompt token with probability pMaskPrompt and the whole response', () => {
    let masked = 0;
    let total = 0;
    for (let n = 0; n < 2000; n++) {
      const x = d1MaskedView({ ...seqs[0]!, id: `seq-${n}` }, 9, 0.15);
      for (let j = 0; j < task.promptLength; j++) masked += x[j] === MASK ? 1 : x[j] === seqs[0]!.prompt[j] ? 0 : NaN;
      total += task.promptLength;
      expect(Array.from(x.subarray(task.promptLength)).every((t) => t === MASK)).toBe(true);
    }
    expect(Math.abs(masked / total - 0.15)).toBeLessThan(0.01); // 16 000 Bernoulli(0.15) draws: sd 0.0028
  });

  it('d1 with pMaskPrompt = 1 ignores the prompt; with 0 it sees it', () => {
    const swapped = [{ ...seqs[0]!, prompt: seqs[1]!.prompt }];
    const full = (s: DiffusionSequence[], p: number) =>
      Array.from(diffusionEstimators.d1(model, params, s, fp32, { pMaskPrompt: p }).logp);
    expect(full(swapped, 1)).toEqual(full([seqs[0]!], 1));
    expect(full(swapped, 0)).not.toEqual(full([seqs[0]!], 0));
  });

  it('elbo with N = 1 is the one-token log-likelihood (the d1 view without prompt masking)', () => {
    const one = seqs.map((s) => ({ ...s, response: s.response.slice(0, 1) }));
    const elbo = diffusionEstimators.elbo(model, params, one, fp32, { elboSamples: 5 }).logp;
    const d1 = diffusionEstimators.d1(model, params, one, fp32, { pMaskPrompt: 0 }).logp;
    elbo.forEach((x, i) => expect(x).toBeCloseTo(d1[i]!, 12));
  });

  it('elbo is a lower bound in expectation: more samples move it little, every share is ≤ 0', () => {
    const few = diffusionEstimators.elbo(model, params, seqs, fp32, { elboSamples: 64, seed: 1 }).logp;
    expect(few.every((x) => x <= 0)).toBe(true);
    const seq = (lp: Float64Array, i: number) => lp.subarray(i * 8, (i + 1) * 8).reduce((a, b) => a + b, 0);
    const other = diffusionEstimators.elbo(model, params, seqs, fp32, { elboSamples: 64, seed: 2 }).logp;
    for (let i = 0; i < 3; i++)
      expect(Math.abs(seq(few, i) - seq(other, i))).toBeLessThan(0.15 * Math.abs(seq(few, i)));
  });

  it('trajectory needs sampled sequences; options are validated', () => {
    expect(() => diffusionEstimators.trajectory(model, params, seqs, fp32)).toThrow(
      /sequences\[0\] \("s0"\) has no commitStep/,
    );
    expect(() => diffusionLogprobs('exact' as never, model, params, seqs, fp32)).toThrow(
      /estimator must be one of trajectory, d1, elbo, got "exact"/,
    );
    expect(() => diffusionEstimators.d1(model, params, seqs, fp32, { pMaskPrompt: 1.5 })).toThrow(
      /pMaskPrompt must be in \[0, 1\], got 1.5/,
    );
    expect(() => diffusionEstimators.elbo(model, params, seqs, fp32, { elboSamples: 0 })).toThrow(
      /elboSamples must be a positive integer, got 0/,
    );
    expect(() => diffusionEstimators.d1(model, params, seqs, fp32, { temperature: 0 })).toThrow(
      /temperature must be finite and > 0, got 0/,
    );
  });

  it('completion mask covers the response up to and including the first EOS', () => {
    const m = diffusionCompletionMask([
      { ...seqs[0]!, response: [5, 6, EOS, 7, EOS, 5, 5, 5] },
      { ...seqs[0]!, response: [5, 5, 5, 5, 5, 5, 5, 5] },
    ]);
    expect(Array.from(m)).toEqual([1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]);
  });
});
