// `qrl-sim cast`: rounds decimal inputs (as float32) to a format under a cast profile (castRows in
// golden/methods.ts) and prints code, hex and decoded value. Not a batch tool: for arrays use the
// library's vector casts.

import {
  type CastProfile,
  type RoundingMode,
  castProfiles,
  profileCovers,
  roundingModes,
} from '../numerics/profiles.js';
import { type FloatFormat, floatFormats } from '../numerics/formats.js';
import { parseFloat32 } from '../numerics/values.js';
import { castRows } from '../golden/methods.js';
import type { Command } from './command.js';
import { UsageError } from '../core/errors.js';
import { booleans, parseCommandArgs, required, seedOption, strings } from './parse.js';

const help = `usage: qrl-sim cast --format F --profile P [--mode M] [--seed S] [--json] [--] VALUES...

Rounds each value to float32, then to format F under cast profile P, and prints the integer
code, its hex and the decoded value.

options:
  --format F    ${Object.keys(floatFormats).join(', ')}
  --profile P   ${Object.keys(castProfiles).join(', ')}
  --mode M      ${roundingModes.join(', ')} (default: the profile's mode)
  --seed S      seed of the random bits for --mode stochastic (default 0, an integer in
                0..4294967295; one uint32 per value)
  --json        print one JSON object {format, profile, mode, results: [{input, code, hex, value}]}
                (input and value are strings so that NaN, ±Infinity and -0 survive)

VALUES are decimal numbers, NaN, Infinity, -Infinity or -0; put '--' before negative values.

examples:
  qrl-sim cast --format e4m3fn --profile satfinite 448 464 465 1e6
  qrl-sim cast --format e2m1 --profile mx --json -- 2.5 -2.5 NaN`;

/** The `cast` subcommand. */
export const castCommand: Command = {
  summary: 'round values to a format under a cast profile (code, hex, decoded value)',
  help,
  async run(args, io) {
    const { values, positionals } = parseCommandArgs(
      args,
      { ...strings('format', 'profile', 'mode', 'seed'), ...booleans('json') },
      true,
    );
    const formatName = required(values.format, 'format');
    const format = (floatFormats as Record<string, FloatFormat>)[formatName];
    if (format === undefined)
      throw new UsageError(`--format: unknown format '${formatName}' (known: ${Object.keys(floatFormats).join(', ')})`);
    const profileName = required(values.profile, 'profile');
    const profile = (castProfiles as Record<string, CastProfile>)[profileName];
    if (profile === undefined)
      throw new UsageError(
        `--profile: unknown profile '${profileName}' (known: ${Object.keys(castProfiles).join(', ')})`,
      );
    if (!profileCovers(profile, format)) {
      throw new UsageError(
        `--profile: profile '${profileName}' does not apply to format '${formatName}' (it covers: ${Object.keys(profile.formats).join(', ')})`,
      );
    }
    const mode = (values.mode ?? profile.mode) as RoundingMode;
    if (!roundingModes.includes(mode))
      throw new UsageError(`--mode: unknown mode '${values.mode}' (known: ${roundingModes.join(', ')})`);
    const seed = seedOption(values.seed);
    if (values.seed !== undefined && mode !== 'stochastic')
      throw new UsageError(`--seed: only used with --mode stochastic (mode is ${mode})`);
    if (positionals.length === 0) throw new UsageError('no VALUES given');
    const results = castRows(format, profile, mode, positionals.map(parseFloat32), seed);
    if (values.json) {
      io.out(JSON.stringify({ format: format.name, profile: profile.name, mode, results }));
      return 0;
    }
    const width = Math.max(5, ...results.map((r) => r.input.length));
    io.out(`${format.name} under ${profile.name} (${mode})`);
    io.out(`${'input'.padStart(width)}  ${'code'.padStart(10)}  ${'hex'.padStart(10)}  value`);
    for (const r of results)
      io.out(`${r.input.padStart(width)}  ${String(r.code).padStart(10)}  ${r.hex.padStart(10)}  ${r.value}`);
    return 0;
  },
};
