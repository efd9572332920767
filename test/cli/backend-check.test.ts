// `qrl-sim backend-check`: passes on the numpy AR backend (fp32 and bf16) and on the in-test fake,
// fails (exit 1, the row named, saying what differed) on a fake with exactly one bug: a step that
// does not advance the weight version, a gradient of the wrong sign, a handle never spent, a load that
// skips the optimizer state, a declared entropy omitted; on one that answers garbage; and checks
// the plan and vocabulary against --config.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';

function capture(): { io: Parameters<typeof main>[1]; out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (t) => out.push(t), err: (t) => err.push(t), readStdin: async () => '' }, out, err };
}

const numpy = (plan: string): string =>
  `PYTHONPATH=python python3 -m qrl_backend.numpy_ar --config '{"vocabSize":13,"maxLen":12,"C":16,"H":2,"layers":1,"hidden":32}' --max-new-tokens 6 --plan ${plan}`;
const fake = (flags = ''): string => `node --import tsx test/protocol/fake-backend.ts ${flags}`;

describe('qrl-sim backend-check', () => {
  it.each(['fp32', 'bf16'])(
    'passes on the numpy AR backend (%s)',
    async (plan) => {
      const c = capture();
      const code = await main(['backend-check', '--backend', numpy(plan), '--batch', '4'], c.io);
      const table = c.out.join('\n');
      expect(code, table).toBe(0);
      expect(table).toMatch(/conformance: all \d+ checks passed/);
      expect(table).toMatch(/ℓroll vs ℓ \(same sides.*ok +tokens \d+, k1 /);
      expect(table).toMatch(/probSqSum capability +ok +declared and returned: Σπ² in \[π\(y\)², 1\]/);
      // capabilities.topkLogprobs, declared by numpy_ar: its three rows ran and passed
      expect(table).toMatch(/top-k ids are the engine’s most likely +ok +K = 13: ordered by ℓ/);
      expect(table).toMatch(/sampled token in the support +ok/);
      expect(table).toMatch(/trainer ℓ at the top-k ids +ok/);
    },
    120_000,
  );

  it('passes on the in-test fake backend', async () => {
    const c = capture();
    expect(await main(['backend-check', '--backend', fake()], c.io), c.out.join('\n')).toBe(0);
    expect(c.out.join('\n')).toMatch(/probSqSum capability +info +not declared/);
  }, 120_000);

  it('exits 1 naming the violated check', async () => {
    const c = capture();
    const code = await main(['backend-check', '--backend', fake('--stale-version'), '--json'], c.io);
    expect(code).toBe(1);
    const { rows } = JSON.parse(c.out.join('')) as { rows: { check: string; status: string; detail: string }[] };
    const failed = rows.filter((r) => r.status === 'FAIL').map((r) => r.check);
    expect(failed).toContain('weight version advances after step');
    expect(failed).toContain('sync serves the new version');
  }, 120_000);

  it.each([
    [
      '--wrong-sign',
      'gradient direction (finite difference)',
      /moved mean ℓ .* → .*: the gradient points the wrong way; backward must accumulate \+∂\(Σ gradLogp·ℓ\)\/∂θ/,
    ],
    ['--no-spend', 'spent handle refused', /backward must spend its handle; a second backward on it was accepted/],
    [
      '--load-skips-optimizer',
      'save → step → load → step (optimizer state)',
      /the step after load gives other weights than the same step after save \(ℓ differs at \d+ of \d+ positions, max \|Δ\| .*\): load does not restore the optimizer state/,
    ],
    ['--omit-entropy', 'entropy capability', /capabilities\.entropy is true but logprobs returned no entropy/],
  ])(
    'catches a backend with exactly one bug (%s): that row fails with what differed',
    async (flag, check, detail) => {
      const c = capture();
      const code = await main(['backend-check', '--backend', fake(flag), '--json'], c.io);
      expect(code).toBe(1);
      const { rows } = JSON.parse(c.out.join('')) as { rows: { check: string; status: string; detail: string }[] };
      const failed = rows.filter((r) => r.status === 'FAIL');
      expect(failed.map((r) => r.check)).toEqual([check]);
      expect(failed[0]!.detail).toMatch(detail);
      expect(failed[0]!.detail).not.toMatch(/Invalid input/);
    },
    120_000,
  );

  it('passes a backend that declares no entropy and omits it', async () => {
    const c = capture();
    expect(await main(['backend-check', '--backend', fake('--no-entropy')], c.io), c.out.join('\n')).toBe(0);
    expect(c.out.join('\n')).toMatch(/entropy capability +ok +not declared and omitted/);
  }, 120_000);

  it('checks the plan and vocabulary against --config, sending the run so a backend builds itself from it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qrl-bc-config-'));
    try {
      const file = join(dir, 'run.json');
      writeFileSync(
        file,
        JSON.stringify({
          task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
          policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
          plan: 'fp32',
        }),
      );
      const bad = capture();
      expect(await main(['backend-check', '--backend', fake('--vocab 14'), '--config', file], bad.io)).toBe(1);
      expect(bad.out.join('\n')).toMatch(
        /plan and vocabulary against the run config +FAIL +vocabulary\.size: the backend's vocabulary has 14 tokens, task 'reverse' has 13/,
      );
      const good = capture();
      const code = await main(
        [
          'backend-check',
          '--backend',
          'PYTHONPATH=python python3 -m qrl_backend.numpy_ar',
          '--config',
          file,
          '--batch',
          '4',
        ],
        good.io,
      );
      expect(code, good.out.join('\n')).toBe(0);
      expect(good.out.join('\n')).toMatch(
        /plan and vocabulary against the run config +ok +policy ar, plan fp32, vocabulary 13/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it("passes the project's own serve backend with a top-k sampler in --config (processed ℓroll is not compared with the full-vocabulary ℓ)", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qrl-bc-topk-'));
    try {
      const file = join(dir, 'run.json');
      const sampler = { temperature: 0.8, topK: 4, logprob: 'processed' };
      writeFileSync(
        file,
        JSON.stringify({
          task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
          policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 16 }, sampler },
          plan: 'bf16',
        }),
      );
      const c = capture();
      const code = await main(
        [
          'backend-check',
          '--backend',
          `node ${join(process.cwd(), 'bin/qrl-sim.js')} serve --policy ar --stdio`,
          '--config',
          file,
          '--batch',
          '4',
        ],
        c.io,
      );
      expect(code, c.out.join('\n')).toBe(0);
      expect(c.out.join('\n')).toMatch(/ℓroll vs ℓ \(not the same quantity\) +info .*τ 0\.8, top-k 4/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  // numpy_ar started with a processed sampler of its own (--top-k/--top-p/--temperature flags): the
  // battery asks for the sampler it compares under (the config's, else the untouched one) in every
  // generate, as `run` does, so the backend's own default never stands in for it.
  it.each([
    ['fp32', '--top-k 4 --top-p 0.9'],
    ['bf16', '--top-k 3'],
    ['fp32', '--temperature 0.7 --top-p 0.5'],
  ])(
    'passes numpy_ar (%s) started with %s: the battery sends its sampler, ℓroll vs ℓ compared',
    async (plan, flags) => {
      const c = capture();
      const code = await main(['backend-check', '--backend', `${numpy(plan)} ${flags}`, '--batch', '4'], c.io);
      const table = c.out.join('\n');
      expect(code, table).toBe(0);
      expect(table).toMatch(/ℓroll vs ℓ \(same sides.*ok +tokens \d+, k1 /);
      expect(table).toMatch(/trainer-side generate scored by the trainer +ok/);
    },
    120_000,
  );

  it('names the refusal when a backend refuses the battery’s sampler and its own is processed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qrl-bc-refused-'));
    try {
      const file = join(dir, 'run.json');
      writeFileSync(
        file,
        JSON.stringify({
          task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
          policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 16 }, sampler: { topK: 4 } },
          plan: 'bf16',
        }),
      );
      const c = capture();
      // serve's reference backend samples with its configured sampler only; the check is not told it
      const backend = `node ${join(process.cwd(), 'bin/qrl-sim.js')} serve --policy ar --stdio --config ${file}`;
      const code = await main(['backend-check', '--backend', backend, '--batch', '4', '--json'], c.io);
      expect(code).toBe(1);
      const { rows } = JSON.parse(c.out.join('')) as { rows: { check: string; status: string; detail: string }[] };
      const failed = rows.filter((r) => r.status === 'FAIL');
      expect(failed.map((r) => r.check)).toEqual([
        'ℓroll vs ℓ (same sides, max|δ| ≤ 0.0001)',
        'trainer-side generate scored by the trainer',
      ]);
      for (const r of failed)
        expect(r.detail).toContain(
          'the backend refused sampling {"temperature":1,"topK":0,"topP":1,"logprob":"processed"}',
        );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it.each([
    [
      '',
      'ok',
      /killed at step 2 of 3, resumed from the checkpoint of step 1: metrics\.jsonl and eval\.jsonl byte-identical/,
    ],
    [
      '--load-skips-optimizer',
      'FAIL',
      /metrics\.jsonl differs at line 2 after the kill at step 2 and the resume: [a-z_/]+ \S+ resumed vs \S+ uninterrupted/,
    ],
  ])(
    '--kill-resume kills the backend mid-run, resumes and compares the files (%s)',
    async (flag, status, detail) => {
      const dir = mkdtempSync(join(tmpdir(), 'qrl-bc-kill-'));
      try {
        const file = join(dir, 'run.json');
        writeFileSync(
          file,
          JSON.stringify({
            steps: 3,
            task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
            policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
            sft: { steps: 2, batchSize: 8 },
            rollout: { prompts: 2, groupSize: 2 },
            eval: { every: 1, problems: 2 },
            plan: 'fp32',
          }),
        );
        const c = capture();
        const code = await main(
          ['backend-check', '--backend', fake(`--vocab 13 ${flag}`), '--config', file, '--kill-resume', '--json'],
          c.io,
        );
        expect(code).toBe(status === 'ok' ? 0 : 1);
        const { rows } = JSON.parse(c.out.join('')) as { rows: { check: string; status: string; detail: string }[] };
        const row = rows.find((r) => r.check === 'kill → resume: files byte-identical');
        expect(row?.status).toBe(status);
        expect(row?.detail).toMatch(detail);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );

  it('exits 1 on a backend that answers garbage', async () => {
    const c = capture();
    const code = await main(['backend-check', '--backend', fake('--garbage-on logprobs')], c.io);
    expect(code).toBe(1);
    expect(c.out.join('\n')).toMatch(/entropy capability +FAIL .*not JSON/); // the first logprobs call
  }, 120_000);

  it('exits 2 without --backend', async () => {
    const c = capture();
    expect(await main(['backend-check'], c.io)).toBe(2);
    expect(c.err.join('')).toMatch(/--backend/);
  });
});
