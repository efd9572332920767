// The torch-side quantizer presets against torch 2.13: python/qrl_golden/torch_quantizers.py writes each
// from its library's source and compares with the `quantizers` golden files; and the docs' agreement table.

import { rmSync } from 'node:fs';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGREEMENT_DOC, AGREEMENT_MARKER, runTorchQuantizers, writeQuantizerGolden } from '../../scripts/quantizer-agreement.js';

interface Row {
  case: string;
  compared: number;
  agreeing: number;
  nan_encoding: number;
  max_abs_diff: number;
  note: string;
}

/** Presets whose torch code keeps the sign of x86 NaNs on the CPU (the GPU writes +NaN), or whose emulated cast stores a code under a NaN block scale. */
const NAN_ENCODING_ON_CPU = new Set(['deepgemm-fp8-group', 'deepgemm-fp8-block', 'te-current-pyref', 'torchao-fp8-row', 'mxfp4', 'nvfp4-te-pyref']);

describe('quantizer presets against their torch transcriptions (torch 2.13, CPU)', () => {
  let dir = '';
  let rows: Row[] = [];
  let markdown = '';
  beforeAll(() => {
    dir = writeQuantizerGolden();
    const r = runTorchQuantizers(dir, ['--json']);
    if (r.stdout.trim() === '') throw new Error(`python -m qrl_golden.torch_quantizers failed (exit ${r.status}):\n${r.stderr}`);
    rows = JSON.parse(r.stdout) as Row[];
    markdown = runTorchQuantizers(dir, ['--markdown']).stdout.trimEnd();
  }, 600_000);
  afterAll(() => {
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('covers every torch-side preset on every input variant, UE8M0 included', () => {
    const presets = new Set(rows.map((r) => r.case.split('.')[0]));
    for (const p of ['vllm-fp8-tensor', 'vllm-fp8-token', 'vllm-fp8-group', 'vllm-fp8-group-triton', 'sglang-fp8-group-triton', 'deepseek-fp8-group', 'deepseek-fp8-block', 'deepgemm-fp8-group', 'deepgemm-fp8-block', 'te-current', 'te-current-pyref', 'torchao-fp8-row', 'mxfp8', 'mxfp4', 'nvfp4', 'nvfp4-te-pyref']) {
      expect(presets.has(p), p).toBe(true);
    }
    const names = new Set(rows.map((r) => r.case));
    for (const c of ['deepgemm-fp8-block.ue8m0.edges', 'torchao-fp8-row.edges-finite', 'mxfp4.edges', 'nvfp4.nan']) expect(names.has(c), c).toBe(true);
    for (const r of rows) expect(r.compared, r.case).toBeGreaterThan(100);
  });

  it('every value agrees bit for bit, except NaN encodings where both sides are NaN', () => {
    const other = rows.filter((r) => r.agreeing + r.nan_encoding !== r.compared).map((r) => `${r.case}: ${r.note}`);
    expect(other).toEqual([]);
    for (const r of rows) expect(r.max_abs_diff, r.case).toBe(0);
  });

  it('NaN encodings differ only for presets whose torch code runs the CPU cast on x86 NaNs', () => {
    const withNan = new Set(rows.filter((r) => r.nan_encoding > 0).map((r) => r.case.split('.')[0]));
    for (const p of withNan) expect(NAN_ENCODING_ON_CPU.has(p!), p).toBe(true);
  });

  it(`${AGREEMENT_DOC} holds the agreement table as measured (regenerate: npx tsx scripts/quantizer-agreement.ts)`, () => {
    const doc = readFileSync(AGREEMENT_DOC, 'utf8');
    const m = doc.match(new RegExp(`<!-- begin:${AGREEMENT_MARKER} -->\\n([\\s\\S]*?)\\n<!-- end:${AGREEMENT_MARKER} -->`));
    expect(m, `marker ${AGREEMENT_MARKER} in ${AGREEMENT_DOC}`).not.toBeNull();
    expect(m![1]).toBe(markdown);
  });
});
