// The table of tasks by name and `makeTask`, which builds one from its name and (validated) options.
// Not a plugin system: adding a task means adding a row to the frozen table below.

import { createCountdownTask, type CountdownOptions, type CountdownTask } from './countdown.js';
import { createFibonacciTask, type FibonacciOptions, type FibonacciTask } from './fibonacci.js';
import { createReverseTask, type ReverseOptions, type ReverseTask } from './reverse.js';
import { createSudoku4Task, type Sudoku4Options, type Sudoku4Task } from './sudoku4.js';
import type { Task, TaskName } from './task.js';

/** The task type of each task name. */
export interface TaskTypes {
  /** See {@link createReverseTask}. */
  readonly reverse: ReverseTask;
  /** See {@link createSudoku4Task}. */
  readonly sudoku4: Sudoku4Task;
  /** See {@link createCountdownTask}. */
  readonly countdown: CountdownTask;
  /** See {@link createFibonacciTask}. */
  readonly fibonacci: FibonacciTask;
}

/** The options type of each task name. */
export interface TaskOptionsByName {
  /** See {@link ReverseOptions}. */
  readonly reverse: ReverseOptions;
  /** See {@link Sudoku4Options}. */
  readonly sudoku4: Sudoku4Options;
  /** See {@link CountdownOptions}. */
  readonly countdown: CountdownOptions;
  /** See {@link FibonacciOptions}. */
  readonly fibonacci: FibonacciOptions;
}

/**
 * Every task's factory, by name. Each factory validates its options (unknown keys, wrong types
 * and out-of-range values throw an error naming the option and the value) and fills in defaults.
 *
 * @example
 * ```ts
 * const task = tasks.sudoku4({ minBlanks: 6, maxBlanks: 10 });
 * ```
 */
export const tasks = Object.freeze({
  reverse: createReverseTask,
  sudoku4: createSudoku4Task,
  countdown: createCountdownTask,
  fibonacci: createFibonacciTask,
} as const satisfies { readonly [N in TaskName]: (options?: Partial<TaskOptionsByName[N]>) => TaskTypes[N] });

/** The task names, in registry order. */
export const taskNames: readonly TaskName[] = Object.freeze(['reverse', 'sudoku4', 'countdown', 'fibonacci']);

/**
 * The task `name` built with `options` (validated, defaults filled in). Throws an error naming the
 * task name when it is not in {@link tasks}, and the option and value when an option is invalid.
 *
 * @example
 * ```ts
 * const task = makeTask('reverse', { minLength: 3, maxLength: 6 });
 * const [p] = task.trainProblems(1, 42);
 * ```
 */
export function makeTask<N extends TaskName>(name: N, options?: Partial<TaskOptionsByName[N]>): TaskTypes[N] {
  return makeTaskFromConfig({ name, options }) as TaskTypes[N];
}

/** A task as a run config names it: a task name and its options, both not yet checked. */
export interface TaskConfig {
  /** A name in {@link tasks}. */
  readonly name: string;
  /** The task's options (absent: every default); validated by the task's zod schema. */
  readonly options?: unknown;
}

/**
 * The task a config names (`config.task`, or a name and options read from a file): the name is
 * checked against {@link tasks} and the options are validated by that task's zod schema, so the
 * caller needs no cast. Throws what {@link makeTask} throws.
 *
 * @example
 * ```ts
 * const task: Task = makeTaskFromConfig({ name: 'reverse', options: { maxLength: 4 } });
 * ```
 */
export function makeTaskFromConfig(config: TaskConfig): Task {
  const { name, options } = config;
  if (typeof name !== 'string' || !Object.hasOwn(tasks, name)) {
    throw new Error(`task: name must be one of ${taskNames.join(', ')}, got ${JSON.stringify(name)}`);
  }
  // Each factory parses `options` with its own schema (parseOptions), so any value may reach it.
  const factory = tasks[name as TaskName] as (options?: unknown) => Task;
  return factory(options);
}
