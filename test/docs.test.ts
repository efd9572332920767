import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fillMarkers, numericsBlocks } from '../scripts/doc-tables.js';

describe('generated documentation tables', () => {
  it('docs/numerics.md embeds the tables generated from the records (regenerate: npx tsx scripts/doc-tables.ts)', () => {
    const text = readFileSync('docs/numerics.md', 'utf8');
    expect(fillMarkers(text, numericsBlocks())).toBe(text);
  });
});
