// The transformers diffusion LM (python3 -m qrl_backend.hf_diffusion: a one-layer Llama config run with
// full attention, MASK an ordinary input id) under numpy_diffusion's sampler and estimators:
// `backend-check` passes on it with the trajectory estimator's ℓroll ≡ ℓ under hf-bf16 (k3 exactly 0)
// and, under the FP8 W8A8 rollout plan, ℓroll the engine's own (every token differs, k3 > 0).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-hf-diffusion-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const model = JSON.stringify({ hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1 });
const backend = (plan: string): string => `PYTHONPATH=python python3 -m qrl_backend.hf_diffusion --plan ${plan} --model '${model}'`;
const config = join(root, 'trajectory.json');
writeFileSync(
  config,
  JSON.stringify({
    task: { name: 'reverse', options: {} },
    policy: { kind: 'diffusion', diffusion: { generationLength: 8, blockLength: 4, steps: 4, estimator: 'trajectory' } },
    plan: 'backend',
    sft: { steps: 0 },
  }),
);
const k3 = (out: string, sides: string): number => {
  const m = new RegExp(`ℓroll vs ℓ \\(${sides}.*k3 (\\S+),`).exec(out);
  expect(m, out).not.toBeNull();
  return Number(m![1]);
};

describe('transformers diffusion LM (qrl_backend.hf_diffusion)', () => {
  it('passes backend-check under hf-bf16 with the trajectory estimator’s ℓroll and ℓ bit-identical', async () => {
    const r = await runCli(['backend-check', '--backend', backend('hf-bf16'), '--config', config, '--batch', '4']);
    expect(r.code, r.out + r.err).toBe(0);
    expect(r.out).toMatch(/conformance: all \d+ checks passed/);
    expect(r.out).toMatch(/protocol version +ok +qrl-backend\/1; qrl_backend\.hf_diffusion .*LlamaForCausalLM bidirectional.*policy diffusion, plan hf-bf16/);
    expect(r.out).toMatch(/ℓroll vs ℓ \(same sides.*ok +tokens \d+, k1 0\.000e\+0, k3 0\.000e\+0, mean\|δ\| 0\.000e\+0, max\|δ\| 0\.000e\+0/);
    expect(k3(r.out, 'same sides')).toBe(0);
    for (const row of ['diffusion record replayed', 'diffusion sampler schedule and block length', 'each estimator recomputes its own ℓ'])
      expect(r.out).toMatch(new RegExp(`${row} +ok`));
  }, 300_000);

  it('passes backend-check under hf-fp8-w8a8-rollout with k3 > 0', async () => {
    const r = await runCli(['backend-check', '--backend', backend('hf-fp8-w8a8-rollout'), '--config', config, '--batch', '4']);
    expect(r.code, r.out + r.err).toBe(0);
    expect(r.out).toMatch(/conformance: all \d+ checks passed/);
    expect(k3(r.out, 'plan sides differ')).toBeGreaterThan(0);
    expect(r.out).toMatch(/ℓroll is the engine’s +ok +(\d+) of \1 tokens differ/);
  }, 300_000);
});
