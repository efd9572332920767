// `qrl-sim run --backend "python3 -m qrl_backend.numpy_diffusion"`: the numpy twin of the masked-diffusion
// policy, written independently in Python, reproduces the in-process diffusion engine's metrics.jsonl and
// eval.jsonl byte for byte over qrl-backend/1 — the warm start handed over as weights.safetensors, then
// sampling, the estimator on both sides, backward, clipping and AdamW in the backend — under both plans
// it runs and all three estimators, with truncation and support replay; a plan it does not run is
// refused naming setup.plan.name.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-numpy-diffusion-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const backend = `PYTHONPATH=${join(process.cwd(), 'python')} python3 -m qrl_backend.numpy_diffusion`;

function config(name: string, plan: string, diffusion: Record<string, unknown>, sampler: Record<string, unknown> = {}): string {
  const path = join(root, `${name}.json`);
  writeFileSync(
    path,
    JSON.stringify({
      seed: 1,
      steps: 2,
      task: { name: 'reverse', options: {} },
      policy: {
        kind: 'diffusion',
        model: { C: 16, H: 2, layers: 1, hidden: 32 },
        diffusion: { generationLength: 8, blockLength: 4, steps: 4, ...diffusion },
        sampler,
      },
      plan,
      sft: { steps: 10, batchSize: 8, cache: false },
      rollout: { prompts: 2, groupSize: 4 },
      estimators: { advantage: { name: 'drgrpo' }, correction: { name: 'tis' }, loss: { name: 'ppo-clip' } },
      optim: { lr: 0.003 },
      eval: { every: 2, problems: 4 },
    }),
  );
  return path;
}

async function both(cfg: string, name: string): Promise<[string, string]> {
  const outs: string[] = [];
  for (const [side, extra] of [
    ['in', []],
    ['be', ['--backend', backend]],
  ] as const) {
    const out = join(root, `${name}-${side}`);
    const r = await runCli(['run', '--config', cfg, '--out', out, ...extra]);
    expect(r.code, r.err).toBe(0);
    outs.push(out);
  }
  return [outs[0]!, outs[1]!];
}

describe('qrl_backend.numpy_diffusion against the in-process diffusion engine', () => {
  it.each([
    ['d1 bf16', 'bf16', { estimator: 'd1' }, {}],
    ['trajectory fp32, top-k with support replay', 'fp32', { estimator: 'trajectory' }, { topK: 5, supportReplay: true }],
    ['elbo bf16, τ 0.7 and top-p', 'bf16', { estimator: 'elbo' }, { temperature: 0.7, topP: 0.8 }],
  ])(
    '%s: metrics.jsonl and eval.jsonl byte-identical',
    async (name, plan, diffusion, sampler) => {
      const [a, b] = await both(config(name.replace(/\W+/g, '-'), plan, diffusion, sampler), name.replace(/\W+/g, '-'));
      const written = JSON.parse(readFileSync(join(b, 'config.json'), 'utf8')) as { backend: { name: string } };
      expect(written.backend.name).toBe('qrl_backend.numpy_diffusion');
      const metrics = readFileSync(join(a, 'metrics.jsonl'), 'utf8');
      expect(metrics.trim().split('\n')).toHaveLength(2);
      expect(readFileSync(join(b, 'metrics.jsonl'), 'utf8')).toBe(metrics);
      expect(readFileSync(join(b, 'eval.jsonl'), 'utf8')).toBe(readFileSync(join(a, 'eval.jsonl'), 'utf8'));
    },
    180_000,
  );

  it('refuses a plan it does not run, naming setup.plan.name', async () => {
    const r = await runCli(['run', '--config', config('fp8', 'fp8-rollout', {}), '--out', join(root, 'fp8'), '--backend', backend]);
    expect(r.code).not.toBe(0);
    expect(r.err).toContain('setup.plan.name');
  }, 120_000);
});
