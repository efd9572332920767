// The bit-identical pin: every sim under sims/, run short, must reproduce the recorded sha256 of its
// metrics.jsonl and eval.jsonl. Not a test of what the numbers mean (the other suites do that).

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FIXTURE, pinRun, sims } from './pin-runs.js';

const work = mkdtempSync(join(tmpdir(), 'qrl-pin-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const fixture = JSON.parse(readFileSync(FIXTURE, 'utf8')) as Record<string, { metrics: string; eval: string }>;

describe('bit-identical pin of every sim', () => {
  it('covers every config under sims/', () => {
    expect(Object.keys(fixture).sort()).toEqual(sims());
  });
  for (const sim of sims()) {
    it(`${sim}: metrics.jsonl and eval.jsonl byte for byte`, { timeout: 600_000 }, async () => {
      const r = await pinRun(sim, work);
      expect({ metrics: r.metrics, eval: r.eval }).toEqual(fixture[sim]);
    });
  }
});
