// `qrl-sim estimate`: reads a batch as JSON, prints weights, masks, advantages, losses, gradient and metrics as JSON.
// Not an estimator: all computation is `estimateJson` from src/rl; this file only does argument parsing and I/O.

import { readFile, writeFile } from 'node:fs/promises';
import { estimateJson } from '../rl/estimate.js';
import type { CliIo, Command } from './command.js';
import { UsageError } from '../core/errors.js';
import { parseCommandArgs, strings } from './parse.js';
import { parseJsonInput } from '../core/json.js';

const help = `usage: qrl-sim estimate --input FILE|- [--output FILE]

Evaluates one GRPO loss over a batch and prints the result as JSON (the contract GPU
implementations are checked against; see docs/estimators.md).

input JSON:  { "logpTheta", "logpOld", "logpRollout", "logpRef"?, "mask",
               "rewards" | "advantages", "groups"?, "probSqSum"?, "topk"?, "onPolicy"?, "config" }
             2-D arrays have one row per sequence; rewards and groups one entry per sequence.
             probSqSum (Σ_v π(v)² per token, like mask) is needed by the advantage
             optimal_token_baseline only. topk { vocabSize, ids, logpRollout, logpTheta,
             tokens? } (3-D [B][T][K]: the engine's top-k ids and ℓ, the trainer's ℓ at them)
             is read by losses trpl, dppo-topk-tv, dppo-topk-kl, config.scoreCentering and
             config.topkKl; onPolicy (one 0/1 per sequence) by config.exactOnPolicyRatio.
config:      { "advantage": { "name": "grpo" | "drgrpo" | "batch-std" | "optimal_token_baseline" | …, ... },
               "correction": { "name", ...params } | [ stage, stage, ... ],
               "loss": { "name": "ppo-clip" | "gspo" | "sapo" | "cispo" | "reinforce" | "tbpo", ... },
               "aggregation": "token-mean" | "seq-mean-token-sum" | "seq-mean-token-mean"
                              | "seq-mean-token-sum-norm" | { "name", "normalizer" },
               "kl"?: { "name": "k1" | "k2" | "k3" | "k1+" | "k3+", "coef" } }
output JSON: { "advantages", "weights", "mask", "tokenLoss", "loss", "gradLogpTheta",
               "gradTopkLogpTheta"? ([B][T][K], with topk), "metrics" }

options:
  --input FILE|-   batch JSON file, or - for standard input (required)
  --output FILE    write the JSON there instead of standard output
  -h, --help       this text

Malformed input exits with code 2 and one line naming the field; a number that overflows
float64 (1e400) is reported with its line.

examples:
  qrl-sim estimate --input docs/examples/estimate-ais.json`;

async function readInput(path: string, io: CliIo): Promise<string> {
  if (path === '-') return io.readStdin();
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw new UsageError(`--input: cannot read '${path}' (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

/** The path and value of the first non-finite number in a JSON-bound value, or null. */
function firstNonFinite(value: unknown, path: string): { path: string; value: number } | null {
  if (typeof value === 'number') return Number.isFinite(value) ? null : { path: path || 'value', value };
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
    const a = value as unknown as ArrayLike<number>;
    for (let i = 0; i < a.length; i++)
      if (typeof a[i] === 'number' && !Number.isFinite(a[i])) return { path: `${path}[${i}]`, value: a[i] as number };
    return null;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const r = firstNonFinite(value[i], `${path}[${i}]`);
      if (r !== null) return r;
    }
    return null;
  }
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const r = firstNonFinite(v, path === '' ? k : `${path}.${k}`);
      if (r !== null) return r;
    }
  }
  return null;
}

/** The `estimate` subcommand. */
export const estimateCommand: Command = {
  summary: 'evaluate advantages, rollout correction, policy loss, KL and d loss/d logpTheta on a JSON batch',
  help,
  async run(args: string[], io: CliIo): Promise<number> {
    const { values } = parseCommandArgs(args, strings('input', 'output'));
    if (values.input === undefined) throw new UsageError('--input: required (a file path or - for standard input)');
    const text = await readInput(values.input, io);
    const json = parseJsonInput(text, values.input === '-' ? '--input' : `--input '${values.input}'`);
    const result = estimateJson(json);
    const bad = firstNonFinite(result, '');
    if (bad !== null)
      throw new UsageError(
        `result ${bad.path} is ${bad.value} (not finite: the input's magnitudes overflow float64 arithmetic; JSON cannot carry it)`,
      );
    const out = `${JSON.stringify(result, null, 2)}\n`;
    if (values.output !== undefined) {
      try {
        await writeFile(values.output, out);
      } catch (error) {
        throw new UsageError(
          `--output: cannot write '${values.output}' (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
        );
      }
    } else {
      io.out(out);
    }
    return 0;
  },
};
