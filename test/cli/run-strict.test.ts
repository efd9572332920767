// The strict driver (docs/adapter.md §5): every generate carries the run's sampler and response
// length; save/load get absolute paths; a backend that writes a reserved name into a checkpoint is
// refused; a backend whose plan, vocabulary, special tokens or ℓroll modes disagree with the config
// stops `run` at start with exit 2 naming both values, unless the config takes the plan from the
// backend; a failure's one line names where the run was (warm start, step, checkpoint).

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { GenerateRequest, PolicyBackend } from '../../src/core/backend-contract.js';
import { ReferenceBackend } from '../../src/backend/reference.js';
import { connectBackend } from '../../src/protocol/remote.js';
import { resolveRunConfig } from '../../src/rl/grpo/config.js';
import { policyFactory } from '../../src/runs/policies.js';
import { runGrpo, saveAtomic, warmStartKey } from '../../src/runs/run.js';
import { makeTaskFromConfig } from '../../src/tasks/registry.js';
import { FakeBackend } from '../protocol/fake-backend.js';
import { runCli } from './io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-run-strict-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const fake = (flags = ''): string =>
  `node --import tsx ${join(process.cwd(), 'test/protocol/fake-backend.ts')} ${flags}`;
const small = {
  steps: 1,
  task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
  policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
  sft: { steps: 2, batchSize: 8, cache: false },
  rollout: { prompts: 2, groupSize: 2 },
  eval: { every: 1, problems: 2 },
  checkpoint: { every: 1 },
  plan: 'fp32',
};
function configFile(name: string, patch: Record<string, unknown> = {}): string {
  const path = join(root, `${name}.json`);
  writeFileSync(path, JSON.stringify({ ...small, ...patch }));
  return path;
}

describe('the strict driver', () => {
  it('sends the sampler and the maximum response length with every generate', async () => {
    const config = resolveRunConfig({
      ...small,
      policy: { ...small.policy, sampler: { temperature: 0.7, topK: 5, logprob: 'raw' } },
    });
    const task = makeTaskFromConfig(config.task);
    const inner = new ReferenceBackend(config, policyFactory('ar'), task);
    const seen: GenerateRequest[] = [];
    const recording = new Proxy(inner, {
      get(target, key, receiver) {
        if (key === 'generate') return (r: GenerateRequest) => (seen.push(r), target.generate(r));
        const v = Reflect.get(target, key, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as PolicyBackend;
    try {
      await runGrpo({ config, outDir: join(root, 'sampling'), backend: recording, cacheDir: join(root, 'cache') });
    } finally {
      await inner.close();
    }
    expect(seen.length).toBeGreaterThanOrEqual(5); // eval at 0 (4 generates) + the step's rollout
    for (const r of seen) {
      expect(r.sampling).toEqual({ temperature: 0.7, topK: 5, topP: 1, logprob: 'raw' });
      expect(r.maxNewTokens).toBe(task.responseLength);
    }
  }, 120_000);

  it('sends save and load an absolute path', async () => {
    const backend = await connectBackend({ command: fake() }, { timeoutMs: 30_000 });
    try {
      const dir = relative(process.cwd(), join(root, 'relative-save'));
      expect(dir.startsWith('/')).toBe(false);
      await backend.save(dir);
      await backend.load(dir);
      expect(existsSync(join(root, 'relative-save', 'fake.json'))).toBe(true);
    } finally {
      await backend.close();
    }
  }, 60_000);

  it("a checkpoint write removes the temps a dead process left beside it (a run still dying when it was resumed), and keeps a live one's", async () => {
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    const parent = join(root, 'stale-temps');
    const stale = join(parent, `step-000005.tmp-${dead.stdout}-0-6`);
    const live = join(parent, `step-000005.tmp-${process.pid}-0-999`);
    mkdirSync(stale, { recursive: true });
    writeFileSync(join(stale, 'backend.json'), '{}');
    mkdirSync(live, { recursive: true });
    const backend = new FakeBackend();
    await saveAtomic(backend, join(parent, 'step-000006'), { version: 2 });
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(live)).toBe(true);
    expect(existsSync(join(parent, 'step-000006', 'checkpoint.json'))).toBe(true);
  });

  it('refuses a checkpoint into which the backend wrote a reserved name, leaving no directory', async () => {
    const backend = new FakeBackend();
    backend.bugs.add('writes-reserved');
    const dir = join(root, 'reserved', 'step-000001');
    await expect(saveAtomic(backend, dir, { version: 2 })).rejects.toThrow(
      /wrote checkpoint\.json .*reserved for the driver/,
    );
    expect(existsSync(dir)).toBe(false);
  });

  it.each([
    [
      'a vocabulary of another size',
      fake('--vocab 14'),
      {},
      /vocabulary\.size: the backend's vocabulary has 14 tokens, task 'reverse' has 13/,
    ],
    ['another EOS id', fake('--vocab 13 --eos 6'), {}, /vocabulary\.eos: the backend's EOS id is 6, qrl-sim's is 2/],
    [
      'another plan',
      fake('--vocab 13'),
      { plan: 'bf16' },
      /plan\.name: the backend serves plan 'fp32', config\.plan is 'bf16'.*plan\.rollout: the backend's rollout side is \{"gemm":\{"kind":"fp32"\}\}, config plan 'bf16' has \{"gemm":\{"kind":"rounding","operands":"bf16"\}\}/,
    ],
    [
      'an ℓroll mode it cannot report',
      fake('--vocab 13'),
      { policy: { ...small.policy, sampler: { logprob: 'raw' } } },
      /capabilities\.logprobs: the backend reports ℓroll as \[processed\], config\.policy\.sampler\.logprob is 'raw'/,
    ],
  ])(
    'exits 2 at start on a backend with %s, naming both values',
    async (name, command, patch, message) => {
      const out = join(root, `mismatch-${name.replace(/\W+/g, '-')}`);
      const r = await runCli([
        'run',
        '--config',
        configFile(`m-${name.replace(/\W+/g, '-')}`, patch),
        '--out',
        out,
        '--backend',
        command,
        '--timeout',
        '30000',
      ]);
      expect(r.code, r.err).toBe(2);
      expect(r.err).toMatch(message);
      expect(existsSync(join(out, 'metrics.jsonl'))).toBe(false);
    },
    60_000,
  );

  it("takes the plan from the backend when config.plan is 'backend', and the report names it", async () => {
    const out = join(root, 'plan-from-backend');
    const numpy = `PYTHONPATH=${join(process.cwd(), 'python')} python3 -m qrl_backend.numpy_ar --plan bf16`;
    const r = await runCli([
      'run',
      '--config',
      configFile('from-backend', { plan: 'backend' }),
      '--out',
      out,
      '--backend',
      numpy,
    ]);
    expect(r.code, r.err).toBe(0);
    const written = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')) as {
      plan: string;
      backend: { plan: string };
    };
    expect(written.plan).toBe('backend');
    expect(written.backend.plan).toBe('bf16');
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toMatch(/plan=bf16/);
    const inproc = await runCli([
      'run',
      '--config',
      configFile('from-backend'),
      '--out',
      join(root, 'plan-from-nothing'),
    ]);
    expect(inproc.code).toBe(0); // plan fp32 in-process is fine
    const bad = await runCli([
      'run',
      '--config',
      configFile('from-backend', { plan: 'backend' }),
      '--out',
      join(root, 'plan-from-nothing-2'),
    ]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/config\.plan: 'backend' takes the plan from the backend's info and needs --backend/);
  }, 120_000);

  it.each([
    ['the warm start hand-over', '--garbage-on load', /^qrl-sim run: warm start, load \(malformed\)/m],
    [
      'the final checkpoint of a 1-step run',
      '--garbage-on save',
      /^qrl-sim run: checkpoint of step 1, save \(malformed\)/m,
    ],
  ])(
    'names where a backend failure happened: %s',
    async (_name, flags, message) => {
      const out = join(root, `label-${flags.replace(/\W+/g, '-')}`);
      const r = await runCli([
        'run',
        '--config',
        configFile(`label-${flags.replace(/\W+/g, '-')}`),
        '--out',
        out,
        '--backend',
        fake(`--vocab 13 ${flags}`),
        '--timeout',
        '30000',
      ]);
      expect(r.code, r.err).toBe(1);
      expect(r.err).toMatch(message);
    },
    60_000,
  );

  it('a backend that declines the weight hand-over gets none: sft.steps 0 starts from its weights, more is exit 2', async () => {
    const declined = await runCli([
      'run',
      '--config',
      configFile('decline'),
      '--out',
      join(root, 'decline'),
      '--backend',
      fake('--vocab 13 --no-handover'),
      '--timeout',
      '30000',
    ]);
    expect(declined.code).toBe(2);
    expect(declined.err).toMatch(
      /config\.sft\.steps: the backend neither warm-starts .* nor takes qrl-sim's weights .*, so sft\.steps must be 0, got 2/,
    );
    const own = await runCli([
      'run',
      '--config',
      configFile('own', { sft: { steps: 0, cache: false } }),
      '--out',
      join(root, 'own'),
      '--backend',
      fake('--vocab 13 --no-handover'),
      '--timeout',
      '30000',
    ]);
    expect(own.code, own.err).toBe(0);
    expect(own.out).toMatch(/warm start: none \(sft\.steps 0\); the backend's own initial weights/);
  }, 60_000);

  it("keys the warm-start cache by the backend's identity (the reference backend keeps its key)", () => {
    const config = resolveRunConfig(small);
    expect(warmStartKey(config, { name: 'qrl-sim reference', version: '1' })).toBe(warmStartKey(config));
    expect(warmStartKey(config, { name: 'my-backend', version: '1' })).not.toBe(warmStartKey(config));
    expect(warmStartKey(config, { name: 'my-backend', version: '2' })).not.toBe(
      warmStartKey(config, { name: 'my-backend', version: '1' }),
    );
    // the command line is part of the identity: another init seed is another warm start
    expect(
      warmStartKey(config, { name: 'my-backend', version: '1', address: 'python3 -m my_backend --init-seed 1' }),
    ).not.toBe(
      warmStartKey(config, { name: 'my-backend', version: '1', address: 'python3 -m my_backend --init-seed 0' }),
    );
    expect(
      warmStartKey(config, { name: 'qrl-sim reference', version: '1', address: 'qrl-sim serve --policy ar --stdio' }),
    ).toBe(warmStartKey(config));
  });

  it('a warm start of 0 steps through qrl-sim serve answers finite metrics (the losses are left out)', async () => {
    const serve = `node ${join(process.cwd(), 'bin/qrl-sim.js')} serve --policy ar --stdio`;
    const r = await runCli([
      'run',
      '--config',
      configFile('sft0', { sft: { steps: 0, cache: false } }),
      '--out',
      join(root, 'sft0'),
      '--backend',
      serve,
    ]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/warm start: 0 supervised steps \(sft\/steps=0\.0000\)/);
  }, 120_000);
});
