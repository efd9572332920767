// qrl-sim run --backend: through `qrl-sim serve --stdio` the metrics are byte-identical to the
// in-process run; a backend that dies, hangs or answers garbage mid-run stops the run with one line
// naming the backend, the method and the step, leaves whole files, and --resume finishes the run
// (byte-identical again) once the backend is back. Spawns bin/qrl-sim.js (run `npm run build` first).

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from './io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-run-backend-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const small = {
  steps: 4,
  task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
  policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
  sft: { steps: 5, batchSize: 8, cache: false },
  rollout: { prompts: 2, groupSize: 4 },
  eval: { every: 2, problems: 4 },
  checkpoint: { every: 1 },
};
const configPath = join(root, 'small.json');
const serve = `node ${join(process.cwd(), 'bin/qrl-sim.js')} serve --policy ar --stdio`;
const faulty = (mode: string, method: string, n: number): string =>
  `node --import tsx ${join(process.cwd(), 'test/protocol/faulty-proxy.ts')} ${mode} ${method} ${n} -- ${serve}`;
const read = (dir: string, file: string): string => readFileSync(join(dir, file), 'utf8');
let reference = '';
let referenceEval = '';

beforeAll(async () => {
  writeFileSync(configPath, JSON.stringify(small));
  const r = await runCli(['run', '--config', configPath, '--out', join(root, 'inproc')]);
  expect(r.code, r.err).toBe(0);
  reference = read(join(root, 'inproc'), 'metrics.jsonl');
  referenceEval = read(join(root, 'inproc'), 'eval.jsonl');
}, 300_000);

describe('qrl-sim run --backend', () => {
  it('through qrl-sim serve --stdio writes metrics.jsonl byte-identical to the in-process run', async () => {
    const out = join(root, 'served');
    const r = await runCli(['run', '--config', configPath, '--out', out, '--backend', serve]);
    expect(r.code, r.err).toBe(0);
    expect(read(out, 'metrics.jsonl')).toBe(reference);
    expect(read(out, 'eval.jsonl')).toBe(referenceEval);
    const config = JSON.parse(read(out, 'config.json')) as { backend: Record<string, string> };
    expect(config.backend).toMatchObject({
      address: serve,
      name: 'qrl-sim reference',
      protocol: 'qrl-backend/1',
      policy: 'ar',
      plan: 'bf16',
    });
  }, 300_000);

  it.each([
    ['dies', 'die', '', /step \(exit\): backend '.*': the connection closed; exit code 3.*\(during step\)/],
    [
      'hangs',
      'hang',
      '--timeout 4000 --startup-timeout 60000',
      /step \(timeout\): backend '.*': no answer to step within 4000 ms/,
    ],
    [
      'answers garbage',
      'garbage',
      '',
      /step \(malformed\): backend '.*': sent a line that is not JSON.*\(during step\)/,
    ],
  ])(
    'a backend that %s mid-run: one line, whole files, --resume finishes byte-identical',
    async (_name, mode, timeout, message) => {
      const out = join(root, `fault-${mode}`);
      const args = [
        'run',
        '--config',
        configPath,
        '--out',
        out,
        '--backend',
        faulty(mode, 'step', 3),
        ...(timeout === '' ? [] : timeout.split(' ')),
      ];
      const r = await runCli(args);
      expect(r.code).toBe(1);
      const lines = r.err
        .trim()
        .split('\n')
        .filter((l) => l.startsWith('qrl-sim run:'));
      expect(lines).toHaveLength(1);
      const metrics = read(out, 'metrics.jsonl');
      expect(metrics.endsWith('\n')).toBe(true);
      const steps = metrics
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { step: number }).step);
      expect(steps.length).toBeGreaterThan(0);
      expect(steps.length).toBeLessThan(small.steps);
      expect(steps).toEqual(steps.map((_, i) => i + 1));
      expect(lines[0]).toMatch(new RegExp(`^qrl-sim run: step ${steps.length + 1}, `));
      expect(lines[0]).toMatch(/faulty-proxy\.ts/);
      expect(lines[0]).toMatch(message);
      expect(lines[0]).toMatch(/resume with: qrl-sim run --resume /);
      expect(reference.startsWith(metrics)).toBe(true);
      const resumed = await runCli(['run', '--resume', out, '--backend', serve]);
      expect(resumed.code, resumed.err).toBe(0);
      expect(read(out, 'metrics.jsonl')).toBe(reference);
      expect(read(out, 'eval.jsonl')).toBe(referenceEval);
    },
    300_000,
  );
});
