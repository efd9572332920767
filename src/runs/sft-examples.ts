// The supervised pairs the run driver sends with `warmStart` to a backend declaring
// `capabilities.sftExamples` (docs/adapter.md §3): the pairs qrl-sim's own AR warm start trains on.

import type { SupervisedPair } from '../core/backend-contract.js';
import { UsageError } from '../core/errors.js';
import { supervisedExamples } from '../policies/ar-api.js';
import type { RunConfig } from '../rl/grpo/config.js';
import type { Task } from '../tasks/task.js';

/** The most tokens (prompt and response slots of every pair) one `warmStart` request may carry: 2²⁴ (64 MiB of I32). */
export const SFT_EXAMPLE_TOKEN_LIMIT = 2 ** 24;

/**
 * The `sft.steps · sft.batchSize` pairs of the run's warm start, in training order: the task's problems
 * on the stream `<seed>/sft` with their gold responses, exactly those `trainSupervised` draws.
 * A request over {@link SFT_EXAMPLE_TOKEN_LIMIT} tokens is a UsageError naming `sft.steps`.
 */
export function warmStartExamples(config: RunConfig, task: Task): SupervisedPair[] {
  const tokens = config.sft.steps * config.sft.batchSize * (task.promptLength + task.responseLength);
  if (tokens > SFT_EXAMPLE_TOKEN_LIMIT)
    throw new UsageError(
      `config.sft.steps: ${config.sft.steps} steps × ${config.sft.batchSize} examples of ${task.promptLength + task.responseLength} tokens exceed the ${SFT_EXAMPLE_TOKEN_LIMIT} tokens one warmStart request carries to an external backend, got ${tokens}`,
    );
  return supervisedExamples(task, config.seed, config.sft.steps, config.sft.batchSize);
}
