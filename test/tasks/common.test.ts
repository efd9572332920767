// Properties every task must have: layouts, reproducible generators, disjoint splits, gold rewards, robust rewards.
// Task-specific reward cases live in reverse/sudoku4/countdown tests.
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.js';
import { BOS, EOS, MASK, PAD, SEP, makeTask, makeTaskFromConfig, taskNames, type Task } from '../../src/tasks/index.js';

const allTasks: readonly Task[] = taskNames.map((name) => makeTask(name));

/** Arbitrary integer token sequences: in-vocabulary ids, specials, negative and huge ids. */
function anyResponse(task: Task) {
  const id = fc.oneof(
    { arbitrary: fc.integer({ min: 0, max: task.vocabSize - 1 }), weight: 6 },
    { arbitrary: fc.constantFrom(PAD, BOS, EOS, SEP, MASK), weight: 2 },
    { arbitrary: fc.integer(), weight: 1 },
    {
      arbitrary: fc.constantFrom(
        -1,
        task.vocabSize,
        2 ** 31,
        -(2 ** 31),
        Number.MAX_SAFE_INTEGER,
        -Number.MAX_SAFE_INTEGER,
      ),
      weight: 1,
    },
  );
  return fc.array(id, { maxLength: 3 * task.responseLength });
}

/** The gold response with a few positions overwritten: exercises the partially right paths. */
function mutatedGold(task: Task) {
  return fc.record({
    seed: fc.integer({ min: 0, max: 1000 }),
    edits: fc.array(fc.tuple(fc.nat(20), fc.integer({ min: -2, max: task.vocabSize + 1 })), { maxLength: 4 }),
    cut: fc.nat(20),
  });
}

describe.each(allTasks.map((t) => [t.name, t] as const))('%s', (_name, task) => {
  it('has a small vocabulary with the shared specials at ids 0–4', () => {
    expect(task.vocabSize).toBe(task.tokenizer.vocab.length);
    expect(task.vocabSize).toBeLessThanOrEqual(32);
    expect(task.tokenizer.vocab.slice(0, 5)).toEqual(['<pad>', '<bos>', '<eos>', '<sep>', '<mask>']);
    expect(task.promptLength + task.responseLength).toBeLessThanOrEqual(
      { sudoku4: 40, fibonacci: 41 }[task.name as string] ?? 20,
    );
  });

  it('lays out prompts and gold responses as documented', () => {
    for (const p of [...task.trainProblems(200, 1), ...task.evalProblems(50, 1)]) {
      expect(p.prompt).toHaveLength(task.promptLength);
      const start = p.prompt.findIndex((t) => t !== PAD);
      expect(p.prompt[start]).toBe(BOS);
      expect(p.prompt[task.promptLength - 1]).toBe(SEP);
      const inner = p.prompt.slice(start + 1, -1);
      expect(inner.every((t) => t >= 5 && t < task.vocabSize)).toBe(true);
      expect(task.tokenizer.decode(inner)).toBe(p.key);
      const gold = task.goldResponse(p);
      expect(gold.length).toBeLessThanOrEqual(task.responseLength);
      expect(gold.indexOf(EOS)).toBe(gold.length - 1);
      expect(gold.slice(0, -1).every((t) => t >= 5 && t < task.vocabSize)).toBe(true);
      expect(p.prompt).not.toContain(MASK);
      expect(gold).not.toContain(MASK);
    }
  });

  it('gives gold responses reward 1 and correct, on both splits', () => {
    for (const p of [...task.trainProblems(300, 2), ...task.evalProblems(100, 2)]) {
      expect(task.reward(p, task.goldResponse(p))).toEqual({ reward: 1, correct: true });
    }
  });

  it('scores an empty, unterminated or EOS-only response 0', () => {
    const [p] = task.trainProblems(1, 3);
    if (p === undefined) throw new Error('no problem');
    const gold = task.goldResponse(p);
    expect(task.reward(p, [])).toEqual({ reward: 0, correct: false });
    expect(task.reward(p, [EOS])).toEqual({ reward: 0, correct: false });
    expect(task.reward(p, gold.slice(0, -1))).toEqual({ reward: 0, correct: false });
  });

  it('reproduces problems from the seed and changes them with it', () => {
    const again = makeTaskFromConfig(task);
    expect(again.trainProblems(40, 'abc')).toEqual(task.trainProblems(40, 'abc'));
    expect(again.evalProblems(40, 9)).toEqual(task.evalProblems(40, 9));
    const a = task.sampleProblem(createRng(5));
    expect(task.sampleProblem(createRng(5))).toEqual(a);
    const keys = (seed: number) =>
      task
        .trainProblems(40, seed)
        .map((p) => p.key)
        .join('|');
    expect(keys(1)).not.toBe(keys(2));
    expect(task.trainProblems(0, 1)).toEqual([]);
    expect(task.trainProblems(25, 'abc')).toEqual(task.trainProblems(40, 'abc').slice(0, 25));
    expect(task.evalProblems(25, 9)).toEqual(task.evalProblems(40, 9).slice(0, 25));
  });

  it('keeps train and eval disjoint and eval problems distinct', () => {
    const train = task.trainProblems(3000, 11);
    const evalSet = task.evalProblems(200, 11);
    expect(train.every((p) => task.splitOf(p) === 'train')).toBe(true);
    expect(evalSet.every((p) => task.splitOf(p) === 'eval')).toBe(true);
    expect(new Set(evalSet.map((p) => p.key)).size).toBe(evalSet.length);
    const trainKeys = new Set(train.map((p) => p.key));
    expect(evalSet.filter((p) => trainKeys.has(p.key))).toEqual([]);
    // the default split is train
    const rng = createRng(4);
    for (let i = 0; i < 50; i++) expect(task.splitOf(task.sampleProblem(rng))).toBe('train');
  });

  it('rejects a bad n', () => {
    expect(() => task.trainProblems(-1, 0)).toThrow(/trainProblems: n must be a non-negative integer, got -1/);
    expect(() => task.evalProblems(1.5, 0)).toThrow(/evalProblems: n must be a non-negative integer, got 1.5/);
  });

  test.prop([fc.integer({ min: 0, max: 10_000 }), anyResponse(task)])(
    'reward never throws and stays in range for arbitrary integer sequences',
    (seed, response) => {
      const p = task.sampleProblem(createRng(seed));
      const r = task.reward(p, response);
      expect(Number.isFinite(r.reward)).toBe(true);
      expect(r.reward).toBeGreaterThanOrEqual(task.rewardRange[0]);
      expect(r.reward).toBeLessThanOrEqual(task.rewardRange[1]);
      if (r.correct) expect(r.reward).toBe(task.rewardRange[1]);
      if (!response.includes(EOS)) expect(r).toEqual({ reward: 0, correct: false });
    },
  );

  test.prop([mutatedGold(task), anyResponse(task)])(
    'reward of a mutated gold response is in range and ignores tokens after the first EOS',
    ({ seed, edits, cut }, tail) => {
      const p = task.sampleProblem(createRng(seed));
      const response = task.goldResponse(p);
      for (const [at, id] of edits) response[at % response.length] = id;
      const closed = [...response.slice(0, cut % (response.length + 1)), EOS];
      const r = task.reward(p, closed);
      expect(r.reward).toBeGreaterThanOrEqual(task.rewardRange[0]);
      expect(r.reward).toBeLessThanOrEqual(task.rewardRange[1]);
      expect(task.reward(p, [...closed, ...tail])).toEqual(r);
    },
  );
});
