// Regenerates the preset table that docs/quantization.md embeds from the preset records.
// Usage: npx tsx scripts/quant-doc-tables.ts; test/numerics/presets.test.ts checks that the doc is current.

import { readFileSync, writeFileSync } from 'node:fs';
import { presetTableMarkdown } from '../src/numerics/presets.js';
import { fillMarkers } from './doc-tables.js';

/** The generated blocks of docs/quantization.md. */
export const quantizationBlocks = (): Record<string, string> => ({ presets: presetTableMarkdown() });

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/').split('/').pop() ?? '');
if (isMain) {
  const path = 'docs/quantization.md';
  writeFileSync(path, fillMarkers(readFileSync(path, 'utf8'), quantizationBlocks()));
}
