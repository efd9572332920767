// `qrl-sim mismatch`: the rollout–trainer mismatch probe of a toy policy under a precision plan.
// Not a training run: the policy is freshly initialized from the seed or loaded from a checkpoint.

import { readFileSync } from 'node:fs';
import { arConfig, arMismatchProbe, createArPolicy, loadCheckpoint, type ArPolicy } from '../policies/ar/index.js';
import { precisionPlans, type PrecisionPlan } from '../policies/plans.js';
import { makeTask, taskNames, type Task, type TaskName } from '../tasks/index.js';
import type { Command } from './command.js';
import { UsageError } from './errors.js';
import { integerOption, parseCommandArgs, required } from './parse.js';

const help = `usage: qrl-sim mismatch --policy ar --plan P [--length L] [--seed S] [--batch B]
                        [--temperature T] [--checkpoint FILE] [--json]

Samples B responses of exactly L tokens (EOS ignored) with the plan's rollout engine, recomputes
their log-probs with the plan's trainer side, and prints the mismatch diagnostics:
  tokens       number of sampled tokens (B·L)
  k1           mean(ℓroll − ℓold)
  k3           mean(e^(−x) − 1 + x), x = ℓroll − ℓold
  meanAbsDp    mean |e^ℓold − e^ℓroll|
  meanAbsDelta mean |δ|, δ = ℓold − ℓroll;  maxAbsDelta  max |δ|
  ess          1 / mean((w / mean w)²), w = e^δ
  fracAbsDeltaGt1e-3  fraction of tokens with |δ| > 1e-3

Options:
  --policy ar         the autoregressive toy policy (diffusion: not available yet)
  --plan P            precision plan: ${Object.keys(precisionPlans).join(', ')}
  --length L          response tokens per sequence (default 16)
  --seed S            initialization (without --checkpoint), prompts and sampling (default 0)
  --batch B           number of sequences (default 16)
  --temperature T     sampling temperature, also used by the trainer recompute (default 1)
  --checkpoint FILE   load a policy saved by saveCheckpoint (JSON) instead of initializing one
  --json              one JSON object instead of a table

Prompts are training prompts of the checkpoint's task (reverse when the checkpoint names none, and
without a checkpoint). A fresh policy has vocabulary and prompt layout of the reverse task and
maxLen = prompt length + L.`;

function parseTemperature(value: string | undefined): number {
  if (value === undefined) return 1;
  const t = Number(value);
  if (value.trim() === '' || !Number.isFinite(t) || !(t > 0)) throw new UsageError(`--temperature: expected a finite number > 0, got '${value}'`);
  return t;
}

function loadPolicy(file: string): { policy: ArPolicy; task: Task } {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new UsageError(`--checkpoint: cannot read '${file}': ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
  }
  try {
    const { policy, task } = loadCheckpoint(json);
    if (task && !taskNames.includes(task.name)) throw new Error(`task.name must be one of ${taskNames.join(', ')}, got ${JSON.stringify(task.name)}`);
    const t = task ? makeTask(task.name as TaskName, task.options as never) : makeTask('reverse');
    if (t.vocabSize > policy.config.vocabSize) throw new Error(`the policy's vocabSize ${policy.config.vocabSize} is smaller than task ${t.name}'s ${t.vocabSize}`);
    return { policy, task: t };
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`--checkpoint: '${file}' is not a usable AR checkpoint: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** The `mismatch` subcommand. */
export const mismatchCommand: Command = {
  summary: 'rollout–trainer log-prob mismatch of a toy policy under a precision plan (k1, k3, |δ|, ESS)',
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, {
      policy: { type: 'string' },
      plan: { type: 'string' },
      length: { type: 'string' },
      seed: { type: 'string' },
      batch: { type: 'string' },
      temperature: { type: 'string' },
      checkpoint: { type: 'string' },
      json: { type: 'boolean' },
    });
    const policyName = required(values.policy, 'policy');
    if (policyName === 'diffusion') throw new UsageError("--policy: 'diffusion' is not available yet (the masked-diffusion policy comes in a later change); use --policy ar");
    if (policyName !== 'ar') throw new UsageError(`--policy: expected ar, got '${policyName}'`);
    const planName = required(values.plan, 'plan');
    if (!Object.hasOwn(precisionPlans, planName)) throw new UsageError(`--plan: expected one of ${Object.keys(precisionPlans).join(', ')}, got '${planName}'`);
    const plan: PrecisionPlan = precisionPlans[planName as keyof typeof precisionPlans];
    const length = integerOption(values.length, 'length', 16, 1);
    const seed = integerOption(values.seed, 'seed', 0);
    const batch = integerOption(values.batch, 'batch', 16, 1);
    const temperature = parseTemperature(values.temperature);

    let policy: ArPolicy;
    let task: Task;
    if (values.checkpoint !== undefined) {
      ({ policy, task } = loadPolicy(values.checkpoint));
      if (task.promptLength + length > policy.config.maxLen) {
        throw new UsageError(`--length: prompt length ${task.promptLength} + ${length} exceeds the checkpoint's maxLen ${policy.config.maxLen}`);
      }
    } else {
      task = makeTask('reverse');
      policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + length }), seed);
    }
    const prompts = task.trainProblems(batch, seed).map((p) => [...p.prompt]);
    const { diagnostics } = arMismatchProbe(policy, { plan, length, prompts, seed, temperature });
    const result = { policy: 'ar', plan: plan.name, length, ...diagnostics };
    if (values.json) {
      io.out(JSON.stringify(result));
    } else {
      const width = Math.max(...Object.keys(result).map((k) => k.length));
      for (const [k, v] of Object.entries(result)) io.out(`${k.padEnd(width)}  ${typeof v === 'number' && !Number.isInteger(v) ? v.toExponential(4) : String(v)}`);
    }
    return 0;
  },
};
