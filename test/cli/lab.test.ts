// Tests of `qrl-sim lab`: every experiment spec under sims/lab/ validates, has its page, and runs
// at its smoke size through the same sweep the full experiment uses. Not the findings themselves.

import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { labExperimentNames, loadLabExperiment } from '../../src/runs/index.js';
import { runCli } from './io.js';

const names = labExperimentNames();

describe('qrl-sim lab', () => {
  it('lists every experiment with its runs and estimate', async () => {
    expect(names.length).toBeGreaterThanOrEqual(8);
    const r = await runCli(['lab', 'list']);
    expect(r.code).toBe(0);
    for (const name of names) expect(r.out).toContain(`| ${name} |`);
  });

  it('every experiment has its page, linked from the lab index', () => {
    const index = readFileSync('docs/lab/README.md', 'utf8');
    for (const name of names) {
      const exp = loadLabExperiment(name);
      expect(existsSync(exp.page), exp.page).toBe(true);
      expect(index).toContain(`(${exp.page.slice('docs/lab/'.length)}`); // a second experiment may share a page
      expect(readFileSync(exp.page, 'utf8')).toContain(`qrl-sim lab run ${name}`);
    }
  });

  it('refuses an unknown experiment and a missing verb, with exit 2', async () => {
    expect((await runCli(['lab', 'run', 'nope'])).err).toMatch(/unknown experiment 'nope' \(known: /);
    expect((await runCli(['lab'])).code).toBe(2);
  });

  for (const name of names) {
    it(`runs ${name} at its smoke size`, async () => {
      const out = join(mkdtempSync(join(tmpdir(), 'qrl-lab-')), name);
      const r = await runCli(['lab', 'run', name, '--smoke', '--seeds', '1', '--workers', '1', '--out', out]);
      expect(r.err).not.toMatch(/FAILED|Error/);
      expect(r.code).toBe(0);
      expect(r.out).toContain('smoke run');
      expect(existsSync(join(out, 'report.html'))).toBe(true);
    });
  }
});
