import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fillMarkers, generatedDocs } from '../scripts/doc-tables.js';

describe('generated documentation tables', () => {
  it.each(Object.entries(generatedDocs()))('%s embeds the tables generated from the code (regenerate: npx tsx scripts/doc-tables.ts)', (path, blocks) => {
    const text = readFileSync(path, 'utf8');
    expect(fillMarkers(text, blocks)).toBe(text);
  });
});
