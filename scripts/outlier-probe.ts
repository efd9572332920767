// The "Outlier channels and INT8 vs FP8 rollouts" measurement of docs/precision-plans.md: the `small`
// AR preset with and without its outlier channels, warm-started on reverse, probed under int8-rollout
// and fp8-rollout over seeds. Not a test, not a run; it never feeds a mismatch figure back into a setting.
// Usage: `npx tsx scripts/outlier-probe.ts [sftSteps] [seeds] [warmStarts]` (defaults 60, 3, 1). Warm starts
// (training seeds 0 … warmStarts − 1: initialisation and SFT problem stream) are cached in .cache/.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import {
  arConfig,
  arMismatchProbe,
  arModelOptions,
  createArPolicy,
  linearInputChannelStats,
  loadCheckpoint,
  saveCheckpoint,
  trainSupervised,
  type ArPolicy,
} from '../src/policies/index.js';
import { precisionPlan } from '../src/policies/plans.js';
import { seedStat } from '../src/report/summary.js';
import { EOS, makeTask } from '../src/tasks/index.js';

const sftSteps = Number(process.argv[2] ?? 60);
const seeds = Number(process.argv[3] ?? 3);
const warmStarts = Number(process.argv[4] ?? 1);
const L = 16; // response tokens probed
const B = 8; // sequences per seed
const task = makeTask('reverse');

function warmStart(outliers: number, w: number): ArPolicy {
  const cache = `.cache/outlier-probe-small-o${outliers}-${sftSteps}${w === 0 ? '' : `-w${w}`}.json`;
  if (existsSync(cache)) return loadCheckpoint(JSON.parse(readFileSync(cache, 'utf8'))).policy;
  const policy = createArPolicy(
    arConfig({
      ...arModelOptions({ preset: 'small', outliers }),
      vocabSize: task.vocabSize,
      maxLen: task.promptLength + Math.max(L, task.responseLength),
    }),
    w,
  );
  const { losses } = trainSupervised(policy, task, { steps: sftSteps, batchSize: 8, seed: w });
  console.error(
    `warm start ${w} outliers ${outliers}: ${sftSteps} steps, loss ${losses[0]!.toFixed(3)} → ${losses.at(-1)!.toFixed(4)}`,
  );
  mkdirSync('.cache', { recursive: true });
  writeFileSync(cache, JSON.stringify(saveCheckpoint(policy, { name: task.name, options: task.options })));
  return policy;
}

/** `mean ± sample std` of the values (std 0 for one value). */
const ms = (xs: number[]): string => {
  const { mean, std } = seedStat(xs);
  return `${mean.toExponential(2)} ± ${(xs.length > 1 ? std : 0).toExponential(1)}`;
};

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const plans = ['int8-rollout', 'fp8-rollout'] as const;
const rows: string[] = [
  '| outliers | warm start | plan | k3 | mean \\|δ\\| | frac \\|δ\\| > 1e-3 |',
  '| --- | --- | --- | --- | --- | --- |',
];
const across: string[] = [
  '| outliers | plan | k3 | mean \\|δ\\| | INT8 k3 > FP8 k3 | INT8 / FP8 k3 (geometric mean, range) |',
  '| --- | --- | --- | --- | --- | --- |',
];
for (const outliers of [0, 2]) {
  // Per-warm-start means over the probe seeds, per plan.
  const perWarm: Record<(typeof plans)[number], { k3: number[]; abs: number[] }> = {
    'int8-rollout': { k3: [], abs: [] },
    'fp8-rollout': { k3: [], abs: [] },
  };
  for (let w = 0; w < warmStarts; w++) {
    const policy = warmStart(outliers, w);
    // Probe of the linear layers' inputs on training problems of seed 0 (prompt + gold response, EOS-padded).
    const probs = task.trainProblems(B, 0);
    const T = task.promptLength + task.responseLength;
    const tokens = probs.flatMap((p) =>
      [...p.prompt, ...task.goldResponse(p), ...new Array<number>(T).fill(EOS)].slice(0, T),
    ); // padded with EOS
    for (const s of linearInputChannelStats(policy, tokens, B, T, 3)) {
      console.log(
        `warm ${w} outliers ${outliers} ${s.name.padEnd(8)} median|x| ${s.median.toExponential(2)}  top ${s.top.map((t) => `c${t.channel}=${t.meanAbs.toExponential(2)} (${t.ratio.toFixed(1)}x)`).join(' ')}`,
      );
    }
    for (const name of plans) {
      const k3: number[] = [];
      const abs: number[] = [];
      const frac: number[] = [];
      for (let seed = 0; seed < seeds; seed++) {
        const prompts = task.trainProblems(B, 100 + seed).map((p) => [...p.prompt]);
        const d = arMismatchProbe(policy, { plan: precisionPlan(name), length: L, prompts, seed }).diagnostics;
        k3.push(d.k3);
        abs.push(d.meanAbsDelta);
        frac.push(d['fracAbsDeltaGt1e-3']);
      }
      perWarm[name].k3.push(mean(k3));
      perWarm[name].abs.push(mean(abs));
      rows.push(`| ${outliers} | ${w} | \`${name}\` | ${ms(k3)} | ${ms(abs)} | ${ms(frac)} |`);
    }
  }
  const wins = perWarm['int8-rollout'].k3.filter((k, w) => k > perWarm['fp8-rollout'].k3[w]!).length;
  // Paired per warm start: the ratio of INT8's to FP8's k3 on the same policy.
  const ratios = perWarm['int8-rollout'].k3.map((k, w) => k / perWarm['fp8-rollout'].k3[w]!);
  const geo = Math.exp(mean(ratios.map(Math.log)));
  const ratioCell = `${geo.toPrecision(2)} (${Math.min(...ratios).toPrecision(2)} – ${Math.max(...ratios).toPrecision(2)})`;
  for (const name of plans) {
    const first = name === 'int8-rollout';
    across.push(
      `| ${outliers} | \`${name}\` | ${ms(perWarm[name].k3)} | ${ms(perWarm[name].abs)} | ${first ? `${wins} of ${warmStarts}` : ''} | ${first ? ratioCell : ''} |`,
    );
  }
}
console.log(rows.join('\n'));
console.log(`\nAcross ${warmStarts} warm starts (mean ± std of the per-warm-start means over ${seeds} probe seeds):\n`);
console.log(across.join('\n'));
