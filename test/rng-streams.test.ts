// The named random streams: every label's exact string (the determinism contract), the two-level run streams, and no unnamed label left in src/.
// Not a test of the generator (rng.test.ts): only the names the code forks by.

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createRng } from '../src/core/rng.js';
import { evalStream, rngStreams, stepStream } from '../src/core/rng-streams.js';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');

describe('rng streams: the labels are the ones results were drawn from', () => {
  it('every fixed label and every label family keeps its string', () => {
    const s = rngStreams;
    expect([s.params.init, s.params.tensor('wte')]).toEqual(['init', 'wte']);
    expect(s.tasks.split('reverse', 'train')).toBe('reverse-train');
    expect([s.run.step, s.run.eval, s.run.prompts, s.run.rollout, s.run.minibatches]).toEqual([
      'step',
      'eval',
      'prompts',
      'rollout',
      'minibatches',
    ]);
    expect([s.run.side('rollout'), s.run.side('trainer'), s.run.decoding(true), s.run.decoding(false)]).toEqual([
      'rollout',
      'trainer',
      'greedy',
      'sampled',
    ]);
    expect([s.ar.sft, s.ar.probeRollout]).toEqual(['sft', 'probe-rollout']);
    expect([
      s.diffusion.warmStartProblems,
      s.diffusion.warmStartMasks,
      s.diffusion.row(3),
      s.diffusion.mismatchRollout,
      s.diffusion.d1,
      s.diffusion.elbo,
      s.diffusion.sequence('0/row-1'),
    ]).toEqual(['warm-start-problems', 'warm-start-masks', 'row-3', 'mismatch-rollout', 'd1', 'elbo', '0/row-1']);
    expect([s.cli.demo, s.cli.divergeRollout, s.cli.probeLengths]).toEqual([
      'demo',
      'diverge-rollout',
      'probe-lengths',
    ]);
    expect([
      s.golden.castBits,
      s.golden.casts('e4m3fn'),
      s.golden.libraryCasts,
      s.golden.quantizer('mxfp8', 'finite', false),
      s.golden.quantizer('mxfp8', 'finite', true),
      s.golden.gemm,
      s.golden.estimator(4),
      s.golden.estimatorProbSqSum(4),
      s.golden.grpoStepRollout,
    ]).toEqual([
      'cast',
      'golden/casts/e4m3fn',
      'golden/library-casts',
      'golden/quantizers/mxfp8/finite',
      'golden/quantizers/mxfp8/finite/ue8m0',
      'golden/gemm',
      'golden/estimators/4',
      'golden/estimators/4/probSqSum',
      'golden/grpo-step/rollout',
    ]);
  });

  it('the step and evaluation streams are root/step/<s> and root/eval/<s>, the same draws as the forks spelled out', () => {
    const root = createRng(11);
    expect(stepStream(root, 3).path).toBe('11/step/3');
    expect(evalStream(root, 0).path).toBe('11/eval/0');
    expect(stepStream(root, 3).fork(rngStreams.run.rollout).uniform()).toBe(
      createRng(11).fork('step').fork('3').fork('rollout').uniform(),
    );
  });

  it('no file of src/ forks by a literal label: every label comes from src/core/rng-streams.ts', () => {
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
      );
    const literal: string[] = [];
    for (const f of files(join(repo, 'src'))) {
      const path = relative(repo, f).split('\\').join('/');
      if (path === 'src/core/rng-streams.ts' || path === 'src/core/rng.ts') continue;
      readFileSync(f, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (/^\s*(\/\*|\*|\/\/)/.test(line)) return; // comments show the paths the names stand for
          if (/\.fork\(\s*(?!rngStreams\.)/.test(line)) literal.push(`${path}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(literal).toEqual([]);
  });
});
