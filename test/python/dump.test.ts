// qrl_golden.dump on a tiny transformers Llama (fp32 and the same weights in bf16), read by
// `qrl-sim diverge --dump`: every module in hook order, and bf16 vs fp32 within the bf16 numerics.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-dump-py-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const script = `
import sys, torch
sys.path.insert(0, 'python')
from transformers import LlamaConfig, LlamaForCausalLM
from qrl_golden import dump
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=32)
ref = LlamaForCausalLM(cfg).eval()
low = LlamaForCausalLM(cfg).eval()
low.load_state_dict(ref.state_dict())
low = low.to(torch.bfloat16)
ids = torch.randint(0, 64, (2, 8))
dump.record(ref, ids, sys.argv[1] + '/fp32.safetensors')
dump.record(low, ids, sys.argv[1] + '/bf16.safetensors')
`;

describe('qrl_golden.dump → qrl-sim diverge --dump', () => {
  it('compares a transformers model in fp32 and bf16 module by module', async () => {
    const r = spawnSync('python3', ['-c', script, root], { encoding: 'utf8', timeout: 300_000 });
    if (r.error) throw new Error(`cannot run python3: ${r.error.message}`);
    expect(r.status, r.stderr).toBe(0);
    const out = await runCli(['diverge', '--dump', join(root, 'fp32.safetensors'), '--dump', join(root, 'bf16.safetensors'), '--json']);
    expect(out.code, out.err).toBe(0);
    const rep = JSON.parse(out.out);
    const names = rep.rows.map((x: { name: string }) => x.name);
    expect(names.slice(0, 4)).toEqual(['model.embed_tokens', 'model.rotary_emb', 'model.layers.0.input_layernorm', 'model.layers.0.self_attn.q_proj']);
    expect(names.at(-1)).toBe('output');
    expect(rep.format).toBe('bf16');
    expect(rep.firstDiffer).toBe('model.embed_tokens');
    // A bf16 forward of the same weights adds no more than a few bf16 roundings per module.
    expect(rep.firstDivergence).toBeNull();
    expect(Math.max(...rep.rows.map((x: { relError: number }) => x.relError))).toBeLessThan(4 * 2 ** -8);
  }, 300_000);
});
