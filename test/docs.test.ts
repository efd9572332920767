import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fillMarkers, generatedDocs, labDocs } from '../scripts/doc-tables.js';
import { labPlannedRuns, labSizeText } from '../src/cli/lab.js';
import { loadLabExperiment } from '../src/runs/lab.js';
import {
  fillGoldenTable,
  fillManifestSize,
  GOLDEN_DOC,
  goldenManifestBytes,
  goldenSuiteStats,
} from '../scripts/golden-docs.js';

describe('generated documentation tables', () => {
  it.each(Object.entries(generatedDocs()))(
    '%s embeds the tables generated from the code (regenerate: npx tsx scripts/doc-tables.ts)',
    (path, blocks) => {
      const text = readFileSync(path, 'utf8');
      expect(fillMarkers(text, blocks)).toBe(text);
    },
  );
});

describe("the lab pages' runs and estimates", () => {
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
    expect(fillMarkers(page, { x: labSizeText({ ...exp, secondsPerRun: exp.secondsPerRun * 4 }, runs) })).not.toBe(
      page,
    );
  }, 60_000);
});

describe('docs/golden.md suite table', () => {
  it('case counts and sizes are those the suites write (regenerate: npx tsx scripts/golden-docs.ts)', () => {
    const text = readFileSync(GOLDEN_DOC, 'utf8');
    expect(fillGoldenTable(text, goldenSuiteStats(0))).toBe(text);
    expect(fillManifestSize(text, goldenManifestBytes(0))).toBe(text);
  }, 180_000);

  it('a stale count is caught', () => {
    const stats = { gemm: { cases: 16, bytes: 1024 } };
    expect(fillGoldenTable('| `gemm` | 15 | 1 KiB | x |\n', stats)).toBe('| `gemm` | 16 | 1 KiB | x |\n');
    expect(() => fillGoldenTable('nothing\n', stats)).toThrow(/no table row for suite 'gemm'/);
    expect(fillManifestSize('`manifest.json` is 1.5 MiB.\n', 2_261_939)).toBe('`manifest.json` is 2.2 MiB.\n');
    expect(() => fillManifestSize('nothing\n', 1)).toThrow(/no sentence/);
  });
});

/**
 * What is wrong with a decisions page: an entry (`### ` under a `## ` topic) without its four fields
 * in order, a Test field that names no test file and does not say "No test", a test file named
 * anywhere on the page that does not exist, or a topic missing from the contents.
 */
function decisionProblems(text: string, exists: (path: string) => boolean): string[] {
  const problems: string[] = [];
  const topics = text.split(/^## /m).slice(1);
  const contents = topics.find((t) => t.startsWith('Contents\n')) ?? '';
  for (const topic of topics) {
    const title = topic.slice(0, topic.indexOf('\n'));
    if (title === 'Contents') continue;
    if (!contents.includes(`[${title}](#`)) problems.push(`topic not in the contents: ${title}`);
    for (const entry of topic.split(/^### /m).slice(1)) {
      const name = entry.slice(0, entry.indexOf('\n'));
      const fields = [...entry.matchAll(/^- \*\*(\w+)\.\*\*/gm)].map((m) => m[1]);
      if (fields.join() !== 'Decision,Why,Alternatives,Test')
        problems.push(`${name}: fields ${fields.join(', ') || 'none'}`);
      const test = /^- \*\*Test\.\*\*([\s\S]*)/m.exec(entry)?.[1] ?? '';
      if (!/(^|\s)(test|python\/tests)\//.test(test) && !/^\s*No test/.test(test))
        problems.push(`${name}: the Test field names no test file`);
    }
  }
  for (const [path] of text.matchAll(/\b(?:test|python\/tests)\/[\w./-]*\w\.(?:ts|py|mjs|json)\b/g)) {
    if (!exists(path)) problems.push(`no such file: ${path}`);
  }
  return problems;
}

describe('docs/decisions.md', () => {
  it('every entry has Decision, Why, Alternatives and Test, and every test file it names exists', () => {
    expect(decisionProblems(readFileSync('docs/decisions.md', 'utf8'), existsSync)).toEqual([]);
  });

  it('a missing field, an unnamed test, a missing file and a topic outside the contents are caught', () => {
    const page = [
      '# Decisions',
      '',
      '## Contents',
      '',
      '1. [Numerics](#numerics)',
      '',
      '## Numerics',
      '',
      '### A',
      '',
      '- **Decision.** d',
      '- **Why.** w',
      '- **Test.** test/a.test.ts',
      '',
      '### B',
      '',
      '- **Decision.** d',
      '- **Why.** w',
      '- **Alternatives.** a',
      '- **Test.** by hand',
      '',
      '## Runs',
      '',
      '### C',
      '',
      '- **Decision.** d',
      '- **Why.** w',
      '- **Alternatives.** a',
      '- **Test.** No test.',
      '',
    ].join('\n');
    expect(decisionProblems(page, (p) => p !== 'test/a.test.ts')).toEqual([
      'A: fields Decision, Why, Test',
      'B: the Test field names no test file',
      'topic not in the contents: Runs',
      'no such file: test/a.test.ts',
    ]);
  });
});
