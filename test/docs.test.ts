import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fillMarkers, generatedDocs } from '../scripts/doc-tables.js';
import { fillGoldenTable, GOLDEN_DOC, goldenSuiteStats } from '../scripts/golden-docs.js';

describe('generated documentation tables', () => {
  it.each(Object.entries(generatedDocs()))('%s embeds the tables generated from the code (regenerate: npx tsx scripts/doc-tables.ts)', (path, blocks) => {
    const text = readFileSync(path, 'utf8');
    expect(fillMarkers(text, blocks)).toBe(text);
  });
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
