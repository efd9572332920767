// `qrl-sim golden`: writes golden reference suites (safetensors + manifest.json) for GPU
// implementations to test against. Not the suites (src/golden/suites) nor the reader (python/qrl_golden).

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { goldenSuites } from '../golden/suites/index.js';
import { goldenWriteSteps } from '../golden/write.js';
import { GOLDEN_SCHEMA, type GoldenManifest } from '../golden/types.js';
import { handleStopSignals, STOP_EXIT, stopReason, stopRequested } from './stop.js';
import type { Command } from './command.js';
import { UsageError } from '../core/errors.js';
import { makeOutDir } from './outdir.js';
import { removeStaleTemps } from '../core/files.js';
import { parseCommandArgs, required, seedOption, strings } from './parse.js';

const help = `usage: qrl-sim golden --suite NAME[,NAME…] --out DIR [--seed S]

Writes DIR/manifest.json (schema qrl-golden/1) and DIR/<suite>/<case>.safetensors: inputs,
expected outputs and a compare rule per tensor (bitwise, ulp or rtol/atol). The same seed gives
byte-identical files. Read them with the Python package qrl_golden (python/); see docs/golden.md.

options:
  --suite NAMES   comma-separated, or 'all': ${Object.keys(goldenSuites).join(', ')}
  --out DIR       output directory (created). Into a directory that already holds a golden
                  manifest the suites are merged: the named suites are rewritten, the others
                  stay listed; its seed must be the same
  --seed S        seed of the random inputs (default 0)

suites:
${Object.values(goldenSuites)
  .map((s) => `  ${s.name.padEnd(14)} ${s.description}`)
  .join('\n')}

examples:
  qrl-sim golden --suite gemm,estimators --out golden/
  qrl-sim golden --suite casts --out golden/     # adds casts; gemm and estimators stay listed`;

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
      if (suite === undefined)
        throw new UsageError(`--suite: unknown suite '${name}' (known: ${Object.keys(goldenSuites).join(', ')}, all)`);
      return suite;
    });
    const out = required(values.out, 'out');
    const seed = seedOption(values.seed);
    if (existsSync(out) && !statSync(out).isDirectory())
      throw new UsageError(`--out: '${out}' is a file, not a directory`);
    if (existsSync(out) && readdirSync(out).length > 0 && !existsSync(join(out, 'manifest.json'))) {
      throw new UsageError(
        `--out: '${out}' exists, is not empty and holds no manifest.json (refusing to write into it)`,
      );
    }
    const existing = existsSync(join(out, 'manifest.json')) ? readManifest(join(out, 'manifest.json')) : undefined;
    if (existing !== undefined && existing.seed !== seed) {
      throw new UsageError(
        `--seed: ${join(out, 'manifest.json')} holds suites of seed ${existing.seed}, got ${seed}; merging needs the same seed (pass --seed ${existing.seed}, or another --out)`,
      );
    }
    // The merged manifest's command regenerates the whole directory: the kept suites, then the new ones.
    const all = [
      ...Object.keys(existing?.suites ?? {}),
      ...list.filter((name) => existing?.suites[name] === undefined),
    ];
    // One level at a time and probed for writing: /proc/x, a read-only or unwritable parent fail here at once.
    makeOutDir(out, '--out');
    // Temp files of an earlier golden that was killed mid-write (safetensors and manifest are renamed into place).
    for (const dir of [out, ...suites.map((suite) => join(out, suite.name))]) removeStaleTemps(dir);
    const command = ['qrl-sim', 'golden', '--suite', all.join(','), '--out', out, '--seed', String(seed)].join(' ');
    // SIGINT/SIGTERM stop after the current case file; manifest.json then lists the suites finished whole.
    const unhandle = handleStopSignals(
      io,
      'golden',
      'stopping after this case file; manifest.json will list the suites finished',
    );
    let manifest: GoldenManifest;
    try {
      const steps = goldenWriteSteps(out, suites, {
        seed,
        command,
        ...(existing === undefined ? {} : { keep: existing.suites }),
        stopped: stopRequested,
        onSuite: (name, cases, bytes, ms) =>
          io.err(`${name}: ${cases} cases, ${(bytes / 1024).toFixed(0)} KiB, ${(ms / 1000).toFixed(2)} s`),
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
      const done = list.filter((name) => manifest.suites[name] !== undefined);
      io.err(
        `qrl-sim golden: stopped (${why}): ${join(out, 'manifest.json')} lists ${done.length} of ${suites.length} suites (${done.join(', ') || 'none'}); every file is whole; run the same command again for the rest`,
      );
      return STOP_EXIT[why];
    }
    io.out(`wrote ${join(out, 'manifest.json')}`);
    return 0;
  },
};

/** The existing manifest of an output directory, checked enough to merge into (schema, seed, suites). */
function readManifest(path: string): GoldenManifest {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new UsageError(
      `--out: ${path} is not JSON (${e instanceof Error ? e.message : String(e)}); remove it or choose another --out`,
    );
  }
  const m = value as Partial<GoldenManifest> | null;
  if (
    m === null ||
    typeof m !== 'object' ||
    m.schema !== GOLDEN_SCHEMA ||
    typeof m.seed !== 'number' ||
    typeof m.suites !== 'object' ||
    m.suites === null
  ) {
    throw new UsageError(
      `--out: ${path} is not a ${GOLDEN_SCHEMA} manifest (schema, seed and suites expected); remove it or choose another --out`,
    );
  }
  return m as GoldenManifest;
}
