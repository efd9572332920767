import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { dequantize, quantPreset, quantize } from '../../src/numerics/index.js';
import { runCli } from './io.js';

describe('qrl-sim quantize', () => {
  it('--json prints codes and dequantized values in the input shape, scales per row, stats', async () => {
    const input = [
      [1, -2, 3.5, 0],
      [0.1, 0.2, 0.3, 400],
    ];
    const r = await runCli(['quantize', '--preset', 'vllm-fp8-token', '--input', '-', '--json'], JSON.stringify(input));
    expect(r.code).toBe(0);
    const j = JSON.parse(r.out);
    const q = quantize(quantPreset('vllm-fp8-token'), Float32Array.from(input.flat()), [2, 4]);
    expect(j.preset).toBe('vllm-fp8-token');
    expect(j.codes).toEqual([Array.from(q.codes.slice(0, 4)), Array.from(q.codes.slice(4))]);
    expect(j.scales).toEqual(Array.from(q.scales));
    const y = Array.from(dequantize(q));
    expect(j.dequantized).toEqual([y.slice(0, 4), y.slice(4)]);
    expect(j.stats.maxAbsError).toBeCloseTo(
      Math.max(...input.flat().map((v, i) => Math.abs(Math.fround(v) - y[i]!))),
      12,
    );
    expect(j.stats.sqnrDb).toBeGreaterThan(30);
    expect(j.zeroPoints).toBeUndefined();
  });

  it('--block sets the group size; 1-D input stays 1-D; zero points for asymmetric presets', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qrl-quant-'));
    const file = join(dir, 'w.json');
    writeFileSync(file, JSON.stringify([-1, 0, 2, 0.5, 0, 0, 0, 0]));
    const r = await runCli(['quantize', '--preset', 'gptq-w4g128', '--block', '4', '--input', file, '--json']);
    expect(r.code).toBe(0);
    const j = JSON.parse(r.out);
    expect(j.codes).toHaveLength(8);
    expect(j.scales).toHaveLength(2);
    expect(j.zeroPoints).toEqual([5, 7]);
    expect(j.dequantized.slice(4)).toEqual([0, 0, 0, 0]);
  });

  it('--ue8m0 gives power-of-two scales (DeepGEMM ceil_to_ue8m0)', async () => {
    const r = await runCli(
      ['quantize', '--preset', 'deepgemm-fp8-group', '--block', '4', '--ue8m0', '--input', '-', '--json'],
      '[[1, -2, 3, 0]]',
    );
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).scales).toEqual([[2 ** -7]]); // 3/448 ≈ 1.71·2^-8 rounds up
    const fp32 = await runCli(
      ['quantize', '--preset', 'deepgemm-fp8-group', '--block', '4', '--input', '-', '--json'],
      '[[1, -2, 3, 0]]',
    );
    expect(JSON.parse(fp32.out).scales).toEqual([[Math.fround(3 / 448)]]);
  });

  it('NaN, ±Infinity and −0 travel as strings; an all-zero input has infinite SQNR', async () => {
    const r = await runCli(
      ['quantize', '--preset', 'mxfp8', '--block', '2', '--input', '-', '--json'],
      '[["NaN", 1, "-0", 0]]',
    );
    const j = JSON.parse(r.out);
    expect(j.dequantized[0]).toEqual(['NaN', 'NaN', '-0', 0]);
    const z = await runCli(['quantize', '--preset', 'int8-row', '--input', '-', '--json'], '[0, 0]');
    expect(JSON.parse(z.out).stats.sqnrDb).toBe('Infinity');
  });

  it('prints a readable summary without --json', async () => {
    const r = await runCli(['quantize', '--preset', 'nvfp4', '--input', '-'], '[[1, 2, 3, 4]]');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^nvfp4: e2m1, group 16, input \[1, 4\], scales \[1, 1\]/);
    expect(r.out).toMatch(/SQNR/);
  });

  it('text mode prints the codes and the scales, as its help says', async () => {
    const r = await runCli(
      ['quantize', '--preset', 'vllm-fp8-token', '--input', '-'],
      '[[1, -2, 3.5, 0], [0.1, 0.2, 0.3, 400]]',
    );
    expect(r.code, r.err).toBe(0);
    const q = quantize(
      quantPreset('vllm-fp8-token'),
      Float32Array.from([1, -2, 3.5, 0, 0.1, 0.2, 0.3, 400].map(Math.fround)),
      [2, 4],
    );
    expect(r.out).toContain(`row 0 codes:   ${Array.from(q.codes.slice(0, 4)).join(' ')}`);
    expect(r.out).toContain(`row 1 codes:   ${Array.from(q.codes.slice(4, 8)).join(' ')}`);
    expect(r.out).toContain(`scales:\n  ${Array.from(q.scales).join(' ')}\n`);
  });

  it('counts finite inputs that dequantize to NaN instead of reporting max |error| 0', async () => {
    // One NaN in an MX block makes the shared scale NaN: every finite value of the block decodes to NaN.
    const r = await runCli(['quantize', '--preset', 'mxfp8', '--input', '-'], '[1, 2, "NaN", 3]');
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/non-finite outputs: 3 of 3 finite inputs/);
    expect(r.out).not.toMatch(/max \|error\| 0\b/);
    const j = await runCli(['quantize', '--preset', 'mxfp8', '--input', '-', '--json'], '[1, 2, "NaN", 3]');
    expect(JSON.parse(j.out).stats.nonFinite).toBe(3);
  });

  it.each([
    [['--preset', 'nope', '--input', '-'], '[1]', /--preset: unknown preset 'nope'/],
    [
      ['--preset', 'te-delayed', '--block', '4', '--input', '-'],
      '[1]',
      /--block: preset 'te-delayed' has no block size/,
    ],
    [['--preset', 'mxfp8', '--block', '0', '--input', '-'], '[1]', /--block: expected an integer ≥ 1, got '0'/],
    [
      ['--preset', 'mxfp8', '--ue8m0', '--input', '-'],
      '[1]',
      /--ue8m0: preset 'mxfp8' has no UE8M0 variant \(presets with one: vllm-fp8-group, /,
    ],
    [['--preset', 'mxfp8', '--input', '-'], '{"a": 1}', /--input: expected a JSON array/],
    [['--preset', 'mxfp8', '--input', '-'], '[1, 2', /--input is not valid JSON/],
    [['--preset', 'mxfp8', '--input', '-'], '[[1, 2], [3]]', /--input: row 1 has 1 values, row 0 has 2/],
    [['--preset', 'mxfp8', '--input', '-'], '[[1, "x"]]', /--input: element \[0\]\[1\] is not a number: "x"/],
    [['--preset', 'mxfp8', '--input', '/nonexistent/file.json'], '', /--input: cannot read '\/nonexistent\/file.json'/],
    [['--preset', 'mxfp8'], '', /missing required option --input/],
  ])('bad input %j exits 2 with one line', async (args, stdin, message) => {
    const r = await runCli(['quantize', ...args], stdin);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(r.err.trim().split('\n')).toHaveLength(1);
  });
});
