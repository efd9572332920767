// Measures the lab's duration estimates: for each experiment of sims/lab/, the CPU seconds of a
// warm-start step, a GRPO step, an evaluation and a checkpoint of every grid point, in a short run of
// that point's own config, extrapolated to the full config (src/runs/lab-estimate.ts) and written
// into the experiment's secondsPerRun / warmStartSeconds / timedOn. Not a benchmark (bench/) and not a test.
// Usage: npm run lab-timings [-- NAME …] [--dry] (npx tsx scripts/lab-timings.ts); without --dry it also
// regenerates the docs/lab blocks that quote the estimates. One process, one thread;
// CPU time (process.cpuUsage), which a busy machine inflates far less than wall time.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunConfig } from '../src/rl/grpo/config.js';
import {
  labExperimentNames,
  labSweepOptions,
  LAB_DIR,
  loadLabExperiment,
  type LabExperiment,
} from '../src/runs/lab.js';
import { type PhaseSeconds, runCpuSeconds, warmStartCpuSeconds } from '../src/runs/lab-estimate.js';
import { runGrpo, warmStartKey } from '../src/runs/run.js';
import { fillMarkers, labDocs } from './doc-tables.js';
import { type PlannedRun, planSweep } from '../src/runs/sweep.js';

/** GRPO steps of each short run: the first is left out (it compiles the point's code paths), the second is measured. */
const GRPO_STEPS = 2;
/** Supervised steps of the short warm start measured once per warm-start key (the first two are left out of the mean). */
const SFT_STEPS = 8;
/** Seconds the estimates are rounded to, from 20 s up (whole seconds below). */
const ROUND = 5;

const cpuSeconds = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

type Phase = 'step' | 'eval' | 'checkpoint';

/** CPU seconds of one short run's phases; `warmStart` false: no supervised steps (setup and warm-start step are NaN). */
async function measurePoint(config: RunConfig, warmStart: boolean): Promise<PhaseSeconds & { total: number }> {
  // The point's config with fewer steps: the evaluation (once, after the last step) and everything else unchanged.
  const short: RunConfig = {
    ...config,
    steps: GRPO_STEPS,
    sft: { ...config.sft, steps: warmStart ? SFT_STEPS : 0, cache: false },
    eval: { ...config.eval, every: 0 },
    checkpoint: { every: 1 },
  };
  const out = mkdtempSync(join(tmpdir(), 'qrl-lab-timings-'));
  const sft: number[] = [];
  const seen: Record<Phase, number[]> = { step: [], eval: [], checkpoint: [] };
  let mark = 0;
  let phase: Phase | null = null;
  const close = (now: number): void => {
    if (phase !== null) seen[phase].push(now - mark);
    phase = null;
  };
  const open = (next: Phase): void => {
    const now = cpuSeconds();
    close(now);
    phase = next;
    mark = now;
  };
  const t0 = cpuSeconds();
  try {
    await runGrpo({
      config: short,
      outDir: out,
      cacheDir: join(out, 'cache'),
      observer: {
        onWarmStart: () => sft.push(cpuSeconds()),
        onStepStart: () => open('step'),
        onStep: () => close(cpuSeconds()),
        onEvalStart: () => open('eval'),
        onEval: () => close(cpuSeconds()),
        onCheckpointStart: () => open('checkpoint'),
      },
    });
    close(cpuSeconds());
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
  const warmStartStep = warmStart ? mean(sft.slice(2).map((t, i) => t - (sft[i + 1] as number))) : Number.NaN;
  return {
    setup: warmStart ? Math.max(0, (sft[0] as number) - t0 - warmStartStep) : Number.NaN,
    warmStartStep,
    grpoStep: mean(seen.step.slice(1)),
    evaluation: mean(seen.eval),
    checkpoint: mean(seen.checkpoint),
    total: cpuSeconds() - t0,
  };
}

const rounded = (s: number): number => (s < 20 ? Math.max(1, Math.round(s)) : Math.round(s / ROUND) * ROUND);

/** Replaces a top-level numeric field's value in the experiment's JSON text (formatting kept). */
function setField(text: string, field: string, value: string): string {
  const re = new RegExp(`("${field}":\\s*)("[^"]*"|[0-9.e+-]+)`);
  if (re.test(text)) return text.replace(re, (_m, head: string) => `${head}${value}`);
  // A new field goes after warmStartSeconds.
  return text.replace(
    /("warmStartSeconds":\s*[0-9.e+-]+,?)(\n\s*)/,
    (_m, line: string, nl: string) => `${line.endsWith(',') ? line : `${line},`}${nl}"${field}": ${value},${nl}`,
  );
}

async function timeExperiment(exp: LabExperiment, machine: string, date: string, dry: boolean): Promise<string> {
  const plan = await planSweep(labSweepOptions(exp, { outDir: 'unused' }));
  const seed = plan.seeds[0];
  const points = plan.points.map((p) => plan.runs.find((r) => r.label === p.label && r.seed === seed) as PlannedRun);
  // The warm start and the run's setup are measured once per warm-start key (its first grid point).
  const warm = new Map<string, PhaseSeconds>();
  const runSeconds: number[] = [];
  const warmSeconds: number[] = [];
  let spent = 0;
  const lines: string[] = [];
  for (const run of points) {
    const key = warmStartKey(run.config);
    const firstOfKey = !warm.has(key);
    const measured = await measurePoint(run.config, firstOfKey);
    spent += measured.total;
    if (firstOfKey) {
      warm.set(key, measured);
      warmSeconds.push(warmStartCpuSeconds(run.config, measured));
    }
    const { setup, warmStartStep } = warm.get(key) as PhaseSeconds;
    const phases: PhaseSeconds = { ...measured, setup, warmStartStep };
    runSeconds.push(runCpuSeconds(run.config, phases));
    const line =
      `  ${run.label}: ${firstOfKey ? `setup ${setup.toFixed(2)} s, warm-start step ${warmStartStep.toFixed(3)} s, ` : ''}GRPO step ${phases.grpoStep.toFixed(2)} s, ` +
      `evaluation ${phases.evaluation.toFixed(2)} s, checkpoint ${phases.checkpoint.toFixed(3)} s → run ${(runSeconds.at(-1) as number).toFixed(0)} s (${measured.total.toFixed(0)} s to measure)`;
    lines.push(line);
    console.error(line);
  }
  const perRun = rounded(mean(runSeconds));
  const perWarmStart = rounded(mean(warmSeconds));
  const file = join(LAB_DIR, `${exp.name}.json`);
  if (!dry) {
    let text = readFileSync(file, 'utf8');
    text = setField(text, 'secondsPerRun', String(perRun));
    text = setField(text, 'warmStartSeconds', String(perWarmStart));
    text = setField(text, 'timedOn', JSON.stringify(`${date}, ${machine}, npm run lab-timings`));
    writeFileSync(file, text);
  }
  return `${exp.name}: ${points.length} grid points, ${warm.size} warm-start configs: ${perRun} CPU s per run, ${perWarmStart} CPU s per warm start (measured in ${spent.toFixed(0)} CPU s)`;
}

const args = process.argv.slice(2);
const dry = args.includes('--dry');
const names = args.filter((a) => !a.startsWith('--'));
const machine = `${cpus()[0]?.model.trim() ?? 'unknown CPU'} (${cpus().length} cores), Node ${process.version}`;
const date = new Date().toISOString().slice(0, 10);
const start = cpuSeconds();
for (const name of names.length > 0 ? names : labExperimentNames()) {
  console.log(await timeExperiment(loadLabExperiment(name), machine, date, dry));
}
console.log(`lab-timings: ${(cpuSeconds() - start).toFixed(0)} CPU s in all`);
if (!dry) {
  // The docs quote the estimates (docs/lab/README.md, each page's command line): regenerated here too.
  for (const [path, blocks] of Object.entries(await labDocs()))
    writeFileSync(path, fillMarkers(readFileSync(path, 'utf8'), blocks));
  console.log('lab-timings: docs/lab regenerated (scripts/doc-tables.ts)');
}
