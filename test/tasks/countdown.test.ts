// Hand-checked TinyZero/d1 rewards of `countdown`, the exact parser against JavaScript as an oracle, and the gold search.
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import {
  evaluateRpn,
  literalsOf,
  parseExpression,
  threeNumberExpressions,
} from '../../src/tasks/countdown-expression.js';
import { createCountdownTask, MASK } from '../../src/tasks/index.js';

describe('countdown rewards', () => {
  const task = createCountdownTask();
  const enc = (text: string) => task.tokenizer.encode(text);
  const p = task.makeProblem([3, 5, 7], 22);
  const score = (text: string) => task.reward(p, enc(text));

  it('builds the documented layout', () => {
    expect(task.tokenizer.decode(p.prompt)).toBe('<bos>357=22<sep>');
    expect(task.tokenizer.decode(task.makeProblem([1, 2, 1], 2).prompt)).toBe('<pad><bos>121=2<sep>');
    expect(task.tokenizer.decode(task.goldResponse(p))).toBe('3*5+7<eos>');
    expect([task.vocabSize, task.promptLength, task.responseLength]).toEqual([22, 8, 8]);
  });

  it('gives 1 to a correct expression in any order or bracketing', () => {
    for (const text of ['3*5+7', '7+3*5', '5*3+7', '(3*5)+7', '((7))+(5*3)', '5*(3)+7', '(5*3+7)']) {
      expect(score(`${text}<eos>`)).toEqual({ reward: 1, correct: true });
    }
  });

  it('gives 0.1 to a well-formed but wrong expression', () => {
    expect(score('3+5+7<eos>')).toEqual({ reward: 0.1, correct: false }); // wrong value
    expect(score('3*5+3<eos>')).toEqual({ reward: 0.1, correct: false }); // 3 reused, 7 unused
    expect(score('3*5*5+7<eos>')).toEqual({ reward: 0.1, correct: false }); // 5 reused
    expect(score('3*5<eos>')).toEqual({ reward: 0.1, correct: false }); // 7 unused
    expect(score('15+7<eos>')).toEqual({ reward: 0.1, correct: false }); // right value, wrong numbers
    expect(score('35-13<eos>')).toEqual({ reward: 0.1, correct: false }); // multi-digit literals
    const zero = task.makeProblem([4, 2, 2], 8);
    expect(task.tokenizer.decode(task.goldResponse(zero))).toBe('4+2+2<eos>');
    expect(task.reward(zero, enc('4/(2-2)<eos>'))).toEqual({ reward: 0.1, correct: false }); // division by zero
    expect(task.reward(zero, enc('(2-2)/4<eos>'))).toEqual({ reward: 0.1, correct: false }); // value 0, not 8
    // rationals are exact: 7/3 is not rounded to an integer
    const third = task.makeProblem([7, 3, 1], 2);
    expect(task.reward(third, enc('7/3-1<eos>'))).toEqual({ reward: 0.1, correct: false });
    expect(task.reward(third, enc('(7-1)/3<eos>'))).toEqual({ reward: 1, correct: true });
  });

  it('gives 0 to anything that does not parse or is not closed by EOS', () => {
    for (const text of [
      '3*5+7',
      '<eos>',
      '3*5+<eos>',
      '-3+5*7<eos>',
      '3*(5+7<eos>',
      '3*5)+7<eos>',
      '3(5)+7<eos>',
      '3*5+07<eos>',
      '()3*5+7<eos>',
      '3*5=22<eos>',
      '3**5+7<eos>',
      '<pad>3*5+7<eos>',
      '3*5<sep>+7<eos>',
    ]) {
      expect(score(text), text).toEqual({ reward: 0, correct: false });
    }
    expect(task.reward(p, [...enc('3*5+'), MASK, ...enc('<eos>')])).toEqual({ reward: 0, correct: false });
    expect(task.reward(p, [...enc('3*5+'), 99, ...enc('7<eos>')])).toEqual({ reward: 0, correct: false });
    expect(task.reward(p, [...enc('3*5+7'), 2.5, ...enc('<eos>')])).toEqual({ reward: 0, correct: false });
  });

  it('ignores tokens after the first EOS', () => {
    expect(score('3*5+7<eos>+1<eos>')).toEqual({ reward: 1, correct: true });
    expect(score('3*5<eos>+7<eos>')).toEqual({ reward: 0.1, correct: false });
  });

  it('survives deep nesting without recursion', () => {
    const deep = [...'('.repeat(100_000)].concat(['3'], [...')'.repeat(100_000)]).join('');
    expect(score(`${deep}*5+7<eos>`)).toEqual({ reward: 1, correct: true });
    expect(score(`${'('.repeat(100_000)}<eos>`)).toEqual({ reward: 0, correct: false });
  });

  it('validates makeProblem and options-dependent targets', () => {
    expect(() => task.makeProblem([3, 5, 7], 23)).toThrow(
      /target must be an integer in \[1, 99\] reachable from 3, 5, 7, got 23/,
    );
    expect(() => task.makeProblem([3, 0, 7], 21)).toThrow(/numbers must be three integers in \[1, 9\], got \[3,0,7\]/);
    const big = createCountdownTask({ minTarget: 100, maxTarget: 729 });
    expect(big.promptLength).toBe(9);
    expect(big.tokenizer.decode(big.makeProblem([9, 9, 9], 729).prompt)).toBe('<bos>999=729<sep>');
    expect(big.trainProblems(200, 1).every((q) => q.target >= 100 && q.target <= 729)).toBe(true);
    expect(() => big.makeProblem([3, 5, 7], 22)).toThrow(/target must be an integer in \[100, 729\]/);
  });
});

describe('countdown expressions', () => {
  it('prints all 192 expressions so that they parse back to their value', () => {
    for (const numbers of [
      [3, 5, 7],
      [4, 2, 2],
      [9, 1, 6],
      [8, 8, 8],
    ] as const) {
      const list = threeNumberExpressions(numbers);
      expect(list).toHaveLength(192);
      for (const { text, value } of list) {
        const rpn = parseExpression([...text]);
        expect(rpn, text).toBeDefined();
        expect(literalsOf(rpn!).sort()).toEqual(numbers.map(String).sort());
        expect(evaluateRpn(rpn!), text).toEqual(value);
        expect(text.length).toBeLessThanOrEqual(7);
      }
    }
  });

  it('picks the first shortest expression as gold', () => {
    const task = createCountdownTask();
    const gold = (n: readonly [number, number, number], t: number) =>
      task.tokenizer.decode(task.goldResponse(task.makeProblem(n, t)));
    expect(gold([3, 5, 7], 56)).toBe('(3+5)*7<eos>');
    expect(gold([5, 1, 6], 2)).toBe('1-5+6<eos>');
    expect(gold([7, 3, 1], 2)).toBe('(7-1)/3<eos>');
  });

  const exprToken = fc.constantFrom('0', '1', '2', '3', '7', '9', '+', '-', '*', '/', '(', ')');
  test.prop([fc.array(exprToken, { maxLength: 11 })], { numRuns: 2000 })(
    'agrees with JavaScript on every string of expression tokens',
    (tokens) => {
      const text = tokens.join('');
      let js: number | undefined;
      try {
        js = Number(new Function(`"use strict"; return (${text});`)());
      } catch {
        js = undefined;
      }
      const rpn = parseExpression(tokens);
      if (rpn === undefined) {
        // JavaScript accepts more: unary signs, regex literals, `**` and comments; otherwise it must reject too.
        const jsOnly = /(^|[-+*/(])[-+/]/.test(text) || /\*\*|\/\/|\/\*/.test(text);
        if (!jsOnly) expect(js, text).toBeUndefined();
        return;
      }
      expect(js, text).toBeDefined();
      const value = evaluateRpn(rpn);
      if (value === undefined) {
        expect(text).toContain('/');
        return;
      }
      const exact = Number(value.num) / Number(value.den);
      expect(Math.abs((js as number) - exact), text).toBeLessThanOrEqual(1e-9 * Math.max(1, Math.abs(exact)));
    },
  );
});
