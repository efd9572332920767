// The named random streams of qrl-sim: every label handed to `Rng.fork` in src/, one entry per stream family, and the two-level run streams.
// Not the generator (rng.ts) and not a registry: the labels' string values are the determinism contract, so changing one changes every result drawn from it.

import type { Rng } from './rng.js';

/**
 * Every stream label of src/, by family. A stream's path is its parent's path, `/`, and the label
 * (`createRng(42).fork(rngStreams.sft).path === '42/sft'`); the values are exactly the strings the
 * code used before they were named here, so seeds give the same draws as before. Fixed labels are
 * strings; a family with one stream per index or name is a function returning the label.
 * @example createRng(7).fork(rngStreams.tasks.split('reverse', 'train')).path // '7/reverse-train'
 */
export const rngStreams = {
  /** Network parameters (nn/params.ts): `createRng(seed).fork(init)`, then one child per tensor. */
  params: {
    /** The initialisation root of a parameter store. */
    init: 'init',
    /** One stream per tensor, named by the tensor (adding a tensor leaves the others' values). */
    tensor: (name: string): string => name,
  },
  /** Problems of a task split (tasks/task.ts): `createRng(seed).fork(split(name, split))`. */
  tasks: {
    /** `<task>-<split>`, e.g. `reverse-train`. */
    split: (task: string, split: string): string => `${task}-${split}`,
  },
  /** The GRPO run (runs/run.ts, rl/grpo/): children of `createRng(config.seed)`. */
  run: {
    /** Parent of the per-step streams ({@link stepStream}). */
    step: 'step',
    /** Parent of the per-evaluation streams ({@link evalStream}). */
    eval: 'eval',
    /** A step's prompts (child of the step stream). */
    prompts: 'prompts',
    /** A step's rollout: the backend generates from this fork's path (child of the step stream). */
    rollout: 'rollout',
    /** A step's mini-batch shuffles (child of the step stream). */
    minibatches: 'minibatches',
    /** An evaluation's side: the rollout engine's or the trainer's plan (child of the evaluation stream). */
    side: (side: 'rollout' | 'trainer'): string => side,
    /** An evaluation's decoding within a side: greedy or sampled (the backend generates from its path). */
    decoding: (greedy: boolean): string => (greedy ? 'greedy' : 'sampled'),
  },
  /** The AR policy (policies/ar/). */
  ar: {
    /** The supervised warm start's batches. */
    sft: 'sft',
    /** The mismatch probe's rollout. */
    probeRollout: 'probe-rollout',
  },
  /** The masked-diffusion policy (policies/diffusion/). */
  diffusion: {
    /** The warm start's problems. */
    warmStartProblems: 'warm-start-problems',
    /** The warm start's masks. */
    warmStartMasks: 'warm-start-masks',
    /** One sampler stream per row of a batch; its path is the row's sequence id. */
    row: (row: number): string => `row-${row}`,
    /** The mismatch probe's rollout. */
    mismatchRollout: 'mismatch-rollout',
    /** The d1 estimator's prompt masks, then one child per sequence id. */
    d1: 'd1',
    /** The ELBO estimator's masks, then one child per sequence id. */
    elbo: 'elbo',
    /** One estimator stream per sequence, named by the sequence id. */
    sequence: (id: string): string => id,
  },
  /** Commands of the CLI (cli/). */
  cli: {
    /** `qrl-sim demo`. */
    demo: 'demo',
    /** `qrl-sim diverge`'s rollout. */
    divergeRollout: 'diverge-rollout',
    /** `qrl-sim mismatch`'s response lengths. */
    probeLengths: 'probe-lengths',
  },
  /** Golden reference suites (golden/): each suite's inputs. */
  golden: {
    /** The `cast` method's stochastic-rounding bits (golden/methods.ts). */
    castBits: 'cast',
    /** Inputs of the cast suite, per format (also the library-cast suite's own inputs per format). */
    casts: (format: string): string => `golden/casts/${format}`,
    /** Inputs of the library-cast suite. */
    libraryCasts: 'golden/library-casts',
    /** Inputs of a quantizer case; the `ue8m0` variants add `/ue8m0`. */
    quantizer: (name: string, variant: string, ue8m0: boolean): string =>
      `golden/quantizers/${name}/${variant}${ue8m0 ? '/ue8m0' : ''}`,
    /** Inputs of the GEMM suite. */
    gemm: 'golden/gemm',
    /** The batch of estimator case `index`. */
    estimator: (index: number): string => `golden/estimators/${index}`,
    /** The Σπ² of estimator case `index`. */
    estimatorProbSqSum: (index: number): string => `golden/estimators/${index}/probSqSum`,
    /** The GRPO-step suite's rollout. */
    grpoStepRollout: 'golden/grpo-step/rollout',
  },
} as const;

/**
 * The stream of GRPO step `step` (1-based): `root.fork('step').fork(String(step))`. The step's
 * prompts, rollout and mini-batch shuffles are its children, so a resumed run, and a batch generated
 * ahead for stale rollouts, draw exactly what an uninterrupted run does.
 * @example stepStream(createRng(0), 3).path // '0/step/3'
 */
export function stepStream(root: Rng, step: number): Rng {
  return root.fork(rngStreams.run.step).fork(String(step));
}

/**
 * The stream of the evaluation after step `step` (0 before the first step):
 * `root.fork('eval').fork(String(step))`, with one child per side ({@link rngStreams}`.run.side`).
 * @example evalStream(createRng(0), 20).path // '0/eval/20'
 */
export function evalStream(root: Rng, step: number): Rng {
  return root.fork(rngStreams.run.eval).fork(String(step));
}
