// `qrl-sim/tasks`: the verifiable toy tasks (reverse, sudoku4, countdown, fibonacci), their shared contract and tokenizer.
// Chosen names, not `export *` (the rule: docs/decisions.md; pinned by test/api-surface.test.ts).

// The tokenizer and its special tokens.
export { BOS, EOS, MASK, PAD, SEP, specialTokenStrings, createTokenizer, type Tokenizer } from './tokenizer.js';

// The task contract and the train/test split.
export { type HashSplitOptions } from './options.js';
export { splitHash, type RewardResult, type Split, type Task, type TaskName, type TaskProblem } from './task.js';

// The task registry by name.
export {
  makeTask,
  makeTaskFromConfig,
  taskNames,
  tasks,
  type TaskConfig,
  type TaskOptionsByName,
  type TaskTypes,
} from './registry.js';

// reverse (each task comes with its options schema and types).
export {
  createReverseTask,
  reverseOptionsSchema,
  type ReverseOptions,
  type ReverseProblem,
  type ReverseTask,
} from './reverse.js';

// sudoku4, with the enumerated 4×4 grids and solution counting.
export {
  createSudoku4Task,
  sudoku4OptionsSchema,
  type Sudoku4Options,
  type Sudoku4Problem,
  type Sudoku4Task,
} from './sudoku4.js';
export { countSolutions, isValidSudoku4, sudoku4Grids } from './sudoku4-grids.js';

// countdown, with the enumerated three-number expressions its solvability check uses.
export {
  createCountdownTask,
  countdownOptionsSchema,
  type CountdownOptions,
  type CountdownProblem,
  type CountdownTask,
} from './countdown.js';
export { threeNumberExpressions, type Rational, type ThreeNumberExpression } from './countdown-expression.js';

// fibonacci.
export {
  createFibonacciTask,
  fibonacciOptionsSchema,
  type FibonacciOptions,
  type FibonacciProblem,
  type FibonacciTask,
} from './fibonacci.js';
