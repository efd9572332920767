// Hand-checked rewards and option handling of the `reverse` task.
import { describe, expect, it } from 'vitest';
import { createReverseTask, EOS, MASK } from '../../src/tasks/index.js';

describe('reverse', () => {
  const task = createReverseTask();
  const enc = (text: string) => task.tokenizer.encode(text);
  const p = task.makeProblem('cabd');
  const score = (text: string) => task.reward(p, enc(text));

  it('builds the documented layout', () => {
    expect(task.tokenizer.decode(p.prompt)).toBe('<pad><pad><bos>cabd<sep>');
    expect(task.tokenizer.decode(task.goldResponse(p))).toBe('dbac<eos>');
    expect([task.vocabSize, task.promptLength, task.responseLength]).toEqual([13, 8, 7]);
  });

  it('gives per-position credit over max(m, n)', () => {
    expect(score('dbac<eos>')).toEqual({ reward: 1, correct: true });
    expect(score('dbcc<eos>')).toEqual({ reward: 0.75, correct: false });
    expect(score('cabd<eos>')).toEqual({ reward: 0, correct: false }); // the input echoed: nothing in place
    expect(score('abcd<eos>')).toEqual({ reward: 0.25, correct: false }); // only the b in second place
    expect(score('dba<eos>')).toEqual({ reward: 0.75, correct: false }); // too short: 3 of 4
    expect(score('dbaca<eos>')).toEqual({ reward: 0.8, correct: false }); // too long: 4 of 5
    expect(score('bac<eos>')).toEqual({ reward: 0, correct: false }); // shifted: nothing in place
    expect(task.reward(p, [...enc('db'), MASK, ...enc('c<eos>')])).toEqual({ reward: 0.75, correct: false });
    expect(task.reward(p, [...enc('db'), -7, 2 ** 40, EOS])).toEqual({ reward: 0.5, correct: false });
  });

  it('reads up to the first EOS and needs one', () => {
    expect(score('dbac<eos>cc<eos>')).toEqual({ reward: 1, correct: true });
    expect(score('db<eos>ac<eos>')).toEqual({ reward: 0.5, correct: false });
    expect(score('dbac')).toEqual({ reward: 0, correct: false });
    expect(score('<eos>')).toEqual({ reward: 0, correct: false });
  });

  it('uses the configured alphabet and lengths', () => {
    const t = createReverseTask({ alphabetSize: 3, minLength: 2, maxLength: 8 });
    expect(t.tokenizer.vocab.slice(5)).toEqual(['a', 'b', 'c']);
    expect([t.promptLength, t.responseLength]).toEqual([10, 9]);
    const lengths = new Set(t.trainProblems(500, 1).map((q) => q.input.length));
    expect([...lengths].sort()).toEqual([2, 3, 4, 5, 6, 7, 8]);
    expect(() => t.makeProblem('abd')).toThrow(/reverse.makeProblem: text must be 2–8 of the symbols abc, got "abd"/);
    expect(() => t.makeProblem('a')).toThrow(/got "a"/);
  });

  it('throws when the eval split runs out of distinct problems', () => {
    const t = createReverseTask({ alphabetSize: 2, minLength: 1, maxLength: 2, evalFraction: 0.5 });
    const held = ['a', 'b', 'aa', 'ab', 'ba', 'bb'].filter((s) => t.splitOf(t.makeProblem(s)) === 'eval');
    expect(held.length).toBeGreaterThan(0);
    expect(
      t
        .evalProblems(held.length, 1)
        .map((q) => q.key)
        .sort(),
    ).toEqual(held.sort());
    expect(() => t.evalProblems(held.length + 1, 1)).toThrow(
      new RegExp(
        `reverse.evalProblems: n = ${held.length + 1} exceeds the distinct eval problems found \\(${held.length}\\)`,
      ),
    );
  });

  it('holds out about evalFraction of the strings', () => {
    const t = createReverseTask({ minLength: 4, maxLength: 4 });
    const all: string[] = [];
    for (let i = 0; i < 8 ** 4; i++) all.push([0, 1, 2, 3].map((k) => 'abcdefgh'[(i >> (3 * k)) & 7]).join(''));
    const held = all.filter((s) => t.splitOf(t.makeProblem(s)) === 'eval').length;
    expect(held / all.length).toBeGreaterThan(0.08);
    expect(held / all.length).toBeLessThan(0.12);
    // a larger fraction only adds strings to the eval split
    const wider = createReverseTask({ minLength: 4, maxLength: 4, evalFraction: 0.3 });
    expect(
      all.every((s) => t.splitOf(t.makeProblem(s)) === 'train' || wider.splitOf(wider.makeProblem(s)) === 'eval'),
    ).toBe(true);
  });
});
