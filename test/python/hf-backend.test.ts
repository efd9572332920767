// The transformers backend (python3 -m qrl_backend.hf) driven by qrl-sim: `backend-check` passes on it
// with ℓroll ≡ ℓ under bf16 (k3 exactly 0), and a short GRPO run on it under an FP8 plan (block FP8
// and an FP8 KV cache) reports a non-zero mismatch and writes byte-identical metrics.jsonl when run
// twice with the same seed. Its numerics in detail are python/tests/test_hf_backend.py (pytest).

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-hf-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const model = JSON.stringify({ hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1 });
const hf = (flags: string): string => `PYTHONPATH=python python3 -m qrl_backend.hf --model '${model}' ${flags}`;

describe('transformers backend (qrl_backend.hf)', () => {
  it('passes backend-check under bf16 with ℓroll and ℓ bit-identical', async () => {
    const r = await runCli(['backend-check', '--backend', hf('--plan hf-bf16 --vocab-size 13 --max-new-tokens 6'), '--batch', '4']);
    expect(r.code, r.out + r.err).toBe(0);
    expect(r.out).toMatch(/conformance: all \d+ checks passed/);
    expect(r.out).toMatch(/ℓroll vs ℓ \(same sides.*ok +tokens \d+, k1 0\.000e\+0, k3 0\.000e\+0, mean\|δ\| 0\.000e\+0, max\|δ\| 0\.000e\+0/);
    expect(r.out).toMatch(/protocol version +ok +qrl-backend\/1; qrl_backend\.hf .*LlamaForCausalLM.*plan hf-bf16/);
  }, 600_000);

  it('runs GRPO under an FP8 plan: k3 > 0, same seed ⇒ byte-identical metrics.jsonl', async () => {
    const config = {
      steps: 2,
      task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
      policy: { kind: 'ar' },
      plan: 'backend',
      optim: { lr: 0.003 },
      sft: { steps: 0, cache: false },
      rollout: { prompts: 2, groupSize: 4 },
      eval: { every: 0, problems: 4 },
      checkpoint: { every: 1 },
    };
    const path = join(root, 'fp8.json');
    writeFileSync(path, JSON.stringify(config));
    // vocabulary, maxNewTokens and AdamW's hyper-parameters come from the run's setup, not from flags
    const backend = hf('--plan hf-fp8-kv --fp8-block 16');
    const metrics: string[] = [];
    for (const name of ['a', 'b']) {
      const out = join(root, name);
      const r = await runCli(['run', '--config', path, '--out', out, '--backend', backend]);
      expect(r.code, r.err).toBe(0);
      metrics.push(readFileSync(join(out, 'metrics.jsonl'), 'utf8'));
      const identity = (JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')) as { backend: Record<string, string> }).backend;
      expect(identity).toMatchObject({ name: 'qrl_backend.hf', protocol: 'qrl-backend/1', policy: 'ar', plan: 'hf-fp8-kv' });
    }
    expect(metrics[1]).toBe(metrics[0]);
    const lines = metrics[0]!.trim().split('\n').map((l) => JSON.parse(l) as Record<string, number>);
    expect(lines.map((l) => l['step'])).toEqual([1, 2]);
    for (const l of lines) {
      expect(l['rollout_corr/k3_kl']).toBeGreaterThan(0);
      expect(Number.isFinite(l['reward/mean'])).toBe(true);
    }
  }, 600_000);
});
