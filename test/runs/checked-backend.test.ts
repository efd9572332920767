// The run driver's response checks (src/runs/checked-backend.ts): each impossible answer a backend
// can give stops the run with a BackendCallError naming method, field, row and position, before
// anything of that step is written; resuming on a healthy backend then gives the metrics of an
// uninterrupted run byte for byte.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type {
  GenerateRequest,
  LogprobsRequest,
  LogprobsResult,
  RolloutBatch,
  StepRequest,
  StepResult,
} from '../../src/core/backend-contract.js';
import { ReferenceBackend } from '../../src/backend/reference.js';
import { BackendCallError } from '../../src/protocol/errors.js';
import { resolveRunConfig, type RunConfig } from '../../src/rl/grpo/config.js';
import { CheckedBackend } from '../../src/runs/checked-backend.js';
import { policyFactory } from '../../src/runs/policies.js';
import { runGrpo } from '../../src/runs/run.js';
import { makeTaskFromConfig } from '../../src/tasks/registry.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-checked-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const configOf = (steps: number): RunConfig =>
  resolveRunConfig({
    steps,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 16 } },
    sft: { steps: 2, batchSize: 8, cache: false },
    rollout: { prompts: 2, groupSize: 2 },
    eval: { every: 1, problems: 2 },
    checkpoint: { every: 1 },
    plan: 'bf16',
  });

type Corrupt = {
  generate?: (b: RolloutBatch) => RolloutBatch;
  logprobs?: (r: LogprobsResult, q: LogprobsRequest) => LogprobsResult;
  step?: (s: StepResult) => StepResult;
};

/** A reference backend whose answers pass through `corrupt` from step 2's rollout on (after the step-1 checkpoint). */
class Corrupted extends ReferenceBackend {
  armed = false;
  constructor(
    config: RunConfig,
    private readonly corrupt: Corrupt,
  ) {
    super(config, policyFactory('ar'), makeTaskFromConfig(config.task));
  }
  override async generate(r: GenerateRequest): Promise<RolloutBatch> {
    if (/\/step\/2\//.test(r.seed)) this.armed = true;
    const b = await super.generate(r);
    return this.armed && this.corrupt.generate ? this.corrupt.generate(b) : b;
  }
  override async logprobs(q: LogprobsRequest): Promise<LogprobsResult> {
    const r = await super.logprobs(q);
    return this.armed && this.corrupt.logprobs ? this.corrupt.logprobs(r, q) : r;
  }
  override async step(q: StepRequest): Promise<StepResult> {
    const s = await super.step(q);
    return this.armed && this.corrupt.step ? this.corrupt.step(s) : s;
  }
}

/** The first masked position of a batch's row 1. */
const onMask = (b: RolloutBatch): number => b.T * 1;
const setAt = (a: Float64Array, i: number, v: number): Float64Array => {
  const c = Float64Array.from(a);
  c[i] = v;
  return c;
};

const impossible: Record<string, { corrupt: Corrupt; message: RegExp }> = {
  '−∞ ℓroll': {
    corrupt: { generate: (b) => ({ ...b, logpRollout: setAt(b.logpRollout, onMask(b), -Infinity) }) },
    message: /generate result\.logpRollout \(row 1, position 0\): logpRollout\[1, 0\] = -Infinity on the mask/,
  },
  'ℓ off the mask': {
    corrupt: {
      logprobs: (r, q) => {
        const T = q.batch.T;
        let i = 0;
        while (i < r.logp.length && q.batch.mask[q.rows[Math.floor(i / T)]! * T + (i % T)] === 1) i++;
        return i < r.logp.length ? { ...r, logp: setAt(r.logp, i, -0.5) } : r;
      },
    },
    message: /logprobs result\.logp \(row \d+, position \d+\): logp\[\d+, \d+\] = -0\.5 off the mask/,
  },
  'NaN entropy': {
    corrupt: { logprobs: (r) => ({ ...r, entropy: setAt(r.entropy, 0, Number.NaN) }) },
    message: /logprobs result\.entropy \(row 0, position 0\): entropy\[0, 0\] = NaN on the mask/,
  },
  'inflated weight version': {
    corrupt: { generate: (b) => ({ ...b, weightVersion: b.weightVersion + 5 }) },
    message: /generate result\.weightVersion: weightVersion \d+, but the rollout side serves version \d+/,
  },
  'token outside the vocabulary': {
    corrupt: { generate: (b) => ({ ...b, responses: Int32Array.from(b.responses, (y, i) => (i === 0 ? 999 : y)) }) },
    message: /generate result\.responses \(row 0, position 0\): responses\[0, 0\] = 999 outside the vocabulary/,
  },
  'a mask with a hole': {
    corrupt: {
      generate: (b) => ({
        ...b,
        mask: Float64Array.from(b.mask, (m, i) => (i === 0 ? 0 : m)),
        logpRollout: setAt(b.logpRollout, 0, 0),
      }),
    },
    message: /generate result\.mask \(row 0, position 1\): mask\[0, 1\] = 1 after a 0 at position 0/,
  },
  'version not advanced by step': {
    corrupt: { step: (s) => ({ ...s, weightVersion: s.weightVersion - 1 }) },
    message: /step result\.weightVersion: weightVersion \d+ after the step, expected \d+/,
  },
  'NaN gradient norm': {
    corrupt: { step: (s) => ({ ...s, gradNorm: Number.NaN }) },
    message: /step result\.gradNorm: gradNorm = NaN/,
  },
};

describe('the run driver stops on an impossible answer', () => {
  const healthy = join(root, 'healthy');
  it('(an uninterrupted healthy run, the reference)', async () => {
    const config = configOf(3);
    const backend = new ReferenceBackend(config, policyFactory('ar'), makeTaskFromConfig(config.task));
    await runGrpo({
      config,
      outDir: healthy,
      backend: new CheckedBackend(backend, 'healthy'),
      backendIdentity: { address: 'healthy' },
      cacheDir: join(root, 'cache'),
    });
  }, 120_000);

  it.each(Object.keys(impossible))(
    '%s: named, nothing of the step written, resumable byte-identically',
    async (name) => {
      const { corrupt, message } = impossible[name]!;
      const config = configOf(3);
      const outDir = join(root, name.replace(/\W+/g, '-'));
      const bad = new Corrupted(config, corrupt);
      const error = await runGrpo({
        config,
        outDir,
        backend: new CheckedBackend(bad, 'corrupted'),
        backendIdentity: { address: 'healthy' },
        cacheDir: join(root, 'cache'),
      }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BackendCallError);
      expect((error as BackendCallError).message).toMatch(message);
      expect((error as BackendCallError).kind).toBe('malformed');
      // step 1 and its checkpoint are written, nothing of the step that got the impossible answer
      const lines = readFileSync(join(outDir, 'metrics.jsonl'), 'utf8').trim().split('\n');
      expect(lines.map((l) => (JSON.parse(l) as { step: number }).step)).toEqual([1]);
      const fixed = new ReferenceBackend(config, policyFactory('ar'), makeTaskFromConfig(config.task));
      await runGrpo({
        config,
        outDir,
        resume: true,
        backend: new CheckedBackend(fixed, 'healthy'),
        backendIdentity: { address: 'healthy' },
        cacheDir: join(root, 'cache'),
      });
      for (const file of ['metrics.jsonl', 'eval.jsonl'])
        expect(readFileSync(join(outDir, file), 'utf8')).toBe(readFileSync(join(healthy, file), 'utf8'));
    },
    120_000,
  );
});
