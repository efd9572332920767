// `qrl-sim mismatch` in-process: JSON keys, reproducibility, zero mismatch for identical sides, usage errors.
// Not the probe's numerics (test/policies/ar covers those).

import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createDiffusionEngine } from '../../src/policies/diffusion/engine.js';
import { resolveRunConfig } from '../../src/rl/grpo/config.js';
import { runGrpo } from '../../src/runs/run.js';
import { makeTask } from '../../src/tasks/index.js';
import { runCli } from './io.js';

describe('qrl-sim mismatch', () => {
  it('prints the diagnostics as JSON with the documented keys; same seed ⇒ same output', async () => {
    const a = await runCli([
      'mismatch',
      '--policy',
      'ar',
      '--plan',
      'bf16-splitk',
      '--length',
      '12',
      '--seed',
      '3',
      '--json',
    ]);
    expect(a.code).toBe(0);
    const r = JSON.parse(a.out);
    expect(Object.keys(r)).toEqual([
      'policy',
      'plan',
      'length',
      'tokens',
      'k1',
      'k3',
      'meanAbsDp',
      'meanAbsDelta',
      'maxAbsDelta',
      'ess',
      'fracAbsDeltaGt1e-3',
    ]);
    expect(r).toMatchObject({ policy: 'ar', plan: 'bf16-splitk', length: 12, tokens: 16 * 12 });
    expect(r.meanAbsDelta).toBeGreaterThan(0);
    expect(r.k3).toBeGreaterThanOrEqual(0);
    expect(
      (await runCli(['mismatch', '--policy', 'ar', '--plan', 'bf16-splitk', '--length', '12', '--seed', '3', '--json']))
        .out,
    ).toBe(a.out);
    for (const plan of ['fp32', 'bf16', 'fp16']) {
      const z = JSON.parse(
        (await runCli(['mismatch', '--policy', 'ar', '--plan', plan, '--length', '6', '--batch', '4', '--json'])).out,
      );
      expect([z.k1, z.k3, z.maxAbsDelta, z.ess]).toEqual([0, 0, 0, 1]);
    }
  });

  it('--moe: flip rate per layer and k1/k3 with R3 replay; identical sides flip nothing and agree exactly', async () => {
    const q = JSON.parse(
      (
        await runCli([
          'mismatch',
          '--policy',
          'ar',
          '--plan',
          'int8-rollout',
          '--moe',
          '4,2',
          '--length',
          '8',
          '--batch',
          '4',
          '--json',
        ])
      ).out,
    );
    expect(Object.keys(q).slice(11)).toEqual(['flipRate/l0', 'flipRate/l1', 'k1R3', 'k3R3']);
    for (const l of [0, 1]) expect(q[`flipRate/l${l}`]).toBeGreaterThanOrEqual(0);
    expect(q.k3R3).toBeGreaterThan(0);
    const z = JSON.parse(
      (
        await runCli([
          'mismatch',
          '--policy',
          'ar',
          '--plan',
          'bf16',
          '--moe',
          '4,2',
          '--length',
          '6',
          '--batch',
          '3',
          '--json',
        ])
      ).out,
    );
    expect([z['flipRate/l0'], z['flipRate/l1'], z.k3, z.k3R3]).toEqual([0, 0, 0, 0]);
    const table = await runCli([
      'mismatch',
      '--policy',
      'ar',
      '--plan',
      'bf16',
      '--moe',
      '4,2',
      '--length',
      '4',
      '--batch',
      '2',
    ]);
    expect(table.out).toMatch(/^flipRate\/l1 +0$/m);
    expect(table.out).toMatch(/^k3R3 +0$/m);
    const bad = await runCli(['mismatch', '--policy', 'ar', '--plan', 'bf16', '--moe', '2,3']);
    expect([bad.code, bad.err.trim()]).toEqual([
      2,
      "qrl-sim mismatch: --moe: expected E,K with 1 ≤ K ≤ E ≤ 64 (e.g. 4,2), got '2,3'",
    ]);
  });

  it('--positions: per-position rows and buckets agree with the overall figures, for both policies', async () => {
    const a = JSON.parse(
      (
        await runCli([
          'mismatch',
          '--policy',
          'ar',
          '--plan',
          'fp8-rollout',
          '--length',
          '10',
          '--batch',
          '3',
          '--positions',
          '--json',
        ])
      ).out,
    );
    expect(a.positions).toHaveLength(10);
    expect(a.positions.every((c: { tokens: number }) => c.tokens === 3)).toBe(true);
    const k3 = a.positions.reduce((s: number, c: { k3: number }) => s + c.k3, 0) / 10;
    expect(k3).toBeCloseTo(a.k3, 12);
    expect(a.byPosition.map((b: { tokens: number }) => b.tokens)).toEqual([24, 6, 0, 0]);
    expect(a.byLength.map((b: { tokens: number; hi: number | null }) => [b.tokens, b.hi])).toEqual([
      [0, 8],
      [30, 32],
      [0, 128],
      [0, null],
    ]);
    expect(a.byLength[1].meanAbsDelta).toBeCloseTo(a.meanAbsDelta, 12);
    expect(a.seqLogRatioAbsMax).toBeGreaterThan(0);
    expect(a.seqLogRatioAbsMax).toBeLessThanOrEqual(10 * a.maxAbsDelta + 1e-12);
    expect(a.errorTokenFrac).toBe(0);
    expect(a.repetitionRate).toBeGreaterThanOrEqual(0);
    const d = JSON.parse(
      (
        await runCli([
          'mismatch',
          '--policy',
          'diffusion',
          '--plan',
          'bf16',
          '--length',
          '8',
          '--batch',
          '2',
          '--positions',
          '--json',
        ])
      ).out,
    );
    expect(d.positions).toHaveLength(8);
    expect(d.positions.reduce((s: number, c: { tokens: number }) => s + c.tokens, 0)).toBe(d.tokens);
    expect([d.seqLogRatioAbsMax, d.errorTokenFrac]).toEqual([0, 0]);
    const t = await runCli([
      'mismatch',
      '--policy',
      'ar',
      '--plan',
      'fp32',
      '--length',
      '4',
      '--batch',
      '2',
      '--positions',
    ]);
    expect(t.out).toMatch(/^pos \[0,8\)\s+8\s+0\.000e\+0\s+0\.000e\+0$/m);
    expect(t.out).toMatch(/^seqLogRatioAbsMax\s+0$/m);
  });

  it('prints a table without --json', async () => {
    const t = await runCli(['mismatch', '--policy', 'ar', '--plan', 'fp32', '--length', '4', '--batch', '2']);
    expect(t.code).toBe(0);
    expect(t.out).toMatch(/^tokens\s+8$/m);
  });

  it('accepts the checkpoints `run` writes and the cached warm starts, for both policies', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qrl-mismatch-run-'));
    const policies = {
      ar: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
      diffusion: {
        kind: 'diffusion',
        model: { C: 8, H: 2, hidden: 16, layers: 1 },
        diffusion: { generationLength: 8, blockLength: 4, steps: 4 },
      },
    } as const;
    for (const [kind, policy] of Object.entries(policies)) {
      const config = resolveRunConfig({
        steps: 1,
        task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
        policy,
        sft: { steps: 2, batchSize: 4 },
        rollout: { prompts: 2, groupSize: 2 },
        eval: { every: 0, problems: 2 },
      });
      const out = join(dir, kind);
      const cacheDir = join(dir, `cache-${kind}`);
      await runGrpo({ config, outDir: out, cacheDir });
      const [cached] = readdirSync(cacheDir);
      for (const path of [
        join(out, 'checkpoints', 'step-000001'),
        join(out, 'checkpoints', 'step-000001', 'backend.json'),
        join(cacheDir, cached!),
      ]) {
        const r = await runCli([
          'mismatch',
          '--policy',
          kind,
          '--plan',
          'bf16-splitk',
          '--length',
          '4',
          '--batch',
          '2',
          '--checkpoint',
          path,
          '--json',
        ]);
        expect([r.code, r.err], `${kind} ${path}`).toEqual([0, '']);
        expect(JSON.parse(r.out)).toMatchObject({ policy: kind });
      }
      const wrong = await runCli([
        'mismatch',
        '--policy',
        kind === 'ar' ? 'diffusion' : 'ar',
        '--plan',
        'bf16',
        '--length',
        '4',
        '--checkpoint',
        join(out, 'checkpoints', 'step-000001'),
      ]);
      expect([wrong.code, wrong.err]).toEqual([
        2,
        expect.stringMatching(/--checkpoint: .* is not a usable .* checkpoint: its policy.kind is/),
      ]);
    }
  });

  it('bad input exits 2 with one line naming the flag', async () => {
    const cases: [string[], RegExp][] = [
      [['--plan', 'bf16'], /--policy/],
      [['--policy', 'gpt', '--plan', 'bf16'], /--policy/],
      [['--policy', 'ar'], /--plan/],
      [['--policy', 'ar', '--plan', 'fp7'], /--plan: expected one of fp32, bf16, bf16-splitk, fp16/],
      [['--policy', 'ar', '--plan', 'bf16', '--length', '0'], /--length/],
      [['--policy', 'ar', '--plan', 'bf16', '--temperature', 'hot'], /--temperature/],
      [['--policy', 'ar', '--plan', 'bf16', '--checkpoint', '/nonexistent/x.json'], /--checkpoint/],
      [['--policy', 'ar', '--plan', 'bf16', '--estimator', 'd1'], /--estimator: only for --policy diffusion/],
    ];
    for (const [args, re] of cases) {
      const r = await runCli(['mismatch', ...args]);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(re);
      expect(r.err.trim().split('\n')).toHaveLength(1);
    }
  });
});

describe('qrl-sim mismatch --policy diffusion', () => {
  const keys = [
    'policy',
    'plan',
    'estimator',
    'length',
    'tokens',
    'k1',
    'k3',
    'meanAbsDp',
    'meanAbsDelta',
    'maxAbsDelta',
    'ess',
    'fracAbsDeltaGt1e-3',
  ];
  const run = (...args: string[]) => runCli(['mismatch', '--policy', 'diffusion', ...args]);

  it('prints the AR keys plus estimator; identical sides ⇒ zero; bf16-splitk ⇒ non-zero; reproducible', async () => {
    for (const estimator of ['trajectory', 'd1', 'elbo']) {
      const a = await run(
        '--plan',
        'bf16-splitk',
        '--length',
        '8',
        '--batch',
        '4',
        '--seed',
        '2',
        '--estimator',
        estimator,
        '--json',
      );
      expect(a.code).toBe(0);
      const r = JSON.parse(a.out);
      expect(Object.keys(r)).toEqual(keys);
      expect(r).toMatchObject({ policy: 'diffusion', plan: 'bf16-splitk', estimator, length: 8 });
      expect(r.tokens).toBeGreaterThan(0);
      expect(r.tokens).toBeLessThanOrEqual(4 * 8);
      expect(r.maxAbsDelta).toBeGreaterThan(0);
      expect(Number.isFinite(r.k3)).toBe(true);
      expect(
        (
          await run(
            '--plan',
            'bf16-splitk',
            '--length',
            '8',
            '--batch',
            '4',
            '--seed',
            '2',
            '--estimator',
            estimator,
            '--json',
          )
        ).out,
      ).toBe(a.out);
      const z = JSON.parse(
        (await run('--plan', 'bf16', '--length', '8', '--batch', '4', '--estimator', estimator, '--json')).out,
      );
      expect([z.k1, z.k3, z.maxAbsDelta, z.ess]).toEqual([0, 0, 0, 1]);
    }
    const d = JSON.parse((await run('--plan', 'fp32', '--json')).out);
    expect([d.estimator, d.length]).toEqual(['d1', 24]);
  });

  it('prints a table without --json', async () => {
    const t = await run('--plan', 'fp32', '--length', '4', '--batch', '2');
    expect(t.code).toBe(0);
    expect(t.out).toMatch(/^estimator\s+d1$/m);
  });

  it('loads a warm-start cache file or a run checkpoint (config.json two folders up)', async () => {
    const config = resolveRunConfig({
      task: { name: 'reverse', options: { maxLength: 4 } },
      policy: {
        kind: 'diffusion',
        model: { C: 8, H: 2, hidden: 16, layers: 1 },
        diffusion: { generationLength: 8, blockLength: 4, steps: 4 },
      },
    });
    const engine = createDiffusionEngine(config, makeTask('reverse', { maxLength: 4 }));
    const dir = mkdtempSync(join(tmpdir(), 'qrl-mismatch-'));
    const cache = join(dir, 'sft.json');
    writeFileSync(
      cache,
      JSON.stringify({
        config: { seed: 0, task: config.task, policy: config.policy, sft: config.sft },
        weights: Array.from(engine.params.data),
      }),
    );
    mkdirSync(join(dir, 'run', 'checkpoints'), { recursive: true });
    writeFileSync(join(dir, 'run', 'config.json'), JSON.stringify(config));
    const ck = join(dir, 'run', 'checkpoints', 'step-000001.json');
    writeFileSync(
      ck,
      JSON.stringify({
        version: 1,
        step: 1,
        weights: Array.from(engine.params.data),
        referenceWeights: [],
        optimizer: {},
        engine: null,
      }),
    );
    const a = await run('--plan', 'bf16-splitk', '--checkpoint', cache, '--batch', '3', '--json');
    expect(a.code).toBe(0);
    expect(JSON.parse(a.out)).toMatchObject({ policy: 'diffusion', length: 8 });
    expect((await run('--plan', 'bf16-splitk', '--checkpoint', ck, '--batch', '3', '--json')).out).toBe(a.out);
    const tooLong = await run('--plan', 'bf16', '--checkpoint', cache, '--length', '64');
    expect([tooLong.code, tooLong.err]).toEqual([
      2,
      expect.stringMatching(/--length: prompt length 6 \+ 64 exceeds the checkpoint's maxLen 64/),
    ]);
    writeFileSync(
      join(dir, 'bad.json'),
      JSON.stringify({ weights: [1, 2, 3], config: { task: config.task, policy: config.policy } }),
    );
    const bad = await run('--plan', 'bf16', '--checkpoint', join(dir, 'bad.json'));
    expect([bad.code, bad.err]).toEqual([
      2,
      expect.stringMatching(/--checkpoint: .* is not a usable diffusion checkpoint: it has 3 weights/),
    ]);
  });

  it('bad input exits 2 with one line naming the flag', async () => {
    const cases: [string[], RegExp][] = [
      [['--plan', 'bf16', '--estimator', 'exact'], /--estimator: expected one of trajectory, d1, elbo, got 'exact'/],
      [['--plan', 'fp7'], /--plan: expected one of/],
      [[], /--plan/],
      [['--plan', 'bf16', '--length', '0'], /--length/],
      [['--plan', 'bf16', '--batch', 'x'], /--batch/],
      [['--plan', 'bf16', '--temperature', '-1'], /--temperature/],
      [['--plan', 'bf16', '--checkpoint', '/nonexistent/x.json'], /--checkpoint: cannot read/],
    ];
    for (const [args, re] of cases) {
      const r = await run(...args);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(re);
      expect(r.err.trim().split('\n')).toHaveLength(1);
    }
  });
});

describe('qrl-sim mismatch engine paths', () => {
  const run = async (...extra: string[]) =>
    runCli(['mismatch', '--policy', 'ar', '--length', '6', '--batch', '20', '--json', ...extra]);
  it('--max-batch, --prefill-chunk, --batch-invariant and --min-length set the rollout engine; the key engine names it', async () => {
    const cb = JSON.parse(
      (await run('--plan', 'sims/plans/bf16-batch-variant.json', '--max-batch', '20', '--min-length', '1')).out,
    );
    expect(cb.engine).toBe('maxBatch 20');
    expect(cb.maxAbsDelta).toBeGreaterThan(0); // requests leave: decode GEMMs fall under the split-K limit
    expect(cb.tokens).toBeLessThan(20 * 6); // requests of different lengths
    const inv = JSON.parse(
      (
        await run(
          '--plan',
          'sims/plans/bf16-batch-variant.json',
          '--max-batch',
          '7',
          '--prefill-chunk',
          '3',
          '--min-length',
          '2',
          '--batch-invariant',
        )
      ).out,
    );
    expect(inv.engine).toBe('maxBatch 7, prefillChunk 3, batchInvariant');
    expect([inv.k1, inv.k3, inv.maxAbsDelta]).toEqual([0, 0, 0]);
    const tp = JSON.parse((await run('--plan', 'sims/plans/true-on-policy-tp4.json', '--max-batch', '5')).out);
    expect(tp.engine).toBe('maxBatch 5, batchInvariant, tp 4 ring bf16, trainer tp 4 ring bf16');
    expect([tp.k1, tp.k3, tp.maxAbsDelta]).toEqual([0, 0, 0]);
    expect('engine' in JSON.parse((await run('--plan', 'bf16')).out)).toBe(false);
  });

  it('--trainer-micro-batch sets trainer.microBatch: the key engine names it, a whole-batch chunk changes nothing', async () => {
    const file = 'sims/plans/fp8-tensor-trainer-micro-batch.json';
    const planned = JSON.parse((await run('--plan', file)).out);
    expect(planned.engine).toBe('batchInvariant, trainer microBatch 8');
    const whole = JSON.parse((await run('--plan', file, '--trainer-micro-batch', '20')).out);
    const none = JSON.parse((await run('--plan', 'sims/plans/fp8-tensor-scale-invariant.json')).out);
    expect(whole.engine).toBe('batchInvariant, trainer microBatch 20');
    expect({ ...whole, plan: '', engine: '' }).toEqual({ ...none, plan: '', engine: '' });
    const one = JSON.parse((await run('--plan', file, '--trainer-micro-batch', '1')).out);
    expect(one.k3).not.toBe(none.k3);
    const bad = await run('--plan', 'bf16', '--trainer-micro-batch', '0');
    expect(bad.code).toBe(2);
    expect(bad.err.trim()).toMatch(/^.*--trainer-micro-batch: expected an integer in 1\.\.4096, got '0'$/);
  });

  it('--trainer-padding sets trainer.padding: the key engine names it, trimming moves per-tensor scales only', async () => {
    const file = 'sims/plans/fp8-tensor-trainer-padded-micro-batch.json';
    expect(JSON.parse((await run('--plan', file)).out).engine).toBe(
      'batchInvariant, trainer microBatch 8, trainer padding longest-in-micro-batch',
    );
    const probe = async (plan: string, padding: string) =>
      JSON.parse(
        (await run('--plan', plan, '--min-length', '1', '--trainer-micro-batch', '1', '--trainer-padding', padding))
          .out,
      );
    const padded = await probe(file, 'max-length');
    const trimmed = await probe(file, 'longest-in-micro-batch');
    expect(trimmed.tokens).toBe(padded.tokens);
    expect(trimmed.k3).not.toBe(padded.k3);
    const token = 'sims/plans/fp8-token-scale-invariant.json';
    const tokenPadded = await probe(token, 'max-length');
    const tokenTrimmed = await probe(token, 'longest-in-micro-batch');
    expect({ ...tokenTrimmed, engine: '' }).toEqual({ ...tokenPadded, engine: '' });
    const bad = await run('--plan', 'bf16', '--trainer-padding', 'longest');
    expect(bad.code).toBe(2);
    expect(bad.err.trim()).toMatch(
      /^.*--trainer-padding: expected one of max-length, longest-in-batch, longest-in-micro-batch, got 'longest'$/,
    );
    const diffusion = await runCli([
      'mismatch',
      '--policy',
      'diffusion',
      '--plan',
      'bf16',
      '--trainer-padding',
      'max-length',
    ]);
    expect(diffusion.code).toBe(2);
    expect(diffusion.err).toMatch(/--trainer-padding/);
  });

  it('bad values exit 2 with one line naming the option', async () => {
    for (const [args, message] of [
      [['--plan', 'bf16', '--max-batch', '0'], /--max-batch: expected an integer in 1\.\.4096, got '0'/],
      [['--plan', 'bf16', '--prefill-chunk', 'x'], /--prefill-chunk: expected an integer in 1\.\.1024, got 'x'/],
      [['--plan', 'bf16', '--min-length', '7'], /--min-length: expected an integer in 1\.\.6, got '7'/],
      [['--plan', 'sims/plans/bf16-tp4-ring.json', '--max-batch', '2', '--prefill-chunk', '1'], null],
    ] as const) {
      const r = await run(...args);
      if (message === null) {
        expect(r.code).toBe(0);
        continue;
      }
      expect(r.code).toBe(2);
      expect(r.err.trim().split('\n')).toHaveLength(1);
      expect(r.err).toMatch(message);
    }
    const diff = await runCli(['mismatch', '--policy', 'diffusion', '--plan', 'bf16', '--max-batch', '2']);
    expect(diff.code).toBe(2);
    expect(diff.err).toMatch(/--max-batch/);
  });
});
