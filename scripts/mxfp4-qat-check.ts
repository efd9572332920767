// Checks the presets modelopt-mxfp4-qtensor (codes and E8M0 bytes) and megatron-lite-mxfp4-qat (dequantized values)
// bit for bit against ModelOpt's own MXFP4QTensor.quantize / dequantize, run in torch from a Model-Optimizer checkout.
// Usage: npx tsx scripts/mxfp4-qat-check.ts PATH/TO/modelopt/torch/quantization/qtensor/mxfp4_tensor.py
// (ModelOpt is not a dependency; the file is read where the caller has it, e.g. `git show REV:PATH > file`).

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRng } from '../src/core/rng.js';
import { quantPreset } from '../src/numerics/presets.js';
import { dequantize, quantize } from '../src/numerics/quantize.js';
import { round } from '../src/numerics/round.js';
import { torchPython } from './quantizer-agreement.js';

/**
 * One case: the input, the codes and E8M0 bytes of modelopt-mxfp4-qtensor, the values of megatron-lite-mxfp4-qat;
 * float arrays as their float32 bits (JSON has no −0, NaN or ±Inf).
 */
interface Case {
  name: string;
  xBits: number[];
  rows: number;
  cols: number;
  codes: number[];
  scaleCodes: number[];
  liteBits: number[];
}

const bitsOf = (a: Float32Array): number[] => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));

const bf16 = (v: number): number => round('bf16', Math.fround(v), { profile: 'ieee' });

/**
 * Inputs (8 rows × 64): float32 normals over five decades; the same rounded to BF16 (the weights QAT quantizes in
 * verl, where E2M1 ties are common); block amaxes a few ulps above 6·2^k (the float32 log2 rounds down); exact ties;
 * signed zeros; zero, subnormal and huge blocks.
 */
function inputs(rows: number, cols: number): [string, Float32Array][] {
  const rng = createRng('mxfp4-qat-check');
  const out: [string, Float32Array][] = [];
  for (let t = 0; t < 10; t++) {
    const x = new Float32Array(rows * cols);
    for (let i = 0; i < x.length; i++) {
      const scale = 10 ** ((Math.floor(i / 32) % 5) - 3) * (t + 1);
      x[i] = Math.fround(rng.normal() * scale * (rng.uniform() < 0.02 ? 20 : 1));
    }
    let label = 'normal';
    if (t >= 1 && t <= 3) ((label = 'bf16'), x.forEach((v, i) => (x[i] = bf16(v))));
    if (t === 4) {
      label = 'amax just above 6·2^k';
      for (let b = 0; b < x.length / 32; b++) {
        const k = -12 + (b % 10);
        const bits = new Uint32Array(new Float32Array([6 * 2 ** k]).buffer)[0] as number;
        for (let j = 0; j < 32; j++) x[b * 32 + j] = Math.fround((2 * rng.uniform() - 1) * 5.9 * 2 ** k);
        x[b * 32 + (b % 32)] = new Float32Array(new Uint32Array([bits + 1 + (b % 4)]).buffer)[0] as number;
      }
    }
    if (t === 5) {
      label = 'ties';
      const ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5];
      for (let i = 0; i < x.length; i++)
        x[i] = (i % 32 === 0 ? 6 : (ties[i % 7] as number) * (i % 2 ? -1 : 1)) * 2 ** ((i >> 5) - 4);
    }
    if (t === 6) ((label = 'signed zeros'), x.fill(0, 0, 40), x.fill(-0, 40, 70), (x[50] = 0.3));
    if (t === 7) ((label = 'subnormal blocks'), x.fill(Math.fround(1e-40), 0, 32), (x[33] = Math.fround(-3e-39)));
    if (t === 8) ((label = 'huge'), (x[5] = 3.3895313892515355e38), (x[70] = -1e38));
    if (t === 9) ((label = 'all-zero tensor'), x.fill(0));
    out.push([`${t} ${label}`, x]);
  }
  return out;
}

function cases(): Case[] {
  const rows = 8;
  const cols = 64;
  return inputs(rows, cols).map(([name, x]) => {
    const q = quantize(quantPreset('modelopt-mxfp4-qtensor'), x, [rows, cols]);
    const lite = dequantize(quantize(quantPreset('megatron-lite-mxfp4-qat'), x, [rows, cols]));
    return {
      name,
      xBits: bitsOf(x),
      rows,
      cols,
      codes: Array.from(q.codes),
      scaleCodes: Array.from(q.scaleCodes!),
      liteBits: bitsOf(lite),
    };
  });
}

const reference = process.argv[2];
if (reference === undefined) {
  console.error('usage: npx tsx scripts/mxfp4-qat-check.ts PATH/TO/mxfp4_tensor.py');
  process.exit(2);
}
const dir = mkdtempSync(join(tmpdir(), 'qrl-mxfp4-qat-'));
try {
  const file = join(dir, 'cases.json');
  writeFileSync(file, JSON.stringify(cases()));
  const r = spawnSync(torchPython(), ['-m', 'qrl_golden.modelopt_mxfp4_reference', reference, file], {
    encoding: 'utf8',
    env: { ...process.env, PYTHONPATH: ['python', process.env.PYTHONPATH].filter(Boolean).join(':') },
  });
  if (r.status !== 0)
    throw new Error(`python -m qrl_golden.modelopt_mxfp4_reference failed (${r.status}):\n${r.stderr}`);
  const res = JSON.parse(r.stdout) as { cases: number; blocks: number; mismatches: unknown[] };
  console.log(`${res.cases} cases, ${res.blocks} blocks: ${res.mismatches.length} differ from ModelOpt's MXFP4QTensor`);
  for (const m of res.mismatches) console.log(JSON.stringify(m));
  process.exitCode = res.mismatches.length === 0 ? 0 : 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
