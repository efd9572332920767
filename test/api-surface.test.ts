// The public surface of every package entry is pinned in test/api-surface.json, so that a name
// leaks in or drops out only by a deliberate change. Not a check of what the names do.

import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { apiSurface, SNAPSHOT_FILE, surfaceSnapshot } from '../scripts/api-surface.js';

const UPDATE =
  `If the change is deliberate: npx tsx scripts/api-surface.ts && npx tsx scripts/doc-tables.ts, then review and commit ${SNAPSHOT_FILE} ` +
  'and docs/library.md (the rule for what is public: docs/decisions.md, "Public surface per layer").';

const surfaces = apiSurface();
const pinned = JSON.parse(readFileSync(new URL(`../${SNAPSHOT_FILE}`, import.meta.url), 'utf8')) as Record<
  string,
  string[]
>;
const current = surfaceSnapshot(surfaces);

describe('public surface of the package entries', () => {
  it('every entry of package.json is pinned, and nothing else', () => {
    expect(Object.keys(current).sort(), `package entries differ from ${SNAPSHOT_FILE}. ${UPDATE}`).toEqual(
      Object.keys(pinned).sort(),
    );
  });

  it.each(surfaces.map((s) => [s.entry, s] as const))('%s names every export (no export *)', (_entry, surface) => {
    expect(surface.exportStar, `${surface.file} re-exports without naming; list the names`).toEqual([]);
  });

  it.each(surfaces.map((s) => [s.entry] as const))('%s exports exactly the pinned names', (entry) => {
    const now = current[entry] ?? [];
    const before = pinned[entry] ?? [];
    const added = now.filter((n) => !before.includes(n));
    const removed = before.filter((n) => !now.includes(n));
    expect({ added, removed }, `the public surface of ${entry} changed. ${UPDATE}`).toEqual({ added: [], removed: [] });
  });

  it.each(surfaces.map((s) => [s.entry, s] as const))(
    '%s: its run-time exports are its value names',
    async (_entry, surface) => {
      const module = (await import(`../${surface.file}`)) as Record<string, unknown>;
      const values = surface.names.filter((n) => n.kind === 'value').map((n) => n.name);
      expect(Object.keys(module).sort()).toEqual(values.sort());
      for (const name of values) expect(module[name], `${surface.entry} exports ${name} as undefined`).toBeDefined();
    },
  );

  it('the code in README.md and docs/*.md imports only names its entry exports', () => {
    const docs = [
      'README.md',
      ...readdirSync(new URL('../docs/', import.meta.url))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const wrong: string[] = [];
    for (const doc of docs) {
      const text = readFileSync(new URL(`../${doc}`, import.meta.url), 'utf8');
      for (const m of text.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'(qrl-sim(?:\/[a-z]+)?)'/g)) {
        const names = (current[m[2]!] ?? []).map((n) => n.replace(/^type /, ''));
        for (const item of m[1]!.split(',')) {
          const name = item
            .trim()
            .replace(/^type\s+/, '')
            .split(/\s+as\s+/)[0]!;
          if (name !== '' && !names.includes(name)) wrong.push(`${doc}: ${name} from '${m[2]}'`);
        }
      }
    }
    expect(
      wrong,
      'a documented import names something its entry does not export (docs/library.md lists each entry)',
    ).toEqual([]);
  });
});
