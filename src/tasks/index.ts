// Public surface of the verifiable toy tasks (reverse, sudoku4, countdown, fibonacci) and their shared contract.
// Not where anything is implemented; the expression parser and option helpers stay internal.

export { BOS, EOS, MASK, PAD, SEP, specialTokenStrings, createTokenizer, type Tokenizer } from './tokenizer.js';
export {
  splitHash,
  type RewardResult,
  type Split,
  type Task,
  type TaskName,
  type TaskProblem,
} from './task.js';
export { createReverseTask, reverseOptionsSchema, type ReverseOptions, type ReverseProblem, type ReverseTask } from './reverse.js';
export {
  createSudoku4Task,
  sudoku4OptionsSchema,
  type Sudoku4Options,
  type Sudoku4Problem,
  type Sudoku4Task,
} from './sudoku4.js';
export { countSolutions, isValidSudoku4, sudoku4Grids } from './sudoku4-grids.js';
export {
  createCountdownTask,
  countdownOptionsSchema,
  type CountdownOptions,
  type CountdownProblem,
  type CountdownTask,
} from './countdown.js';
export { threeNumberExpressions, type Rational, type ThreeNumberExpression } from './countdown-expression.js';
export {
  createFibonacciTask,
  fibonacciOptionsSchema,
  type FibonacciOptions,
  type FibonacciProblem,
  type FibonacciTask,
} from './fibonacci.js';
export { makeTask, taskNames, tasks, type TaskOptionsByName, type TaskTypes } from './registry.js';
