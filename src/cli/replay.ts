// `qrl-sim replay BUNDLE [--json]`: reads a qrl-step/1 bundle (or a directory of them, one per step),
// replays it through the oracle (src/golden/replay.ts) and prints the stage table. Exit 0 when every
// stage agrees, 1 on a difference, 2 on a bad bundle. Not the replay itself.

import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from './command.js';
import { UsageError } from '../core/errors.js';
import { formatReplay, replayStages, replayStep, type ReplayResult } from '../golden/replay.js';
import { readStepBundle } from '../golden/step-bundle.js';
import { booleans, parseCommandArgs } from './parse.js';

const help = `usage: qrl-sim replay BUNDLE [--json]

Replays one training step that a stack captured (a qrl-step/1 bundle: manifest.json +
tensors.safetensors, written by python -m qrl_golden.capture or qrl_golden.bundle.write) through
qrl-sim's estimators, stage by stage, each stage from the stack's own inputs to it:
${replayStages.join(' → ')}. Prints the stage table and names the first stage that differs,
with its largest difference and position. BUNDLE may also be a directory of bundles (DIR/<step>/),
replayed in step order. The stack's options are mapped by its table (TRL 1.13); an option the table
cannot map exits 2 naming it. Guide: docs/replay.md.

options:
  --json   print {"stages": [{"name", "status", "maxDiff", "bound", "position", …}], "firstDifference"}
           (a directory: {"bundles": [...], "firstDifference"})

exit status: 0 every stage agrees, 1 a stage differs, 2 a bad bundle (a missing field, a hash that
does not match, a shape that disagrees) or an option that cannot be mapped.

examples:
  qrl-sim replay docs/examples/replay/trl-grpo/1
  qrl-sim replay docs/examples/replay/trl-grpo --json
  qrl-sim replay docs/examples/replay/trl-grpo-planted/1 || test $? -eq 1

Capture your own: python -m qrl_golden.capture trl --out DIR --steps 2 --options '{"loss_type": "grpo"}'`;

/** The bundles under \`path\`: itself when it holds manifest.json, else its sub-directories that do, in step order. */
function bundleDirs(path: string): string[] {
  if (!existsSync(path)) throw new UsageError(`BUNDLE: ${path} does not exist`);
  if (existsSync(join(path, 'manifest.json'))) return [path];
  if (!statSync(path).isDirectory()) throw new UsageError(`BUNDLE: ${path} is not a directory`);
  const dirs = readdirSync(path)
    .filter((name) => existsSync(join(path, name, 'manifest.json')))
    .sort((a, b) => (/^\d+$/.test(a) && /^\d+$/.test(b) ? Number(a) - Number(b) : a < b ? -1 : a > b ? 1 : 0));
  if (dirs.length === 0)
    throw new UsageError(`BUNDLE: ${path} holds no manifest.json (not a qrl-step/1 bundle or a directory of them)`);
  return dirs.map((name) => join(path, name));
}

/** The \`replay\` subcommand. */
export const replayCommand: Command = {
  summary: "replay a stack's captured training step (qrl-step/1) stage by stage through the estimators",
  help,
  async run(args, io) {
    const { values, positionals } = parseCommandArgs(args, { ...booleans('json') }, true);
    if (positionals.length !== 1)
      throw new UsageError(
        `BUNDLE: expected one bundle directory, got ${positionals.length === 0 ? 'none' : positionals.join(' ')}`,
      );
    const dirs = bundleDirs(positionals[0]!);
    // read and verify every bundle before replaying any: a bad one is exit 2 with nothing printed
    const results: ReplayResult[] = dirs.map((dir) => readStepBundle(dir)).map(replayStep);
    const first = results.find((r) => r.firstDifference !== null);
    if (values.json) {
      const one = (r: ReplayResult) => ({
        bundle: r.bundle,
        stack: r.stack,
        step: r.step,
        config: r.config,
        stages: r.stages,
        firstDifference: r.firstDifference,
      });
      io.out(
        JSON.stringify(
          results.length === 1 && dirs[0] === positionals[0]
            ? one(results[0]!)
            : { bundles: results.map(one), firstDifference: first?.firstDifference ?? null },
        ),
      );
    } else {
      results.forEach((r, i) => {
        if (results.length > 1) io.out(`${i > 0 ? '\n' : ''}${r.bundle}`);
        io.out(formatReplay(r));
      });
    }
    return first === undefined ? 0 : 1;
  },
};
