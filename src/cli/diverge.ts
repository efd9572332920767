// `qrl-sim diverge`: where two forwards first part — the trainer and rollout sides of a plan on the
// same tokens (toy AR policy), or two qrl-dump/1 files from any stack. Not the comparison (policies/diverge.ts).

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { arDiverge, arModelPresetNames, rollout } from '../policies/ar-api.js';
import { sideNumerics } from '../policies/plans.js';
import { compareForwards, type DivergeReport } from '../policies/diverge.js';
import { readForwardDump, writeForwardDump } from '../policies/dump.js';
import { floatFormats, type FloatFormatName } from '../numerics/formats.js';
import { createRng } from '../core/rng.js';
import { makeTask } from '../tasks/registry.js';
import { UsageError } from '../core/errors.js';
import type { Command } from './command.js';
import {
  booleans,
  integerOption,
  MODEL_OPTIONS,
  parseCommandArgs,
  refuseIgnored,
  REPEATED,
  seedOption,
  strings,
} from './parse.js';
import { planOption } from './plan-option.js';
import { freshArPolicy, modelOption } from './model-option.js';
import { rngStreams } from '../core/rng-streams.js';

const help = `usage: qrl-sim diverge --policy ar --plan P [--preset NAME] [--outliers N] [--moe E,K]
                       [--length L] [--batch B] [--seed S] [--format F] [--tolerance K]
                       [--write-dumps DIR] [--all] [--json]
       qrl-sim diverge --dump REFERENCE.safetensors --dump CANDIDATE.safetensors
                       [--format F] [--tolerance K] [--all] [--json]

Compares two forwards op by op, in forward order, and says where they first part.
--policy ar: samples B responses of L tokens with the plan's rollout side (prompts of the reverse
task, a fresh toy policy from the seed), then runs the full-sequence forward of the trainer side
(reference) and of the rollout side (candidate) on those same tokens, recording every op.
--dump: two qrl-dump/1 files (docs/diverge.md; python: qrl_golden.dump.record), the first the
reference; their token ids must be equal.

Per op: max|Δ|, mean|Δ|, the share of elements whose bits differ, the largest ulp distance in
float32 and in the working format F (both rounded to F), the normwise relative error
r = max|a − b| / max|a|, r_in (the largest r of the op's inputs) and added = r − r_in.
An op exceeds what the numerics alone explain when r > r_in + K·u_F (u_F = 2^−(mantissa bits + 1)
of F): it added more than K roundings of F to the error it received. Printed at the end:
  firstDiffer      first op whose outputs differ at all
  firstDivergence  first op that exceeds (none: every difference is within K·u_F per op)
  largestAdded     the op that added the most relative error

Options:
  --plan P          preset (fp8-rollout, bf16-splitk, …) or a plan .json file
  --preset NAME     model preset of the fresh policy (${arModelPresetNames.join(', ')}; default tiny)
  --outliers N      with --preset: outlier channels, 0..64
  --moe E,K         an MoE feed-forward of E experts, top-K (1 ≤ K ≤ E ≤ 64)
  --length L        response tokens, 1..256 (default 8)
  --batch B         sequences, 1..64 (default 2)
  --seed S          initialization, prompts and sampling (default 0)
  --format F        working format of the ulp distances and of u_F: bf16, fp16, fp32, e4m3fn, …
                    (default bf16, or the dumps' common dtype when they record one)
  --tolerance K     K ≥ 0 (default 4)
  --write-dumps DIR ar only: also write DIR/trainer.safetensors and DIR/rollout.safetensors (qrl-dump/1)
  --all             print every op (default: only ops that differ, and the summary)
  --json            one JSON object: { rows, firstDiffer, firstDivergence, largestAdded, … }

examples:
  qrl-sim diverge --policy ar --plan fp8-rollout
  qrl-sim diverge --policy ar --plan bf16-splitk --format fp32 --all`;

const DTYPE_FORMATS: Readonly<Record<string, FloatFormatName>> = {
  bfloat16: 'bf16',
  float16: 'fp16',
  float32: 'fp32',
  float8_e4m3fn: 'e4m3fn',
  float8_e5m2: 'e5m2',
};

function formatOption(value: string | undefined): FloatFormatName | undefined {
  if (value === undefined) return undefined;
  if (!Object.hasOwn(floatFormats, value) || value === 'e8m0')
    throw new UsageError(
      `--format: expected one of ${Object.keys(floatFormats)
        .filter((f) => f !== 'e8m0')
        .join(', ')}, got '${value}'`,
    );
  return value as FloatFormatName;
}

function toleranceOption(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const k = Number(value);
  if (value.trim() === '' || !Number.isFinite(k) || k < 0)
    throw new UsageError(`--tolerance: expected a finite number ≥ 0, got '${value}'`);
  return k;
}

function printReport(
  report: DivergeReport,
  extra: Record<string, unknown>,
  all: boolean | undefined,
  json: boolean | undefined,
  out: (line: string) => void,
): void {
  const summary = {
    format: report.format,
    tolerance: report.tolerance,
    unitRoundoff: report.unitRoundoff,
    firstDiffer: report.firstDiffer,
    firstDivergence: report.firstDivergence,
    largestAdded: report.largestAdded,
  };
  if (json) {
    out(JSON.stringify({ ...extra, ...summary, rows: report.rows }));
    return;
  }
  const e = (x: number): string => (x === 0 ? '0' : x.toExponential(2));
  const width = Math.max(8, ...report.rows.map((r) => r.name.length));
  out(
    `${'op'.padEnd(width)}  ${'max|Δ|'.padStart(9)}  ${'mean|Δ|'.padStart(9)}  ${'differ'.padStart(6)}  ${'ulp32'.padStart(9)}  ${`ulp ${report.format}`.padStart(9)}  ${'r'.padStart(9)}  ${'added'.padStart(9)}`,
  );
  for (const r of report.rows) {
    if (!all && r.fracDiffer === 0) continue;
    out(
      `${r.name.padEnd(width)}  ${e(r.maxAbsDelta).padStart(9)}  ${e(r.meanAbsDelta).padStart(9)}  ${r.fracDiffer.toFixed(3).padStart(6)}  ${e(r.maxUlpFp32).padStart(9)}  ${e(r.maxUlp).padStart(9)}  ${e(r.relError).padStart(9)}  ${e(r.added).padStart(9)}${r.exceeds ? '  ← exceeds' : ''}`,
    );
  }
  for (const [k, v] of Object.entries({ ...extra, ...summary }))
    out(
      `${k.padEnd(16)} ${Array.isArray(v) ? v.map((x: number) => x.toFixed(3)).join(' ') : typeof v === 'number' ? e(v) : String(v ?? 'none')}`,
    );
}

/** The `diverge` subcommand. */
export const divergeCommand: Command = {
  summary: 'where two forwards first part: op-by-op max|Δ|, ulp distance and the first op beyond the numerics',
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, {
      ...strings('policy', 'plan', 'length', 'batch', 'seed', 'format', 'tolerance', 'write-dumps'),
      ...MODEL_OPTIONS,
      dump: REPEATED,
      ...booleans('all', 'json'),
    });
    let format = formatOption(values.format);
    const tolerance = toleranceOption(values.tolerance);
    if (values.dump !== undefined) {
      refuseIgnored(
        values,
        ['policy', 'plan', 'preset', 'outliers', 'moe', 'length', 'batch', 'seed', 'write-dumps'],
        'with --dump',
      );
      if (values.dump.length !== 2)
        throw new UsageError(`--dump: give exactly two files (reference, candidate), got ${values.dump.length}`);
      const [a, b] = values.dump.map((path, i) => {
        try {
          return readForwardDump(path);
        } catch (error) {
          throw new UsageError(
            `--dump ${i === 0 ? 'reference' : 'candidate'}: ${error instanceof Error ? error.message : String(error)}`,
          );
        }
      }) as [ReturnType<typeof readForwardDump>, ReturnType<typeof readForwardDump>];
      if (a.tokens.length !== b.tokens.length || a.tokens.some((t, i) => t !== b.tokens[i]))
        throw new UsageError('--dump: the two dumps were recorded on different token ids');
      if (format === undefined) {
        const dtypes = new Set([...Object.values(a.dtypes), ...Object.values(b.dtypes)]);
        const only = dtypes.size === 1 ? DTYPE_FORMATS[[...dtypes][0]!] : undefined;
        if (only !== undefined) format = only;
      }
      let report: DivergeReport;
      try {
        report = compareForwards(a.ops, b.ops, {
          ...(format ? { format } : {}),
          ...(tolerance !== undefined ? { tolerance } : {}),
        });
      } catch (error) {
        throw new UsageError(`--dump: ${error instanceof Error ? error.message : String(error)}`);
      }
      printReport(report, { reference: values.dump[0], candidate: values.dump[1] }, values.all, values.json, io.out);
      return 0;
    }
    if (values.policy !== 'ar')
      throw new UsageError(`--policy: expected ar (or give --dump twice), got '${values.policy ?? ''}'`);
    if (values.plan === undefined) throw new UsageError('missing required option --plan');
    const plan = planOption(values.plan);
    const model = modelOption(values);
    const length = integerOption(values.length, 'length', 8, 1, 256);
    const batch = integerOption(values.batch, 'batch', 2, 1, 64);
    const seed = seedOption(values.seed);
    const task = makeTask('reverse');
    const policy = freshArPolicy(model, task, length, seed);
    const prompts = task.trainProblems(batch, seed).map((p) => [...p.prompt]);
    const r = rollout(policy, prompts, {
      maxNewTokens: length,
      numerics: sideNumerics(plan.rollout, policy.weights),
      rng: createRng(seed).fork(rngStreams.cli.divergeRollout),
      eos: null,
    });
    const T = r.promptLength + r.responseLength;
    const result = arDiverge(policy, plan, r.tokens, r.B, T, {
      ...(format ? { format } : {}),
      ...(tolerance !== undefined ? { tolerance } : {}),
    });
    if (values['write-dumps'] !== undefined) {
      const dir = values['write-dumps'];
      mkdirSync(dir, { recursive: true });
      writeForwardDump(join(dir, 'trainer.safetensors'), {
        tokens: Int32Array.from(r.tokens),
        tokenShape: [r.B, T],
        ops: result.trainer,
        dtypes: {},
      });
      writeForwardDump(join(dir, 'rollout.safetensors'), {
        tokens: Int32Array.from(r.tokens),
        tokenShape: [r.B, T],
        ops: result.rollout,
        dtypes: {},
      });
    }
    printReport(
      result.report,
      {
        policy: 'ar',
        plan: plan.name,
        tokens: r.B * T,
        ...(result.routingFlips ? { routingFlips: result.routingFlips } : {}),
      },
      values.all,
      values.json,
      io.out,
    );
    return 0;
  },
};
