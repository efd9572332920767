// The shape rules of src/ that no compiler checks: every file under 600 lines (a file that grows past it is
// split by what it holds), functions outside nn/'s layer kernels take at most six parameters (an
// options object instead), and no exported function outside nn/ takes a boolean flag positionally (a call
// `f(x, true)` read far from f's definition says nothing; `f(x, { moe: true })` does). nn/'s kernels keep llm.c's positional signatures
// (docs/decisions.md, "nn/ kernels keep llm.c's positional signatures"); the public GEMM entry points keep BLAS's.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MAX_LINES = 600;
const MAX_PARAMS = 6;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith('.ts') ? [path] : [];
  });
}

/** Functions with more than six parameters: `file:line name (n params)`. */
function wideFunctions(path: string, text: string): string[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const params = node.parameters;
      if (params.length > MAX_PARAMS) {
        const name =
          node.name?.getText(file) ?? (ts.isVariableDeclaration(node.parent) ? node.parent.name.getText(file) : '');
        const line = file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1;
        found.push(`${relative(repo, path)}:${line} ${name} (${params.length} params)`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

/** Exported functions with a parameter typed `boolean`: `file name.param`. */
function booleanFlags(path: string, text: string): string[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  for (const node of file.statements) {
    if (!ts.isFunctionDeclaration(node) || node.name === undefined) continue;
    if (!(ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Export)) continue;
    for (const p of node.parameters) {
      if (p.type?.kind === ts.SyntaxKind.BooleanKeyword) {
        found.push(`${relative(join(repo, 'src'), path)} ${node.name.text}.${p.name.getText(file)}`);
      }
    }
  }
  return found;
}

/** Exported functions whose boolean parameter is a value, not a mode switch. */
const BOOLEAN_VALUES = new Set([
  // the sign of the value to encode, a datum like the magnitude beside it
  'numerics/formats.ts encodeExact.negative',
  // a setter: the boolean is the value set
  'numerics/operand-checks.ts setGemmCacheChecks.on',
  // an injectable reading of the environment (worker_threads' isMainThread), defaulted
  'numerics/threads.ts gemmThreadsFromEnv.mainThread',
]);

/**
 * The functions outside nn/ that still take more than six parameters, each a known case. A new one fails
 * this test: give it an options object, or add it here with its reason.
 */
const KNOWN = new Set([
  // The public BLAS-style GEMMs (operands, sizes, out, options) and the reference GEMM's per-element dots.
  'numerics/gemm.ts gemm',
  'numerics/gemm-reference.ts gemmReference',
  'numerics/gemm-reference.ts referenceDot',
  'numerics/gemm-reference.ts hopperFusedDotAdd',
  'numerics/gemm-batched.ts gemmBatched',
  'numerics/gemm-hopper.ts hopperRangeFast',
  'numerics/threads.ts threadedGemmF32',
  // GridLayout's constructor: the fields of a value class, declared as parameter properties.
  'numerics/quant-cells.ts ',
  // The policies' layer kernels, in nn/'s positional convention (arrays, then sizes).
  'policies/ar/model.ts finalNormForward',
  'policies/ar/rollout.ts lastLogits',
  'policies/diffusion/logprob.ts gumbelArgmax',
  'policies/diffusion/model.ts diffusionForward',
  'policies/quantized.ts coreGemm',
  'policies/quantized.ts qkBatch',
  'policies/quantized.ts pvBatch',
  'policies/quantized.ts kvLoaded',
  'policies/truncation.ts truncatedSupport',
  'policies/ar/logprobs.ts backwardTopkRow',
  'policies/ar/topk.ts recordTopk',
  'policies/ar/topk.ts trainerTopk',
]);

describe('the shape of src/', () => {
  const files = sources(join(repo, 'src'));

  it(`every file is at most ${MAX_LINES} lines`, () => {
    const long = files
      .map((f) => ({ f: relative(repo, f), lines: readFileSync(f, 'utf8').split('\n').length - 1 }))
      .filter((x) => x.lines > MAX_LINES);
    expect(long).toEqual([]);
  });

  it('finds a wide function when there is one (the check can fail)', () => {
    const planted =
      'function f(a: number, b: number, c: number, d: number, e: number, g: number, h: number) {}\n' +
      'const k = (x: number, on: boolean): number => (on ? x : 0);\n';
    expect(wideFunctions(join(repo, 'src/planted.ts'), planted)).toEqual(['src/planted.ts:1 f (7 params)']);
  });

  it('finds a boolean flag when there is one (the check can fail)', () => {
    const planted = 'export function f(x: number, on: boolean): number { return on ? x : 0; }\n';
    expect(booleanFlags(join(repo, 'src/planted.ts'), planted)).toEqual(['planted.ts f.on']);
  });

  it('no exported function outside nn/ takes a boolean flag, but the known values', () => {
    const outside = files.filter((f) => !relative(join(repo, 'src'), f).startsWith('nn/'));
    const flags = outside.flatMap((f) => booleanFlags(f, readFileSync(f, 'utf8')));
    expect(flags.filter((f) => !BOOLEAN_VALUES.has(f))).toEqual([]);
  });

  it('no function outside nn/ takes more than six parameters, but the known ones', () => {
    const outside = files.filter((f) => !relative(join(repo, 'src'), f).startsWith('nn/'));
    const wide = outside.flatMap((f) => wideFunctions(f, readFileSync(f, 'utf8')));
    const unknown = wide.filter((w) => {
      const [where, name] = w.split(' ');
      return !KNOWN.has(`${where!.replace(/^src\//, '').replace(/:\d+$/, '')} ${name}`);
    });
    expect(unknown).toEqual([]);
  });
});
