// The task registry: names, defaults, and option errors that name the option and the value.
import { describe, expect, it } from 'vitest';
import { makeTask, makeTaskFromConfig, taskNames, tasks, type TaskName } from '../../src/tasks/index.js';

describe('task registry', () => {
  it('lists every task under its own name', () => {
    expect(Object.keys(tasks)).toEqual([...taskNames]);
    for (const name of taskNames) expect(makeTask(name).name).toBe(name);
  });

  it('fills in documented defaults', () => {
    expect(makeTask('reverse').options).toEqual({ alphabetSize: 8, minLength: 3, maxLength: 6, evalFraction: 0.1 });
    expect(makeTask('sudoku4').options).toEqual({ minBlanks: 8, maxBlanks: 8, evalGrids: 88 });
    expect(makeTask('countdown').options).toEqual({ minTarget: 1, maxTarget: 99, evalFraction: 0.1 });
    expect(makeTask('fibonacci').options).toEqual({ minLength: 8, maxLength: 32, evalFraction: 0.1 });
    expect(makeTask('reverse', { minLength: 4 }).options.minLength).toBe(4);
    expect(Object.isFrozen(makeTask('reverse').options)).toBe(true);
  });

  it('rejects unknown task names', () => {
    expect(() => makeTask('sort' as TaskName)).toThrow(
      /task: name must be one of reverse, sudoku4, countdown, fibonacci, got "sort"/,
    );
    expect(() => makeTask('toString' as TaskName)).toThrow(/got "toString"/);
    expect(() => makeTaskFromConfig({ name: 'sort', options: {} })).toThrow(
      /task: name must be one of reverse, sudoku4, countdown, fibonacci, got "sort"/,
    );
  });

  it("builds a config's task from an unchecked name and options, the same task makeTask builds", () => {
    const fromConfig = makeTaskFromConfig({ name: 'fibonacci', options: { minLength: 4, maxLength: 6 } });
    const typed = makeTask('fibonacci', { minLength: 4, maxLength: 6 });
    expect(fromConfig.name).toBe('fibonacci');
    expect(fromConfig.options).toEqual(typed.options);
    expect(fromConfig.trainProblems(5, 3)).toEqual(typed.trainProblems(5, 3));
    expect(makeTaskFromConfig({ name: 'sudoku4' }).options).toEqual(makeTask('sudoku4').options);
  });

  it.each([
    ['reverse', { maxLength: 9 }, /reverse: option maxLength must be an integer in \[1, 8\], got 9/],
    ['reverse', { alphabetSize: 2.5 }, /reverse: option alphabetSize must be an integer in \[2, 26\], got 2.5/],
    ['reverse', { minLength: '3' }, /reverse: option minLength must be an integer in \[1, 8\], got "3"/],
    [
      'reverse',
      { evalFraction: 0 },
      /reverse: option evalFraction must be a number in the open interval \(0, 1\), got 0/,
    ],
    ['reverse', { evalFraction: Number.NaN }, /option evalFraction must be .*, got NaN/],
    ['reverse', { minLength: 7, maxLength: 6 }, /reverse: option minLength \(7\) must be ≤ maxLength \(6\)/],
    ['reverse', { length: 4 }, /reverse: unknown field 'length'/],
    ['reverse', 5, /reverse: options must be an object, got 5/],
    ['sudoku4', { maxBlanks: 13 }, /sudoku4: option maxBlanks must be an integer in \[1, 12\], got 13/],
    ['sudoku4', { minBlanks: 10, maxBlanks: 9 }, /sudoku4: option minBlanks \(10\) must be ≤ maxBlanks \(9\)/],
    ['sudoku4', { evalGrids: 288 }, /sudoku4: option evalGrids must be an integer in \[1, 287\], got 288/],
    ['countdown', { maxTarget: 1000 }, /countdown: option maxTarget must be an integer in \[1, 729\], got 1000/],
    ['countdown', { minTarget: 50, maxTarget: 20 }, /countdown: option minTarget \(50\) must be ≤ maxTarget \(20\)/],
    ['fibonacci', { maxLength: 1000 }, /fibonacci: option maxLength must be an integer in \[1, 999\], got 1000/],
    ['fibonacci', { minLength: 0 }, /fibonacci: option minLength must be an integer in \[1, 999\], got 0/],
    [
      'fibonacci',
      { minLength: 300, maxLength: 256 },
      /fibonacci: option minLength \(300\) must be ≤ maxLength \(256\)/,
    ],
    ['countdown', { evalFraction: 1 }, /countdown: option evalFraction must be a number in the open interval/],
  ] as const)('%s rejects %j', (name, options, message) => {
    expect(() => makeTaskFromConfig({ name, options })).toThrow(message);
  });
});
