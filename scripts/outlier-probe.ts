// The "Outlier channels and INT8 vs FP8 rollouts" measurement of docs/precision-plans.md: the `small`
// AR preset with and without its outlier channels, warm-started on reverse, probed under int8-rollout
// and fp8-rollout over seeds. Not a test, not a run; it never feeds a mismatch figure back into a setting.
// Usage: `npx tsx scripts/outlier-probe.ts [sftSteps] [seeds]` (defaults 60, 3). Warm starts cached in .cache/.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { arConfig, arMismatchProbe, arModelOptions, createArPolicy, linearInputChannelStats, loadCheckpoint, saveCheckpoint, trainSupervised, type ArPolicy } from '../src/policies/index.js';
import { precisionPlan } from '../src/policies/plans.js';
import { EOS, makeTask } from '../src/tasks/index.js';

const sftSteps = Number(process.argv[2] ?? 60);
const seeds = Number(process.argv[3] ?? 3);
const L = 16; // response tokens probed
const B = 8; // sequences per seed
const task = makeTask('reverse');

function warmStart(outliers: number): ArPolicy {
  const cache = `.cache/outlier-probe-small-o${outliers}-${sftSteps}.json`;
  if (existsSync(cache)) return loadCheckpoint(JSON.parse(readFileSync(cache, 'utf8'))).policy;
  const policy = createArPolicy(arConfig({ ...arModelOptions({ preset: 'small', outliers }), vocabSize: task.vocabSize, maxLen: task.promptLength + Math.max(L, task.responseLength) }), 0);
  const { losses } = trainSupervised(policy, task, { steps: sftSteps, batchSize: 8 });
  console.error(`warm start outliers ${outliers}: ${sftSteps} steps, loss ${losses[0]!.toFixed(3)} → ${losses.at(-1)!.toFixed(4)}`);
  mkdirSync('.cache', { recursive: true });
  writeFileSync(cache, JSON.stringify(saveCheckpoint(policy, { name: task.name, options: task.options })));
  return policy;
}

const ms = (xs: number[]): string => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  const s = xs.length > 1 ? Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / (xs.length - 1)) : 0;
  return `${m.toExponential(2)} ± ${s.toExponential(1)}`;
};

const rows: string[] = ['| outliers | plan | k3 | mean \\|δ\\| | frac \\|δ\\| > 1e-3 |', '| --- | --- | --- | --- | --- |'];
for (const outliers of [0, 2]) {
  const policy = warmStart(outliers);
  // Probe of the linear layers' inputs on training problems of seed 0 (prompt + gold response, EOS-padded).
  const probs = task.trainProblems(B, 0);
  const T = task.promptLength + task.responseLength;
  const tokens = probs.flatMap((p) => [...p.prompt, ...task.goldResponse(p), ...new Array<number>(T).fill(EOS)].slice(0, T)); // padded with EOS
  for (const s of linearInputChannelStats(policy, tokens, B, T, 3)) {
    console.log(`outliers ${outliers} ${s.name.padEnd(8)} median|x| ${s.median.toExponential(2)}  top ${s.top.map((t) => `c${t.channel}=${t.meanAbs.toExponential(2)} (${t.ratio.toFixed(1)}x)`).join(' ')}`);
  }
  for (const name of ['int8-rollout', 'fp8-rollout'] as const) {
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
    rows.push(`| ${outliers} | \`${name}\` | ${ms(k3)} | ${ms(abs)} | ${ms(frac)} |`);
  }
}
console.log(rows.join('\n'));
