// The `sudoku4` task: a 4×4 Sudoku with blanks → its 16 digits, rewarded by the fraction of blank cells right (d1).
// Not a 9×9 Sudoku and not a validity checker of arbitrary grids: puzzles have one solution, which is the answer.

import { z } from 'zod';
import { createRng, type Rng } from '../core/rng.js';
import { checkOrdered, intOption, parseOptions } from './options.js';
import { countSolutions, sudoku4Grids } from './sudoku4-grids.js';
import {
  assembleTask,
  drawUntil,
  leftPad,
  responseBody,
  type RewardResult,
  type Split,
  type Task,
  type TaskProblem,
} from './task.js';
import { BOS, EOS, SEP, createTokenizer } from './tokenizer.js';

/** Options of the `sudoku4` task. */
export interface Sudoku4Options {
  /**
   * Fewest blank cells per puzzle, 1–12. Eight is d1's test set (every puzzle has 8 blanks).
   * @defaultValue 8
   */
  readonly minBlanks: number;
  /**
   * Most blank cells per puzzle, 1–12 (a 4×4 Sudoku needs at least 4 givens for a unique
   * solution). Puzzles with 11 or 12 blanks may take a few removal orders to find.
   * @defaultValue 8
   */
  readonly maxBlanks: number;
  /**
   * Solution grids held out for evaluation, 1–287; their puzzles never appear in training.
   * 88 leaves 200 training grids, as in SPG's re-split of d1's data.
   * @defaultValue 88
   */
  readonly evalGrids: number;
}

/** Zod schema of {@link Sudoku4Options}: every field optional with its default; unknown keys rejected. */
export const sudoku4OptionsSchema: z.ZodType<Sudoku4Options, Partial<Sudoku4Options>> = z.strictObject({
  minBlanks: intOption(1, 12).default(8),
  maxBlanks: intOption(1, 12).default(8),
  evalGrids: intOption(1, 287).default(88),
});

/** A `sudoku4` problem. */
export interface Sudoku4Problem extends TaskProblem {
  /** The 16 cells row-major, digits 1–4 and 0 for a blank. */
  readonly puzzle: readonly number[];
  /** The unique solution, 16 digits 1–4. */
  readonly solution: readonly number[];
  /** Index of the solution in {@link sudoku4Grids}. */
  readonly gridIndex: number;
}

/** The `sudoku4` task type: a {@link Task} that also builds a problem from a puzzle string. */
export interface Sudoku4Task extends Task<Sudoku4Problem, Sudoku4Options> {
  /**
   * The problem for `puzzle`, 16 characters `0`–`4` row-major with `0` for a blank (d1's format,
   * e.g. `'3102200002100320'`), which must have exactly one solution. Throws an error naming the
   * bad argument. The blank count is not checked against the options.
   */
  makeProblem(puzzle: string): Sudoku4Problem;
}

/** Seed of the fixed shuffle that chooses the evaluation grids (independent of any run seed). */
const gridSplitSeed = 'sudoku4-grid-split';

/**
 * The `sudoku4` task. Prompt `BOS c₁ … c₁₆ SEP` (18 tokens, `0` = blank), gold response
 * `s₁ … s₁₆ EOS` (17 tokens). Every puzzle has a unique solution. With body `o` (the response
 * before its first EOS) and B the set of blank cells (reward of d1's `sudoku_reward_func`):
 *
 * reward = #{i ∈ B : i < |o| ∧ o_i = s_i} / |B|, and 0 without EOS;
 * correct ⇔ |o| = 16 ∧ o = s.
 *
 * Cells are read by position: a short body leaves the missing cells wrong, tokens past the 16th
 * are ignored (d1 pads with `0` and truncates to 16), and a non-digit token makes its cell wrong.
 *
 * @example
 * ```ts
 * const task = createSudoku4Task();
 * const p = task.makeProblem('3102200002100320'); // solution 3142243142131324
 * task.reward(p, task.goldResponse(p));            // { reward: 1, correct: true }
 * task.reward(p, task.tokenizer.encode('3142243142131324<eos>')); // same
 * ```
 */
export function createSudoku4Task(options?: Partial<Sudoku4Options>): Sudoku4Task {
  const o = Object.freeze(parseOptions('sudoku4', sudoku4OptionsSchema, options));
  checkOrdered('sudoku4', 'minBlanks', o.minBlanks, 'maxBlanks', o.maxBlanks);
  const tokenizer = createTokenizer(['0', '1', '2', '3', '4']);
  const digitId = (d: number): number => 5 + d; // `0` … `4` follow the five special tokens

  const grids = sudoku4Grids();
  const shuffled = createRng(gridSplitSeed).shuffle(grids.map((_, i) => i));
  const evalIndices = new Set(shuffled.slice(0, o.evalGrids));
  const gridsOf: Record<Split, readonly number[]> = {
    train: grids.map((_, i) => i).filter((i) => !evalIndices.has(i)),
    eval: grids.map((_, i) => i).filter((i) => evalIndices.has(i)),
  };
  const indexOfGrid = new Map(grids.map((g, i) => [g.join(''), i]));

  const splitOf = (p: Sudoku4Problem): Split =>
    evalIndices.has(indexOfGrid.get(p.solution.join('')) ?? -1) ? 'eval' : 'train';

  /** Blanks `count` cells of `solution` in a random order, keeping only removals that leave one solution. */
  const makePuzzle = (rng: Rng, solution: readonly number[], count: number): number[] =>
    drawUntil(
      () => {
        const puzzle = [...solution];
        let blanks = 0;
        for (const cell of rng.shuffle(Array.from({ length: 16 }, (_, i) => i))) {
          if (blanks === count) break;
          puzzle[cell] = 0;
          if (countSolutions(puzzle, 2) === 1) blanks++;
          else puzzle[cell] = solution[cell] as number;
        }
        return { puzzle, blanks };
      },
      (x) => x.blanks === count,
      () => `sudoku4.sampleProblem: ${count} blanks with a unique solution`,
    ).puzzle;

  const sampleProblem = (rng: Rng, split: Split = 'train'): Sudoku4Problem => {
    const candidates = gridsOf[split];
    const gridIndex = candidates[rng.int(candidates.length)] as number;
    const solution = grids[gridIndex] as readonly number[];
    const count = o.minBlanks + rng.int(o.maxBlanks - o.minBlanks + 1);
    return problemOf(makePuzzle(rng, solution, count), gridIndex);
  };

  const problemOf = (puzzle: number[], gridIndex: number): Sudoku4Problem =>
    Object.freeze({
      prompt: Object.freeze(leftPad([BOS, ...puzzle.map(digitId), SEP], 18)),
      key: puzzle.join(''),
      puzzle: Object.freeze(puzzle),
      solution: grids[gridIndex] as readonly number[],
      gridIndex,
    });

  const makeProblem = (text: string): Sudoku4Problem => {
    if (!/^[0-4]{16}$/.test(text)) {
      throw new Error(`sudoku4.makeProblem: puzzle must be 16 characters 0-4, got ${JSON.stringify(text)}`);
    }
    const puzzle = [...text].map(Number);
    const solutions = grids.flatMap((g, i) => (g.every((d, j) => puzzle[j] === 0 || puzzle[j] === d) ? [i] : []));
    if (solutions.length !== 1) {
      throw new Error(
        `sudoku4.makeProblem: puzzle must have exactly one solution, got ${solutions.length} for ${text}`,
      );
    }
    return problemOf(puzzle, solutions[0] as number);
  };

  const reward = (problem: Sudoku4Problem, response: readonly number[]): RewardResult => {
    const body = responseBody(response);
    if (body === undefined) return { reward: 0, correct: false };
    let blanks = 0;
    let blanksRight = 0;
    let allRight = body.length === 16;
    for (let i = 0; i < 16; i++) {
      const right = body[i] === digitId(problem.solution[i] as number);
      if (!right) allRight = false;
      if (problem.puzzle[i] === 0) {
        blanks++;
        if (right) blanksRight++;
      }
    }
    return { reward: blanks === 0 ? 0 : blanksRight / blanks, correct: allRight };
  };

  return assembleTask<Sudoku4Task>({
    name: 'sudoku4',
    options: o,
    tokenizer,
    promptLength: 18,
    responseLength: 17,
    sampleProblem,
    splitOf,
    reward,
    goldResponse: (problem) => [...problem.solution.map(digitId), EOS],
    makeProblem,
  });
}
