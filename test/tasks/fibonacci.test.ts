// The `fibonacci` task: layout, the prefix reward, long responses, options and held-out split.
// The properties every task shares (reward never throws, gold scores 1, splits disjoint) are in common.test.ts.
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import { BOS, SEP, createFibonacciTask } from '../../src/tasks/index.js';

describe('fibonacci', () => {
  const task = createFibonacciTask();

  it('lays out the prompt as BOS, three length digits, #, two seeds, SEP', () => {
    const p = task.makeProblem(8, 1, 1);
    expect(p.prompt).toEqual([BOS, ...task.tokenizer.encode('008#11'), SEP]);
    expect(p.key).toBe('008#11');
    expect(task.tokenizer.decode(task.goldResponse(p))).toBe('23583145<eos>');
    expect(task.tokenizer.decode(task.goldResponse(task.makeProblem(12, 0, 0)))).toBe('000000000000<eos>');
  });

  it('credits the correct prefix only', () => {
    const p = task.makeProblem(8, 1, 1);
    const enc = (s: string) => task.tokenizer.encode(s);
    expect(task.reward(p, enc('23583145<eos>'))).toEqual({ reward: 1, correct: true });
    expect(task.reward(p, enc('23593145<eos>'))).toEqual({ reward: 3 / 8, correct: false });
    expect(task.reward(p, enc('2358<eos>'))).toEqual({ reward: 4 / 8, correct: false });
    expect(task.reward(p, enc('2358314500<eos>'))).toEqual({ reward: 8 / 10, correct: false });
    expect(task.reward(p, enc('23583145'))).toEqual({ reward: 0, correct: false });
    expect(task.reward(p, enc('<eos>23583145<eos>'))).toEqual({ reward: 0, correct: false });
  });

  it('asks for up to 999 terms: the gold of a long problem scores 1 and fits responseLength', () => {
    const long = createFibonacciTask({ minLength: 256, maxLength: 512 });
    expect(long.responseLength).toBe(513);
    for (const p of [...long.trainProblems(20, 1), ...long.evalProblems(20, 1)]) {
      expect(p.length).toBeGreaterThanOrEqual(256);
      const gold = long.goldResponse(p);
      expect(gold).toHaveLength(p.length + 1);
      expect(long.reward(p, gold)).toEqual({ reward: 1, correct: true });
      // one wrong term near the start loses nearly everything after it
      const wrong = [...gold];
      wrong[3] = 5 + ((gold[3]! - 5 + 1) % 10);
      expect(long.reward(p, wrong).reward).toBe(3 / p.length);
    }
    const max = createFibonacciTask({ minLength: 999, maxLength: 999 }).makeProblem(999, 3, 7);
    expect(max.key).toBe('999#37');
  });

  it('keeps long train and eval problems disjoint', () => {
    const long = createFibonacciTask({ minLength: 200, maxLength: 300 });
    const train = new Set(long.trainProblems(2000, 3).map((p) => p.key));
    const evalSet = long.evalProblems(300, 3);
    expect(evalSet.every((p) => !train.has(p.key) && long.splitOf(p) === 'eval')).toBe(true);
  });

  test.prop([fc.integer({ min: 0, max: 1000 }), fc.array(fc.integer({ min: -3, max: 20 }), { maxLength: 700 })])(
    'reward never throws on long arbitrary responses',
    (seed, response) => {
      const long = createFibonacciTask({ minLength: 256, maxLength: 600 });
      const r = long.reward(long.sampleProblem(createRng(seed)), response);
      expect(r.reward).toBeGreaterThanOrEqual(0);
      expect(r.reward).toBeLessThanOrEqual(1);
    },
  );

  it('rejects bad makeProblem arguments, naming them', () => {
    expect(() => task.makeProblem(40, 1, 1)).toThrow(/length must be an integer in \[8, 32\], got 40/);
    expect(() => task.makeProblem(8, 10, 1)).toThrow(/x0 must be a digit 0–9, got 10/);
    expect(() => task.makeProblem(8, 1, -1)).toThrow(/x1 must be a digit 0–9, got -1/);
  });
});
