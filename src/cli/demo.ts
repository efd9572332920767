// `qrl-sim demo` (what `npm start` runs): a small quantized-rollout GRPO sweep next to its BF16
// baseline, with and without correction (src/runs/demo.ts), and what it found; `--numerics` prints
// the cast-profile demonstration instead. Not a general sweep tool (`qrl-sim sweep`).

import { docRef, packagePathsIn } from './bundled.js';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { availableParallelism } from 'node:os';
import { loadLabExperiment } from '../runs/lab.js';
import {
  DEMO_EXCLUDE,
  DEMO_EXPERIMENT,
  DEMO_GRID,
  DEMO_SEEDS,
  demoFindings,
  demoSweepOptions,
  roundTripError,
} from '../runs/demo.js';
import { planSweep, readSweepManifestOptions, type SweepResult } from '../runs/sweep.js';
import { estimateHereText, labPlannedRuns, labSizeText } from './lab.js';
import { castProfiles, profileCovers } from '../numerics/profiles.js';
import { decode, floatFormats } from '../numerics/formats.js';
import { scalarEncoder } from '../numerics/round.js';
import { createRng } from '../core/rng.js';
import type { Command } from './command.js';
import { formatValue } from '../numerics/values.js';
import { UsageError } from '../core/errors.js';
import {
  booleans,
  integerOption,
  PARALLEL_OPTIONS,
  parseCommandArgs,
  refuseIgnored,
  seedOption,
  strings,
} from './parse.js';
import { executeSweep, MAX_SEEDS, MAX_WORKERS } from './sweep.js';
import { claimOutDir, outDirKind } from './outdir.js';
import { rngStreams } from '../core/rng-streams.js';

const help = `usage: qrl-sim demo [--out DIR] [--seeds N] [--workers N]
       qrl-sim demo --numerics [--seed S]

Without --numerics (what npm start runs): the lab's departure experiment (qrl-sim lab run
departure: sims/quantized-departure.json, sudoku4, 60 GRPO steps, settings unchanged) over the
arms of its finding — BF16 without correction, an MXFP4 rollout engine without correction and
with TIS (BF16 with TIS is identical to BF16 by construction and left out) — 2 seeds, in worker
threads. Prints the summary table, then what it found in plain words: each MXFP4 arm's held-out
accuracy at the trainer's precision minus BF16's, per seed. Default out: runs/demo; a finished
previous demonstration there is replaced, a stopped one continued (Ctrl-C or SIGTERM stop it after
the current step of every run); any other existing run, sweep or non-empty directory is refused
(exit 2). The same runs: qrl-sim sweep --config sims/quantized-departure.json
  --grid "${DEMO_GRID}" --exclude "${DEMO_EXCLUDE}" --seeds 2 --baseline plan=bf16,correction=none

With --numerics: how each cast profile treats the same float32 inputs in E4M3FN (the edge cases
that differ between backends), and the round-trip error of a seeded N(0,1) tensor in each format
under per-tensor amax scaling. --seed (0..4294967295) goes with --numerics only; --out, --seeds
(at most 1000) and --workers with the sweep only.

examples:
  qrl-sim demo --numerics --seed 1
  (npm start runs 'qrl-sim demo', the full demonstration)`;

/** True when `dir` holds the output of an earlier `demo` (its sweep.json has the demo's grid and exclusion). */
function isPreviousDemo(dir: string): boolean {
  if (outDirKind(dir) !== 'sweep') return false;
  try {
    const manifest = JSON.parse(readFileSync(join(dir, 'sweep.json'), 'utf8')) as {
      options?: { grid?: string; exclude?: string };
    };
    return manifest.options?.grid === DEMO_GRID && manifest.options.exclude === DEMO_EXCLUDE;
  } catch {
    return false;
  }
}

/** The `demo` subcommand. */
export const demoCommand: Command = {
  summary: 'the npm start demonstration: quantized-rollout GRPO sweep vs BF16 (--numerics: cast profiles side by side)',
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, { ...strings('seed'), ...booleans('numerics'), ...PARALLEL_OPTIONS });
    if (!values.numerics) {
      if (values.seed !== undefined) throw new UsageError('--seed goes with --numerics; the sweep uses --seeds N');
      const seeds = integerOption(values.seeds, 'seeds', DEMO_SEEDS, 1, MAX_SEEDS);
      const workers =
        values.workers === undefined ? undefined : integerOption(values.workers, 'workers', 1, 1, MAX_WORKERS);
      const outDir = values.out ?? 'runs/demo';
      const departure = loadLabExperiment(DEMO_EXPERIMENT);
      const options = demoSweepOptions(departure, { outDir: resolve(outDir), seeds, workers });
      let resume = false;
      if (isPreviousDemo(outDir)) {
        // A finished demonstration is replaced; a stopped one (no summary yet) is continued.
        resume = !existsSync(join(outDir, 'summary.json')) && readSweepManifestOptions(outDir).seeds === seeds;
        if (!resume) rmSync(outDir, { recursive: true, force: true });
        io.err(
          `qrl-sim demo: ${resume ? 'continuing the stopped' : 'replacing the previous'} demonstration in ${outDir}`,
        );
      }
      if (!resume) claimOutDir(outDir, 'sweep', values.out === undefined ? 'output directory' : '--out');
      io.out(`qrl-sim demonstration: ${departure.title}`);
      io.out(`  ${departure.source}`);
      io.out(`  GRPO on sudoku4 (${departure.config}, as \`qrl-sim lab run departure\` runs it): BF16 vs an MXFP4`);
      io.out(`  rollout engine without correction and with TIS, ${seeds} seed(s), 60 steps each → ${outDir}`);
      const planned = (await planSweep(options)).runs;
      io.out(
        `  ${planned.length} runs, ${estimateHereText(departure, planned, workers ?? availableParallelism())}; what that assumes: qrl-sim lab --help`,
      );
      let found: string[] = [];
      const code = await executeSweep(io, { ...options, ...(resume ? { resume: true } : {}) }, outDir, 'demo', {
        after: (result: SweepResult) => (found = demoFindings(resolve(outDir), result.runs)),
      });
      if (found.length === 0) return code;
      io.out('');
      for (const line of found) io.out(packagePathsIn(line));
      io.out('');
      io.out(
        `The full experiment, AIS as well and 3 seeds — ${labSizeText(departure, await labPlannedRuns(departure))}:`,
      );
      io.out('qrl-sim lab run departure; its page and verdict:');
      io.out(`${docRef('docs/lab/departure.md')}; every finding: ${docRef('docs/lab/README.md')}.`);
      return code;
    }
    refuseIgnored(values, ['out', 'seeds', 'workers'], 'with --numerics (it runs no sweep)');
    const seed = seedOption(values.seed);
    io.out('qrl-sim numerics demonstration\n');
    io.out('1. The same float32 inputs cast to E4M3FN by each backend profile (decoded value):\n');
    const inputs = [448, 464, 465, 470, 485, 1e6, Infinity, Number.NaN, 2 ** -10, 3 * 2 ** -10, -0];
    const profiles = Object.values(castProfiles).filter((p) => profileCovers(p, floatFormats.e4m3fn));
    const w = Math.max(13, ...profiles.map((p) => p.name.length + 2));
    io.out(['input'.padStart(w), ...profiles.map((p) => p.name.padStart(w))].join(''));
    for (const x of inputs) {
      const cells = profiles.map((p) =>
        formatValue(decode(floatFormats.e4m3fn, scalarEncoder('e4m3fn', p)(x))).padStart(w),
      );
      io.out([formatValue(x).padStart(w), ...cells].join(''));
    }
    io.out('\n2. Round-trip error of 65 536 N(0,1) values, per-tensor scale amax/maxFinite (seed ' + seed + '):\n');
    const rng = createRng(seed).fork(rngStreams.cli.demo);
    const x = new Float32Array(65536).map(() => rng.normal());
    const rows: [keyof typeof floatFormats, keyof typeof castProfiles][] = [
      ['bf16', 'ieee'],
      ['fp16', 'ieee'],
      ['e4m3fn', 'satfinite'],
      ['e5m2', 'satfinite'],
      ['e3m2', 'satfinite'],
      ['e2m3', 'satfinite'],
      ['e2m1', 'satfinite'],
    ];
    io.out(
      `${'format'.padEnd(8)}${'profile'.padEnd(11)}${'max |err|'.padStart(12)}${'rmse'.padStart(12)}${'SQNR dB'.padStart(10)}`,
    );
    for (const [format, profile] of rows) {
      const e = roundTripError(x, format, profile);
      io.out(
        `${format.padEnd(8)}${profile.padEnd(11)}${e.maxErr.toExponential(3).padStart(12)}${e.rmse.toExponential(3).padStart(12)}${e.sqnrDb.toFixed(2).padStart(10)}`,
      );
    }
    io.out(`\nMore: qrl-sim cast --help, ${docRef('docs/numerics.md')}`);
    return 0;
  },
};
