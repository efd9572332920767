import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fillMarkers, generatedDocs, labDocs } from '../scripts/doc-tables.js';
import { labPlannedRuns, labSizeText } from '../src/cli/lab.js';
import { loadLabExperiment } from '../src/runs/lab.js';
import { fillGoldenTable, GOLDEN_DOC, goldenSuiteStats } from '../scripts/golden-docs.js';

describe('generated documentation tables', () => {
  it.each(Object.entries(generatedDocs()))('%s embeds the tables generated from the code (regenerate: npx tsx scripts/doc-tables.ts)', (path, blocks) => {
    const text = readFileSync(path, 'utf8');
    expect(fillMarkers(text, blocks)).toBe(text);
  });
});

describe('the lab pages\' runs and estimates', () => {
  it('are those of sims/lab/*.json (regenerate: npx tsx scripts/doc-tables.ts)', async () => {
    for (const [path, blocks] of Object.entries(await labDocs())) {
      const text = readFileSync(path, 'utf8');
      expect(fillMarkers(text, blocks), path).toBe(text);
    }
  }, 120_000);

  it('a stale estimate is caught', async () => {
    const exp = loadLabExperiment('alignment');
    const runs = await labPlannedRuns(exp);
    const page = fillMarkers('<!-- begin:x -->\n<!-- end:x -->\n', { x: labSizeText(exp, runs) });
    expect(fillMarkers(page, { x: labSizeText({ ...exp, secondsPerRun: exp.secondsPerRun * 4 }, runs) })).not.toBe(page);
  }, 60_000);
});

describe('docs/golden.md suite table', () => {
  it('case counts and sizes are those the suites write (regenerate: npx tsx scripts/golden-docs.ts)', () => {
    const text = readFileSync(GOLDEN_DOC, 'utf8');
    expect(fillGoldenTable(text, goldenSuiteStats(0))).toBe(text);
  }, 180_000);

  it('a stale count is caught', () => {
    const stats = { gemm: { cases: 16, bytes: 1024 } };
    expect(fillGoldenTable('| `gemm` | 15 | 1 KiB | x |\n', stats)).toBe('| `gemm` | 16 | 1 KiB | x |\n');
    expect(() => fillGoldenTable('nothing\n', stats)).toThrow(/no table row for suite 'gemm'/);
  });
});
