// Measures MoE routing flips and the mismatch k3 with and without R3 replay per quantized plan, over
// seeds, on a warm-started MoE AR policy (docs/moe.md, "Measured"). Not a test and not a training run.
// Usage: `npx tsx scripts/moe-replay-measure.ts [--seeds 0,1,2] [--sft-steps 40] [--prompts 64] [--json FILE]`.

import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ReferenceBackend } from '../src/backend/index.js';
import { arPolicyFactory, probeDiagnostics } from '../src/policies/index.js';
import { resolveRunConfig } from '../src/rl/index.js';

const { values } = parseArgs({
  options: {
    seeds: { type: 'string', default: '0,1,2' },
    'sft-steps': { type: 'string', default: '40' },
    prompts: { type: 'string', default: '64' },
    json: { type: 'string' },
  },
});
const seeds = values.seeds.split(',').map(Number);
const sftSteps = Number(values['sft-steps']);
const nPrompts = Number(values.prompts);
const plans = ['bf16', 'fp8-rollout', 'int8-rollout', 'nvfp4-rollout', 'w4a16-rollout'];
const moe = { experts: 4, topK: 2, auxCoeff: 0.01 };
const layers = 2;

const raw = (seed: number, plan: string) => ({
  seed,
  task: { name: 'reverse' },
  policy: { kind: 'ar', model: { preset: 'tiny', layers, moe } },
  plan,
  sft: { steps: sftSteps },
});

interface Row {
  plan: string;
  seed: number;
  flip: number[];
  k3: number;
  k3R3: number;
  tokens: number;
}
const rows: Row[] = [];
for (const seed of seeds) {
  // the warm start is plan-independent: run it once per seed, then load its weights under every plan
  const base = new ReferenceBackend(resolveRunConfig(raw(seed, 'bf16')), arPolicyFactory);
  const c = base.config;
  const sft = await base.warmStart({
    task: { name: c.task.name, options: c.task.options as never },
    steps: c.sft.steps,
    batchSize: c.sft.batchSize,
    lr: c.sft.lr,
    seed,
  });
  process.stderr.write(
    `seed ${seed}: warm start loss ${sft['sft/loss_first']!.toFixed(3)} → ${sft['sft/loss_last10']!.toFixed(3)}\n`,
  );
  const weights = Float32Array.from(base.weights);
  await base.close();
  for (const plan of plans) {
    const backend = new ReferenceBackend(resolveRunConfig(raw(seed, plan)), arPolicyFactory);
    backend.weights.set(weights);
    await backend.sync();
    const prompts = backend.task.trainProblems(nPrompts, `${seed}/moe-measure`).map((p) => [...p.prompt]);
    const batch = await backend.generate({ prompts, seed: `${seed}/moe-measure/rollout` });
    const all = prompts.map((_, i) => i);
    const own = await backend.logprobs({ batch, rows: all, policy: 'current' });
    const r3 = await backend.logprobs({ batch, rows: all, policy: 'current', routing: 'rollout' });
    const d = probeDiagnostics(batch.logpRollout, own.logp, batch.mask);
    const dR3 = probeDiagnostics(batch.logpRollout, r3.logp, batch.mask);
    rows.push({ plan, seed, flip: [...own.routingFlipRate!], k3: d.k3, k3R3: dR3.k3, tokens: d.tokens });
    await backend.close();
  }
}

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const std = (xs: number[]): number =>
  xs.length < 2 ? 0 : Math.sqrt(xs.reduce((a, b) => a + (b - mean(xs)) ** 2, 0) / (xs.length - 1));
const pm = (xs: number[], f: (x: number) => string): string => `${f(mean(xs))} ± ${f(std(xs))}`;
const pct = (x: number): string => `${(100 * x).toFixed(2)} %`;
const sci = (x: number): string => x.toExponential(2);
const header = `| plan | ${Array.from({ length: layers }, (_, l) => `flip rate l${l}`).join(' | ')} | k3 no replay | k3 R3 | (k3 − k3 R3) / k3 |`;
console.log(header);
console.log(`|${' --- |'.repeat(layers + 4)}`);
for (const plan of plans) {
  const rs = rows.filter((r) => r.plan === plan);
  const flips = Array.from({ length: layers }, (_, l) =>
    pm(
      rs.map((r) => r.flip[l]!),
      pct,
    ),
  );
  const share = rs.map((r) => (r.k3 > 0 ? (r.k3 - r.k3R3) / r.k3 : 0));
  console.log(
    `| ${plan} | ${flips.join(' | ')} | ${pm(
      rs.map((r) => r.k3),
      sci,
    )} | ${pm(
      rs.map((r) => r.k3R3),
      sci,
    )} | ${pm(share, pct)} |`,
  );
}
console.log(
  `\n${seeds.length} seeds (${seeds.join(', ')}), ${nPrompts} prompts each, ${rows[0]?.tokens ?? 0} scored tokens per seed and plan; mean ± sample std over seeds.`,
);
if (values.json !== undefined) writeFileSync(values.json, `${JSON.stringify(rows, null, 1)}\n`);
