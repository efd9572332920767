// `qrl-sim refit-check --backend` on a live transformers engine (python3 -m qrl_backend.hf): over the
// protocol's optional dumpEngine, a healthy sync is clean and a planted fault is named on the right
// tensor with the right kind, the Python twin agreeing on the same dump; a backend without the
// capability is refused at start. Every fault kind in-process: python/tests/test_hf_refit_dump.py.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-hf-dump-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const model = JSON.stringify({ hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1 });
const hf = (flags: string): string => `PYTHONPATH=python python3 -m qrl_backend.hf --model '${model}' --vocab-size 13 --fp8-block 16 ${flags}`;

interface Result {
  readonly findings: readonly { readonly tensor: string; readonly kind: string; readonly permutation?: string }[];
  readonly recipe: string;
  readonly block: number | null;
  readonly kvScales: number;
}

/** The Python twin on the files the backend wrote, with the arguments the TypeScript run used. */
function twin(out: string, result: Result, ignore: readonly string[]): Result {
  const args = ['-m', 'qrl_golden.refit_check', '--trainer', join(out, 'trainer.safetensors'), '--engine', join(out, 'engine.safetensors'), '--recipe', result.recipe, ...(result.block === null ? [] : ['--block', String(result.block)]), ...ignore.flatMap((p) => ['--ignore', p]), '--match', 'prefix', '--json'];
  const p = spawnSync('python3', args, { encoding: 'utf8', env: { ...process.env, PYTHONPATH: 'python' } });
  expect(p.stderr).toBe('');
  return JSON.parse(p.stdout) as Result;
}

describe('refit-check --backend on the transformers engine', () => {
  it.each([
    ['', []],
    ['--fault halves-swapped', [['model.layers.0.mlp.gate_up_proj.weight', 'layout-permuted']]],
    ['--fault unity-kv-scales', [['model.layers.0.self_attn.k_scale', 'unity-scale'], ['model.layers.0.self_attn.v_scale', 'unity-scale']]],
  ])('hf-fp8-kv %s: the findings name the planted fault, and the twin agrees', async (flags, expected) => {
    const out = join(root, flags === '' ? 'healthy' : flags.replace(/\W+/g, '-'));
    const r = await runCli(['refit-check', '--backend', hf(`--plan hf-fp8-kv ${flags}`), '--out', out, '--json']);
    expect(r.code, r.err).toBe(expected.length === 0 ? 0 : 1);
    const result = JSON.parse(r.out) as Result;
    expect(result.findings.map((f) => [f.tensor, f.kind])).toEqual(expected);
    expect(result).toMatchObject({ recipe: 'deepseek-fp8-block', block: 16, kvScales: 2 });
    if (flags.includes('halves')) expect(result.findings[0]!.permutation).toBe('halves-swapped');
    expect(twin(out, result, ['lm_head', 'model.embed_tokens'])).toEqual(result);
  }, 300_000);

  it('refuses a backend that does not declare capabilities.dumpEngine (the reference backend of qrl-sim serve), exit 2', async () => {
    const r = await runCli(['refit-check', '--backend', 'qrl-sim serve --policy ar --stdio', '--out', join(root, 'numpy')]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--backend: .* does not declare capabilities\.dumpEngine/);
  }, 120_000);

  it('refuses the file flags with --backend, and --out without it, naming the flag', async () => {
    const both = await runCli(['refit-check', '--backend', 'x', '--out', root, '--recipe', 'vllm-fp8-tensor']);
    expect([both.code, both.err.trim()]).toEqual([2, 'qrl-sim refit-check: --recipe: not with --backend (the backend states its files, recipe and ignore list)']);
    const out = await runCli(['refit-check', '--trainer', 'a', '--engine', 'b', '--recipe', 'vllm-fp8-tensor', '--out', root]);
    expect([out.code, out.err.trim()]).toEqual([2, 'qrl-sim refit-check: --out: only with --backend']);
  });
});
