// The `countdown` task: three numbers 1–9 and a reachable target → an arithmetic expression, with TinyZero/d1 rewards.
// Not the original Countdown scale (numbers up to 100, free-form reasoning); the expression is the whole response.

import { z } from 'zod';
import type { Rng } from '../core/rng.js';
import {
  evaluateRpn,
  literalsOf,
  parseExpression,
  threeNumberExpressions,
  type ThreeNumberExpression,
} from './countdown-expression.js';
import { checkOrdered, hashSplitOptionsShape, intOption, parseOptions, type HashSplitOptions } from './options.js';
import {
  assembleTask,
  drawUntil,
  leftPad,
  responseBody,
  splitHash,
  type RewardResult,
  type Split,
  type Task,
  type TaskProblem,
} from './task.js';
import { BOS, EOS, SEP, createTokenizer } from './tokenizer.js';

/** Options of the `countdown` task. */
export interface CountdownOptions extends HashSplitOptions {
  /**
   * Smallest target, 1–729 (targets are positive, as in TinyZero's data).
   * @defaultValue 1
   */
  readonly minTarget: number;
  /**
   * Largest target, 1–729 (9·9·9 is the largest value three numbers 1–9 reach). 99 matches
   * TinyZero's targets below 100 and keeps the target at two tokens.
   * @defaultValue 99
   */
  readonly maxTarget: number;
}

/** Zod schema of {@link CountdownOptions}: every field optional with its default; unknown keys rejected. */
export const countdownOptionsSchema: z.ZodType<CountdownOptions, Partial<CountdownOptions>> = z.strictObject({
  minTarget: intOption(1, 729).default(1),
  maxTarget: intOption(1, 729).default(99),
  ...hashSplitOptionsShape,
});

/** A `countdown` problem. */
export interface CountdownProblem extends TaskProblem {
  /** The three numbers, 1–9, in prompt order (repeats allowed). */
  readonly numbers: readonly [number, number, number];
  /** The target, reachable with each number used exactly once. */
  readonly target: number;
}

/** The `countdown` task type: a {@link Task} that also builds a problem from given numbers and target. */
export interface CountdownTask extends Task<CountdownProblem, CountdownOptions> {
  /**
   * The problem with these `numbers` (three integers 1–9, in prompt order) and `target` (in
   * `[minTarget, maxTarget]` and reachable). Throws an error naming the bad argument.
   */
  makeProblem(numbers: readonly [number, number, number], target: number): CountdownProblem;
}

/** Reward values of TinyZero's `compute_score` as used by d1 (`format_score = 0.1`, `score = 1.0`). */
const score = { correct: 1, wellFormed: 0.1, malformed: 0 } as const;

/**
 * The `countdown` task. Prompt `[PAD…] BOS a b c = t… SEP` (target in decimal digits, left-padded to
 * `6 + digits(maxTarget)`), gold response an expression and EOS, e.g. `(3+5)*7<eos>`.
 *
 * The body (the response before its first EOS) is parsed as an infix expression over decimal
 * numbers with `+ - * /` and parentheses (binary operators only). Reward, after TinyZero's
 * `countdown.compute_score` (used by d1):
 * - 0 if there is no EOS or the body does not parse (the analogue of a missing `<answer>` tag);
 * - 0.1 if it parses but its numbers are not exactly the multiset {a, b, c}, it divides by zero,
 *   or its exact rational value differs from the target;
 * - 1 if it uses each number once and its value equals the target exactly (`correct`).
 *
 * The gold expression is the first of the shortest among all 192 expressions over the three numbers
 * (see {@link threeNumberExpressions}) that reach the target.
 *
 * @example
 * ```ts
 * const task = createCountdownTask();
 * const p = task.makeProblem([3, 5, 7], 22);
 * task.reward(p, task.tokenizer.encode('3*5+7<eos>')); // { reward: 1, correct: true }
 * task.reward(p, task.tokenizer.encode('3+5+7<eos>')); // { reward: 0.1, correct: false }
 * task.reward(p, task.tokenizer.encode('3+5+<eos>'));  // { reward: 0, correct: false }
 * ```
 */
export function createCountdownTask(options?: Partial<CountdownOptions>): CountdownTask {
  const o = Object.freeze(parseOptions('countdown', countdownOptionsSchema, options));
  checkOrdered('countdown', 'minTarget', o.minTarget, 'maxTarget', o.maxTarget);
  const tokenizer = createTokenizer([
    '0',
    '1',
    '2',
    '3',
    '4',
    '5',
    '6',
    '7',
    '8',
    '9',
    '+',
    '-',
    '*',
    '/',
    '(',
    ')',
    '=',
  ]);
  const promptLength = 6 + String(o.maxTarget).length;

  const expressionsCache = new Map<string, ThreeNumberExpression[]>();
  const expressionsOf = (numbers: readonly [number, number, number]): ThreeNumberExpression[] => {
    const key = numbers.join(',');
    let list = expressionsCache.get(key);
    if (list === undefined) {
      list = threeNumberExpressions(numbers);
      expressionsCache.set(key, list);
    }
    return list;
  };
  const sortedKey = (numbers: readonly number[], target: number): string =>
    `countdown:${[...numbers].sort((x, y) => x - y).join(',')}=${target}`;
  const splitOfPair = (numbers: readonly number[], target: number): Split =>
    splitHash(sortedKey(numbers, target)) < o.evalFraction ? 'eval' : 'train';

  /** Integer targets in range reachable from `numbers`, ascending. */
  const reachableTargets = (numbers: readonly [number, number, number]): number[] => {
    const targets = new Set<number>();
    for (const { value } of expressionsOf(numbers)) {
      if (value === undefined || value.den !== 1n) continue;
      const t = Number(value.num);
      if (t >= o.minTarget && t <= o.maxTarget) targets.add(t);
    }
    return [...targets].sort((x, y) => x - y);
  };

  const makeProblem = (numbers: readonly [number, number, number], target: number): CountdownProblem => {
    if (numbers.length !== 3 || !numbers.every((n) => Number.isInteger(n) && n >= 1 && n <= 9)) {
      throw new Error(
        `countdown.makeProblem: numbers must be three integers in [1, 9], got ${JSON.stringify(numbers)}`,
      );
    }
    if (!reachableTargets(numbers).includes(target)) {
      throw new Error(
        `countdown.makeProblem: target must be an integer in [${o.minTarget}, ${o.maxTarget}] reachable from ${numbers.join(', ')}, got ${target}`,
      );
    }
    const key = `${numbers.join('')}=${target}`;
    return Object.freeze({
      prompt: Object.freeze(leftPad([BOS, ...tokenizer.encode(key), SEP], promptLength)),
      key,
      numbers: Object.freeze([numbers[0], numbers[1], numbers[2]] as const),
      target,
    });
  };

  const sampleProblem = (rng: Rng, split: Split = 'train'): CountdownProblem => {
    const drawn = drawUntil(
      () => {
        const numbers = [1 + rng.int(9), 1 + rng.int(9), 1 + rng.int(9)] as const;
        const targets = reachableTargets(numbers).filter((t) => splitOfPair(numbers, t) === split);
        return { numbers, target: targets.length === 0 ? undefined : targets[rng.int(targets.length)] };
      },
      (x) => x.target !== undefined,
      () => `countdown.sampleProblem(${split})`,
    );
    return makeProblem(drawn.numbers, drawn.target as number);
  };

  const reward = (problem: CountdownProblem, response: readonly number[]): RewardResult => {
    const body = responseBody(response);
    if (body === undefined) return { reward: score.malformed, correct: false };
    const rpn = parseExpression(body.map((id) => tokenizer.vocab[id]));
    if (rpn === undefined) return { reward: score.malformed, correct: false };
    const used = literalsOf(rpn).sort().join(',');
    const given = problem.numbers.map(String).sort().join(',');
    if (used !== given) return { reward: score.wellFormed, correct: false };
    const value = evaluateRpn(rpn);
    if (value === undefined || value.den !== 1n || value.num !== BigInt(problem.target)) {
      return { reward: score.wellFormed, correct: false };
    }
    return { reward: score.correct, correct: true };
  };

  const goldResponse = (problem: CountdownProblem): number[] => {
    let best: string | undefined;
    for (const { text, value } of expressionsOf(problem.numbers)) {
      if (value === undefined || value.den !== 1n || value.num !== BigInt(problem.target)) continue;
      if (best === undefined || text.length < best.length) best = text;
    }
    if (best === undefined) {
      throw new Error(
        `countdown.goldResponse: target ${problem.target} is not reachable from ${problem.numbers.join(', ')}`,
      );
    }
    return [...tokenizer.encode(best), EOS];
  };

  return assembleTask<CountdownTask>({
    name: 'countdown',
    options: o,
    tokenizer,
    promptLength,
    responseLength: 8,
    sampleProblem,
    splitOf: (p) => splitOfPair(p.numbers, p.target),
    reward,
    goldResponse,
    makeProblem,
  });
}
