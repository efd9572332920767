// Sampling-support replay against a backend the driver does not own: an AR backend must declare
// capabilities.supportReplay for a run that replays a cut support (else the run is refused at info,
// exit 2, nothing written), and a diffusion batch of such a run must carry the record's `support`
// (else the driver stops at that generate, naming result.record.support).

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { GenerateRequest, RolloutBatch } from '../../src/core/backend-contract.js';
import { ReferenceBackend } from '../../src/backend/reference.js';
import { BackendCallError } from '../../src/protocol/errors.js';
import { replaysSupport, resolveRunConfig } from '../../src/rl/grpo/config.js';
import { backendMismatches } from '../../src/runs/backend-expect.js';
import { CheckedBackend } from '../../src/runs/checked-backend.js';
import { policyFactory } from '../../src/runs/policies.js';
import { makeTaskFromConfig } from '../../src/tasks/registry.js';
import { runCli } from '../cli/io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-support-replay-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const raw = (kind: 'ar' | 'diffusion', sampler: object) => ({
  steps: 1,
  task: { name: 'reverse', options: { minLength: 2, maxLength: 3 } },
  policy: {
    kind,
    model: { C: 16, H: 2, layers: 1, hidden: 16 },
    sampler,
    ...(kind === 'diffusion' ? { diffusion: { generationLength: 8, blockLength: 4, steps: 4 } } : {}),
  },
  sft: { steps: 0 },
  rollout: { prompts: 2, groupSize: 2 },
  plan: 'bf16',
});

describe('replaysSupport and backendMismatches', () => {
  it('asks an AR backend for capabilities.supportReplay exactly when a cut support is replayed', async () => {
    const cases: [object, boolean][] = [
      [{ topK: 4, supportReplay: true }, true],
      [{ topP: 0.9, supportReplay: true }, true],
      [{ supportReplay: true }, false], // nothing cut: nothing to replay
      [{ topK: 4 }, false],
    ];
    for (const [sampler, replayed] of cases) {
      const config = resolveRunConfig(raw('ar', sampler));
      const task = makeTaskFromConfig(config.task);
      expect(replaysSupport(config), JSON.stringify(sampler)).toBe(replayed);
      const info = await new ReferenceBackend(config, policyFactory('ar'), task).info();
      expect(info.capabilities.supportReplay).toBe(true);
      expect(backendMismatches(info, config, task)).toEqual([]);
      const { supportReplay: _, ...older } = info.capabilities;
      const refused = backendMismatches({ ...info, capabilities: older }, config, task);
      expect(refused).toEqual(
        replayed ? [expect.stringMatching(/^capabilities\.supportReplay: the backend does not replay/)] : [],
      );
    }
  });

  it('asks a diffusion backend for nothing (its record carries the support)', async () => {
    const config = resolveRunConfig(raw('diffusion', { topK: 4, supportReplay: true }));
    const task = makeTaskFromConfig(config.task);
    const info = await new ReferenceBackend(config, policyFactory('diffusion'), task).info();
    expect(info.capabilities.supportReplay).toBeUndefined();
    expect(backendMismatches(info, config, task)).toEqual([]);
  });
});

describe('CheckedBackend under a replayed support', () => {
  const config = resolveRunConfig(raw('diffusion', { topK: 4, supportReplay: true }));
  const task = makeTaskFromConfig(config.task);
  const prompts = task.trainProblems(2, 0).map((p) => [...p.prompt]);

  class Dropping extends ReferenceBackend {
    override async generate(r: GenerateRequest): Promise<RolloutBatch> {
      const b = await super.generate(r);
      const record = { ...b.record } as Record<string, unknown>;
      delete record.support;
      return { ...b, record: record as RolloutBatch['record'] };
    }
  }

  it('passes a diffusion batch that carries record.support', async () => {
    const checked = new CheckedBackend(new ReferenceBackend(config, policyFactory('diffusion'), task), 'healthy', {
      replaysSupport: true,
    });
    await checked.sync();
    const b = await checked.generate({ prompts, seed: 's' });
    expect((b.record as { support?: unknown }).support).toBeInstanceOf(Uint8Array);
  });

  it('stops at a diffusion batch without record.support, naming the field', async () => {
    const checked = new CheckedBackend(new Dropping(config, policyFactory('diffusion'), task), 'dropping', {
      replaysSupport: true,
    });
    await checked.sync();
    const error = await checked.generate({ prompts, seed: 's' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendCallError);
    expect((error as BackendCallError).field).toBe('result.record.support');
    expect((error as Error).message).toMatch(/generate result\.record\.support: is absent, .*supportReplay/);
    // greedy batches (evaluation) and runs that replay nothing are not asked
    await expect(checked.generate({ prompts, seed: 's', greedy: true })).resolves.toBeDefined();
    const unchecked = new CheckedBackend(new Dropping(config, policyFactory('diffusion'), task), 'dropping');
    await unchecked.sync();
    await expect(unchecked.generate({ prompts, seed: 's' })).resolves.toBeDefined();
  });
});

describe('qrl-sim run --backend with supportReplay', () => {
  it('refuses an AR backend without capabilities.supportReplay (numpy_ar of 2026-11-25) under top-k 4 with exit 2, writing nothing', async () => {
    const path = join(root, 'ar.json');
    writeFileSync(path, JSON.stringify(raw('ar', { topK: 4, supportReplay: true })));
    const out = join(root, 'ar-out');
    const sdk = join(process.cwd(), 'test/fixtures/backends/qrl_backend-2026-11-25');
    const model = JSON.stringify({ vocabSize: 13, maxLen: 9, C: 16, H: 2, layers: 1, hidden: 16 });
    const backend = `PYTHONPATH=${sdk} python3 -m qrl_backend.numpy_ar --config '${model}' --plan fp32`;
    const r = await runCli(['run', '--config', path, '--out', out, '--backend', backend, '--no-report']);
    expect(r.code, r.err).toBe(2);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toMatch(/capabilities\.supportReplay: the backend does not replay the sampling support/);
    expect(existsSync(join(out, 'metrics.jsonl'))).toBe(false);
  }, 60_000);

  it('trains on numpy_ar, which replays the support: ℓold is ℓroll on the same sides, byte-identical on a rerun', async () => {
    const path = join(root, 'ar-replay.json');
    writeFileSync(path, JSON.stringify({ ...raw('ar', { topK: 4, supportReplay: true }), steps: 2, seed: 1 }));
    const backend = `PYTHONPATH=${join(process.cwd(), 'python')} python3 -m qrl_backend.numpy_ar`;
    const lines: string[] = [];
    for (const name of ['np-a', 'np-b']) {
      const r = await runCli(['run', '--config', path, '--out', join(root, name), '--backend', backend, '--no-report']);
      expect(r.code, r.err).toBe(0);
      lines.push(readFileSync(join(root, name, 'metrics.jsonl'), 'utf8'));
    }
    expect(lines[1]).toBe(lines[0]);
    const steps = lines[0]!
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number>);
    expect(steps).toHaveLength(2);
    // bf16 on both sides and ℓold taken right after the sync: the replayed ℓold is the rollout's ℓroll
    // up to the rounding of the recompute; without the replay it differs by log of the kept mass
    for (const m of steps) expect(m['mismatch/seq_log_ratio_abs_max']!).toBeLessThan(1e-3);
  }, 120_000);

  it('stops a diffusion run at the first batch whose record lacks the support (exit 1, field named)', async () => {
    const path = join(root, 'diffusion.json');
    writeFileSync(path, JSON.stringify(raw('diffusion', { topK: 4, supportReplay: true })));
    const fixture = join(process.cwd(), 'test/fixtures/backends/sdk_diffusion_mutant.py');
    const out = join(root, 'diffusion-out');
    const backend = `python3 ${fixture} --mutant support-not-recorded`;
    const r = await runCli(['run', '--config', path, '--out', out, '--backend', backend, '--no-report']);
    expect(r.code, r.err).toBe(1);
    expect(r.err).toMatch(/impossible generate result\.record\.support: is absent/);
    // the unmutated numpy_diffusion records it and the run finishes
    const ok = await runCli([
      'run',
      '--config',
      path,
      '--out',
      join(root, 'diffusion-ok'),
      '--backend',
      `PYTHONPATH=${join(process.cwd(), 'python')} python3 -m qrl_backend.numpy_diffusion`,
      '--no-report',
    ]);
    expect(ok.code, ok.err).toBe(0);
  }, 120_000);
});
