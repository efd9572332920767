// `qrl-sim golden`: writes golden reference suites (safetensors + manifest.json) for GPU
// implementations to test against. Not the suites (src/golden/suites) nor the reader (python/qrl_golden).

import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { goldenSuites } from '../golden/suites/index.js';
import { goldenWriteSteps } from '../golden/write.js';
import type { GoldenManifest } from '../golden/types.js';
import { handleStopSignals, STOP_EXIT, stopReason, stopRequested } from './stop.js';
import type { Command } from './command.js';
import { UsageError } from '../errors.js';
import { makeOutDir } from './outdir.js';
import { removeStaleTemps } from '../files.js';
import { parseCommandArgs, required, seedOption, strings } from './parse.js';

const help = `usage: qrl-sim golden --suite NAME[,NAME…] --out DIR [--seed S]

Writes DIR/manifest.json (schema qrl-golden/1) and DIR/<suite>/<case>.safetensors: inputs,
expected outputs and a compare rule per tensor (bitwise, ulp or rtol/atol). The same seed gives
byte-identical files. Read them with the Python package qrl_golden (python/); see docs/golden.md.

options:
  --suite NAMES   comma-separated, or 'all': ${Object.keys(goldenSuites).join(', ')}
  --out DIR       output directory (created; existing suite files are overwritten)
  --seed S        seed of the random inputs (default 0)

suites:
${Object.values(goldenSuites).map((s) => `  ${s.name.padEnd(14)} ${s.description}`).join('\n')}

example:
  qrl-sim golden --suite gemm,estimators --out golden/`;

/** The `golden` subcommand. */
export const goldenCommand: Command = {
  summary: 'write golden reference suites (safetensors + manifest) for other implementations',
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, strings('suite', 'out', 'seed'));
    const names = required(values.suite, 'suite');
    const list = names === 'all' ? Object.keys(goldenSuites) : names.split(',').map((s) => s.trim());
    const suites = list.map((name) => {
      const suite = goldenSuites[name];
      if (suite === undefined) throw new UsageError(`--suite: unknown suite '${name}' (known: ${Object.keys(goldenSuites).join(', ')}, all)`);
      return suite;
    });
    const out = required(values.out, 'out');
    const seed = seedOption(values.seed);
    if (existsSync(out) && !statSync(out).isDirectory()) throw new UsageError(`--out: '${out}' is a file, not a directory`);
    if (existsSync(out) && readdirSync(out).length > 0 && !existsSync(join(out, 'manifest.json'))) {
      throw new UsageError(`--out: '${out}' exists, is not empty and holds no manifest.json (refusing to write into it)`);
    }
    // One level at a time and probed for writing: /proc/x, a read-only or unwritable parent fail here at once.
    makeOutDir(out, '--out');
    // Temp files of an earlier golden that was killed mid-write (safetensors and manifest are renamed into place).
    for (const dir of [out, ...suites.map((suite) => join(out, suite.name))]) removeStaleTemps(dir);
    const command = ['qrl-sim', 'golden', '--suite', list.join(','), '--out', out, '--seed', String(seed)].join(' ');
    // SIGINT/SIGTERM stop after the current case file; manifest.json then lists the suites finished whole.
    const unhandle = handleStopSignals(io, 'golden', 'stopping after this case file; manifest.json will list the suites finished');
    let manifest: GoldenManifest;
    try {
      const steps = goldenWriteSteps(out, suites, {
        seed,
        command,
        stopped: stopRequested,
        onSuite: (name, cases, bytes, ms) => io.err(`${name}: ${cases} cases, ${(bytes / 1024).toFixed(0)} KiB, ${(ms / 1000).toFixed(2)} s`),
      });
      for (;;) {
        const r = steps.next();
        if (r.done === true) {
          manifest = r.value;
          break;
        }
        // Signals are delivered between cases.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } finally {
      unhandle();
    }
    const why = stopReason();
    if (why !== null) {
      const done = Object.keys(manifest.suites);
      io.err(`qrl-sim golden: stopped (${why}): ${join(out, 'manifest.json')} lists ${done.length} of ${suites.length} suites (${done.join(', ') || 'none'}); every file is whole; run the same command again for the rest`);
      return STOP_EXIT[why];
    }
    io.out(`wrote ${join(out, 'manifest.json')}`);
    return 0;
  },
};
