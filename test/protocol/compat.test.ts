// Protocol evolution without breakage (docs/adapter.md §12): a backend written to the 2026-11-25
// revision of qrl-backend/1 (before info.setup; test/fixtures/backends/numpy-2026-11-25, frozen) keeps
// passing backend-check and taking the driver's calls; the negotiation rule as data. Not the battery itself.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { BackendCallError } from '../../src/protocol/errors.js';
import { connectBackend } from '../../src/protocol/remote.js';
import { NEWEST_REVISION, olderRevision, takesField, UNDECLARED_FIELDS } from '../../src/protocol/schema.js';
import { resolveRunConfig } from '../../src/rl/index.js';
import { backendSetup } from '../../src/runs/backend-expect.js';
import { makeTaskFromConfig } from '../../src/tasks/registry.js';

const dir = 'test/fixtures/backends/numpy-2026-11-25';
const frozen = `python3 ${dir}/backend.py`;
const fake = 'node --import tsx test/protocol/fake-backend.ts';

function capture(): { io: Parameters<typeof main>[1]; out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (t) => out.push(t), err: (t) => err.push(t), readStdin: async () => '' }, out, err };
}

function runAndSetup(): { run: unknown; setup: unknown } {
  const config = resolveRunConfig(JSON.parse(readFileSync(`${dir}/run.json`, 'utf8')) as unknown);
  return { run: config, setup: backendSetup(config, makeTaskFromConfig(config.task)) };
}

describe('negotiation of the fields added without a capability', () => {
  it('falls back one revision per refused info field, and only on −32602 naming one', () => {
    expect(NEWEST_REVISION).toBe(3);
    expect(olderRevision(3, -32602, 'setup')).toBe(2);
    expect(olderRevision(3, -32602, 'run')).toBe(1); // a first-revision backend: no run, so no setup either
    expect(olderRevision(2, -32602, 'run')).toBe(1);
    expect(olderRevision(2, -32602, 'setup')).toBeUndefined(); // not sent at revision 2: a real error
    expect(olderRevision(3, -32000, 'setup')).toBeUndefined(); // refused for its value (e.g. another run's setup)
    expect(olderRevision(3, -32602, 'setup.model')).toBeUndefined();
    expect(olderRevision(3, -32602, 'protocols')).toBeUndefined();
    expect(takesField(2, 'generate', 'maxNewTokens')).toBe(false);
    expect(takesField(2, 'info', 'run')).toBe(true);
    expect(takesField(1, 'generate', 'sampling')).toBe(true); // in the first revision
    for (const f of UNDECLARED_FIELDS)
      expect(takesField(f.revision, f.method, f.field) && !takesField(f.revision - 1, f.method, f.field)).toBe(true);
  });
});

describe('a backend written to the 2026-11-25 revision (frozen fixture)', () => {
  it('is strict: refuses info.setup and generate.maxNewTokens as unknown fields, naming them', async () => {
    const backend = await connectBackend({ command: frozen }, { timeoutMs: 60_000 });
    try {
      const setup = await backend.raw('info', { protocols: ['qrl-backend/1'], setup: {} }).catch((e: unknown) => e);
      expect(setup).toBeInstanceOf(BackendCallError);
      expect(setup).toMatchObject({
        code: -32602,
        field: 'setup',
        message: expect.stringContaining('setup: unknown field'),
      });
      const long = await backend
        .raw('generate', { prompts: [[1, 5, 3]], seed: 's', maxNewTokens: 4 })
        .catch((e: unknown) => e);
      expect(long).toMatchObject({ code: -32602, field: 'maxNewTokens' });
    } finally {
      await backend.close();
    }
  }, 60_000);

  it("takes the run driver's info (run and setup) and generate (sampling, maxNewTokens): the client leaves out what it refused", async () => {
    const backend = await connectBackend({ command: frozen }, { timeoutMs: 60_000, ...runAndSetup() });
    try {
      expect(backend.paramsRevision).toBe(2);
      expect(backend.lastInfo?.backend.name).toBe('numpy-2026-11-25');
      expect((await backend.info()).plan.name).toBe('fp64'); // again: no second refusal
      await backend.sync();
      const batch = await backend.generate({
        prompts: [
          [1, 5, 6, 3],
          [1, 7, 8, 3],
        ],
        seed: '0/step/0/rollout',
        maxNewTokens: 5,
        sampling: { temperature: 1, topK: 0, topP: 1, logprob: 'processed' },
      });
      expect(batch.B).toBe(2);
    } finally {
      await backend.close();
    }
  }, 60_000);

  it('passes qrl-sim backend-check --config (the run and setup sent, setup refused, negotiated)', async () => {
    const c = capture();
    const code = await main(
      ['backend-check', '--backend', frozen, '--config', `${dir}/run.json`, '--batch', '4'],
      c.io,
    );
    const table = c.out.join('\n');
    expect(code, `${table}\n${c.err.join('\n')}`).toBe(0);
    expect(table).toMatch(/conformance: all \d+ checks passed/);
    expect(table).toMatch(
      /params revision +info +written to revision 2 \(refused info\.setup as unknown\): the client leaves out info\.setup, generate\.maxNewTokens/,
    );
    expect(table).toMatch(/info answers the same twice +ok/);
  }, 120_000);
});

describe("today's backends", () => {
  it('get every field: the TypeScript server takes run and setup (revision 3)', async () => {
    const backend = await connectBackend({ command: fake }, { timeoutMs: 60_000, ...runAndSetup() });
    try {
      expect(backend.paramsRevision).toBe(NEWEST_REVISION);
    } finally {
      await backend.close();
    }
  }, 60_000);
});

describe('the SDK and numpy backend of the 2026-11-25 revision (test/fixtures/backends/qrl_backend-2026-11-25, frozen)', () => {
  it('runs a whole GRPO run unchanged: warm-start hand-over, steps, evaluations, checkpoints', async () => {
    const { mkdtempSync, rmSync, writeFileSync, existsSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const root = mkdtempSync(join(tmpdir(), 'qrl-frozen-sdk-'));
    try {
      const config = join(root, 'run.json');
      writeFileSync(
        config,
        JSON.stringify({
          seed: 0,
          steps: 2,
          task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
          policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
          sft: { steps: 2, batchSize: 8, cache: false },
          rollout: { prompts: 2, groupSize: 2 },
          eval: { every: 1, problems: 2 },
          checkpoint: { every: 1 },
          plan: 'fp32',
        }),
      );
      const sdk = join(process.cwd(), 'test/fixtures/backends/qrl_backend-2026-11-25');
      const backend = `PYTHONPATH=${sdk} python3 -m qrl_backend.numpy_ar --config '{"vocabSize":13,"maxLen":11,"C":16,"H":2,"layers":1,"hidden":32}' --plan fp32`;
      const c = capture();
      const code = await main(['run', '--config', config, '--out', join(root, 'out'), '--backend', backend], c.io);
      expect(code, c.err.join('\n')).toBe(0);
      expect(
        readFileSync(join(root, 'out', 'metrics.jsonl'), 'utf8')
          .trim()
          .split('\n'),
      ).toHaveLength(2);
      expect(existsSync(join(root, 'out', 'checkpoints'))).toBe(true);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }, 120_000);
});
