// Regenerates the refit-fault figures: docs/refit.md's refit-faults table and docs/lab/refit-faults.md's
// tables, from one run of the lab experiment sims/lab/refit-faults.json (every fault plan next to its
// healthy twin, 3 seeds of sims/ar-reverse.json: 150 warm-start steps, 12 GRPO steps) and a weight
// self-check of each plan's refit on a fresh toy policy. Not the faults (src/policies/refit.ts).
// Usage: npx tsx scripts/refit-faults.ts [--from DIR]   (about a minute on two cores; needs the built
// CLI; --from reads a finished `qrl-sim lab run refit-faults --out DIR` instead of running it)

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fillMarkers } from './doc-tables.js';
import { arConfig } from '../src/policies/ar/config.js';
import { createArPolicy } from '../src/policies/ar/model.js';
import {
  resolvePlan,
  precisionPlan,
  sideNumerics,
  type PlanData,
  type PrecisionPlan,
  type QuantizedGemmPlan,
} from '../src/policies/plans.js';
import type { PolicyNumerics } from '../src/policies/numerics.js';
import { rollout } from '../src/policies/ar/rollout.js';
import { createRng } from '../src/core/rng.js';
import { ignoredSites, refitWeights } from '../src/policies/refit.js';
import { makeTask } from '../src/tasks/registry.js';
import { quantPreset } from '../src/numerics/presets.js';
import { dequantize, quantize } from '../src/numerics/quantize.js';
import { fakeQuant } from '../src/numerics/vector.js';
import { floatFormats } from '../src/numerics/formats.js';
import type { FloatArray } from '../src/nn/array.js';

/** Each fault plan, its healthy twin (the same plan without `refit.faults`) and the report it is set against. */
const rows = [
  { plan: 'fp8-rollout-fault-halves-swapped', twin: 'fp8-rollout', fault: 'halves-swapped' },
  { plan: 'fp8-rollout-fault-rows-permuted', twin: 'fp8-rollout', fault: 'rows-permuted' },
  { plan: 'fp8-rollout-fault-stale-sync', twin: 'fp8-rollout', fault: 'stale-sync' },
  { plan: 'fp8-rollout-fault-unity-kv-scales', twin: 'fp8-kv', fault: 'unity-kv-scales' },
  { plan: 'jet-fault-ignore-rule', twin: 'jet', fault: 'ignore-rule' },
] as const;
const planNames = ['fp8-rollout', 'fp8-kv', 'jet', ...rows.map((r) => r.plan)];

interface Seed {
  readonly k3: number;
  readonly absMean: number;
  readonly absMax: number;
  readonly chi2Token: number;
  readonly chi2Seq: number;
  readonly accuracy: number;
}

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const std = (xs: readonly number[]): number =>
  xs.length < 2 ? NaN : Math.sqrt(xs.reduce((a, x) => a + (x - mean(xs)) ** 2, 0) / (xs.length - 1));
const e = (x: number): string => (x === 0 ? '0' : x.toExponential(2));
const pm = (xs: readonly number[], f: (x: number) => string = e): string => `${f(mean(xs))} ± ${f(std(xs))}`;

/** The seeds of every plan of a finished lab run, by plan name (a preset's name or a plan file's `name`). */
function readRun(dir: string): Map<string, Map<number, Seed>> {
  const byPlan = new Map<string, Map<number, Seed>>();
  for (const point of readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory())) {
    for (const seedDir of readdirSync(join(dir, point.name)).filter((s) => s.startsWith('seed-'))) {
      const run = join(dir, point.name, seedDir);
      const config = JSON.parse(readFileSync(join(run, 'config.json'), 'utf8')) as {
        plan: string | { name: string };
        seed: number;
      };
      const name = typeof config.plan === 'string' ? config.plan : config.plan.name;
      const steps = readFileSync(join(run, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, number>);
      const evals = readFileSync(join(run, 'eval.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, number>);
      const over = (key: string): number => mean(steps.map((s) => s[key]!));
      const seed: Seed = {
        k3: over('rollout_corr/k3_kl'),
        absMean: over('rollout_corr/logp_abs_diff_mean'),
        absMax: over('rollout_corr/logp_abs_diff_max'),
        chi2Token: over('rollout_corr/chi2_token'),
        chi2Seq: over('rollout_corr/chi2_seq'),
        accuracy: evals.at(-1)!['eval/rollout/greedy_accuracy']!,
      };
      if (!byPlan.has(name)) byPlan.set(name, new Map());
      byPlan.get(name)!.set(config.seed, seed);
    }
  }
  for (const name of planNames) if (!byPlan.has(name)) throw new Error(`${dir}: no runs of plan ${name}`);
  return byPlan;
}

/**
 * The refit self-check of verl #7986 on the toy: max over the linear weights W of
 * ‖E − W‖₂ / ‖W‖₂, E what the rollout engine computes with (the refitted weight through the
 * rollout's weight quantizer, or rounded to BF16 on a site the plan or the fault keeps plain).
 */
function selfCheck(plan: PrecisionPlan): number {
  const task = makeTask('reverse');
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + 8 }), 0);
  const side = plan.rollout;
  const gemm = side.gemm as QuantizedGemmPlan;
  const spec = quantPreset(gemm.weights.preset, gemm.weights.params ?? {});
  const refitted = refitWeights(policy.weights, side.refit ?? {});
  const rule = side.refit?.faults?.find((f) => f.kind === 'ignore-rule');
  const plainByRule = new Set(rule === undefined ? [] : ignoredSites(rule, policy.weights));
  const C = policy.config.C;
  const sites: [string, FloatArray, number][] = [];
  policy.weights.blocks.forEach((b, l) => {
    for (const [s, w] of [
      ['q', b.wq],
      ['k', b.wk],
      ['v', b.wv],
      ['o', b.wo],
      ['up', b.mlp!.up],
      ['gate', b.mlp!.gate!],
      ['down', b.mlp!.down],
    ] as const)
      sites.push([`h${l}.${s}`, w, w.length / C]);
  });
  sites.push(['lmHead', policy.weights.lmHead, policy.weights.lmHead.length / C]);
  let worst = 0;
  for (const [name, w, n] of sites) {
    const x = refitted.get(w)!;
    const plain =
      rule !== undefined
        ? plainByRule.has(name)
        : (gemm.exclude ?? ['lmHead']).some((s) => name === s || name.endsWith(`.${s}`));
    const k = x.length / n;
    const held = plain
      ? fakeQuant(floatFormats.bf16, Float32Array.from(x), { profile: 'ieee' })
      : dequantize(quantize(spec, Float32Array.from(x), [n, k]));
    let d = 0;
    let s = 0;
    for (let i = 0; i < w.length; i++) {
      d += ((held[i] as number) - (w[i] as number)) ** 2;
      s += (w[i] as number) ** 2;
    }
    worst = Math.max(worst, Math.sqrt(d / s));
  }
  return worst;
}

/**
 * Where the toy's K and V values lie for a unity KV scale: the shares of |K| and |V| (every row a
 * fresh policy's fp8-kv rollout writes into the cache, 8 prompts × 8 tokens) below E4M3's smallest
 * normal 2⁻⁶ (stored subnormal under scale 1) and below 2⁻¹⁰ (flushed to zero under scale 1).
 */
function kvRange(): string {
  const task = makeTask('reverse');
  const policy = createArPolicy(arConfig({ vocabSize: task.vocabSize, maxLen: task.promptLength + 8 }), 0);
  const inner = sideNumerics(precisionPlan('fp8-kv').rollout, policy.weights);
  const seen = { K: [] as number[], V: [] as number[] };
  const numerics: PolicyNumerics = {
    ...inner,
    kvHook: (l) => {
      const hook = inner.kvHook(l)!;
      return (k, v, t, B, tCap, C) => {
        for (let b = 0; b < B; b++) {
          for (let c = 0; c < C; c++) {
            seen.K.push(Math.abs(k[(b * tCap + t) * C + c]!));
            seen.V.push(Math.abs(v[(b * tCap + t) * C + c]!));
          }
        }
        hook(k, v, t, B, tCap, C);
      };
    },
  };
  rollout(
    policy,
    task.trainProblems(8, 1).map((q) => [...q.prompt]),
    { maxNewTokens: 8, numerics, rng: createRng('refit-faults/kv') },
  );
  const share = (xs: number[], below: number): string =>
    `${((100 * xs.filter((x) => x < below).length) / xs.length).toFixed(1)} %`;
  return (['K', 'V'] as const)
    .map((n) => `${n}: ${share(seen[n], 2 ** -6)} below 2⁻⁶, ${share(seen[n], 2 ** -10)} below 2⁻¹⁰`)
    .join('; ');
}

const from = process.argv[2] === '--from' ? process.argv[3] : undefined;
const dir = from ?? mkdtempSync(join(tmpdir(), 'qrl-refit-faults-'));
try {
  if (from === undefined) {
    const r = spawnSync(process.execPath, ['bin/qrl-sim.js', 'lab', 'run', 'refit-faults', '--out', join(dir, 'lab')], {
      encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(`lab run refit-faults: ${r.stderr}`);
  }
  const run = readRun(from ?? join(dir, 'lab'));
  const seedsOf = (name: string): Seed[] => [...run.get(name)!.entries()].sort(([a], [b]) => a - b).map(([, s]) => s);
  const plans = new Map(
    planNames.map((n) => [
      n,
      existsSync(`sims/plans/${n}.json`)
        ? resolvePlan(JSON.parse(readFileSync(`sims/plans/${n}.json`, 'utf8')) as PlanData)
        : precisionPlan(n),
    ]),
  );

  // docs/refit.md: one line per plan (the healthy twins first)
  const refitRows = [
    '| plan | k3 (mean) | mean \\|δ\\| | max \\|δ\\| (mean) | rollout accuracy at step 12 |',
    '| --- | ---: | ---: | ---: | ---: |',
  ];
  for (const name of planNames) {
    const s = seedsOf(name);
    refitRows.push(
      `| \`${name}\` | ${e(mean(s.map((x) => x.k3)))} | ${e(mean(s.map((x) => x.absMean)))} | ${e(mean(s.map((x) => x.absMax)))} | ${mean(s.map((x) => x.accuracy)).toFixed(3)} |`,
    );
  }

  // docs/lab/refit-faults.md: mismatch, IS weights and training, mean ± std over seeds
  const measured = [
    '| plan | k3 | mean \\|δ\\| | max \\|δ\\| | χ² token | χ² sequence | rollout accuracy (%) | Δ accuracy vs twin (pp) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  const twinOf = new Map<string, string>(rows.map((r) => [r.plan, r.twin]));
  for (const name of planNames) {
    const s = seedsOf(name);
    const twin = twinOf.get(name);
    let delta = 'twin';
    if (twin !== undefined) {
      const t = seedsOf(twin);
      const d = s.map((x, i) => 100 * (x.accuracy - t[i]!.accuracy));
      delta = `${pm(d, (x) => x.toFixed(1))} (${d.filter((x) => x < 0).length}/${d.length} < 0)`;
    }
    measured.push(
      `| \`${name}\` | ${pm(s.map((x) => x.k3))} | ${pm(s.map((x) => x.absMean))} | ${pm(s.map((x) => x.absMax))} | ${pm(s.map((x) => x.chi2Token))} | ${pm(s.map((x) => x.chi2Seq))} | ${pm(
        s.map((x) => 100 * x.accuracy),
        (x) => x.toFixed(1),
      )} | ${delta} |`,
    );
  }

  // next to the reported figures: k3 over the healthy twin, and the weight self-check
  const ratios = [
    "| fault | k3 ÷ twin's k3 (seeds) | weight self-check: max ‖E − W‖/‖W‖ (twin) |",
    '| --- | ---: | ---: |',
  ];
  for (const r of rows) {
    const s = seedsOf(r.plan);
    const t = seedsOf(r.twin);
    const each = s.map((x, i) => (t[i]!.k3 === 0 ? Infinity : x.k3 / t[i]!.k3));
    const ratio = each.every((x) => x === Infinity)
      ? `k3 ${e(mean(s.map((x) => x.k3)))} where the twin's is 0`
      : `${mean(each).toFixed(1)}× (${each.map((x) => x.toFixed(1)).join(', ')})`;
    const check =
      r.fault === 'stale-sync'
        ? 'n/a (a stale engine is the recipe of older weights)'
        : `${selfCheck(plans.get(r.plan)!).toFixed(3)} (${selfCheck(plans.get(r.twin)!).toFixed(3)})`;
    ratios.push(`| \`${r.fault}\` | ${ratio} | ${check} |`);
  }

  writeFileSync(
    'docs/refit.md',
    fillMarkers(readFileSync('docs/refit.md', 'utf8'), { 'refit-faults': refitRows.join('\n') }),
  );
  const page = 'docs/lab/refit-faults.md';
  const kv = kvRange();
  writeFileSync(
    page,
    fillMarkers(readFileSync(page, 'utf8'), {
      'refit-faults-measured': measured.join('\n'),
      'refit-faults-ratios': ratios.join('\n'),
      'refit-faults-kv': kv,
    }),
  );
  console.log([...refitRows, '', ...measured, '', ...ratios, '', kv].join('\n'));
} finally {
  if (from === undefined) rmSync(dir, { recursive: true, force: true });
}
