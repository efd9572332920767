// The contract every verifiable toy task fulfils, and the helpers the three tasks share (prompts, splits, datasets).
// Not a task itself (see reverse.ts, sudoku4.ts, countdown.ts) and not the GRPO loop that consumes tasks.

import { createRng, type Rng } from '../core/rng.js';
import { EOS, PAD, type Tokenizer } from './tokenizer.js';
import { rngStreams } from '../core/rng-streams.js';

/** Names of the tasks in the {@link tasks} registry. */
export type TaskName = 'reverse' | 'sudoku4' | 'countdown' | 'fibonacci';

/** The two disjoint halves of a task's problem space: training and held-out evaluation. */
export type Split = 'train' | 'eval';

/** What every problem carries, whatever the task. */
export interface TaskProblem {
  /** Prompt token ids, exactly `task.promptLength` long: left PAD, then BOS, the problem, SEP. */
  readonly prompt: readonly number[];
  /** The problem as text (the decoded prompt without PAD, BOS and SEP); unique per problem. */
  readonly key: string;
}

/** Outcome of scoring one response. */
export interface RewardResult {
  /** Scalar reward in the task's {@link Task.rewardRange}. */
  readonly reward: number;
  /** Whether the response solves the problem exactly (the accuracy metric). */
  readonly correct: boolean;
}

/**
 * A verifiable task: seeded problem generators with disjoint train/eval splits, a tokenizer,
 * a reward that never throws, and gold responses for a supervised warm start.
 *
 * Responses are token-id sequences read up to their first {@link EOS}; a response without EOS
 * is malformed and scores 0 on every task.
 */
export interface Task<P extends TaskProblem = TaskProblem, O extends object = object> {
  /** Registry name of the task. */
  readonly name: TaskName;
  /** The validated options the task was built with, defaults filled in. */
  readonly options: Readonly<O>;
  /** Tokenizer; ids 0–4 are PAD, BOS, EOS, SEP, MASK on every task. */
  readonly tokenizer: Tokenizer;
  /** Vocabulary size, `tokenizer.vocab.length` (≤ 32 on every task). */
  readonly vocabSize: number;
  /** Length of every prompt, in tokens (shorter problems are left-padded with PAD). */
  readonly promptLength: number;
  /** Maximum response length in tokens, EOS included; every gold response fits. */
  readonly responseLength: number;
  /** Smallest and largest value {@link Task.reward} can return. */
  readonly rewardRange: readonly [min: number, max: number];
  /**
   * One problem of `split` (`'train'` when omitted) drawn from `rng`. The GRPO loop draws its
   * prompts here with its own stream, so it never sees an evaluation problem.
   */
  sampleProblem(rng: Rng, split?: Split): P;
  /**
   * `n` training problems, i.i.d. from `sampleProblem` on stream `<seed>/<name>-train` (repeats
   * possible). The same `(n, seed)` gives the same list, and a shorter list is a prefix of a longer one.
   */
  trainProblems(n: number, seed: number | string): P[];
  /**
   * `n` distinct held-out problems from stream `<seed>/<name>-eval` (repeats redrawn); a shorter
   * list is a prefix of a longer one. Throws if the eval split runs out of distinct problems.
   */
  evalProblems(n: number, seed: number | string): P[];
  /** Which split a problem belongs to (a pure function of the problem). */
  splitOf(problem: P): Split;
  /** Reward of `response` (token ids) for `problem`. Never throws, whatever the integers. */
  reward(problem: P, response: readonly number[]): RewardResult;
  /** The reference response (token ids, ending with EOS): reward 1 and `correct`. */
  goldResponse(problem: P): number[];
}

/**
 * The tokens of `response` before its first EOS, or `undefined` when it has no EOS (malformed:
 * the answer was never closed, like a missing `</answer>` tag in d1/TinyZero).
 */
export function responseBody(response: readonly number[]): readonly number[] | undefined {
  const end = response.indexOf(EOS);
  return end < 0 ? undefined : response.slice(0, end);
}

/**
 * The reward of a response scored against an answer token by token: 0 when it has no EOS
 * ({@link responseBody}), else `matched / max(m, n)` for a body of m tokens and an answer of n (0 when
 * both are empty), correct when all n answer tokens matched and the body has exactly n tokens.
 *
 * @param response - the sampled tokens
 * @param answer - the gold answer's tokens
 * @param matched - answer tokens the body got right (how they are counted is the task's rule)
 */
export function matchedShare(
  response: readonly number[],
  answer: readonly number[],
  matched: (body: readonly number[], answer: readonly number[]) => number,
): RewardResult {
  const body = responseBody(response);
  if (body === undefined) return { reward: 0, correct: false };
  const right = matched(body, answer);
  const denominator = Math.max(body.length, answer.length);
  return {
    reward: denominator === 0 ? 0 : right / denominator,
    correct: right === answer.length && body.length === answer.length,
  };
}

/** `tokens` left-padded with PAD to `length`. */
export function leftPad(tokens: readonly number[], length: number): number[] {
  if (tokens.length > length) {
    throw new Error(`leftPad: ${tokens.length} tokens do not fit in promptLength ${length}`);
  }
  return [...new Array<number>(length - tokens.length).fill(PAD), ...tokens];
}

/**
 * A fixed hash of `key` in [0, 1): FNV-1a over UTF-16 code units, then the MurmurHash3 32-bit
 * finalizer so that every output bit depends on every input bit. Splits use `hash < evalFraction`,
 * so they depend only on the problem, never on a seed, and a larger fraction only adds problems.
 */
export function splitHash(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 2 ** 32;
}

/** How many draws {@link drawUntil} makes before it gives up. */
const maxDraws = 100_000;

/**
 * Draws from `draw` until `accept` holds, at most 100 000 times; then throws `what` (the split of
 * the configured problem space is empty or nearly so).
 */
export function drawUntil<T>(draw: () => T, accept: (x: T) => boolean, what: () => string): T {
  for (let i = 0; i < maxDraws; i++) {
    const x = draw();
    if (accept(x)) return x;
  }
  throw new Error(`${what()}: no problem found in ${maxDraws} draws; the split is empty or nearly so`);
}

/**
 * `n` problems of `split` from that split's stream of `seed`: `train` draws are i.i.d.; `eval` draws
 * are distinct (a duplicate is redrawn).
 */
export function drawProblems<P extends TaskProblem>(
  task: Pick<Task<P>, 'name' | 'sampleProblem'>,
  split: Split,
  n: number,
  seed: number | string,
): P[] {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new Error(`${task.name}.${split}Problems: n must be a non-negative integer, got ${String(n)}`);
  }
  const rng = createRng(seed).fork(rngStreams.tasks.split(task.name, split));
  if (split === 'train') return Array.from({ length: n }, () => task.sampleProblem(rng, 'train'));
  const seen = new Set<string>();
  const out: P[] = [];
  while (out.length < n) {
    const p = drawUntil(
      () => task.sampleProblem(rng, 'eval'),
      (q) => !seen.has(q.key),
      () => `${task.name}.evalProblems: n = ${n} exceeds the distinct eval problems found (${out.length})`,
    );
    seen.add(p.key);
    out.push(p);
  }
  return out;
}

/**
 * The split of a problem by a hash of its key: `eval` when `splitHash("<name>:<key>") < evalFraction`.
 * A pure function of the problem, so a larger fraction only adds problems to `eval`.
 */
export function hashSplit(name: TaskName, evalFraction: number): (problem: { readonly key: string }) => Split {
  return (problem) => (splitHash(`${name}:${problem.key}`) < evalFraction ? 'eval' : 'train');
}

/**
 * `sampleProblem` of a task whose problems are drawn whole by `draw` and split by `splitOf`: draws
 * until the problem falls in the asked split (rejection, {@link drawUntil}).
 */
export function splitSampler<P extends TaskProblem>(
  name: TaskName,
  draw: (rng: Rng) => P,
  splitOf: (problem: P) => Split,
): (rng: Rng, split?: Split) => P {
  return (rng, split = 'train') =>
    drawUntil(
      () => draw(rng),
      (p) => splitOf(p) === split,
      () => `${name}.sampleProblem(${split})`,
    );
}

/**
 * A task object from its parts, frozen: `vocabSize` from the tokenizer, `trainProblems` and
 * `evalProblems` drawn from `sampleProblem` ({@link drawProblems}), `rewardRange` [0, 1] unless given.
 */
export function assembleTask<T extends Task>(
  parts: Omit<T, 'vocabSize' | 'trainProblems' | 'evalProblems' | 'rewardRange'> & Partial<Pick<T, 'rewardRange'>>,
): T {
  const sampler = parts as unknown as Pick<Task, 'name' | 'sampleProblem'>;
  const task = {
    rewardRange: [0, 1] as const,
    ...parts,
    vocabSize: parts.tokenizer.vocabSize,
    trainProblems: (n: number, seed: number | string) => drawProblems(sampler, 'train', n, seed),
    evalProblems: (n: number, seed: number | string) => drawProblems(sampler, 'eval', n, seed),
  };
  return Object.freeze(task) as unknown as T;
}
