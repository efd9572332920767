// `qrl-sim run --backend "python3 -m qrl_backend.numpy_ar"` with estimators that read the sampler's
// distribution (loss trpl and score centering, policy.sampler.topkLogprobs): the numpy backend declares
// capabilities.topkLogprobs, serves generate.topkLogprobs, logprobs.topk and backward.gradTopk, and the
// run finishes with the estimators' metrics finite and the same metrics on a second run.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-numpy-topk-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const backend = `PYTHONPATH=${join(process.cwd(), 'python')} python3 -m qrl_backend.numpy_ar`;
const config = join(root, 'run.json');
writeFileSync(
  config,
  JSON.stringify({
    seed: 3,
    steps: 2,
    task: { name: 'reverse', options: { minLength: 2, maxLength: 3 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 }, sampler: { topkLogprobs: 8 } },
    plan: 'bf16',
    rollout: { prompts: 2, groupSize: 4 },
    optim: { miniBatches: 2 },
    estimators: { loss: { name: 'trpl' }, scoreCentering: {} },
  }),
);

describe('numpy AR backend under estimators that read the top-k', () => {
  it('runs trpl with score centering to the end, deterministically', async () => {
    const lines: string[] = [];
    for (const name of ['a', 'b']) {
      const out = join(root, name);
      const r = await runCli(['run', '--config', config, '--out', out, '--backend', backend, '--no-report']);
      expect(r.code, r.err).toBe(0);
      lines.push(readFileSync(join(out, 'metrics.jsonl'), 'utf8'));
    }
    const steps = lines[0]!.trim().split('\n').map((l) => JSON.parse(l) as Record<string, number>);
    expect(steps).toHaveLength(2);
    for (const m of steps) {
      for (const key of ['actor/trpl/initial_kl', 'actor/trpl/final_kl', 'actor/trpl/projection_loss', 'actor/score_centering/correction'])
        expect(Number.isFinite(m[key]), `${key} = ${m[key]}`).toBe(true);
      expect(m['actor/trpl/initial_kl']).toBeGreaterThan(0); // the trainer's ℓ at the engine's ids arrived (K = 8 < V)
    }
    expect(lines[1]).toBe(lines[0]);
  }, 120_000);
});
