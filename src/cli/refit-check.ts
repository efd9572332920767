// `qrl-sim refit-check`: parses the flags, runs the check of src/golden/refit-check.ts and prints one
// line per finding (or the JSON result); exit 0 clean, 1 with findings. Not the check itself.

import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { EngineDump } from '../core/backend-contract.js';
import type { CliIo, Command } from './command.js';
import { UsageError } from '../core/errors.js';
import {
  ignoreMatchAliases,
  ignoreMatchRules,
  refitCheck,
  refitFindingKinds,
  refitRecipes,
  type IgnoreMatchRule,
  type RefitCheckResult,
  type RefitRecipe,
} from '../golden/refit-check.js';
import { connectBackend } from '../protocol/remote.js';
import { backendToken } from './input.js';
import {
  BACKEND_OPTIONS,
  backendTimeouts,
  booleans,
  integerOption,
  parseCommandArgs,
  REPEATED,
  required,
  strings,
} from './parse.js';
import { resolveBackendAddress } from './self-command.js';

const matchNames = [...Object.keys(ignoreMatchRules), ...Object.keys(ignoreMatchAliases)];

const help = `usage: qrl-sim refit-check --trainer T.safetensors --engine E.safetensors --recipe PRESET [--block N]
                         [--previous T0.safetensors] [--ignore PATTERN …] [--match RULE] [--json]
       qrl-sim refit-check --backend CMD|URL --out DIR [--previous T0.safetensors] [--json]

Checks what a rollout engine holds after a weight sync against the trainer's state dict: every
2-D '.weight' tensor not matched by the ignore list must be the recipe applied to the trainer's
values (F8_E4M3 codes with the recipe's scale tensor), every other tensor the trainer's values in
the engine's dtype (BF16 or F32). Reads the files one tensor at a time. Exit 0 when clean, 1 with
findings, 2 on bad input. Guide: docs/refit-check.md.

options:
  --trainer FILE    the trainer's state dict (BF16/F32, Hugging Face names)
  --engine FILE     the engine's weights after the sync (Hugging Face FP8 conventions:
                    X.weight F8_E4M3 + X.weight_scale_inv (block) or X.weight_scale (tensor,
                    channel); k_scale / v_scale tensors are checked for unity)
  --recipe PRESET   ${Object.keys(refitRecipes).join(', ')}
  --block N         block size of deepseek-fp8-block (default 128)
  --previous FILE   an older trainer snapshot: a tensor equal to the recipe applied to it is 'stale'
  --ignore PATTERN  a module the stack keeps in high precision (repeatable)
  --match RULE      how --ignore matches a module name: substring (default; = vllm), prefix,
                    regex (= compressed-tensors: 're:' patterns, others exact)
  --json            print {"findings": [{"tensor", "kind", …}], "tensors", "quantized", "kvScales",
                    "recipe", "block", "match"}

a live backend (capabilities.dumpEngine, docs/refit-check.md §8):
  --backend CMD|URL  a qrl-backend/1 backend: sync, one greedy generate (an FP8 KV cache calibrates
                    its scales on it), dumpEngine into --out; then the check of the two files with the
                    recipe, block and ignore list the backend states for its plan
  --out DIR         where the backend writes trainer.safetensors and engine.safetensors (created)
  --timeout MS, --startup-timeout MS, --token-file FILE   as backend-check's
  e.g. --backend "python3 -m qrl_backend.hf --plan hf-fp8-kv --fp8-block 16" --out /tmp/dump (PYTHONPATH=python in a checkout)

finding kinds: ${refitFindingKinds.join(', ')}

examples:
  qrl-sim refit-check --trainer docs/examples/refit/trainer.safetensors --engine docs/examples/refit/engine.safetensors --recipe deepseek-fp8-block --block 16 --match prefix --ignore model.embed_tokens --ignore lm_head --ignore model.layers.0.mlp.gate
  qrl-sim refit-check --trainer docs/examples/refit/trainer.safetensors --engine docs/examples/refit/engine-w31.safetensors --recipe deepseek-fp8-block --block 16 --match prefix --ignore model.embed_tokens --ignore lm_head --ignore model.layers.0.mlp.gate --json || test $? -eq 1`;

/** The `refit-check` subcommand. */
export const refitCheckCommand: Command = {
  summary: "check an engine's FP8 weights after a sync against the trainer's state dict and a recipe",
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, {
      ...strings('trainer', 'engine', 'recipe', 'block', 'previous', 'match', 'out'),
      ...BACKEND_OPTIONS,
      ignore: REPEATED,
      ...booleans('json'),
    });
    if (values.backend !== undefined) {
      for (const flag of ['trainer', 'engine', 'recipe', 'block', 'match'] as const)
        if (values[flag] !== undefined)
          throw new UsageError(`--${flag}: not with --backend (the backend states its files, recipe and ignore list)`);
      if (values.ignore !== undefined && values.ignore.length > 0)
        throw new UsageError('--ignore: not with --backend (the backend states its files, recipe and ignore list)');
      const out = resolve(required(values.out, 'out'));
      mkdirSync(out, { recursive: true });
      const dump = await dumpFromBackend(values.backend, out, values, io);
      return report(
        refitCheck({
          trainer: join(out, dump.trainer),
          engine: join(out, dump.engine),
          recipe: dump.recipe as RefitRecipe,
          ...(dump.block !== undefined ? { block: dump.block } : {}),
          ...(values.previous !== undefined ? { previous: values.previous } : {}),
          ignore: dump.ignore,
          match: dump.match,
        }),
        values.json === true,
        io,
      );
    }
    if (values.out !== undefined) throw new UsageError('--out: only with --backend');
    const recipe = required(values.recipe, 'recipe');
    if (!Object.hasOwn(refitRecipes, recipe))
      throw new UsageError(
        `--recipe: unsupported preset '${recipe}' (supported: ${Object.keys(refitRecipes).join(', ')})`,
      );
    const matchName = values.match ?? 'substring';
    if (!matchNames.includes(matchName))
      throw new UsageError(`--match: unknown rule '${matchName}' (known: ${matchNames.join(', ')})`);
    const match = (
      Object.hasOwn(ignoreMatchAliases, matchName)
        ? ignoreMatchAliases[matchName as keyof typeof ignoreMatchAliases]
        : matchName
    ) as IgnoreMatchRule;
    const result = refitCheck({
      trainer: required(values.trainer, 'trainer'),
      engine: required(values.engine, 'engine'),
      recipe: recipe as RefitRecipe,
      ...(values.block !== undefined ? { block: integerOption(values.block, 'block', 0, 1) } : {}),
      ...(values.previous !== undefined ? { previous: values.previous } : {}),
      ignore: values.ignore ?? [],
      match,
    });
    return report(result, values.json === true, io);
  },
};

/**
 * What a live backend's rollout engine holds after a `sync`: connects, checks
 * `capabilities.dumpEngine`, syncs, runs one greedy generate (an FP8 KV cache calibrates its scales on
 * the first forward after a sync), and has the backend write both files under `out`.
 */
async function dumpFromBackend(
  backend: string,
  out: string,
  values: {
    readonly timeout?: string | undefined;
    readonly 'startup-timeout'?: string | undefined;
    readonly 'token-file'?: string | undefined;
  },
  io: CliIo,
): Promise<EngineDump> {
  const token = backendToken(values['token-file']);
  const remote = await connectBackend(resolveBackendAddress(backend), {
    ...backendTimeouts(values, 120_000),
    ...(token === undefined ? {} : { token }),
    onStderr: (t: string) => io.err(t.replace(/\n$/, '')),
  });
  try {
    const info = await remote.info();
    if (info.capabilities.dumpEngine !== true)
      throw new UsageError(
        `--backend: ${info.backend.name} does not declare capabilities.dumpEngine (docs/refit-check.md §8)`,
      );
    await remote.sync();
    const v = info.vocabulary;
    await remote.generate({ prompts: [[v.bos, v.sep]], seed: 'refit-check', greedy: true, maxNewTokens: 1 });
    return await remote.dumpEngine(out);
  } finally {
    await remote.close();
  }
}

/** Prints the result (one line per finding and a summary, or JSON); the exit code. */
function report(result: RefitCheckResult, json: boolean, io: CliIo): number {
  if (json) io.out(JSON.stringify(result));
  else {
    for (const f of result.findings) {
      const { tensor, kind, ...detail } = f;
      const text = Object.entries(detail)
        .map(
          ([k, v]) =>
            `${k}=${Array.isArray(v) && v.length > 16 ? `[${v.slice(0, 16).join(',')},…]` : Array.isArray(v) ? `[${v.join(',')}]` : String(v)}`,
        )
        .join(' ');
      io.out(`${tensor}  ${kind}${text === '' ? '' : `  ${text}`}`);
    }
    io.out(
      `${result.tensors} tensors (${result.quantized} quantized by ${result.recipe}${result.block === null ? '' : ` ${result.block}×${result.block}`}, ignore rule ${result.match}), ${result.kvScales} kv scales: ${result.findings.length === 0 ? 'clean' : `${result.findings.length} finding${result.findings.length === 1 ? '' : 's'}`}`,
    );
  }
  return result.findings.length === 0 ? 0 : 1;
}
