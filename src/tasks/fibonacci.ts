// The `fibonacci` task: two seed digits and a length n → the next n terms of the Fibonacci sequence mod 10.
// Not a reasoning task: the rule is local and fixed; it exists for long responses where one wrong token derails the rest.

import { z } from 'zod';
import { checkOrdered, hashSplitOptionsShape, intOption, parseOptions, type HashSplitOptions } from './options.js';
import {
  assembleTask,
  hashSplit,
  matchedShare,
  splitSampler,
  type RewardResult,
  type Task,
  type TaskProblem,
} from './task.js';
import { BOS, EOS, SEP, createTokenizer } from './tokenizer.js';

/** Options of the `fibonacci` task. */
export interface FibonacciOptions extends HashSplitOptions {
  /**
   * Fewest terms asked for, 1–999.
   * @defaultValue 8
   */
  readonly minLength: number;
  /**
   * Most terms asked for, 1–999 (the response is at most `maxLength + 1` tokens, EOS included).
   * 32 keeps the default CPU-cheap; 256 and more give the long responses of LLM RL.
   * @defaultValue 32
   */
  readonly maxLength: number;
}

/** Zod schema of {@link FibonacciOptions}: every field optional with its default; unknown keys rejected. */
export const fibonacciOptionsSchema: z.ZodType<FibonacciOptions, Partial<FibonacciOptions>> = z.strictObject({
  minLength: intOption(1, 999).default(8),
  maxLength: intOption(1, 999).default(32),
  ...hashSplitOptionsShape,
});

/** A `fibonacci` problem. */
export interface FibonacciProblem extends TaskProblem {
  /** Number of terms asked for. */
  readonly length: number;
  /** The two seed digits x₀, x₁ (0–9). */
  readonly seeds: readonly [number, number];
  /** The terms x₂ … x₍ₙ₊₁₎ as token ids (the gold response without its EOS). */
  readonly answer: readonly number[];
}

/** The `fibonacci` task type: a {@link Task} that also builds a problem from its parts. */
export interface FibonacciTask extends Task<FibonacciProblem, FibonacciOptions> {
  /**
   * The problem asking for `length` terms after the seed digits `x0`, `x1` (integers 0–9;
   * `length` in `[minLength, maxLength]`). Throws an error naming the bad argument.
   */
  makeProblem(length: number, x0: number, x1: number): FibonacciProblem;
}

/** Token id of digit `d` (ids of `0` … `9` start after the five special tokens). */
const digitId = (d: number): number => 5 + d;
/** Token id of `#`, between the length and the seed digits in the prompt. */
const HASH = 15;

/**
 * The `fibonacci` task. Prompt `BOS d₂ d₁ d₀ # x₀ x₁ SEP` (the length n as three decimal digits;
 * always 8 tokens, no padding), gold response `x₂ … x₍ₙ₊₁₎ EOS` with x_k = (x₍ₖ₋₁₎ + x₍ₖ₋₂₎) mod 10.
 * Each term depends on the two before it, so the first wrong term puts every later one off the
 * gold sequence, and the response must stop after exactly n terms.
 *
 * With body `o` (length m) and answer `y` (length n), the credit is the correct prefix:
 *
 * reward = (length of the longest common prefix of o and y) / max(m, n), and 0 without EOS;
 * correct ⇔ o = y (⇔ reward = 1).
 *
 * A prefix, not a per-position count: after a wrong term the gold continuation no longer follows
 * from the response, so later matches would be luck (the sequence mod 10 is periodic).
 *
 * @example
 * ```ts
 * const task = createFibonacciTask();
 * const p = task.makeProblem(8, 1, 1);
 * task.tokenizer.decode(task.goldResponse(p)); // '23583145<eos>'
 * ```
 */
export function createFibonacciTask(options?: Partial<FibonacciOptions>): FibonacciTask {
  const o = Object.freeze(parseOptions('fibonacci', fibonacciOptionsSchema, options));
  checkOrdered('fibonacci', 'minLength', o.minLength, 'maxLength', o.maxLength);
  const tokenizer = createTokenizer(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '#']);

  const splitOf = hashSplit('fibonacci', o.evalFraction);

  const problemOf = (length: number, x0: number, x1: number): FibonacciProblem => {
    const inner = [
      digitId(Math.floor(length / 100)),
      digitId(Math.floor(length / 10) % 10),
      digitId(length % 10),
      HASH,
      digitId(x0),
      digitId(x1),
    ];
    const answer: number[] = [];
    let [a, b] = [x0, x1];
    for (let k = 0; k < length; k++) {
      [a, b] = [b, (a + b) % 10];
      answer.push(digitId(b));
    }
    return Object.freeze({
      prompt: Object.freeze([BOS, ...inner, SEP]),
      key: tokenizer.decode(inner),
      length,
      seeds: Object.freeze([x0, x1] as const),
      answer: Object.freeze(answer),
    });
  };

  const isDigit = (x: number): boolean => Number.isInteger(x) && x >= 0 && x <= 9;
  const makeProblem = (length: number, x0: number, x1: number): FibonacciProblem => {
    if (!Number.isInteger(length) || length < o.minLength || length > o.maxLength) {
      throw new Error(
        `fibonacci.makeProblem: length must be an integer in [${o.minLength}, ${o.maxLength}], got ${String(length)}`,
      );
    }
    if (!isDigit(x0)) throw new Error(`fibonacci.makeProblem: x0 must be a digit 0–9, got ${String(x0)}`);
    if (!isDigit(x1)) throw new Error(`fibonacci.makeProblem: x1 must be a digit 0–9, got ${String(x1)}`);
    return problemOf(length, x0, x1);
  };

  const sampleProblem = splitSampler(
    'fibonacci',
    (rng) => {
      const n = o.minLength + rng.int(o.maxLength - o.minLength + 1);
      const x0 = rng.int(10);
      return problemOf(n, x0, rng.int(10));
    },
    splitOf,
  );

  const reward = (problem: FibonacciProblem, response: readonly number[]): RewardResult => {
    // the answer's longest prefix the body repeats
    return matchedShare(response, problem.answer, (body, y) => {
      let prefix = 0;
      while (prefix < Math.min(body.length, y.length) && body[prefix] === y[prefix]) prefix++;
      return prefix;
    });
  };

  return assembleTask<FibonacciTask>({
    name: 'fibonacci',
    options: o,
    tokenizer,
    promptLength: 8,
    responseLength: o.maxLength + 1,
    sampleProblem,
    splitOf,
    reward,
    goldResponse: (problem) => [...problem.answer, EOS],
    makeProblem,
  });
}
