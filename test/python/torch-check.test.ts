// `python -m qrl_golden.torch_check --device cpu` as part of npm test: every library-named cast
// profile against torch 2.13, ml_dtypes and onnxruntime (library-casts suite), the quantizers where
// qrl_golden.torch_quantizers exists, and torch's GEMMs against the accumulator models (gemm suite).
// Fails when a case disagrees or when the measured tables in docs/numerics.md / docs/golden.md are
// stale (scripts/library-tables.sh regenerates them). Then the same check under every kernel this
// machine can be steered to (ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS, MKL_CBWR): a verdict may
// depend on the kernel only through an expectation keyed by it, so each must pass.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { goldenSuites } from '../../src/golden/suites/index.js';
import { writeGolden } from '../../src/golden/write.js';

const env = { ...process.env, PYTHONPATH: join(process.cwd(), 'python') };
let dir = '';

function torchCheck(args: string[], extra: Record<string, string> = {}): { status: number | null; out: string } {
  const r = spawnSync('python3', ['-m', 'qrl_golden.torch_check', ...args], { encoding: 'utf8', env: { ...env, ...extra }, timeout: 300_000 });
  if (r.error) throw new Error(`cannot run python3: ${r.error.message}`);
  return { status: r.status, out: `${r.stdout}\n${r.stderr}` };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'qrl-torch-check-'));
  writeGolden(dir, ['library-casts', 'quantizers', 'gemm'].map((s) => goldenSuites[s]!), { seed: 0, command: 'qrl-sim golden --suite library-casts,quantizers,gemm --seed 0' });
}, 300_000);

describe('torch_check (the real libraries against the golden files, CPU)', () => {
  it('every library-named profile agrees with its library, and the docs tables are current', () => {
    const { status, out } = torchCheck(['--device', 'cpu', '--check-doc', 'docs/numerics.md', '--check-doc', 'docs/golden.md', dir]);
    expect(status, out.split('\n').filter((l) => /FAIL|out of date|Error|disagree/.test(l)).join('\n') || out.slice(-3000)).toBe(0);
    expect(out).toMatch(/ok {3}e4m3fn\.torch-2\.13 /);
    expect(out).toMatch(/ok {3}e8m0\.ml-dtypes /);
    expect(out).toMatch(/ok {3}fp16\.ort-1\.30 /);
    expect(out).toMatch(/^kernels: .*; key '[^']+'$/m);
    for (const op of ['matmul-fp32', 'matmul-bf16', 'scaled_mm-e4m3fn', 'scaled_mm-e4m3fn-tensor']) {
      expect(out).toMatch(new RegExp(`ok {3}${op} +guaranteed: 16/16 within the any-order bound`));
    }
    expect(out).toMatch(/quantizers: (not available|\d+ cases)/);
    expect(out).toMatch(/all cases agree/);
  }, 300_000);

  it.each([
    ['ATEN_CPU_CAPABILITY', 'default'],
    ['ATEN_CPU_CAPABILITY', 'avx2'],
    ['ATEN_CPU_CAPABILITY', 'avx512'],
    ['MKL_ENABLE_INSTRUCTIONS', 'AVX2'],
    ['MKL_ENABLE_INSTRUCTIONS', 'SSE4_2'],
    ['MKL_CBWR', 'COMPATIBLE'],
  ])('passes with %s=%s, each kernel held to its own expectations', (name, value) => {
    const { status, out } = torchCheck(['--device', 'cpu', dir], { [name]: value });
    expect(status, out.split('\n').filter((l) => /FAIL|Error/.test(l)).join('\n') || out.slice(-3000)).toBe(0);
    const capability = /ATen capability (\S+),/.exec(out)?.[1];
    if (capability === 'DEFAULT') {
      // the scalar kernel: its bf16 NaN is 0x7FC0; the vectorized profile is printed, not checked
      expect(out).toMatch(/ok {3}bf16\.torch-2\.13-scalar /);
      expect(out).toMatch(/obs {2}bf16\.torch-2\.13 /);
    } else if (capability === 'AVX2' || capability === 'AVX512') {
      expect(out).toMatch(/ok {3}bf16\.torch-2\.13 /);
      expect(out).toMatch(/obs {2}bf16\.torch-2\.13-scalar /);
    }
    const key = /key '([^']+)'/.exec(out)?.[1] ?? '';
    const model = { 'GenuineIntel mkl avx2 cnr-off': 'fp32-fma-x2', 'GenuineIntel mkl sse4.2 cnr-off': 'fp32', 'GenuineIntel mkl compatible cnr-compatible': 'fp32', 'GenuineIntel mkl avx512-e4 cnr-off': 'fp32-fma' }[key];
    if (model !== undefined) expect(out).toMatch(new RegExp(`ok {3}scaled_mm-e4m3fn-tensor +vs ${model}\\.e4m3fn-tensor-dequantized +16/16 equal.*\\(expected\\)`));
  }, 300_000);

  it('exits 1 naming the case when a golden code is wrong, 2 on a directory without a manifest', () => {
    // flip one expected code of one small case: the check must notice
    const file = join(dir, 'library-casts', 'e2m1.ml-dtypes.safetensors');
    const original = readFileSync(file);
    const bytes = Buffer.from(original);
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) ^ 1;
    writeFileSync(file, bytes);
    try {
      const { status, out } = torchCheck(['--device', 'cpu', dir]);
      expect(status).toBe(1);
      expect(out).toMatch(/FAIL e2m1\.ml-dtypes .* 1 differ/);
    } finally {
      writeFileSync(file, original);
    }
    const empty = mkdtempSync(join(tmpdir(), 'qrl-torch-check-empty-'));
    const bad = torchCheck(['--device', 'cpu', empty]);
    expect(bad.status).toBe(2);
    expect(bad.out).toMatch(/golden_dir: no manifest\.json/);
  }, 300_000);
});
