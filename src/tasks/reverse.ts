// The `reverse` task: a short string over a small alphabet → the same string reversed, with per-position credit.
// Not sorting or any other sequence transduction; the reward is a fixed formula, not a learned judge.

import { z } from 'zod';
import { checkOrdered, hashSplitOptionsShape, intOption, parseOptions, type HashSplitOptions } from './options.js';
import {
  assembleTask,
  hashSplit,
  leftPad,
  matchedShare,
  splitSampler,
  type RewardResult,
  type Task,
  type TaskProblem,
} from './task.js';
import { BOS, EOS, SEP, createTokenizer } from './tokenizer.js';

/** Options of the `reverse` task. */
export interface ReverseOptions extends HashSplitOptions {
  /**
   * Number of distinct symbols (`a`, `b`, … in the vocabulary), 2–26. Eight follows the
   * reference design (vocabulary of 8) and gives 8^n strings of length n.
   * @defaultValue 8
   */
  readonly alphabetSize: number;
  /**
   * Shortest string, 1–8. Three keeps length-1 and length-2 strings (trivial, few) out.
   * @defaultValue 3
   */
  readonly minLength: number;
  /**
   * Longest string, 1–8 (spec: n ≤ 8). Six keeps prompt + response at 15 tokens.
   * @defaultValue 6
   */
  readonly maxLength: number;
}

/** Zod schema of {@link ReverseOptions}: every field optional with its default; unknown keys rejected. */
export const reverseOptionsSchema: z.ZodType<ReverseOptions, Partial<ReverseOptions>> = z.strictObject({
  alphabetSize: intOption(2, 26).default(8),
  minLength: intOption(1, 8).default(3),
  maxLength: intOption(1, 8).default(6),
  ...hashSplitOptionsShape,
});

/** A `reverse` problem. */
export interface ReverseProblem extends TaskProblem {
  /** The symbols to reverse, as token ids. */
  readonly input: readonly number[];
  /** The reversed symbols, as token ids (the gold response without its EOS). */
  readonly answer: readonly number[];
}

/** The `reverse` task type: a {@link Task} that also builds a problem from its text. */
export interface ReverseTask extends Task<ReverseProblem, ReverseOptions> {
  /**
   * The problem whose string is `text` (e.g. `'cabd'`: `minLength`–`maxLength` symbols of the
   * alphabet). Throws an error naming the bad argument.
   */
  makeProblem(text: string): ReverseProblem;
}

/**
 * The `reverse` task. Prompt `[PAD…] BOS x₁ … xₙ SEP` (left-padded to `maxLength + 2`), gold
 * response `xₙ … x₁ EOS`. With body `o` (the response before its first EOS, length m) and
 * answer `y` (length n):
 *
 * reward = #{k < min(m, n) : o_k = y_k} / max(m, n), and 0 without EOS;
 * correct ⇔ o = y (⇔ reward = 1).
 *
 * Too-short and too-long bodies are penalised alike: missing positions and extra tokens both count
 * as wrong positions. Tokens outside the alphabet (PAD, MASK, unknown ids) are simply wrong.
 *
 * @example
 * ```ts
 * const task = createReverseTask({ minLength: 4, maxLength: 4 });
 * const p = task.makeProblem('cabd');
 * task.reward(p, task.tokenizer.encode('dbac<eos>')); // { reward: 1, correct: true }
 * task.reward(p, task.tokenizer.encode('dba<eos>'));  // { reward: 0.75, correct: false }
 * ```
 */
export function createReverseTask(options?: Partial<ReverseOptions>): ReverseTask {
  const o = Object.freeze(parseOptions('reverse', reverseOptionsSchema, options));
  checkOrdered('reverse', 'minLength', o.minLength, 'maxLength', o.maxLength);
  const symbols = Array.from({ length: o.alphabetSize }, (_, i) => String.fromCharCode(97 + i));
  const tokenizer = createTokenizer(symbols);
  const firstSymbol = 5; // ids of `a`, `b`, … start after the five special tokens
  const promptLength = o.maxLength + 2;

  const splitOf = hashSplit('reverse', o.evalFraction);

  const problemOf = (input: number[]): ReverseProblem =>
    Object.freeze({
      prompt: Object.freeze(leftPad([BOS, ...input, SEP], promptLength)),
      key: tokenizer.decode(input),
      input: Object.freeze(input),
      answer: Object.freeze([...input].reverse()),
    });

  const makeProblem = (text: string): ReverseProblem => {
    const valid = new RegExp(`^[${symbols[0]}-${symbols[symbols.length - 1]}]{${o.minLength},${o.maxLength}}$`);
    if (!valid.test(text)) {
      throw new Error(
        `reverse.makeProblem: text must be ${o.minLength}–${o.maxLength} of the symbols ${symbols.join('')}, got ${JSON.stringify(text)}`,
      );
    }
    return problemOf(tokenizer.encode(text));
  };

  const sampleProblem = splitSampler(
    'reverse',
    (rng) => {
      const n = o.minLength + rng.int(o.maxLength - o.minLength + 1);
      return problemOf(Array.from({ length: n }, () => firstSymbol + rng.int(o.alphabetSize)));
    },
    splitOf,
  );

  const reward = (problem: ReverseProblem, response: readonly number[]): RewardResult => {
    // the answer's positions the body has right
    return matchedShare(response, problem.answer, (body, y) => {
      let right = 0;
      for (let k = 0; k < Math.min(body.length, y.length); k++) if (body[k] === y[k]) right++;
      return right;
    });
  };

  return assembleTask<ReverseTask>({
    name: 'reverse',
    options: o,
    tokenizer,
    promptLength,
    responseLength: o.maxLength + 1,
    sampleProblem,
    splitOf,
    reward,
    goldResponse: (problem) => [...problem.answer, EOS],
    makeProblem,
  });
}
