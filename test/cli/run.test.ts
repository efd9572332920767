import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from './io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-run-cli-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function configFile(name: string, config: unknown): string {
  const path = join(root, `${name}.json`);
  writeFileSync(path, typeof config === 'string' ? config : JSON.stringify(config));
  return path;
}

const small = {
  steps: 2,
  task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
  policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
  sft: { steps: 5, batchSize: 8, cache: false },
  rollout: { prompts: 2, groupSize: 4 },
  eval: { every: 0, problems: 4 },
};

describe('qrl-sim run', () => {
  it('runs a config and writes config.json, metrics.jsonl, eval.jsonl and a checkpoint', async () => {
    const out = join(root, 'ok');
    const r = await runCli([
      'run',
      '--config',
      configFile('ok', small),
      '--out',
      out,
      '--set',
      'estimators.correction.name=tis',
    ]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/step 2 reward/);
    expect(r.out).toMatch(/finished at step 2/);
    expect(readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n')).toHaveLength(2);
    expect(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).estimators.correction).toEqual([
      { name: 'tis', C: 2 },
    ]);
    expect(existsSync(join(out, 'checkpoints', 'step-000002', 'backend.json'))).toBe(true);
    const resumed = await runCli(['run', '--resume', out, '--steps', '3']);
    expect(resumed.code, resumed.err).toBe(0);
    expect(readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n')).toHaveLength(3);
  });

  it.each([
    [
      'unknown estimator',
      { ...small, estimators: { correction: { name: 'magic' } } },
      [],
      /config\.estimators\.correction.*unknown estimator "magic"/,
    ],
    [
      'negative clip',
      { ...small, estimators: { loss: { name: 'ppo-clip', epsLow: -0.2 } } },
      [],
      /config\.estimators\.loss\.epsLow/,
    ],
    ['NaN learning rate', small, ['--set', 'optim.lr=NaN'], /config\.optim\.lr: .*expected number.*"NaN"/],
    ['unknown field', { ...small, optimiser: {} }, [], /config: unknown field 'optimiser'/],
    ['unknown plan', { ...small, plan: 'fp9' }, [], /config\.plan: .*fp9/],
    ['bad model size', { ...small, policy: { kind: 'ar', model: { C: 30, H: 4 } } }, [], /config\.policy\.model/],
    ['zero steps', small, ['--steps', '0'], /--steps: expected an integer in 1\.\.100000, got '0'/],
    [
      'bad task option',
      small,
      ['--set', 'task.options.maxLength=99'],
      /config\.task\.options: reverse: option maxLength .* got 99/,
    ],
    [
      'bad plan data',
      { ...small, plan: { rollout: { gemm: { kind: 'int3' } }, trainer: { gemm: { kind: 'fp32' } } } },
      [],
      /config\.plan\.rollout\.gemm\.kind: expected "fp32", "rounding" or "quantized", got "int3"/,
    ],
    [
      'AR maxLen too small',
      { ...small, policy: { kind: 'ar', model: { maxLen: 3 } } },
      [],
      /config\.policy\.model\.maxLen: must be at least prompt \+ response = .* got 3/,
    ],
    [
      'held-out split too small',
      {
        ...small,
        task: { name: 'fibonacci', options: { minLength: 8, maxLength: 8 } },
        eval: { every: 0, problems: 32 },
      },
      [],
      /config\.eval\.problems: 32 held-out problems of task 'fibonacci'.*distinct eval problems found \(8\)/,
    ],
  ])('bad config (%s) exits 2 naming the field, and writes nothing', async (name, config, extra, message) => {
    const out = join(root, `bad-${name.replace(/ /g, '-')}`);
    const r = await runCli([
      'run',
      '--config',
      configFile(name.replace(/ /g, '-'), config),
      '--out',
      out,
      ...(extra as string[]),
    ]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(existsSync(out)).toBe(false);
  });

  it('a missing or malformed file exits 2', async () => {
    const missing = await runCli(['run', '--config', join(root, 'nope.json'), '--out', join(root, 'x')]);
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(/--config: cannot read .*nope\.json.*ENOENT/);
    const bad = await runCli(['run', '--config', configFile('broken', '{ steps: 1'), '--out', join(root, 'y')]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/is not valid JSON/);
    expect(existsSync(join(root, 'x')) || existsSync(join(root, 'y'))).toBe(false);
    expect((await runCli(['run'])).code).toBe(2);
    expect((await runCli(['run', '--resume', join(root, 'nowhere')])).err).toMatch(/--resume: cannot read/);
  });
});

describe('qrl-sim run under Ctrl-C', () => {
  it('stops after the current step with complete files and a checkpoint to resume from', async () => {
    const { spawn } = await import('node:child_process');
    if (!existsSync('dist/cli/main.js'))
      throw new Error('dist/ missing: run npm run build (npm ci does it through prepare)');
    const out = join(root, 'sigint');
    const config = configFile('sigint', { ...small, steps: 200, checkpoint: { every: 0 } });
    const child = spawn(process.execPath, ['bin/qrl-sim.js', 'run', '--config', config, '--out', out], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const code = await new Promise<number | null>((resolve) => {
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        if (/step 2 reward/.test(stdout) && !child.killed) child.kill('SIGINT');
      });
      child.on('close', (c) => resolve(c));
    });
    expect(code, stderr).toBe(130);
    expect(stderr).toMatch(/stopping after this step/);
    const lines = readFileSync(join(out, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const last = lines[lines.length - 1].step as number;
    expect(last).toBeGreaterThanOrEqual(2);
    expect(last).toBeLessThan(200);
    expect(existsSync(join(out, 'checkpoints', `step-${String(last).padStart(6, '0')}`, 'backend.json'))).toBe(true);
    const resumed = await runCli(['run', '--resume', out, '--steps', String(last + 1)]);
    expect(resumed.code, resumed.err).toBe(0);
  });
});
