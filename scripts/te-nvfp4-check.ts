// Checks the presets nvfp4-4over6-te (MAE/MSE × bound 256/448 × per tensor/per row) and nvfp4-row-te bit for bit
// against TransformerEngine's own PyTorch reference, reference_nvfp4.py, run in torch from a TE checkout.
// Usage: npx tsx scripts/te-nvfp4-check.ts PATH/TO/transformer_engine/pytorch/custom_recipes/reference_nvfp4.py
// (TE is not a dependency; the file is read where the caller has it, e.g. `git show REV:PATH > file`).

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRng } from '../src/core/rng.js';
import { quantPreset } from '../src/numerics/presets.js';
import { quantize } from '../src/numerics/quantize.js';
import { torchPython } from './quantizer-agreement.js';

/** One case: the input and the codes and E4M3 scale codes the preset gave. */
interface Case {
  name: string;
  x: number[];
  rows: number;
  cols: number;
  error?: 'mae' | 'mse';
  tensorBound?: 256 | 448;
  rowScaled: boolean;
  codes: number[];
  scaleCodes: number[];
}

/** Inputs: normal values with block amaxes over five decades and rare outliers, plus edge blocks. */
function inputs(rows: number, cols: number): [string, Float32Array][] {
  const rng = createRng('te-nvfp4-check');
  const out: [string, Float32Array][] = [];
  for (let t = 0; t < 12; t++) {
    const x = new Float32Array(rows * cols);
    for (let i = 0; i < x.length; i++) {
      const scale = 10 ** ((Math.floor(i / 16) % 5) - 2) * (t + 1);
      x[i] = Math.fround(rng.normal() * scale * (rng.uniform() < 0.02 ? 20 : 1));
    }
    let label = 'normal';
    if (t === 1) ((label = 'zero block'), x.fill(0, 0, 16));
    if (t === 2) ((label = 'all-equal block'), x.fill(Math.fround(3.3), 16, 32));
    if (t === 3)
      ((label = 'subnormal block scales'), x.fill(Math.fround(1e-30), 32, 48), (x[40] = Math.fround(-3e-38)));
    if (t === 4) ((label = 'bf16 max'), (x[5] = 3.3895313892515355e38), (x[70] = -3.3895313892515355e38));
    if (t === 5) ((label = 'all-zero tensor'), x.fill(0));
    out.push([`${t} ${label}`, x]);
  }
  return out;
}

function cases(): Case[] {
  const rows = 8;
  const cols = 64;
  const list: Case[] = [];
  for (const [label, x] of inputs(rows, cols)) {
    const add = (
      name: string,
      spec: ReturnType<typeof quantPreset>,
      extra: Partial<Case>,
      rowScaled: boolean,
    ): void => {
      const q = quantize(spec, x, [rows, cols]);
      list.push({
        name,
        x: Array.from(x),
        rows,
        cols,
        rowScaled,
        ...extra,
        codes: Array.from(q.codes),
        scaleCodes: Array.from(q.scaleCodes!),
      });
    };
    for (const error of ['mae', 'mse'] as const)
      for (const tensorBound of [256, 448] as const)
        for (const rowScaled of [false, true])
          add(
            `${label} 4over6 ${error} ${tensorBound}${rowScaled ? ' row' : ''}`,
            quantPreset('nvfp4-4over6-te', { error, tensorBound, rowScaled }),
            { error, tensorBound },
            rowScaled,
          );
    add(`${label} row-scaled`, quantPreset('nvfp4-row-te'), {}, true);
  }
  return list;
}

const reference = process.argv[2];
if (reference === undefined) {
  console.error('usage: npx tsx scripts/te-nvfp4-check.ts PATH/TO/reference_nvfp4.py');
  process.exit(2);
}
const dir = mkdtempSync(join(tmpdir(), 'qrl-te-nvfp4-'));
try {
  const file = join(dir, 'cases.json');
  writeFileSync(file, JSON.stringify(cases()));
  const r = spawnSync(torchPython(), ['-m', 'qrl_golden.te_nvfp4_reference', reference, file], {
    encoding: 'utf8',
    env: { ...process.env, PYTHONPATH: ['python', process.env.PYTHONPATH].filter(Boolean).join(':') },
  });
  if (r.status !== 0) throw new Error(`python -m qrl_golden.te_nvfp4_reference failed (${r.status}):\n${r.stderr}`);
  const res = JSON.parse(r.stdout) as { cases: number; blocks: number; mismatches: unknown[] };
  console.log(`${res.cases} cases, ${res.blocks} blocks: ${res.mismatches.length} differ from TE's reference_nvfp4.py`);
  for (const m of res.mismatches) console.log(JSON.stringify(m));
  process.exitCode = res.mismatches.length === 0 ? 0 : 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
