// Compares a device's GEMMs, captured by `python -m qrl_golden.gemm_capture --device cuda DIR`, with every qrl-sim
// accumulator model on the same operands, and prints per case which models reproduce the device bit for bit.
//
//   npx tsx scripts/gemm-capture-compare.ts DIR [--markdown]
//
// QRL_CAPTURE_GRID=0 tries the presets only (fast); QRL_CAPTURE_K=16384 compares the cases of that K only.
// Models: fp32 (sequential), pairwise, fp64, and hopper-fp8 over a grid of (chunk, fractionBits, promoteEvery), so a
// device that matches none of the presets still shows the nearest setting. Per-tensor scales are applied by each
// epilogue order a kernel may use; row-wise cases round to bf16 last.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decode, floatFormats } from '../src/numerics/formats.js';
import { gemm, type GemmOptions } from '../src/numerics/gemm.js';
import { fakeQuant } from '../src/numerics/vector.js';

interface ArrayRef {
  offset: number;
  bytes: number;
  dtype: string;
  shape: number[];
}
interface Case {
  op: string;
  m: number;
  n: number;
  k: number;
  spread: boolean;
  fastAccum?: boolean;
  aCodes: ArrayRef;
  bCodes: ArrayRef;
  aScale?: number;
  bScale?: number;
  aRowScales?: ArrayRef;
  bRowScales?: ArrayRef;
  out?: ArrayRef;
  outBf16?: ArrayRef;
  error?: string;
}

const dir = process.argv[2];
if (dir === undefined) {
  console.error('usage: npx tsx scripts/gemm-capture-compare.ts DIR [--markdown]');
  process.exit(2);
}
const markdown = process.argv.includes('--markdown');
const manifest = JSON.parse(readFileSync(join(dir, 'gemm-capture.json'), 'utf8')) as {
  info: Record<string, unknown>;
  cases: Case[];
};
const blob = readFileSync(join(dir, 'gemm-capture.bin'));
const buf = blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.byteLength);

function u8(r: ArrayRef): Uint8Array {
  return new Uint8Array(buf, r.offset, r.bytes);
}
function f32(r: ArrayRef): Float32Array {
  return new Float32Array(buf.slice(r.offset, r.offset + r.bytes));
}
function u16(r: ArrayRef): Uint16Array {
  return new Uint16Array(buf.slice(r.offset, r.offset + r.bytes));
}

const e4m3 = floatFormats.e4m3fn;
function values(codes: Uint8Array): Float32Array {
  const v = new Float32Array(codes.length);
  for (let i = 0; i < codes.length; i++) v[i] = decode(e4m3, codes[i] as number);
  return v;
}

/** The presets: the plain models and hopper-fp8 as qrl-sim's plans use it (chunk 32, 13 fractional bits, promoted every 4 chunks or never). */
function presetModels(): { name: string; options: GemmOptions }[] {
  return [
    { name: 'fp32', options: { accumulator: 'fp32' } },
    { name: 'pairwise', options: { accumulator: 'pairwise' } },
    { name: 'fp64', options: { accumulator: 'fp64' } },
    {
      name: 'hopper-fp8 chunk 32 f13 promote 4',
      options: { accumulator: 'hopper-fp8', chunk: 32, fractionBits: 13, promoteEvery: 4 },
    },
    {
      name: 'hopper-fp8 chunk 32 f13 promote 0',
      options: { accumulator: 'hopper-fp8', chunk: 32, fractionBits: 13, promoteEvery: 0 },
    },
  ];
}

/** A grid of hopper-fp8 settings, tried when no preset reproduces a case. */
function gridModels(k: number): { name: string; options: GemmOptions }[] {
  const out: { name: string; options: GemmOptions }[] = [];
  for (const chunk of [32, 16, 64]) {
    if (chunk > k) continue;
    for (const fractionBits of [13, 12, 14, 23]) {
      for (const promoteEvery of [4, 0, 1, 2, 8]) {
        out.push({
          name: `hopper-fp8 chunk ${chunk} f${fractionBits} promote ${promoteEvery}`,
          options: { accumulator: 'hopper-fp8', chunk, fractionBits, promoteEvery },
        });
      }
      // split-K (cuBLASLt splits a long K over thread blocks and adds the parts in float32)
      if (chunk === 32 && fractionBits === 13 && k >= 4096) {
        for (const splitK of [2, 4, 8, 16, 32, 64]) {
          for (const promoteEvery of [4, 0]) {
            out.push({
              name: `hopper-fp8 chunk 32 f13 promote ${promoteEvery} split-K ${splitK}`,
              options: { accumulator: 'hopper-fp8', chunk, fractionBits, promoteEvery, splitK },
            });
          }
        }
      }
    }
  }
  return out;
}

function ordered(bits: number): number {
  return bits & 0x80000000 ? -(bits & 0x7fffffff) : bits;
}
const scratch = new Float32Array(1);
const scratchU = new Uint32Array(scratch.buffer);
function bitsOf(x: number): number {
  scratch[0] = x;
  return scratchU[0] as number;
}
function ulp32(a: number, b: number): number {
  if (Number.isNaN(a) && Number.isNaN(b)) return 0;
  if (Number.isNaN(a) || Number.isNaN(b)) return Infinity;
  return Math.abs(ordered(bitsOf(a)) - ordered(bitsOf(b)));
}
function ulp16(a: number, b: number): number {
  const o = (c: number) => (c & 0x8000 ? -(c & 0x7fff) : c);
  return Math.abs(o(a) - o(b));
}

/** Epilogues a kernel may apply to the float32 accumulator: per-tensor or row scales sa, sb. */
const epilogues: Record<string, (acc: number, sa: number, sb: number) => number> = {
  'sa·(sb·acc)': (acc, sa, sb) => Math.fround(sa * Math.fround(sb * acc)),
  '(sa·sb)·acc': (acc, sa, sb) => Math.fround(Math.fround(sa * sb) * acc),
  '(acc·sa)·sb': (acc, sa, sb) => Math.fround(Math.fround(acc * sa) * sb),
};

interface Row {
  case: string;
  model: string;
  epilogue: string;
  equal: number;
  total: number;
  maxUlp: number;
}
const best: Row[] = [];
let refused = 0;
for (const c of manifest.cases) {
  if (process.env.QRL_CAPTURE_K !== undefined && String(c.k) !== process.env.QRL_CAPTURE_K) continue;
  const label = `${c.op}${c.fastAccum === undefined ? '' : c.fastAccum ? ' fast' : ' promoted'} ${c.m}×${c.n}×${c.k}${c.spread ? ' spread' : ''}`;
  if (c.error !== undefined) {
    refused++;
    if (!markdown) console.log(`${label}: refused by the device (${c.error})`);
    continue;
  }
  const A = values(u8(c.aCodes));
  const B = values(u8(c.bCodes));
  const { m, n, k } = c;
  const bf16Out = c.outBf16 !== undefined;
  const want32 = c.out !== undefined ? f32(c.out) : null;
  const want16 = c.outBf16 !== undefined ? u16(c.outBf16) : null;
  const ra = c.aRowScales !== undefined ? f32(c.aRowScales) : null;
  const rb = c.bRowScales !== undefined ? f32(c.bRowScales) : null;
  const rows: Row[] = [];
  const scaled = c.op === 'scaled_mm-tensor' || c.op === 'scaled_mm-rowwise';
  /** Outputs equal to the device's and the largest ulp distance, `v` rounded to bf16 first where the device wrote bf16. */
  const score = (v: Float32Array): { equal: number; maxUlp: number } => {
    const got = bf16Out ? new Uint32Array(fakeQuant('bf16', v, { profile: 'ieee' }).buffer) : null;
    let equal = 0;
    let maxUlp = 0;
    for (let o = 0; o < m * n; o++) {
      const d =
        got !== null
          ? ulp16((got[o] as number) >>> 16, want16![o] as number)
          : ulp32(v[o] as number, want32![o] as number);
      if (d === 0) equal++;
      if (d > maxUlp) maxUlp = d;
    }
    return { equal, maxUlp };
  };
  const tried = (list: { name: string; options: GemmOptions }[]): void => {
    for (const model of list) {
      const acc = gemm(new Float32Array(m * n), A, B, m, n, k, {
        ...model.options,
        aQuant: 'e4m3fn',
        bQuant: 'e4m3fn',
      });
      for (const [ename, ep] of Object.entries(scaled ? epilogues : { none: (x: number) => x })) {
        const v = new Float32Array(m * n);
        for (let i = 0; i < m; i++) {
          const sa = ra !== null ? (ra[i] as number) : (c.aScale ?? 1);
          for (let j = 0; j < n; j++)
            v[i * n + j] = ep(acc[i * n + j] as number, sa, rb !== null ? (rb[j] as number) : (c.bScale ?? 1));
        }
        rows.push({ case: label, model: model.name, epilogue: ename, total: m * n, ...score(v) });
      }
    }
  };
  tried(presetModels());
  if (c.op === 'scaled_mm-tensor') {
    // The operands scaled first (fl(a·sa), fl(b·sb)), then an fp32 GEMM: what a kernel that dequantizes its inputs does.
    const As = A.map((v) => Math.fround(v * (c.aScale ?? 1)));
    const Bs = B.map((v) => Math.fround(v * (c.bScale ?? 1)));
    const acc = gemm(new Float32Array(m * n), As, Bs, m, n, k, { accumulator: 'fp32' });
    rows.push({ case: label, model: 'fp32 on dequantized operands', epilogue: 'none', total: m * n, ...score(acc) });
  }
  if (process.env.QRL_CAPTURE_GRID !== '0' && !rows.some((r) => r.equal === r.total)) tried(gridModels(k));
  rows.sort((x, y) => y.equal - x.equal || x.maxUlp - y.maxUlp);
  const exact = rows.filter((r) => r.equal === r.total);
  best.push(rows[0] as Row);
  if (!markdown) {
    const presets = rows.filter(
      (r) =>
        (r.model === 'fp32' || r.model.startsWith('hopper-fp8 chunk 32 f13')) &&
        (r.epilogue === 'sa·(sb·acc)' || r.epilogue === 'none'),
    );
    const summary = presets.map((r) => `${r.model}/${r.epilogue}: ${r.equal}/${r.total}, max ${r.maxUlp} ulp`);
    console.log(
      `${label}${bf16Out ? ' (bf16 out)' : ''}\n  exact: ${
        exact.length === 0
          ? 'none'
          : exact
              .slice(0, 6)
              .map((r) => `${r.model}/${r.epilogue}`)
              .join('; ')
      }${exact.length > 6 ? ` (+${exact.length - 6})` : ''}` +
        `\n  nearest: ${rows[0]!.model}/${rows[0]!.epilogue} ${rows[0]!.equal}/${rows[0]!.total}, max ${rows[0]!.maxUlp} ulp\n  presets: ${summary.join(' | ')}`,
    );
  }
}
if (markdown) {
  console.log(`Device: ${JSON.stringify(manifest.info)}\n`);
  console.log(
    '| case | nearest qrl-sim model | epilogue | outputs equal | max ulp |\n| --- | --- | --- | ---: | ---: |',
  );
  for (const r of best)
    console.log(`| ${r.case} | \`${r.model}\` | ${r.epilogue} | ${r.equal}/${r.total} | ${r.maxUlp} |`);
}
if (refused > 0) console.log(`${refused} case(s) refused by the device`);
