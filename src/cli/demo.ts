// `qrl-sim demo` (what `npm start` runs): a small quantized-rollout GRPO sweep next to its BF16
// baseline, with and without correction; `--numerics` prints the cast-profile demonstration instead.
// Not a general sweep tool (`qrl-sim sweep`).

import { readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { estimateLabSeconds, loadLabExperiment } from '../runs/lab.js';
import { gridPoints, parseGrid } from '../runs/grid.js';
import { castProfiles, profileCovers } from '../numerics/profiles.js';
import { decode, floatFormats } from '../numerics/formats.js';
import { fakeQuant } from '../numerics/vector.js';
import { scalarEncoder } from '../numerics/round.js';
import { createRng } from '../rng.js';
import type { Command } from './command.js';
import { formatValue } from './cast.js';
import { UsageError } from '../errors.js';
import { integerOption, parseCommandArgs, refuseIgnored, seedOption } from './parse.js';
import { executeSweep, MAX_SEEDS, MAX_WORKERS } from './sweep.js';
import { claimOutDir, outDirKind } from './outdir.js';

/** The demonstration's base config and grid. */
export const DEMO_CONFIG = fileURLToPath(new URL('../../sims/demo.json', import.meta.url));
export const DEMO_GRID = 'plan=bf16,nvfp4-rollout;correction=none,tis';

const help = `usage: qrl-sim demo [--out DIR] [--seeds N] [--workers N]
       qrl-sim demo --numerics [--seed S]

Without --numerics (what npm start runs): a GRPO sweep of the autoregressive toy policy on the
reverse task (sims/demo.json) — the BF16 baseline next to an NVFP4-quantized rollout engine, each
without correction and with TIS, over 2 seeds — in worker threads, under a minute on two cores.
Prints the summary table and the path of the HTML report (default out: runs/demo), with a live
progress line on standard error. A previous demonstration in the output directory is
replaced; any other existing run, sweep or non-empty directory is refused (exit 2).
Equivalent to: qrl-sim sweep --config sims/demo.json --grid "${DEMO_GRID}" --seeds 2

With --numerics: how each cast profile treats the same float32 inputs in E4M3FN (the edge cases
that differ between backends), and the round-trip error of a seeded N(0,1) tensor in each format
under per-tensor amax scaling. --seed (0..4294967295) goes with --numerics only; --out, --seeds
(at most 1000) and --workers with the sweep only.

examples:
  qrl-sim demo --numerics --seed 1
  (npm start runs 'qrl-sim demo', the full demonstration)`;

/** True when `dir` holds the output of an earlier `demo` (its sweep.json has the demo's grid). */
function isPreviousDemo(dir: string): boolean {
  if (outDirKind(dir) !== 'sweep') return false;
  try {
    const manifest = JSON.parse(readFileSync(join(dir, 'sweep.json'), 'utf8')) as { grid?: { key: string; values: string[] }[] };
    return (manifest.grid ?? []).map((a) => `${a.key}=${a.values.join(',')}`).join(';') === DEMO_GRID;
  } catch {
    return false;
  }
}

/** Per-tensor amax-scaled fake quantization error of `x` in a format (simple demonstration). */
function roundTripError(x: Float32Array, format: keyof typeof floatFormats, profile: keyof typeof castProfiles) {
  const f = floatFormats[format];
  let amax = 0;
  for (const v of x) amax = Math.max(amax, Math.abs(v));
  const scale = Math.fround(amax / f.maxFinite);
  const scaled = x.map((v) => Math.fround(v / scale));
  const q = fakeQuant(f, scaled, { profile });
  let se = 0;
  let sx = 0;
  let maxErr = 0;
  for (let i = 0; i < x.length; i++) {
    const err = (x[i] as number) - Math.fround((q[i] as number) * scale);
    se += err * err;
    sx += (x[i] as number) ** 2;
    maxErr = Math.max(maxErr, Math.abs(err));
  }
  return { maxErr, rmse: Math.sqrt(se / x.length), sqnrDb: 10 * Math.log10(sx / se) };
}

/** The `demo` subcommand. */
export const demoCommand: Command = {
  summary: 'the npm start demonstration: quantized-rollout GRPO sweep vs BF16 (--numerics: cast profiles side by side)',
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, {
      seed: { type: 'string' },
      numerics: { type: 'boolean', default: false },
      out: { type: 'string' },
      seeds: { type: 'string' },
      workers: { type: 'string' },
    });
    if (!values.numerics) {
      if (values.seed !== undefined) throw new UsageError('--seed goes with --numerics; the sweep uses --seeds N');
      const seeds = integerOption(values.seeds, 'seeds', 2, 1, MAX_SEEDS);
      const workers = values.workers === undefined ? undefined : integerOption(values.workers, 'workers', 1, 1, MAX_WORKERS);
      const outDir = values.out ?? 'runs/demo';
      if (isPreviousDemo(outDir)) {
        rmSync(outDir, { recursive: true, force: true });
        io.err(`qrl-sim demo: replacing the previous demonstration in ${outDir}`);
      }
      claimOutDir(outDir, 'sweep', values.out === undefined ? 'output directory' : '--out');
      io.out(`qrl-sim demonstration: GRPO on reverse, BF16 baseline vs NVFP4 rollout × {none, TIS}, ${seeds} seed(s) → ${outDir}`);
      let ok = false;
      const code = await executeSweep(
        io,
        { baseConfig: JSON.parse(readFileSync(DEMO_CONFIG, 'utf8')), grid: DEMO_GRID, seeds, outDir: resolve(outDir), ...(workers !== undefined ? { workers } : {}) },
        outDir,
        'demo',
        { after: (result) => (ok = result.runs.every((r) => r.ok)) },
      );
      if (code !== 0 && !ok) return code;
      io.out('');
      // The long experiment's duration comes from its spec's measured run time, not from this text.
      const departure = loadLabExperiment('departure');
      const departureRuns = gridPoints(parseGrid(departure.grid)).length * departure.seeds;
      const departureMinutes = Math.round(estimateLabSeconds(departure, departureRuns, departure.seeds, 2) / 60);
      io.out('These 15 short steps show the mismatch and what each correction does to the weights, not yet a');
      io.out('training gap. The setting where the uncorrected quantized rollout departs from BF16 by more than');
      io.out(`the seed spread, and TIS recovers it, takes longer: \`qrl-sim lab run departure\` (about ${departureMinutes} min on`);
      io.out('two cores). Its measured result and verdict: docs/lab/departure.md; every finding: docs/lab/README.md.');
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
      const cells = profiles.map((p) => formatValue(decode(floatFormats.e4m3fn, scalarEncoder('e4m3fn', p)(x))).padStart(w));
      io.out([formatValue(x).padStart(w), ...cells].join(''));
    }
    io.out('\n2. Round-trip error of 65 536 N(0,1) values, per-tensor scale amax/maxFinite (seed ' + seed + '):\n');
    const rng = createRng(seed).fork('demo');
    const x = new Float32Array(65536).map(() => rng.normal());
    const rows: [keyof typeof floatFormats, keyof typeof castProfiles][] = [
      ['bf16', 'ieee'], ['fp16', 'ieee'], ['e4m3fn', 'satfinite'], ['e5m2', 'satfinite'],
      ['e3m2', 'satfinite'], ['e2m3', 'satfinite'], ['e2m1', 'satfinite'],
    ];
    io.out(`${'format'.padEnd(8)}${'profile'.padEnd(11)}${'max |err|'.padStart(12)}${'rmse'.padStart(12)}${'SQNR dB'.padStart(10)}`);
    for (const [format, profile] of rows) {
      const e = roundTripError(x, format, profile);
      io.out(`${format.padEnd(8)}${profile.padEnd(11)}${e.maxErr.toExponential(3).padStart(12)}${e.rmse.toExponential(3).padStart(12)}${e.sqnrDb.toFixed(2).padStart(10)}`);
    }
    io.out('\nMore: qrl-sim cast --help, docs/numerics.md');
    return 0;
  },
};
