// The AR engine reuses its ℓold pass for the update's first ℓθ pass when the inputs are the same (one
// mini-batch, one epoch): the result and the gradients equal a fresh pass, and any change recomputes.

import { describe, expect, it } from 'vitest';
import { createArEngine } from '../../../src/policies/index.js';
import { resolveRunConfig } from '../../../src/rl/grpo/config.js';
import { makeTask } from '../../../src/tasks/index.js';
import { createRng } from '../../../src/core/rng.js';

function sameBits(got: ArrayLike<number>, want: ArrayLike<number>): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++)
    if (!Object.is(got[i], want[i])) expect.fail(`element ${i}: got ${got[i]}, want ${want[i]}`);
}

const config = resolveRunConfig({
  task: { name: 'reverse' },
  policy: { model: { C: 16, H: 2, layers: 1, hidden: 32 } },
  plan: 'fp8-rollout',
});
const task = makeTask('reverse');

function setup() {
  const engine = createArEngine(config, task as never);
  const gen = engine.generate(
    task.trainProblems(4, 1).map((p) => [...p.prompt]),
    createRng(3),
  );
  return { engine, batch: { weightVersion: 0, ...gen } };
}

type Between = (engine: ReturnType<typeof createArEngine>, batch: ReturnType<typeof setup>['batch']) => void;

/** ℓ, entropy and gradients of a grad pass on `rows`, after an ℓold pass on `oldRows` and `between` (or alone). */
function gradPass(withOld: boolean, oldRows: number[], rows: number[], between: Between, probSqSum = false) {
  const { engine, batch } = setup();
  if (withOld) engine.logprobs(batch, oldRows, { grad: false });
  between(engine, batch);
  const lp = engine.logprobs(batch, rows, { grad: true, probSqSum });
  const g = Float64Array.from({ length: rows.length * batch.T }, (_, i) => ((i * 7) % 5) - 2);
  engine.params.grads.fill(0);
  engine.backward(g);
  return { lp, grads: Float32Array.from(engine.params.grads) };
}

describe('AR engine: the ℓold pass serves the first ℓθ pass with the same inputs', () => {
  const cases: [string, number[], number[], Between, boolean?][] = [
    ['same rows and weights (reused)', [0, 1, 2, 3], [0, 1, 2, 3], () => {}],
    [
      'a reference pass in between (reused)',
      [0, 1, 2, 3],
      [0, 1, 2, 3],
      (e, b) =>
        void e.logprobs(b, [0, 1, 2, 3], { grad: false, weights: Float32Array.from(e.params.data, (x) => x * 0.5) }),
    ],
    [
      'weights changed in between',
      [0, 1, 2, 3],
      [0, 1, 2, 3],
      (e) => void (e.params.data[5] = Math.fround(e.params.data[5]! + 0.125)),
    ],
    ['other rows', [0, 1, 2, 3], [0, 2, 1, 3], () => {}],
    ['Σπ² asked only by the later pass', [0, 1, 2, 3], [0, 1, 2, 3], () => {}, true],
  ];
  for (const [name, oldRows, rows, between, sq] of cases) {
    it(`equals a fresh pass bit for bit: ${name}`, () => {
      const got = gradPass(true, oldRows, rows, between, sq);
      const want = gradPass(false, oldRows, rows, between, sq);
      sameBits(got.lp.logp, want.lp.logp);
      sameBits(got.lp.entropy, want.lp.entropy);
      expect(got.lp.probSqSum === undefined).toBe(want.lp.probSqSum === undefined);
      if (want.lp.probSqSum !== undefined) sameBits(got.lp.probSqSum!, want.lp.probSqSum);
      sameBits(got.grads, want.grads);
    });
  }

  it('a reused pass returns its own arrays (the ℓold result is not shared)', () => {
    const { engine, batch } = setup();
    const old = engine.logprobs(batch, [0, 1], { grad: false });
    const theta = engine.logprobs(batch, [0, 1], { grad: true });
    expect(theta.logp).not.toBe(old.logp);
    sameBits(theta.logp, old.logp);
  });
});
