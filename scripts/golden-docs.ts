// Regenerates the case count and size of each suite in docs/golden.md's suite table, and the size of
// the manifest, from the suites themselves: the cases `qrl-sim golden --suite all --seed 0` writes and
// the exact bytes of their files (the same encoding writeGolden uses, without writing them).
// Usage: npx tsx scripts/golden-docs.ts [--check]; test/docs.test.ts runs the check.

import { readFileSync, writeFileSync } from 'node:fs';
import { goldenSuites } from '../src/golden/suites/index.js';
import { GOLDEN_SCHEMA } from '../src/golden/types.js';
import { caseEntry, caseMetadata, qrlSimIdentity } from '../src/golden/write.js';
import { encodeSafetensors } from '../src/protocol/safetensors.js';

export const GOLDEN_DOC = 'docs/golden.md';

/** Cases and file bytes per suite for a seed. */
export function goldenSuiteStats(seed = 0): Record<string, { cases: number; bytes: number }> {
  const out: Record<string, { cases: number; bytes: number }> = {};
  for (const [name, suite] of Object.entries(goldenSuites)) {
    let bytes = 0;
    const cases = suite.cases(seed);
    for (const c of cases) bytes += encodeSafetensors(caseEntry(name, c).tensors, caseMetadata(name, c.name)).length;
    out[name] = { cases: cases.length, bytes };
  }
  return out;
}

/**
 * Bytes of the `manifest.json` that `qrl-sim golden --suite all --out golden/` writes for a seed (the
 * recorded command line and the version string vary by a few bytes, below the rounding of {@link sizeText}).
 */
export function goldenManifestBytes(seed = 0): number {
  const suites = Object.fromEntries(
    Object.entries(goldenSuites).map(([name, suite]) => [
      name,
      { description: suite.description, cases: suite.cases(seed).map((c) => caseEntry(name, c).manifest) },
    ]),
  );
  const manifest = {
    schema: GOLDEN_SCHEMA,
    qrlSim: qrlSimIdentity(),
    command: 'qrl-sim golden --suite all --out golden/',
    seed,
    suites,
  };
  return Buffer.byteLength(`${JSON.stringify(manifest, null, 1)}\n`);
}

/** docs/golden.md with the sentence "`manifest.json` is <size>." filled in. */
export function fillManifestSize(text: string, bytes: number): string {
  const re = /`manifest\.json` is \d+(?:\.\d)? [KM]iB\./;
  if (!re.test(text)) throw new Error(`${GOLDEN_DOC}: no sentence "\`manifest.json\` is <size>."`);
  return text.replace(re, `\`manifest.json\` is ${sizeText(bytes)}.`);
}

/** 899 KiB, 5.4 MiB, 23 MiB. */
export function sizeText(bytes: number): string {
  const kib = bytes / 1024;
  if (kib < 1024) return `${Math.max(1, Math.round(kib))} KiB`;
  const mib = kib / 1024;
  return mib < 10 ? `${mib.toFixed(1)} MiB` : `${Math.round(mib)} MiB`;
}

/** docs/golden.md with each suite row's `cases` and `size` cells replaced; every suite must have a row. */
export function fillGoldenTable(text: string, stats: Record<string, { cases: number; bytes: number }>): string {
  let out = text;
  for (const [name, s] of Object.entries(stats)) {
    const re = new RegExp(`^\\| \`${name.replace(/[.-]/g, '\\$&')}\` \\| [^|]* \\| [^|]* \\|`, 'm');
    if (!re.test(out)) throw new Error(`${GOLDEN_DOC}: no table row for suite '${name}'`);
    out = out.replace(re, `| \`${name}\` | ${s.cases} | ${sizeText(s.bytes)} |`);
  }
  return out;
}

const isMain =
  process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/').split('/').pop() ?? '');
if (isMain) {
  const text = readFileSync(GOLDEN_DOC, 'utf8');
  const filled = fillManifestSize(fillGoldenTable(text, goldenSuiteStats(0)), goldenManifestBytes(0));
  if (process.argv.includes('--check')) {
    if (filled !== text) {
      console.error(`${GOLDEN_DOC} is stale: npx tsx scripts/golden-docs.ts`);
      process.exit(1);
    }
  } else if (filled !== text) {
    writeFileSync(GOLDEN_DOC, filled);
    console.log(`wrote ${GOLDEN_DOC}`);
  }
}
