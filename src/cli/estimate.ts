// `qrl-sim estimate`: reads a batch as JSON, prints weights, masks, advantages, losses, gradient and metrics as JSON.
// Not an estimator: all computation is `estimateJson` from src/rl; this file only does argument parsing and I/O.

import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { estimateJson } from '../rl/estimate.js';
import type { CliIo, Command } from './command.js';
import { UsageError } from '../errors.js';

const help = `usage: qrl-sim estimate --input FILE|- [--output FILE]

Evaluates one GRPO loss over a batch and prints the result as JSON (the contract GPU
implementations are checked against; see docs/estimators.md).

input JSON:  { "logpTheta", "logpOld", "logpRollout", "logpRef"?, "mask",
               "rewards" | "advantages", "groups"?, "config" }
             2-D arrays have one row per sequence; rewards and groups one entry per sequence.
config:      { "advantage": { "name": "grpo" | "drgrpo" | "batch-std", ... },
               "correction": { "name", ...params } | [ stage, stage, ... ],
               "loss": { "name": "ppo-clip" | "gspo" | "sapo" | "cispo" | "reinforce" | "tbpo", ... },
               "aggregation": "token-mean" | "seq-mean-token-sum" | "seq-mean-token-mean"
                              | "seq-mean-token-sum-norm" | { "name", "normalizer" },
               "kl"?: { "name": "k1" | "k2" | "k3" | "k1+" | "k3+", "coef" } }
output JSON: { "advantages", "weights", "mask", "tokenLoss", "loss", "gradLogpTheta", "metrics" }

options:
  --input FILE|-   batch JSON file, or - for standard input (required)
  --output FILE    write the JSON there instead of standard output
  -h, --help       this text

Malformed input exits with code 2 and one line naming the field.`;

async function readInput(path: string, io: CliIo): Promise<string> {
  if (path === '-') return io.readStdin();
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw new UsageError(`--input: cannot read '${path}' (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

/** The `estimate` subcommand. */
export const estimateCommand: Command = {
  summary: 'evaluate advantages, rollout correction, policy loss, KL and d loss/d logpTheta on a JSON batch',
  help,
  async run(args: string[], io: CliIo): Promise<number> {
    let values: { input?: string | undefined; output?: string | undefined };
    try {
      ({ values } = parseArgs({
        args,
        options: { input: { type: 'string' }, output: { type: 'string' } },
        strict: true,
        allowPositionals: false,
      }));
    } catch (error) {
      throw new UsageError((error as Error).message.split('\n')[0] ?? 'bad arguments');
    }
    if (values.input === undefined) throw new UsageError('--input: required (a file path or - for standard input)');
    const text = await readInput(values.input, io);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      throw new UsageError(`input: not valid JSON (${(error as Error).message})`);
    }
    const out = `${JSON.stringify(estimateJson(json), null, 2)}\n`;
    if (values.output !== undefined) {
      try {
        await writeFile(values.output, out);
      } catch (error) {
        throw new UsageError(`--output: cannot write '${values.output}' (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
      }
    } else {
      io.out(out);
    }
    return 0;
  },
};
