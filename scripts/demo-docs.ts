// Puts what `npm start` measured into docs/getting-started.md: the summary table (summary.md) and
// the plain-words findings of a demonstration directory, between the `demo-summary` markers.
// Usage: npm start && npx tsx scripts/demo-docs.ts [runs/demo]
// The figures in that section are then the ones the command produced, never copied by hand.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { demoFindings } from '../src/runs/demo.js';
import { fillMarkers } from './doc-tables.js';

const dir = process.argv[2] ?? 'runs/demo';
const manifest = JSON.parse(readFileSync(join(dir, 'sweep.json'), 'utf8')) as {
  runs: { label: string; seed: number; dir: string }[];
};
const table = readFileSync(join(dir, 'summary.md'), 'utf8').trim();
const body = [table, '', '```text', ...demoFindings(dir, manifest.runs), '```'].join('\n');
const path = 'docs/getting-started.md';
writeFileSync(path, fillMarkers(readFileSync(path, 'utf8'), { 'demo-summary': body }));
console.log(`${path}: demo-summary from ${dir}`);
